-- ingressbench nginx-lua balancer (generated; see crates/lab/src/nginx/lua.rs)
local balancer = require "ngx.balancer"
local dict = ngx.shared.endpoints
local _M = { version = -1, peers = {}, rr = 0 }

local function refresh()
    local v = dict:get("version") or 0
    if v == _M.version then return end
    local peers = {}
    for h, p in (dict:get("list") or ""):gmatch("([%d%.]+):(%d+)") do
        peers[#peers + 1] = { h, tonumber(p) }
    end
    _M.peers, _M.version = peers, v
end

local function valid(line)
    local a, b, c, d, p = line:match("^%s*(%d+)%.(%d+)%.(%d+)%.(%d+):(%d+)%s*$")
    if not a then return nil end
    for _, o in ipairs({ a, b, c, d }) do
        if tonumber(o) > 255 then return nil end
    end
    local port = tonumber(p)
    if port < 1 or port > 65535 then return nil end
    return a .. "." .. b .. "." .. c .. "." .. d .. ":" .. port
end

function _M.admin()
    local m = ngx.req.get_method()
    if m == "GET" then
        ngx.say("version=", dict:get("version") or 0)
        local list = dict:get("list") or ""
        if list ~= "" then ngx.say(list) end
        return
    end
    if m ~= "POST" then return ngx.exit(405) end
    ngx.req.read_body()
    local body = ngx.req.get_body_data()
    if not body then
        if ngx.req.get_body_file() then return ngx.exit(413) end
        body = ""
    end
    local list = {}
    for line in body:gmatch("[^\r\n]+") do
        if not line:match("^%s*$") then
            local ep = valid(line)
            if not ep then
                ngx.status = 400
                ngx.say("bad endpoint: ", line)
                return
            end
            list[#list + 1] = ep
        end
    end
    dict:set("list", table.concat(list, "\n"))
    local v = dict:incr("version", 1, 0)
    ngx.say("ok version=", v, " endpoints=", #list)
end

function _M.access()
    refresh()
    if #_M.peers == 0 then return ngx.exit(503) end
end

function _M.balance()
    refresh()
    local n = #_M.peers
    if n == 0 then return ngx.exit(502) end
    local ctx = ngx.ctx
    if not ctx.tries then
        ctx.tries = 0
        -- retry on other peers, like proxy_next_upstream does for nginx-reload
        if n > 1 then balancer.set_more_tries(math.min(2, n - 1)) end
    end
    ctx.tries = ctx.tries + 1
    _M.rr = _M.rr % n + 1
    local peer = _M.peers[_M.rr]
    local ok, err = balancer.set_current_peer(peer[1], peer[2])
    if not ok then
        ngx.log(ngx.ERR, "set_current_peer failed: ", err)
        return ngx.exit(502)
    end
end

return _M
