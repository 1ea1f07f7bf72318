-- Shared by every script (prepended at load). One bucket per call: every key starts with
-- the bucket's hash tag T = "{<prefix>:<bucket>}". ARGV[1] = T, ARGV[2] = now (ms).
-- Numbers cross as decimal strings; epochs never become Lua numbers (2^53).
-- No call does work that grows with the workers or the rows of a bucket (docs/protocol.md
-- "Cost at scale"): every loop below runs over one worker's namespaces, one batch's
-- entries, or a bounded slice.
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

-- The membership view's change log (src/registry/MembershipView.ts): every change a view must
-- learn (a worker registered, removed, its headroom, flags or nacks) moves the worker to the
-- bucket's next sequence number.
local function logChange(worker)
  redis.call("ZADD", T .. ":chg", redis.call("INCR", T .. ":seq"), worker)
end

local function deleteRow(rk, worker)
  redis.call("DEL", T .. ":p:" .. rk)
  redis.call("SREM", T .. ":r:" .. worker, rk)
  redis.call("ZREM", T .. ":wd", rk)
  redis.call("ZREM", T .. ":wdw:" .. worker, rk)
end

-- An incarnation ends: its rows are no longer live (step 2 reads the worker's record), and the
-- set naming them is put aside whole, for the sweep to delete in bounded slices.
local function retireRows(worker, inc)
  local rows = T .. ":r:" .. worker
  if redis.call("EXISTS", rows) == 1 then
    local gone = worker .. "|" .. inc
    redis.call("RENAME", rows, T .. ":g:" .. gone)
    redis.call("RPUSH", T .. ":gone", gone)
  end
  redis.call("UNLINK", T .. ":wdw:" .. worker)
end

local function leaveMemberships(worker, mkeys)
  for _, mk in ipairs(lines(mkeys)) do redis.call("ZREM", T .. ":m:" .. mk, worker) end
end

local function removeWorker(worker)
  local record = redis.call("HMGET", T .. ":w:" .. worker, "mkeys", "inc")
  leaveMemberships(worker, record[1])
  retireRows(worker, record[2] or "")
  redis.call("DEL", T .. ":w:" .. worker)
  redis.call("ZREM", T .. ":wi", worker)
  redis.call("ZREM", T .. ":wl", worker)
  redis.call("ZADD", T .. ":tomb", now, worker)
  logChange(worker)
end

local function nackDegraded(start, count, threshold, windowMs)
  return now < tonumber(start) + windowMs and tonumber(count) >= threshold
end

-- A row whose worker is gone or registered again belongs to an ended incarnation: it waits for
-- the sweep's slices, and every call treats it as absent (deleting it on the way). Answers the
-- row's fields (HMGET of `fields`, which start with "worker", "inc"), or nil.
local function currentRow(rk, ...)
  local row = redis.call("HMGET", T .. ":p:" .. rk, "worker", "inc", ...)
  if not row[1] then return nil end
  if redis.call("HGET", T .. ":w:" .. row[1], "inc") ~= row[2] then
    deleteRow(rk, row[1])
    return nil
  end
  return row
end

-- An owner grant sent from ARGV[first] on (src/registry/Domain.ts OwnerGrant): the count of its
-- exact worker ids, them, then its prefixes. Whether the call sent one that does not cover
-- `worker`; nothing sent from ARGV[first] is no grant (a call without a worker credential).
local function heldByAnother(first, worker)
  if ARGV[first] == nil then return false end
  local exact = tonumber(ARGV[first])
  for i = first + 1, first + exact do
    if ARGV[i] == worker then return false end
  end
  for i = first + exact + 1, #ARGV do
    local prefix = ARGV[i]
    if string.sub(worker, 1, #prefix) == prefix then return false end
  end
  return true
end
