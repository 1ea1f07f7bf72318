-- ARGV: T, now, worker, incarnation, advertiseUrl, leaseExpiresAt, headroom, draining, namespacesJson, mkeys,
--       epoch, bindings (one line "hostname|namespace|env" per entry naming a hostname).
-- "OK", or "conflict" (a hostname binding held by another env; nothing changed).
local worker = ARGV[3]
touch()

-- DESIGN 8 (src/registry/Hostnames.ts decideBindings): every binding is decided before anything changes.
local epoch = ARGV[11]
local updates, order = {}, {}
for _, line in ipairs(lines(ARGV[12])) do
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
    decided = { env = env, epoch = epoch, disp = ARGV[6] }
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
local previous = redis.call("HMGET", wkey, "mkeys", "nackStart", "nackCount")
if previous[1] then
  leaveMemberships(worker, previous[1])
  deleteRowsOf(worker)
end
redis.call("DEL", wkey)
redis.call("HSET", wkey,
  "inc", ARGV[4], "url", ARGV[5], "lease", ARGV[6], "headroom", ARGV[7], "draining", ARGV[8],
  "degraded", "0", "ns", ARGV[9], "mkeys", ARGV[10],
  "nackStart", previous[2] or "0", "nackCount", previous[3] or "0")
redis.call("SADD", T .. ":workers", worker)
for _, mk in ipairs(lines(ARGV[10])) do
  redis.call("SADD", T .. ":ns", mk)
  redis.call("ZADD", T .. ":m:" .. mk, 0, worker)
end
return "OK"
