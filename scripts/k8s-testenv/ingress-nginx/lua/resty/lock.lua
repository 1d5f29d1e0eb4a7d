-- resty.lock, written for ingressbench's test environment (see roundrobin.lua):
-- ingress-nginx's balancer/ewma.lua makes one when it is loaded (and fails if it
-- cannot), and locks with it only for `load-balance: ewma`. A lock is a key added
-- to a shared dictionary with an expiry; waiting sleeps in growing steps.
--   lock_mod:new(dict_name, {timeout = s, exptime = s, step = s, ratio = r, max_step = s})
--   lock:lock(key)   the seconds waited, or nil and "timeout" (or the dict's error)
--   lock:unlock()    1, or nil and "unlocked"

local _M = {}
local mt = { __index = _M }

function _M.new(_, dict_name, opts)
  local dict = ngx.shared[dict_name]
  if not dict then
    return nil, "dictionary not found"
  end
  opts = opts or {}
  return setmetatable({
    dict = dict,
    exptime = opts.exptime or 30,
    timeout = opts.timeout or 5,
    step = opts.step or 0.001,
    ratio = opts.ratio or 2,
    max_step = opts.max_step or 0.5,
  }, mt)
end

function _M.lock(self, key)
  if self.key ~= nil then
    return nil, "locked"
  end
  local waited, step = 0, self.step
  while true do
    local ok, err = self.dict:add(key, true, self.exptime)
    if ok then
      self.key = key
      return waited
    end
    if err ~= "exists" then
      return nil, err
    end
    if waited >= self.timeout then
      return nil, "timeout"
    end
    local s = math.min(step, self.timeout - waited, self.max_step)
    ngx.sleep(s)
    waited = waited + s
    step = step * self.ratio
  end
end

function _M.unlock(self)
  if self.key == nil then
    return nil, "unlocked"
  end
  self.dict:delete(self.key)
  self.key = nil
  return 1
end

return _M
