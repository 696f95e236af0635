"""Limits that every process and machine shares through one Redis server (``llm.shared_limits_url``): a member's
``rpm`` and ``tpm`` (``SharedRateLimiter``), its ``max_parallel`` slots (``SharedSlots``) and the quarter's spend
against ``llm.budget_usd`` (``SharedSpend``). Each decision is one Lua script run by the server, on the server's
clock, so two processes never both take the last request of a minute, and two machines whose clocks differ agree.

Written here on Redis' own primitives (sorted sets, scripts): litellm's Router tracks usage on Redis only for its
own routing between deployments, and blocks no caller at a limit; the Redis-backed limiter libraries either count
fixed windows (twice the limit across a window's edge) or do not bound tokens per minute.
"""

import time
import uuid
from contextlib import contextmanager
from typing import Any, Iterator

from dagster_project.core.config_file import hide_userinfo

# sorted sets of request starts and of token uses ("<id>:<tokens>"), both scored by the server's time in seconds
_ADMIT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local window, rpm, tpm = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
local wait = 0
if rpm > 0 then
  local n = redis.call('ZCARD', KEYS[1])
  if n >= rpm then
    local oldest = redis.call('ZRANGE', KEYS[1], n - rpm, n - rpm, 'WITHSCORES')
    wait = math.max(wait, tonumber(oldest[2]) + window - now)
  end
end
if tpm > 0 then
  local uses = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
  local total = 0
  for i = 1, #uses, 2 do total = total + tonumber(string.match(uses[i], ':(%d+)$')) end
  if total >= tpm then
    local spent, excess = 0, total - tpm
    for i = 1, #uses, 2 do
      spent = spent + tonumber(string.match(uses[i], ':(%d+)$'))
      if spent > excess then
        wait = math.max(wait, tonumber(uses[i + 1]) + window - now)
        break
      end
    end
  end
end
if wait > 0 then return tostring(wait) end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('PEXPIRE', KEYS[1], math.ceil(window * 1000) + 1000)
return '0'
"""
_USED = """
local t = redis.call('TIME')
redis.call('ZADD', KEYS[1], tonumber(t[1]) + tonumber(t[2]) / 1e6, ARGV[1])
redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) * 1000) + 1000)
"""
# a sorted set of slot holders scored by when their lease ends: a process that died frees its slot at that time
_TAKE_SLOT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) * 1000) + 1000)
return 1
"""
_POLL_S = 0.05  # how often a process waiting for a slot asks again
SHARED_PREFIX = "veritas:llm"  # the keys of the shared limits on the Redis server


class SharedLimitsUnavailable(RuntimeError):
    """The Redis server of ``llm.shared_limits_url`` cannot be reached: no limit could be kept, so no call is made."""


def connect(url: str) -> Any:
    """A client of the shared-limits server, checked now: a dead server stops the stage with its URL named."""
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=10)
    try:
        client.ping()
    except redis.RedisError as err:
        raise SharedLimitsUnavailable(
            f"llm.shared_limits_url {hide_userinfo(url)}: cannot reach the Redis server ({err}): start it, or remove "
            "shared_limits_url to keep the limits per process") from err
    return client


class SharedRateLimiter:
    """``RateLimiter``'s interface (``acquire``, ``used``) over a sliding window that every process shares."""

    def __init__(self, client: Any, key: str, rpm: int | None, tpm: int | None, window_s: float = 60.0,
                 sleep=time.sleep) -> None:
        self.rpm, self.tpm, self.window = rpm, tpm, window_s
        self._starts, self._tokens = f"{key}:starts", f"{key}:tokens"
        self._admit = client.register_script(_ADMIT)
        self._used = client.register_script(_USED)
        self._sleep = sleep

    def acquire(self) -> float:
        """Block until a request may start (it is counted at once); returns the seconds waited."""
        waited = 0.0
        if not (self.rpm or self.tpm):
            return waited
        while True:
            delay = float(self._admit(keys=[self._starts, self._tokens],
                                      args=[self.window, self.rpm or 0, self.tpm or 0, uuid.uuid4().hex]))
            if delay <= 0:
                return waited
            self._sleep(delay)
            waited += delay

    def used(self, tokens: int) -> None:
        if self.tpm and tokens:
            self._used(keys=[self._tokens], args=[f"{uuid.uuid4().hex}:{int(tokens)}", self.window])


class SharedSlots:
    """A member's ``max_parallel`` slots across every process (``with slots.held():``). A slot is leased for
    ``lease_s`` (longer than any call may take): a process that dies holding one frees it then."""

    def __init__(self, client: Any, key: str, slots: int, lease_s: float, sleep=time.sleep) -> None:
        self._key, self._slots, self._lease = f"{key}:slots", max(1, slots), lease_s
        self._take = client.register_script(_TAKE_SLOT)
        self._client, self._sleep = client, sleep

    @contextmanager
    def held(self) -> Iterator[None]:
        holder = uuid.uuid4().hex
        while not self._take(keys=[self._key], args=[self._slots, self._lease, holder]):
            self._sleep(_POLL_S)
        try:
            yield
        finally:
            self._client.zrem(self._key, holder)


class SharedSpend:
    """The quarter's model spend as every process adds to it (USD, a float counter per quarter)."""

    def __init__(self, client: Any, prefix: str) -> None:
        self._client, self._prefix = client, prefix

    def add(self, quarter: str, usd: float) -> None:
        if usd:
            self._client.incrbyfloat(f"{self._prefix}:spend:{quarter}", usd)

    def total(self, quarter: str) -> float:
        return float(self._client.get(f"{self._prefix}:spend:{quarter}") or 0.0)
