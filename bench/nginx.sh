# Sourced by bench/run.sh, bench/pairs.sh and bench/http2.sh: what every benchmark's
# nginx.conf puts at the head of its http block.
#
# nginx_http_head DIR: no access log, nginx's temporary files under DIR/tmp, and
# kept-alive connections open for the whole run (no reconnects, and no TLS
# handshakes, every 1,000 requests as with nginx's default).
nginx_http_head() {
  local dir=$1
  cat <<HEAD
    access_log off;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    default_type text/plain;
    keepalive_requests 1000000000;
    keepalive_timeout 300s;
HEAD
}
