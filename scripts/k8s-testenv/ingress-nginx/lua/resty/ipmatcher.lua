-- resty.ipmatcher, left out of ingressbench's test environment: ingress-nginx's
-- global_throttle.lua uses it only for global rate limiting's exceptions (off, see
-- global_throttle.lua here). new() fails with this message.
local _M = {}
local WHY = "resty.ipmatcher is not available in ingressbench's test environment (global rate limiting is off)"
function _M.new()
  return nil, WHY
end
return _M
