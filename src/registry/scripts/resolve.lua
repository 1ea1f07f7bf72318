-- docs/protocol.md "Resolution", for a batch of resolves on one bucket, each as if it ran alone, in order.
-- ARGV: T, now (unused: each query has its own), leaseMs, minLeaseLeftMs, nackThreshold,
--       nackWindowMs, then one query per argument:
--       "now\nenv\nnamespace\nid\nhostname\ntakeover\nmode\nproposal\ngen\nseq"
--       (hostname "" outside hostname-aware mode, takeover "wind_down" or "deny"; mode, proposal,
--       gen and seq: see placeNew; fields never contain "\n").
-- Answers one string per query: "placed\nworker\nadvertiseUrl\nepoch\n0|1", "unknown",
-- "cold\nretryAfterMs", "none", "choose\n<view payload>", "stale\n<view payload>", "again"; in
-- hostname-aware mode also "rebound\nenv", "held", "takeover\nretryAfterMs" and
-- "displaced\nretryAfterMs".
local leaseMs = tonumber(ARGV[3])
local minLeaseLeft = tonumber(ARGV[4])
local nackThreshold = tonumber(ARGV[5])
local nackWindowMs = tonumber(ARGV[6])

local SHORT, CHANGES = 256, 128

-- The ids of this batch whose first call answered "choose": a later first call for one of them
-- answers "again", to be asked once that placement is done, as if it ran after it.
local choosing = {}

-- What a membership view (src/registry/MembershipView.ts) at generation `gen` (the bucket's
-- cold-start marker), having read the change log up to `since`, needs to rank at `now`:
-- "gen\nseq\nstate\nshort count\nshort workers...\nrecord count\nrecords (9 lines each)".
-- state "done": the records changed since `since`, and seq is the log's end; "more": too many
-- changes, or "full": another generation or a trimmed log (no records; read the log or the
-- membership page by page). Short workers: lease left below the minimum at now, so not
-- candidates (-1 as the count: more than SHORT, read them page by page).
local payloads = {}
local function viewPayload(gen, since)
  local memo = gen .. "|" .. since .. "|" .. nowText
  if payloads[memo] then return payloads[memo] end
  local bucketGen = redis.call("GET", T .. ":cold")
  local seq = redis.call("GET", T .. ":seq") or "0"
  local out = { bucketGen, seq }
  local short = redis.call("ZRANGEBYSCORE", T .. ":wl", "-inf", "(" .. string.format("%d", now + minLeaseLeft), "LIMIT", 0, SHORT + 1)
  local records = {}
  local state = "done"
  if gen ~= bucketGen or tonumber(since) < tonumber(redis.call("GET", T .. ":trim") or "0") then
    state = "full"
  else
    local changed = redis.call("ZRANGEBYSCORE", T .. ":chg", "(" .. since, "+inf", "LIMIT", 0, CHANGES + 1)
    if #changed > CHANGES then
      state = "more"
    else
      records = changed
    end
  end
  out[3] = state
  if #short > SHORT then
    out[4] = "-1"
  else
    out[4] = tostring(#short)
    for _, worker in ipairs(short) do out[#out + 1] = worker end
  end
  out[#out + 1] = tostring(#records)
  for _, worker in ipairs(records) do
    local w = redis.call("HMGET", T .. ":w:" .. worker, "mkeys", "headroom", "draining", "degraded", "nackStart", "nackCount", "ns")
    if w[1] then
      out[#out + 1] = worker .. "\n1\n" .. string.gsub(w[1], "\n", " ") .. "\n" .. w[2] .. "\n" .. w[3] .. "\n" .. w[4] .. "\n" .. w[5] .. "\n" .. w[6] .. "\n" .. w[7]
    else
      out[#out + 1] = worker .. "\n0\n\n\n\n\n\n\n"
    end
  end
  payloads[memo] = table.concat(out, "\n")
  return payloads[memo]
end

-- docs/protocol.md "Resolution" steps 4 to 7: cold start, then the view's proposal checked (step 5's test applied to
-- the proposed worker at now), the epoch minted and the row written. mode "a": no proposal yet,
-- answer what the view needs; "p": a proposal ("" when the view has no candidate), refused
-- ones answer "stale" with what the view missed; "f": the last proposal, refused ones answer "none".
local function placeNew(env, namespace, id, mk, rk, pkey, rest)
  local coldUntil = tonumber(redis.call("GET", T .. ":cold")) + leaseMs
  if now < coldUntil then return "cold\n" .. string.format("%d", coldUntil - now) end

  local hostname, _, mode, proposal, gen, since = string.match(rest, "^([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)$")
  if mode == "a" then
    choosing[rk] = true
    return "choose\n" .. viewPayload(gen, since)
  end
  if proposal ~= "" then
    local w = redis.call("HMGET", T .. ":w:" .. proposal, "lease", "draining", "degraded", "nackStart", "nackCount", "ns", "inc", "url")
    if w[1] and tonumber(w[1]) - now >= minLeaseLeft and w[2] ~= "1" and w[3] ~= "1"
        and not nackDegraded(w[4], w[5], nackThreshold, nackWindowMs)
        and redis.call("ZSCORE", T .. ":m:" .. mk, proposal)
        and (hostname == "" or servesHostname(w[6], env, namespace, hostname)) then
      local epoch = nextEpoch(nowText)
      redis.call("HSET", pkey, "env", env, "ns", namespace, "id", id, "worker", proposal, "inc", w[7],
        "epoch", epoch, "placedAt", nowText, "host", hostname, "tag", "", "wd", "0")
      redis.call("SADD", T .. ":r:" .. proposal, rk)
      return "placed\n" .. proposal .. "\n" .. w[8] .. "\n" .. epoch .. "\n1"
    end
  end
  if mode == "f" then return "none" end
  if proposal == "" and gen == redis.call("GET", T .. ":cold") and since == (redis.call("GET", T .. ":seq") or "0") then return "none" end
  return "stale\n" .. viewPayload(gen, since)
end

-- Hostname-aware mode (docs/protocol.md "Resolution" steps 1 to 3, src/registry/Hostnames.ts): the pair's binding
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
        redis.call("ZADD", T .. ":wdw:" .. row[1], deadline, rk)
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
  if choosing[rk] and string.match(rest, "^[^\n]*\n[^\n]*\n([^\n]*)") == "a" then return "again" end
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
for i = 7, #ARGV do answers[#answers + 1] = resolveOne(ARGV[i]) end
return answers
