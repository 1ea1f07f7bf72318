-- DESIGN 5, for a batch of resolves on one bucket, each as if it ran alone, in order.
-- ARGV: T, now (unused: each query has its own), leaseMs, minLeaseLeftMs, balanceFactor,
--       nackThreshold, nackWindowMs, then one query per argument:
--       "now\nenv\nnamespace\nid\nhostname\ntakeover\ncaller\naffinity\nr1 * 2^26\nr2 * 2^26\nexcluded,..."
--       (hostname "" outside hostname-aware mode, takeover "" for wind_down, caller "" for none;
--       fields never contain "\n" or ",").
-- Answers one string per query: "placed\nworker\nadvertiseUrl\nepoch\n0|1", "unknown",
-- "cold\nretryAfterMs", "none"; in hostname-aware mode also "rebound\nenv", "held",
-- "takeover\nretryAfterMs" and "displaced\nretryAfterMs".
local leaseMs = tonumber(ARGV[3])
local minLeaseLeft = tonumber(ARGV[4])
local balanceFactor = tonumber(ARGV[5])
local nackThreshold = tonumber(ARGV[6])
local nackWindowMs = tonumber(ARGV[7])

-- Compares two sha1 hex digests without locale-dependent string ordering.
local function hexGreater(a, b)
  for i = 1, 40, 10 do
    local x, y = tonumber(string.sub(a, i, i + 9), 16), tonumber(string.sub(b, i, i + 9), 16)
    if x ~= y then return x > y end
  end
  return false
end

local function choose(candidates, caller, affinity, r1, r2)
  local n = #candidates
  local sum = 0
  for i = 1, n do sum = sum + candidates[i].headroom end
  local mean = sum / n
  local pick = nil
  for i = 1, n do
    if candidates[i].worker == caller then pick = candidates[i] end
  end
  if not pick then
    local bestScore = nil
    for i = 1, n do
      local score = redis.sha1hex(affinity .. "\n" .. candidates[i].worker)
      if not pick or hexGreater(score, bestScore) then pick, bestScore = candidates[i], score end
    end
  end
  if pick.headroom >= mean / balanceFactor or n == 1 then return pick end
  local i = math.floor(r1 * n)
  local j = math.floor(r2 * (n - 1))
  if j >= i then j = j + 1 end
  local first, second = candidates[i + 1], candidates[j + 1]
  if second.headroom > first.headroom then return second end
  return first
end

-- DESIGN 5 steps 4 to 7: cold start, candidates, the choice, the new row. `hostname` ~= "": only
-- workers registered for that hostname are candidates (hostname-aware mode).
local function placeNew(env, namespace, id, mk, rk, pkey, rest)
  local coldUntil = tonumber(redis.call("GET", T .. ":cold")) + leaseMs
  if now < coldUntil then return "cold\n" .. string.format("%d", coldUntil - now) end

  local hostname, _, caller, affinity, r1, r2, excludedList = string.match(rest, "^([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)$")
  local excluded = {}
  for worker in string.gmatch(excludedList, "[^,]+") do excluded[worker] = true end
  local candidates = {}
  -- ZRANGE of an all-zero-score set is in byte order of the worker ids.
  for _, worker in ipairs(redis.call("ZRANGE", T .. ":m:" .. mk, 0, -1)) do
    local w = redis.call("HMGET", T .. ":w:" .. worker, "lease", "draining", "degraded", "nackStart", "nackCount", "headroom", "ns")
    if w[1] and tonumber(w[1]) - now >= minLeaseLeft and w[2] ~= "1" and w[3] ~= "1"
        and not nackDegraded(w[4], w[5], nackThreshold, nackWindowMs) and not excluded[worker]
        and (hostname == "" or servesHostname(w[7], env, namespace, hostname)) then
      candidates[#candidates + 1] = { worker = worker, headroom = tonumber(w[6]) }
    end
  end
  if #candidates == 0 then return "none" end
  local chosen = choose(candidates, caller, affinity, tonumber(r1) / 67108864, tonumber(r2) / 67108864)

  local epoch = nextEpoch(nowText)
  local owner = redis.call("HMGET", T .. ":w:" .. chosen.worker, "inc", "url")
  redis.call("HSET", pkey, "env", env, "ns", namespace, "id", id, "worker", chosen.worker, "inc", owner[1],
    "epoch", epoch, "placedAt", nowText, "host", hostname, "tag", "", "wd", "0")
  redis.call("SADD", T .. ":r:" .. chosen.worker, rk)
  return "placed\n" .. chosen.worker .. "\n" .. owner[2] .. "\n" .. epoch .. "\n1"
end

-- Hostname-aware mode (DESIGN 5 steps 1 to 3, src/registry/Hostnames.ts): the pair's binding
-- first, then a live row (its owner not registered for this hostname: the takeover), then the
-- displacement wait.
local function resolveForHostname(env, namespace, id, mk, rk, pkey, rest)
  touch()
  local hostname, takeover = string.match(rest, "^([^\n]*)\n([^\n]*)\n")
  local binding = redis.call("HMGET", T .. ":b:" .. hostname .. "|" .. namespace, "env", "disp")
  if not binding[1] then return "unknown" end
  if binding[1] ~= env then return "rebound\n" .. binding[1] end
  local row = redis.call("HMGET", pkey, "worker", "inc", "epoch", "wd", "host")
  if row[1] then
    local owner = redis.call("HMGET", T .. ":w:" .. row[1], "inc", "lease", "url", "ns")
    if rowLive(owner, row[2], row[4]) then
      -- Placed through this hostname: its owner (this incarnation) is registered for it, no JSON to read.
      if row[5] == hostname or servesHostname(owner[4], env, namespace, hostname) then
        return "placed\n" .. row[1] .. "\n" .. owner[3] .. "\n" .. row[3] .. "\n0"
      end
      if takeover == "deny" then return "held" end
      local deadline = tonumber(row[4])
      if deadline == 0 then
        deadline = now + leaseMs
        redis.call("HSET", pkey, "wd", string.format("%d", deadline))
        redis.call("ZADD", T .. ":wd", deadline, rk)
      end
      return "takeover\n" .. string.format("%d", deadline - now)
    end
    deleteRow(rk, row[1])
  end
  local displaced = tonumber(binding[2]) - now
  if displaced > 0 then return "displaced\n" .. string.format("%d", displaced) end
  return placeNew(env, namespace, id, mk, rk, pkey, rest)
end

local function resolveOne(query)
  local env, namespace, id, rest
  nowText, env, namespace, id, rest = string.match(query, "^([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n(.*)$")
  now = tonumber(nowText)
  local mk = env .. "|" .. namespace
  local rk = mk .. "|" .. id
  local pkey = T .. ":p:" .. rk
  -- `rest` starts with the hostname: a line break first means none.
  if string.byte(rest, 1) ~= 10 then return resolveForHostname(env, namespace, id, mk, rk, pkey, rest) end
  -- The hot path first: a row exists only in a bucket already in use, for a registered
  -- namespace, so serving it before touch() and the namespace check changes no answer.
  local row = redis.call("HMGET", pkey, "worker", "inc", "epoch", "wd")
  if row[1] then
    local owner = redis.call("HMGET", T .. ":w:" .. row[1], "inc", "lease", "url")
    if rowLive(owner, row[2], row[4]) then return "placed\n" .. row[1] .. "\n" .. owner[3] .. "\n" .. row[3] .. "\n0" end
    deleteRow(rk, row[1])
  end

  touch()
  if redis.call("SISMEMBER", T .. ":ns", mk) == 0 then return "unknown" end
  return placeNew(env, namespace, id, mk, rk, pkey, rest)
end

local answers = {}
for i = 8, #ARGV do answers[#answers + 1] = resolveOne(ARGV[i]) end
return answers
