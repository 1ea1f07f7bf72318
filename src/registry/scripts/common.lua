-- Shared by every script (prepended at load). One bucket per call: every key starts with
-- the bucket's hash tag T = "{<prefix>:<bucket>}". ARGV[1] = T, ARGV[2] = now (ms).
-- Numbers cross as decimal strings; epochs never become Lua numbers (2^53).
local T = ARGV[1]
local nowText = ARGV[2]
local now = tonumber(nowText)

local function touch()
  redis.call("SETNX", T .. ":cold", nowText)
  redis.call("SETNX", T .. ":epoch", nowText .. "000000")
end

-- One more than the last epoch, and never below <at> followed by six zeros: a failover can
-- lose the counter's last increments, and the clock keeps the epochs increasing anyway.
-- Compared as decimal strings (length, then text): epochs pass 2^53.
local function nextEpoch(atText)
  redis.call("INCR", T .. ":epoch")
  local epoch = redis.call("GET", T .. ":epoch")
  if tonumber(atText) > 0 then
    local floor = atText .. "000000"
    if #floor > #epoch or (#floor == #epoch and floor > epoch) then
      redis.call("SET", T .. ":epoch", floor)
      epoch = floor
    end
  end
  return epoch
end

-- Epochs as decimal strings without leading zeros: the longer, or the same length and greater.
local function epochGreater(a, b)
  return #a > #b or (#a == #b and a > b)
end

-- Whether a worker's registrations (its "ns" JSON) name this env, namespace and hostname.
local function servesHostname(namespacesJson, env, namespace, hostname)
  for _, entry in ipairs(cjson.decode(namespacesJson)) do
    if entry.env == env and entry.namespace == namespace and entry.hostname == hostname then return true end
  end
  return false
end

local function lines(text)
  local out = {}
  for line in string.gmatch(text or "", "[^\n]+") do out[#out + 1] = line end
  return out
end

-- owner: HMGET of the row's worker record starting with "inc", "lease".
local function rowLive(owner, inc, windDownAt)
  if not owner[1] or owner[1] ~= inc or tonumber(owner[2]) <= now then return false end
  local deadline = tonumber(windDownAt)
  return deadline == 0 or deadline > now
end

local function deleteRow(rk, worker)
  redis.call("DEL", T .. ":p:" .. rk)
  redis.call("SREM", T .. ":r:" .. worker, rk)
  redis.call("ZREM", T .. ":wd", rk)
end

local function deleteRowsOf(worker)
  for _, rk in ipairs(redis.call("SMEMBERS", T .. ":r:" .. worker)) do
    redis.call("DEL", T .. ":p:" .. rk)
    redis.call("ZREM", T .. ":wd", rk)
  end
  redis.call("DEL", T .. ":r:" .. worker)
end

local function leaveMemberships(worker, mkeys)
  for _, mk in ipairs(lines(mkeys)) do redis.call("ZREM", T .. ":m:" .. mk, worker) end
end

local function removeWorker(worker)
  leaveMemberships(worker, redis.call("HGET", T .. ":w:" .. worker, "mkeys"))
  deleteRowsOf(worker)
  redis.call("DEL", T .. ":w:" .. worker)
  redis.call("SREM", T .. ":workers", worker)
end

local function nackDegraded(start, count, threshold, windowMs)
  return now < tonumber(start) + windowMs and tonumber(count) >= threshold
end
