-- resty.cookie is Debian's lua-nginx-cookie, installed as nginx.cookie.
return require("nginx.cookie")
