-- Membership writes of many workers in one call (coalesced per bucket, src/registry/Coalescer.ts),
-- each as if it ran alone, in order. ARGV: T, now (unused: each entry has its own), then entries,
-- each a kind followed by its fields:
--   "r" now worker incarnation advertiseUrl leaseExpiresAt headroom draining namespacesJson mkeys
--       epoch bindings (one line "hostname|namespace|env" per entry naming a hostname)
--       callerKey ("" for none: the record then has no "ck")
--   "h" now worker incarnation leaseExpiresAt headroom draining degraded
--   "d" now worker incarnation
--   "n" now worker nackWindowMs
-- Answers one reply per entry: register "OK" or "conflict" (a hostname binding held by another
-- env; nothing changed); heartbeat {"renewed", env, ns, id, epoch, deadline, ...} or {"lost"};
-- deregister and nack "OK".

-- docs/proxy.md "Hostname-aware mode" (src/registry/Hostnames.ts decideBindings): every binding is decided before anything changes.
local function register(worker, inc, url, lease, headroom, draining, namespacesJson, mkeys, epoch, bindings, callerKey)
  local updates, order = {}, {}
  for _, line in ipairs(lines(bindings)) do
    local hostname, namespace, env = string.match(line, "^([^|]*)|([^|]*)|(.*)$")
    local bkey = T .. ":b:" .. hostname .. "|" .. namespace
    local bound = updates[bkey]
    if not bound then
      local stored = redis.call("HMGET", bkey, "env", "epoch", "disp")
      if stored[1] then bound = { env = stored[1], epoch = stored[2], disp = stored[3] } end
    end
    local decided = nil
    if not bound then
      decided = { env = env, epoch = epoch, disp = "0" }
    elseif bound.env == env then
      if epochGreater(epoch, bound.epoch) then decided = { env = env, epoch = epoch, disp = bound.disp } end
    elseif epochGreater(epoch, bound.epoch) then
      -- New ids of the pair wait one lease: leaseExpiresAt is now + leaseMs.
      decided = { env = env, epoch = epoch, disp = lease }
    else
      return "conflict"
    end
    if decided then
      if not updates[bkey] then order[#order + 1] = bkey end
      updates[bkey] = decided
    end
  end
  for _, bkey in ipairs(order) do
    local b = updates[bkey]
    redis.call("HSET", bkey, "env", b.env, "epoch", b.epoch, "disp", b.disp)
  end

  local wkey = T .. ":w:" .. worker
  local previous = redis.call("HMGET", wkey, "mkeys", "nackStart", "nackCount", "inc")
  if previous[1] then
    leaveMemberships(worker, previous[1])
    retireRows(worker, previous[4])
  end
  redis.call("DEL", wkey)
  redis.call("HSET", wkey,
    "inc", inc, "url", url, "lease", lease, "headroom", headroom, "draining", draining,
    "degraded", "0", "ns", namespacesJson, "mkeys", mkeys,
    "nackStart", previous[2] or "0", "nackCount", previous[3] or "0")
  if callerKey ~= "" then redis.call("HSET", wkey, "ck", callerKey) end
  redis.call("ZADD", T .. ":wi", 0, worker)
  redis.call("ZADD", T .. ":wl", lease, worker)
  redis.call("ZREM", T .. ":tomb", worker)
  for _, mk in ipairs(lines(mkeys)) do
    redis.call("SADD", T .. ":ns", mk)
    redis.call("ZADD", T .. ":m:" .. mk, 0, worker)
  end
  logChange(worker)
  return "OK"
end

-- Renews the lease; lists this worker's rows that carry a wind-down deadline (its own index only).
local function heartbeat(worker, inc, lease, headroom, draining, degraded)
  local wkey = T .. ":w:" .. worker
  local record = redis.call("HMGET", wkey, "inc", "lease", "headroom", "draining", "degraded")
  if not record[1] or record[1] ~= inc or tonumber(record[2]) <= now then return { "lost" } end
  if record[3] ~= headroom or record[4] ~= draining or record[5] ~= degraded then
    redis.call("HSET", wkey, "lease", lease, "headroom", headroom, "draining", draining, "degraded", degraded)
    logChange(worker)
  else
    redis.call("HSET", wkey, "lease", lease)
  end
  redis.call("ZADD", T .. ":wl", lease, worker)
  local out = { "renewed" }
  for _, rk in ipairs(redis.call("ZRANGEBYSCORE", T .. ":wdw:" .. worker, "(" .. nowText, "+inf")) do
    local row = redis.call("HMGET", T .. ":p:" .. rk, "worker", "env", "ns", "id", "epoch", "wd")
    if row[1] == worker then
      for i = 2, 6 do out[#out + 1] = row[i] end
    end
  end
  return out
end

-- A fixed window opened by the first refusal.
local function nack(worker, windowMs)
  local wkey = T .. ":w:" .. worker
  local record = redis.call("HMGET", wkey, "nackStart", "nackCount")
  if not record[1] then return "OK" end
  if now < tonumber(record[1]) + tonumber(windowMs) then
    redis.call("HSET", wkey, "nackCount", tostring(tonumber(record[2]) + 1))
  else
    redis.call("HSET", wkey, "nackStart", nowText, "nackCount", "1")
  end
  logChange(worker)
  return "OK"
end

local answers = {}
local touched = false
local i = 3
while i <= #ARGV do
  local kind = ARGV[i]
  nowText = ARGV[i + 1]
  now = tonumber(nowText)
  local worker = ARGV[i + 2]
  -- A bucket's first use: once per call, at the first entry that counts as a use.
  if not touched and (kind == "r" or kind == "h") then
    touch()
    touched = true
  end
  if kind == "r" then
    answers[#answers + 1] = register(worker, ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6], ARGV[i + 7], ARGV[i + 8], ARGV[i + 9], ARGV[i + 10], ARGV[i + 11], ARGV[i + 12])
    i = i + 13
  elseif kind == "h" then
    answers[#answers + 1] = heartbeat(worker, ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6], ARGV[i + 7])
    i = i + 8
  elseif kind == "d" then
    if redis.call("HGET", T .. ":w:" .. worker, "inc") == ARGV[i + 3] then removeWorker(worker) end
    answers[#answers + 1] = "OK"
    i = i + 4
  else
    answers[#answers + 1] = nack(worker, ARGV[i + 3])
    i = i + 4
  end
end
return answers
