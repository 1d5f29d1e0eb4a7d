//! The `resty.*` Lua modules this project writes for the real ingress-nginx
//! controller's Lua (scripts/k8s-testenv/ingress-nginx/lua: what no registry here
//! packages), tested inside a real nginx with Debian's lua-nginx-module, where the
//! controller's Lua runs them: `modules_test.lua` raises on the first wrong answer.

use crate::common::nginx;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

#[test]
fn the_projects_resty_modules_answer_as_ingress_nginx_expects() {
    let lua = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/k8s-testenv/ingress-nginx/lua");
    let dir = tempfile::tempdir().unwrap();
    let port = crate::common::free_ports(1)[0];
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    // The workers run as root, as the master: a checkout under a folder of mode
    // 0700 (a home directory, `mktemp -d`) is not readable by nginx's default
    // worker user, `nobody`, and the Lua is read from the checkout.
    let conf = format!(
        "user root;\nload_module /usr/lib/nginx/modules/ndk_http_module.so;\n\
         load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;\n{}\n\
         http {{\n{}\n    lua_package_path \"{}/?.lua;;\";\n    lua_shared_dict locks 1m;\n\
         \x20   server {{\n        listen {addr};\n        location /t {{\n\
         \x20           content_by_lua_block {{\n\
         \x20               local ok, err = pcall(assert(loadfile(\"{}/test/modules_test.lua\")))\n\
         \x20               if ok then ngx.say(\"ok\") else ngx.status = 500; ngx.say(err) end\n\
         \x20           }}\n        }}\n    }}\n}}\n",
        nginx::head(dir.path(), 64),
        nginx::temp_paths(dir.path()),
        lua.display(),
        lua.display(),
    );
    let _nginx = nginx::spawn(dir.path(), &conf, &[addr]);
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /t HTTP/1.0\r\n\r\n").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.trim_end().ends_with("ok"),
        "{answer}\n{}",
        std::fs::read_to_string(dir.path().join("error.log")).unwrap_or_default()
    );
}
