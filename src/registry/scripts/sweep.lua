-- ARGV: T, now, leaseMs. One bounded slice of the bucket's housekeeping, each part found by an
-- index ordered by time, so its cost follows what has ended, not what is live:
-- lapsed workers (by lease expiry), rows past their wind-down deadline, the change log's
-- entries of workers removed a lease ago, and a slice of the rows of ended incarnations.
-- Answers "more" while a part had more than its slice, else "done".
local leaseMs = tonumber(ARGV[3])
local WORKERS, ROWS, TOMBS = 32, 256, 256
local more = false

local lapsed = redis.call("ZRANGEBYSCORE", T .. ":wl", "-inf", nowText, "LIMIT", 0, WORKERS)
for _, worker in ipairs(lapsed) do removeWorker(worker) end
if #lapsed == WORKERS then more = true end

local ended = redis.call("ZRANGEBYSCORE", T .. ":wd", "-inf", nowText, "LIMIT", 0, ROWS)
for _, rk in ipairs(ended) do
  local worker = redis.call("HGET", T .. ":p:" .. rk, "worker")
  if worker then deleteRow(rk, worker) else redis.call("ZREM", T .. ":wd", rk) end
end
if #ended == ROWS then more = true end

-- A view that read the log before a trimmed entry reads the membership afresh (T:trim).
local old = redis.call("ZRANGEBYSCORE", T .. ":tomb", "-inf", string.format("%d", now - leaseMs), "LIMIT", 0, TOMBS)
if #old > 0 then
  local trim = tonumber(redis.call("GET", T .. ":trim") or "0")
  for _, worker in ipairs(old) do
    local seq = redis.call("ZSCORE", T .. ":chg", worker)
    if seq then
      redis.call("ZREM", T .. ":chg", worker)
      if tonumber(seq) > trim then trim = tonumber(seq) end
    end
    redis.call("ZREM", T .. ":tomb", worker)
  end
  redis.call("SET", T .. ":trim", string.format("%d", trim))
  if #old == TOMBS then more = true end
end

-- Rows of an ended incarnation ("worker|incarnation"): a row placed since (same id, a new
-- placement) is not that incarnation's and stays.
local gone = redis.call("LINDEX", T .. ":gone", 0)
if gone then
  local worker, inc = string.match(gone, "^([^|]*)|(.*)$")
  for _, rk in ipairs(redis.call("SPOP", T .. ":g:" .. gone, ROWS)) do
    local row = redis.call("HMGET", T .. ":p:" .. rk, "worker", "inc")
    if row[1] == worker and row[2] == inc then
      redis.call("DEL", T .. ":p:" .. rk)
      redis.call("ZREM", T .. ":wd", rk)
    end
  end
  if redis.call("EXISTS", T .. ":g:" .. gone) == 0 then redis.call("LPOP", T .. ":gone") end
  if redis.call("LLEN", T .. ":gone") > 0 then more = true end
end

return more and "more" or "done"
