-- resty.chash, written for ingressbench's test environment (see roundrobin.lua):
-- ingress-nginx's balancer/chash.lua, chashsubset.lua and sticky_balanced.lua
-- require it (the `upstream-hash-by` annotation, balanced cookie affinity). The
-- interface is roundrobin's, with a key:
--   factory:new(nodes)   nodes: {["ip:port"] = weight, ...}
--   instance:find(key)   the node the key hashes to
--   instance:reinit(nodes), instance.nodes
-- A ring of 160 points per unit of weight, each point the CRC32 of "id#i": a key
-- goes to the first point at or after its own CRC32. Removing a node moves only the
-- keys that were on it. Pure Lua (no C library), so slower than a real one; the
-- tests' loads do not use it.

local _M = {}
local mt = { __index = _M }
local POINTS = 160
local crc32 = ngx.crc32_long

function _M.new(_, nodes)
  local self = setmetatable({}, mt)
  self:reinit(nodes)
  return self
end

function _M.reinit(self, nodes)
  local ring, owner = {}, {}
  for id, w in pairs(nodes or {}) do
    w = tonumber(w) or 0
    for i = 1, POINTS * w do
      local h = crc32(id .. "#" .. i)
      -- On a collision the smaller id keeps the point: the same for every worker.
      if owner[h] == nil or id < owner[h] then
        if owner[h] == nil then
          ring[#ring + 1] = h
        end
        owner[h] = id
      end
    end
  end
  table.sort(ring)
  self.nodes, self.ring, self.owner = nodes, ring, owner
end

function _M.find(self, key)
  local ring = self.ring
  local n = #ring
  if n == 0 then
    return nil
  end
  local h = crc32(tostring(key))
  -- The first point >= h, else the ring's first.
  local lo, hi = 1, n
  if h > ring[n] then
    return self.owner[ring[1]]
  end
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if ring[mid] < h then
      lo = mid + 1
    else
      hi = mid
    end
  end
  return self.owner[ring[lo]]
end

_M.next = _M.find

return _M
