package redlock

import goredis "github.com/redis/go-redis/v9"

// Redlock's scripts, one server each. A script runs atomically: no other
// command runs on that server between its reads and its writes.

// acquireScript sets KEYS[1] to the token ARGV[1] for ARGV[2] ms if it is
// free, and then counts the grant on the fence counter KEYS[2]: it returns
// the new count, or 0 when the key is held.
const acquireSrc = `
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0
`

var acquireScript = goredis.NewScript(acquireSrc)

// raiseScript raises the fence counter KEYS[1] to ARGV[1] if it is lower.
const raiseSrc = `
local c = tonumber(redis.call('GET', KEYS[1]) or '0')
if c < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end
return 1
`

var raiseScript = goredis.NewScript(raiseSrc)

// refreshScript gives KEYS[1] ARGV[2] ms more if it still holds the token
// ARGV[1]: 1 if it did, 0 if not.
const refreshSrc = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`

var refreshScript = goredis.NewScript(refreshSrc)

// refreshSetNXScript is Defects.SetNXOnExtend's refresh: as refreshScript,
// but a missing key is set again (revived).
const refreshSetNXSrc = `
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if not v and redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
return 0
`

var refreshSetNXScript = goredis.NewScript(refreshSetNXSrc)

// releaseScript deletes KEYS[1] if it still holds the token ARGV[1]: 1 if
// it did, 0 if not.
const releaseSrc = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`

var releaseScript = goredis.NewScript(releaseSrc)

// The priority lock's scripts. KEYS[1] is the hash {k}:lock with fields
// acq (the holder's token), prio and fence, and after steals the chain of
// victims, for undoing a steal that did not get its majority: vn, how
// many, and for the i-th (1 the first, a fresh grant; vn the holder's own
// victim) vacq<i>, vprio<i>, vfence<i> and vdl<i>: its token, priority,
// fence, and deadline in ms of the server's clock. A chain, not one
// victim: where c2 stole from c1 and c3 from c2, and both steals are
// undone, c3's undo gives the key back to c2 and c2's to c1 (until c1's
// deadline); remembering only c2, c2's undo deleted the key while c1
// held it, and a third acquire took it (a double hold).

// obtainScript grants the lock to token ARGV[1] of priority ARGV[2] for
// ARGV[3] ms, counting the grant on the fence counter KEYS[2]:
//   - a free key: {1, fence};
//   - a holder of lower priority (or equal, with ARGV[4] = "1", the
//     EqualSteals defect): the thief replaces it, the key living the longer
//     of its remaining time and the ttl (just the ttl with ARGV[5] = "1",
//     the StealResetsTTL defect): {2, fence, victim's token, victim's
//     remaining ms, the key's life in ms, and then, for each earlier
//     victim of the chain (who may not have been told: its thief's
//     acquire may have failed) after the first told ones (see
//     settleScript), its token and remaining ms (0 or less: none, its
//     claim given up or its time over)};
//   - otherwise {0, holder's priority}.
const obtainSrc = `
local cur = redis.call('HGET', KEYS[1], 'acq')
local mine = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
if not cur then
  local f = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], 'acq', ARGV[1], 'prio', ARGV[2], 'fence', f)
  redis.call('PEXPIRE', KEYS[1], ttl)
  return {1, f}
end
local v = redis.call('HMGET', KEYS[1], 'prio', 'fence')
local p = tonumber(v[1])
if p < mine or (ARGV[4] == '1' and p == mine) then
  local left = redis.call('PTTL', KEYS[1])
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local f = redis.call('INCR', KEYS[2])
  local n = (tonumber(redis.call('HGET', KEYS[1], 'vn')) or 0) + 1
  local told = tonumber(redis.call('HGET', KEYS[1], 'told')) or 0
  local r = {2, f, cur, left, 0}
  for i = told + 1, n - 1 do
    local c = redis.call('HMGET', KEYS[1], 'vacq' .. i, 'vdl' .. i)
    r[#r + 1] = c[1]
    r[#r + 1] = tonumber(c[2]) - now
  end
  redis.call('HSET', KEYS[1], 'acq', ARGV[1], 'prio', ARGV[2], 'fence', f, 'vn', n,
    'vacq' .. n, cur, 'vprio' .. n, v[1], 'vfence' .. n, v[2], 'vdl' .. n, now + left)
  local life = ttl
  if ARGV[5] ~= '1' and left > ttl then life = left end
  redis.call('PEXPIRE', KEYS[1], life)
  r[5] = life
  return r
end
return {0, p}
`

var obtainScript = goredis.NewScript(obtainSrc)

// undoScript takes the lock back from token ARGV[1], if it holds it: a
// steal is undone (its victim, the last of the chain, holds it again, with
// the rest of the chain, until its own deadline, if that has not passed:
// 2), a grant deleted (1); 0 if another holds it, and if ARGV[1]'s key
// there was a fresh grant (ARGV[2] = "1"), the first of the chain,
// ARGV[1] gives up its claim (its deadline becomes 0): the undo that
// reaches it then deletes the key rather than give it back to an acquire
// that failed (a key nobody holds, which refused acquires of no higher
// priority until it expired). A key ARGV[1] stole keeps the claim: its
// deadline is its own victim's, whom nobody told. The deadlines grow
// along the chain (a thief's key lives at least as long as its victim's),
// so a victim whose deadline has passed leaves none before it alive.
const undoSrc = `
local cur = redis.call('HGET', KEYS[1], 'acq')
if cur ~= ARGV[1] then
  if cur and ARGV[2] == '1' and redis.call('HGET', KEYS[1], 'vacq1') == ARGV[1] then
    redis.call('HSET', KEYS[1], 'vdl1', 0)
  end
  return 0
end
local n = tonumber(redis.call('HGET', KEYS[1], 'vn'))
if not n then
  redis.call('DEL', KEYS[1])
  return 1
end
local v = redis.call('HMGET', KEYS[1], 'vacq' .. n, 'vprio' .. n, 'vfence' .. n, 'vdl' .. n)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local left = tonumber(v[4]) - now
if left <= 0 then
  redis.call('DEL', KEYS[1])
  return 1
end
redis.call('HDEL', KEYS[1], 'vacq' .. n, 'vprio' .. n, 'vfence' .. n, 'vdl' .. n)
redis.call('HSET', KEYS[1], 'acq', v[1], 'prio', v[2], 'fence', v[3], 'vn', n - 1)
local told = tonumber(redis.call('HGET', KEYS[1], 'told'))
if told and told > n - 1 then redis.call('HSET', KEYS[1], 'told', n - 1) end
if n == 1 then redis.call('HDEL', KEYS[1], 'vn', 'told') end
redis.call('PEXPIRE', KEYS[1], left)
return 2
`

var undoScript = goredis.NewScript(undoSrc)

// settleSrc is a thief's check, once its wait for its victims is over,
// that token ARGV[1] still holds the lock: 1; -1 if another holds it, 0
// if it is free. Where it holds, the chain below it (vn entries: the
// victims its obtain named there) is marked told (told = vn): each one
// acknowledged or can no longer hold, so a later thief's obtain names
// only the entries after them, and waits for no victim that knew of its
// loss already (one whose watcher a fault cut off would make it wait out
// that victim's time for nothing). An undo keeps told within the chain.
const settleSrc = `
local cur = redis.call('HGET', KEYS[1], 'acq')
if cur == ARGV[1] then
  local n = redis.call('HGET', KEYS[1], 'vn')
  if n then redis.call('HSET', KEYS[1], 'told', n) end
  return 1
end
if cur then return -1 end
return 0
`

// refreshPrioScript gives the lock ARGV[2] ms more if token ARGV[1] holds
// it: 1; -1 if another holds it (a theft); 0 if it is free.
const refreshPrioSrc = `
local cur = redis.call('HGET', KEYS[1], 'acq')
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if cur then return -1 end
return 0
`

var refreshPrioScript = goredis.NewScript(refreshPrioSrc)

// releasePrioScript deletes the lock if token ARGV[1] holds it (1; -1 if
// another holds it, 0 if it is free), and then the token's note list
// KEYS[2]. Where another holds it, the note list stays: a thief's note
// in it waits for the releaser's listeners, and the thief for its
// acknowledgement. Deleted either way, it lost the note of a thief that
// stole while the release ran, and the thief waited in vain until its
// validity ran out (prove --kind priority-redlock --seed 2, plan 14,014).
const releasePrioSrc = `
local cur = redis.call('HGET', KEYS[1], 'acq')
if cur == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('DEL', KEYS[2])
  return 1
end
if cur then return -1 end
return 0
`

var releasePrioScript = goredis.NewScript(releasePrioSrc)

// ScriptSources are the Lua sources of every script Redlock and Priority
// send, by name: a simulator that runs them natively (sim/redissim)
// recognises them by their exact source, taken from here rather than
// copied, so that a script changed here is one it no longer knows (and
// says so) until it models the change.
func ScriptSources() map[string]string {
	return map[string]string{
		"acquire": acquireSrc, "raise": raiseSrc, "refresh": refreshSrc, "refreshSetNX": refreshSetNXSrc, "release": releaseSrc,
		"obtain": obtainSrc, "undo": undoSrc, "settle": settleSrc, "refreshPrio": refreshPrioSrc, "releasePrio": releasePrioSrc,
	}
}
