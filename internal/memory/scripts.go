package memory

import "github.com/redis/go-redis/v9"

// The Lua scripts of the Redis store. Each runs as one atomic step on the
// server (EVALSHA, EVAL when the server restarted and lost its script
// cache). Times come from the server's clock (TIME), so replicas whose
// clocks differ a little still agree; callers pass lifetimes in
// milliseconds. Only standalone Redis (or a primary behind Sentinel) is
// supported: the generation scripts touch keys derived from a member
// name, which Redis Cluster would refuse.

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
var onceUseScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then return 1 end
return 0
`)

// counterAddScript: KEYS[1]; ARGV[1] delta, ARGV[2] lifetime in ms.
var counterAddScript = redis.NewScript(`
local v = redis.call('INCRBY', KEYS[1], ARGV[1])
if v <= 0 then
  redis.call('DEL', KEYS[1])
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return v
`)

// counterRaiseScript: KEYS[1]; ARGV[1] value, ARGV[2] lifetime in ms.
var counterRaiseScript = redis.NewScript(`
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
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
var bucketTakeScript = redis.NewScript(`
local t = redis.call('TIME')
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
var slotsTakeScript = redis.NewScript(prelude + `
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
var slotsCountScript = redis.NewScript(prelude + `
return redis.call('ZCOUNT', KEYS[1], '(' .. now_ms(), '+inf')
`)

// generationsPrelude: a family is a hash {n: next generation, r: 1
// revoked, 2 evicted} living until it expires; its group is a sorted set
// of its families' member names scored by when each was last started or
// refreshed (ms), so the lowest is the least recently refreshed. A member
// whose family has expired leaves the group when room is needed (its key
// is gone), and the group lives as long as its longest-lived family.
// KEYS[1] group, KEYS[2] family, KEYS[3] the family under the previous
// ENCRYPTION_KEY (during a rotation: its memory carries over rather than
// being forgotten, which would let a used token through). ARGV[1] the
// family's member name, ARGV[2] its lifetime in ms, ARGV[3] the group's
// limit, ARGV[4] the prefix that makes a member name a family key.
const generationsPrelude = prelude + `
local G, F, P = KEYS[1], KEYS[2], KEYS[3]
local member, ttl, limit, prefix = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local now = now_ms()
if F ~= P and redis.call('EXISTS', F) == 0 and redis.call('EXISTS', P) == 1 then
  local pt = redis.call('PTTL', P)
  redis.call('HSET', F, unpack(redis.call('HGETALL', P)))
  if pt > 0 then redis.call('PEXPIRE', F, pt) end
end
local function make_room()
  local ended, n = 0, redis.call('ZCARD', G)
  while limit > 0 and n >= limit do
    local old = redis.call('ZPOPMIN', G)
    local fk = prefix .. old[1]
    if redis.call('EXISTS', fk) == 1 then
      redis.call('HSET', fk, 'r', 2)
      ended = ended + 1
    end
    n = n - 1
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

// generationsStartScript returns how many families it ended, or -1 when
// the family was known already (nothing changes).
var generationsStartScript = redis.NewScript(generationsPrelude + `
if redis.call('EXISTS', F) == 1 then return -1 end
local ended = make_room()
redis.call('HSET', F, 'n', 0)
redis.call('PEXPIRE', F, ttl)
join()
return ended
`)

// generationsAdvanceScript: ARGV[5] the generation presented. Returns
// {Outcome, families ended}.
var generationsAdvanceScript = redis.NewScript(generationsPrelude + `
local gen = tonumber(ARGV[5])
local s = redis.call('HMGET', F, 'n', 'r')
if not s[1] and not s[2] then
  local ended = make_room()
  redis.call('HSET', F, 'n', string.format('%d', gen + 1))
  redis.call('PEXPIRE', F, ttl)
  join()
  return {2, ended}
end
if s[2] == '2' then return {5, 0} end
if s[2] then return {4, 0} end
local n = tonumber(s[1])
if gen < n then
  redis.call('HSET', F, 'r', 1)
  redis.call('ZREM', G, member)
  return {3, 0}
end
if gen > n then return {6, 0} end
redis.call('HSET', F, 'n', string.format('%d', gen + 1))
live_for(ttl)
join()
return {1, 0}
`)

// generationsRevokeScript ends the family (known or not) as revoked.
var generationsRevokeScript = redis.NewScript(generationsPrelude + `
redis.call('HSET', F, 'r', 1)
live_for(ttl)
redis.call('ZREM', G, member)
return 1
`)
