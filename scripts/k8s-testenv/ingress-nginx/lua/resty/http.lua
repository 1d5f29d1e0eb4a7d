-- resty.http, left out of ingressbench's test environment: ingress-nginx's
-- certificate.lua requires it only to fetch OCSP responses (`enable-ocsp`, off by
-- default). Every use fails with this message, which the controller's Lua logs.
local _M = {}
local WHY = "resty.http is not available in ingressbench's test environment (OCSP stapling is off)"
function _M.new()
  return nil, WHY
end
return _M
