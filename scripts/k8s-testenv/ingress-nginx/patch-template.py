#!/usr/bin/env python3
"""Patches ingress-nginx's nginx.tmpl (controller-v1.11.0) for Debian's nginx 1.22
with its dynamic modules, as ingressbench's test environment runs it. Each change is
named here; docs/kubernetes.md lists them for readers of the results:

1. load_module lines for ndk, lua-nginx-module and headers-more: the controller's
   image compiles them in; Debian ships them as dynamic modules, and the controller
   runs nginx with its own configuration (-c), which never reads modules-enabled.
2. The `stream {}` block is left out: it needs stream-lua-nginx-module, which no
   registry here packages. It serves TCP/UDP services (the controller's
   --tcp-services-configmap), which the studies do not use.
3. In its place, inside `http {}`, a server on the stream configuration port
   (--stream-port) that accepts and closes: the controller writes the (empty) TCP/UDP
   configuration there on its first sync and fails the sync if nobody listens.

Usage: patch-template.py IN OUT. Exits non-zero, naming the step, when the template
is not the one these steps were written for.
"""
import sys

MODULES = [
    "ndk_http_module.so",
    "ngx_http_lua_module.so",
    "ngx_http_headers_more_filter_module.so",
]


def main(src, dst):
    lines = open(src).read().split("\n")
    starts = [i for i, l in enumerate(lines) if l == "stream {"]
    if len(starts) != 1:
        sys.exit(f"patch-template.py: step 2: expected one 'stream {{' line, found {len(starts)}")
    s = starts[0]
    ends = [i for i in range(s + 1, len(lines)) if lines[i] == "}"]
    if not ends:
        sys.exit("patch-template.py: step 2: the stream block does not end")
    e = ends[0]
    http_end = [i for i in range(s) if lines[i] == "}"]
    if not http_end or not any(l == "http {" for l in lines[: http_end[-1]]):
        sys.exit("patch-template.py: step 3: no 'http {' block before the stream block")
    h = http_end[-1]
    server = [
        "    # ingressbench: no stream-lua-nginx-module; the stream configuration port",
        "    # only accepts and closes (patch-template.py, step 3).",
        "    server {",
        "        listen 127.0.0.1:{{ $all.StreamPort }};",
        "        return 444;",
        "    }",
    ]
    out = lines[:h] + server + lines[h : s] + [
        "# ingressbench: the stream {} block is left out (patch-template.py, step 2)."
    ] + lines[e + 1 :]
    head = [f"load_module /usr/lib/nginx/modules/{m};" for m in MODULES]
    open(dst, "w").write("\n".join(head + out))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: patch-template.py IN OUT")
    main(sys.argv[1], sys.argv[2])
