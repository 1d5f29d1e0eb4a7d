-- resty.dns.resolver is Debian's lua-nginx-dns, installed as nginx.dns.resolver.
return require("nginx.dns.resolver")
