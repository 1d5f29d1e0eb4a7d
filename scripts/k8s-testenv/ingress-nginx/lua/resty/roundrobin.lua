-- resty.roundrobin, written for ingressbench's test environment: ingress-nginx's
-- Lua balancer (balancer/round_robin.lua, its default) requires it, and no registry
-- this project reaches packages it. Written from the interface ingress-nginx uses:
--   factory:new(nodes)   nodes: {["ip:port"] = weight, ...}
--   instance:find()      the next node's id ("ip:port"), or nil when there is none
--   instance:reinit(nodes)
--   instance.nodes       the nodes given last (ingress-nginx compares them)
-- The order is nginx's smooth weighted round robin: over one round of total weight
-- W each node is picked as often as its weight, and no node twice in a row unless
-- its weight says so. Nodes are taken in sorted order, so the sequence does not
-- depend on Lua's table order.

local _M = {}
local mt = { __index = _M }

function _M.new(_, nodes)
  local self = setmetatable({}, mt)
  self:reinit(nodes)
  return self
end

function _M.reinit(self, nodes)
  local ids, weights, total = {}, {}, 0
  for id, w in pairs(nodes or {}) do
    w = tonumber(w) or 0
    if w > 0 then
      ids[#ids + 1] = id
      weights[id] = w
      total = total + w
    end
  end
  table.sort(ids)
  self.nodes = nodes
  self.ids, self.weights, self.total = ids, weights, total
  self.current = {}
  for _, id in ipairs(ids) do
    self.current[id] = 0
  end
end

function _M.find(self)
  local best, best_v
  for _, id in ipairs(self.ids) do
    local v = self.current[id] + self.weights[id]
    self.current[id] = v
    if best_v == nil or v > best_v then
      best, best_v = id, v
    end
  end
  if best == nil then
    return nil
  end
  self.current[best] = best_v - self.total
  return best
end

-- Some callers use next() for find() (the same pick).
_M.next = _M.find

return _M
