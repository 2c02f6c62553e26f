package memory

import "github.com/redis/go-redis/v9"

// The Lua scripts of the Redis store. Each runs as one atomic step on the
// server (EVALSHA, EVAL when the server restarted and lost its script
// cache). Each begins with a shebang (Redis 7, Valkey 7.2): a server over
// its maxmemory then refuses a script that may write before it starts
// (OOM), so the store fails closed. A script without one is refused only
// if its first write may grow memory: one that first deletes (as
// ZREMRANGEBYSCORE) then writes what it likes past maxmemory. Times come from the server's clock (TIME), so replicas whose
// clocks differ a little still agree; callers pass lifetimes in
// milliseconds. Only standalone Redis (or a primary behind Sentinel) is
// supported: the generation scripts touch keys derived from a member
// name, which Redis Cluster would refuse.

// The shebangs: a script that may write, and one that only reads (which
// a full server still runs).
const (
	writes = "#!lua\n"
	reads  = "#!lua flags=no-writes\n"
)

// prelude is shared by the scripts that need it.
const prelude = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`

// onceUseScript: KEYS[1] the id's key, KEYS[2] its key under the previous
// ENCRYPTION_KEY (during a key rotation); ARGV[1] lifetime in ms.
// Returns 1 for a first use.
var onceUseScript = redis.NewScript(writes + `if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then return 1 end
return 0
`)

// counterAddScript: KEYS[1]; ARGV[1] delta, ARGV[2] lifetime in ms.
var counterAddScript = redis.NewScript(writes + `local v = redis.call('INCRBY', KEYS[1], ARGV[1])
if v <= 0 then
  redis.call('DEL', KEYS[1])
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return v
`)

// counterRaiseScript: KEYS[1]; ARGV[1] value, ARGV[2] lifetime in ms.
var counterRaiseScript = redis.NewScript(writes + `local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local v = tonumber(ARGV[1])
if v > cur then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return v
end
if cur > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return cur
`)

// bucketTakeScript is a token bucket as golang.org/x/time/rate keeps one:
// KEYS[1] a hash {t: tokens, a: when, in µs}; ARGV[1] tokens per µs,
// ARGV[2] burst. Returns 0 when a token was taken, else the µs until one
// is there (nothing taken). The key lives until the bucket would be full
// again: an absent bucket is a full one.
var bucketTakeScript = redis.NewScript(writes + `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local s = redis.call('HMGET', KEYS[1], 't', 'a')
local tokens, at = tonumber(s[1]), tonumber(s[2])
if tokens == nil or at == nil then tokens, at = burst, now end
if now > at then tokens = math.min(burst, tokens + (now - at) * rate) end
if tokens < 1 then return math.ceil((1 - tokens) / rate) end
tokens = tokens - 1
redis.call('HSET', KEYS[1], 't', string.format('%.6f', tokens), 'a', string.format('%d', now))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate / 1000) + 1)
return 0
`)

// slotsTakeScript: KEYS[1] a sorted set of members scored by expiry (ms);
// ARGV[1] member, ARGV[2] lifetime in ms, ARGV[3] limit. Returns {1 if
// the member holds a slot, the count, ms until the soonest expires when
// refused}.
var slotsTakeScript = redis.NewScript(writes + prelude + `
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local n = redis.call('ZCARD', KEYS[1])
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  if n >= tonumber(ARGV[3]) then
    local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    local wait = 0
    if first[2] then wait = tonumber(first[2]) - now end
    return {0, n, wait}
  end
  n = n + 1
end
redis.call('ZADD', KEYS[1], 'GT', now + tonumber(ARGV[2]), ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return {1, n, 0}
`)

// slotsCountScript: KEYS[1] the sorted set. Returns the live members.
var slotsCountScript = redis.NewScript(reads + prelude + `
return redis.call('ZCOUNT', KEYS[1], '(' .. now_ms(), '+inf')
`)

// generationsPrelude: a family is a hash {n: next generation, r: 1 if
// revoked} living until it expires; its group is a sorted set of its
// families' member names scored by when each was last started or
// refreshed (ms), so the lowest is the least recently refreshed, and a
// second sorted set holds the group's starts scored by when each stops
// counting (ms). A family's start is also a key of its own, remembered
// (with the grace) so that a replayed start is known even after its
// family ended. An ended family's key is deleted: the memory's id (a
// string key) says that a token naming it, whose family is gone, was
// ended here. The id lives as long as the longest-lived family; an empty
// server makes a new one (from the caller's candidate). A member whose
// family has expired leaves the group when room is needed (its key is
// gone).
//
// KEYS[1] group, KEYS[2] group starts, KEYS[3] family, KEYS[4] the family
// under the previous ENCRYPTION_KEY, KEYS[5] the start, KEYS[6] the start
// under the previous key, KEYS[7] the id, KEYS[8] the id under the
// previous key (during a rotation what the previous key's names hold
// carries over rather than being forgotten, which would let a used token
// through or an ended one back). ARGV[1] the family's member name,
// ARGV[2] its lifetime in ms (grace included), ARGV[3] the group's limit,
// ARGV[4] the prefix that makes a member name a family key, ARGV[5] a new
// id should the server hold none.
const generationsPrelude = prelude + `
local G, S, F, P, T, TP, I, IP = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local member, ttl, limit, prefix = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local now = now_ms()
if F ~= P and redis.call('EXISTS', F) == 0 and redis.call('EXISTS', P) == 1 then
  local pt = redis.call('PTTL', P)
  redis.call('HSET', F, unpack(redis.call('HGETALL', P)))
  if pt > 0 then redis.call('PEXPIRE', F, pt) end
end
local id = redis.call('GET', I)
if not id and IP ~= I then id = redis.call('GET', IP) end
if not id then id = ARGV[5] end
if redis.call('PTTL', I) < ttl then redis.call('SET', I, id, 'PX', ttl) end
-- make_room(n): room for n new entries of the group. Returns the
-- families ended, or -1 and the ms until the oldest start stops counting
-- when the group's starts alone fill it.
local function make_room(n)
  if limit <= 0 then return 0 end
  redis.call('ZREMRANGEBYSCORE', S, '-inf', now)
  local fams = redis.call('ZCARD', G)
  local over = redis.call('ZCARD', S) + fams + n - limit
  if over <= 0 then return 0 end
  if over > fams then
    local first = redis.call('ZRANGE', S, 0, 0, 'WITHSCORES')
    return -1, tonumber(first[2]) - now
  end
  local ended = 0
  local old = redis.call('ZPOPMIN', G, over)
  for i = 1, #old, 2 do
    ended = ended + redis.call('DEL', prefix .. old[i])
  end
  return ended
end
local function join()
  redis.call('ZADD', G, now, member)
  if redis.call('PTTL', G) < ttl then redis.call('PEXPIRE', G, ttl) end
end
local function live_for(t)
  if redis.call('PTTL', F) < t then redis.call('PEXPIRE', F, t) end
end
`

// generationsStartScript: ARGV[6] the start's lifetime in ms (it counts
// in the group that long), ARGV[7] how long it is remembered (grace
// included). Returns {0 started, 1 replayed, 2 the group full; the id;
// families ended, or the ms to wait}.
var generationsStartScript = redis.NewScript(writes + generationsPrelude + `
if redis.call('EXISTS', F) == 1 or redis.call('EXISTS', T) == 1 or redis.call('EXISTS', TP) == 1 then
  if redis.call('EXISTS', F) == 1 then redis.call('HSET', F, 'r', 1) end
  return {1, id, 0}
end
local st = tonumber(ARGV[6])
local ended, wait = make_room(st > 0 and 2 or 1)
if ended < 0 then return {2, id, wait} end
if st > 0 then
  redis.call('SET', T, '1', 'PX', ARGV[7])
  redis.call('ZADD', S, now + st, member)
  if redis.call('PTTL', S) < st then redis.call('PEXPIRE', S, st) end
end
redis.call('HSET', F, 'n', 0)
redis.call('PEXPIRE', F, ttl)
join()
return {0, id, ended}
`)

// generationsAdvanceScript: ARGV[6] the generation presented, ARGV[7] the
// id its token names. Returns {Outcome, the id, ms to wait}: Outcome -1
// when an unknown family cannot be adopted because the group's starts
// fill it.
var generationsAdvanceScript = redis.NewScript(writes + generationsPrelude + `
local gen = tonumber(ARGV[6])
local s = redis.call('HMGET', F, 'n', 'r')
if not s[1] and not s[2] then
  if ARGV[7] == id then return {5, id, 0} end
  local ended, wait = make_room(1)
  if ended < 0 then return {-1, id, wait} end
  redis.call('HSET', F, 'n', string.format('%d', gen + 1))
  redis.call('PEXPIRE', F, ttl)
  join()
  return {2, id, 0}
end
if s[2] then return {4, id, 0} end
local n = tonumber(s[1])
if gen < n then
  redis.call('HSET', F, 'r', 1)
  return {3, id, 0}
end
redis.call('HSET', F, 'n', string.format('%d', gen + 1))
live_for(ttl)
join()
if gen > n then return {6, id, 0} end
return {1, id, 0}
`)
