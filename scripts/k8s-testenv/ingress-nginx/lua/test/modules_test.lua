-- The tests of this project's resty.* modules (../resty), run inside a real nginx
-- with lua-nginx-module by tests/it/lua_modules.rs: an error fails them.

local function eq(got, want, what)
  if got ~= want then
    error(what .. ": got " .. tostring(got) .. ", want " .. tostring(want), 2)
  end
end

-- roundrobin: each node as often as its weight per round, smoothly, and a node
-- removed is never picked again.
do
  local rr = require("resty.roundrobin")
  local nodes = { ["10.0.0.1:80"] = 1, ["10.0.0.2:80"] = 1, ["10.0.0.3:80"] = 2 }
  local r = rr:new(nodes)
  eq(r.nodes, nodes, "nodes kept")
  local seen = {}
  for _ = 1, 400 do
    local id = r:find()
    seen[id] = (seen[id] or 0) + 1
  end
  eq(seen["10.0.0.1:80"], 100, "weight 1")
  eq(seen["10.0.0.2:80"], 100, "weight 1")
  eq(seen["10.0.0.3:80"], 200, "weight 2")
  -- Equal weights (ingress-nginx gives every endpoint 1): strictly in turn.
  local even = rr:new({ ["b:1"] = 1, ["a:1"] = 1, ["c:1"] = 1 })
  local order = {}
  for i = 1, 6 do order[i] = even:find() end
  eq(table.concat(order, " "), "a:1 b:1 c:1 a:1 b:1 c:1", "in turn")
  r:reinit({ ["10.0.0.1:80"] = 1, ["10.0.0.3:80"] = 1 })
  for _ = 1, 50 do
    if r:find() == "10.0.0.2:80" then error("a removed node was picked") end
  end
  eq(rr:new({}):find(), nil, "no node")
  eq(rr:new({ ["a:1"] = 0 }):find(), nil, "weight 0 is no node")
end

-- chash: a key always to the same node; removing a node moves only its own keys;
-- keys spread over the nodes.
do
  local ch = require("resty.chash")
  local nodes = { ["10.0.0.1:80"] = 1, ["10.0.0.2:80"] = 1, ["10.0.0.3:80"] = 1 }
  local c = ch:new(nodes)
  local before, count = {}, {}
  for i = 1, 3000 do
    local k = "user-" .. i
    before[k] = c:find(k)
    eq(c:find(k), before[k], "the same key, the same node")
    count[before[k]] = (count[before[k]] or 0) + 1
  end
  for id, n in pairs(count) do
    if n < 600 or n > 1400 then error("uneven: " .. id .. " has " .. n .. " of 3000") end
  end
  c:reinit({ ["10.0.0.1:80"] = 1, ["10.0.0.3:80"] = 1 })
  for k, was in pairs(before) do
    local now = c:find(k)
    if was ~= "10.0.0.2:80" then eq(now, was, "a key of a node that stayed") end
    if now == "10.0.0.2:80" then error("a key on a removed node") end
  end
  eq(ch:new({}):find("x"), nil, "no node")
end

-- lock: one holder at a time; a timeout of 0 tries once; unlocking frees the key;
-- an unknown dictionary is an error, as ewma.lua expects.
do
  local lock = require("resty.lock")
  local a = lock:new("locks", { timeout = 0, exptime = 1 })
  local b = lock:new("locks", { timeout = 0, exptime = 1 })
  eq(a:lock("k"), 0, "first lock")
  local ok, err = b:lock("k")
  eq(ok, nil, "held")
  eq(err, "timeout", "held")
  eq(a:unlock(), 1, "unlock")
  eq(b:lock("k"), 0, "free again")
  b:unlock()
  local none, why = lock:new("nope", {})
  eq(none, nil, "no dictionary")
  eq(why, "dictionary not found", "no dictionary")
  -- A holder that waits: the other unlocks a moment later.
  a:lock("w")
  local c = lock:new("locks", { timeout = 1, exptime = 1 })
  ngx.timer.at(0.05, function() a:unlock() end)
  local waited = c:lock("w")
  if not waited or waited <= 0 then error("lock with a wait: " .. tostring(waited)) end
  c:unlock()
end

-- What is left out says so.
do
  for _, m in ipairs({ "resty.http", "resty.global_throttle", "resty.ipmatcher" }) do
    local o, err = require(m).new()
    eq(o, nil, m)
    if not err:find("not available in ingressbench's test environment", 1, true) then
      error(m .. ": " .. err)
    end
  end
  -- Debian's modules under the names ingress-nginx requires.
  eq(type(require("resty.cookie").new), "function", "resty.cookie")
  eq(type(require("resty.dns.resolver").new), "function", "resty.dns.resolver")
  eq(require("resty.dns.resolver").TYPE_A, 1, "resolver constants")
end

return true
