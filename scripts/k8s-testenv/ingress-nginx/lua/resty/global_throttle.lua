-- resty.global_throttle, left out of ingressbench's test environment:
-- ingress-nginx's global_throttle.lua uses it only with a memcached host
-- (`global-rate-limit-memcached-host`, empty by default). new() fails with this
-- message, which the controller's Lua logs.
local _M = {}
local WHY = "resty.global_throttle is not available in ingressbench's test environment (global rate limiting is off)"
function _M.new()
  return nil, WHY
end
return _M
