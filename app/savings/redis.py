"""redis://host:port/db: the ledger every replica adds up in. Totals and windows in a hash each (HINCRBY; the smaller
window by a script), each minute of the series in a hash of its own that expires with the history kept (a sorted set
lists them: never KEYS, which would walk the notes' keys too), the models kept apart in a set that a script grows to
`limit` at most.
"""

from __future__ import annotations

import json

import redis

from app.cache import CacheError
from app.cache.redis import SOCKET_TIMEOUT
from app.savings.tally import BUCKET_SECONDS, Tally

PREFIX = "compaction-proxy:savings:"
TOTALS, WINDOWS, MODELS = PREFIX + "totals", PREFIX + "windows", PREFIX + "models"
MINUTES, MINUTE = PREFIX + "minutes", PREFIX + "minute:"
ADMIT = """
if redis.call("SISMEMBER", KEYS[1], ARGV[1]) == 1 then return 1 end
if redis.call("SCARD", KEYS[1]) < tonumber(ARGV[2]) then
    redis.call("SADD", KEYS[1], ARGV[1])
    return 1
end
return 0
"""
SMALLER = """
local current = redis.call("HGET", KEYS[1], ARGV[1])
if not current or tonumber(ARGV[2]) < tonumber(current) then redis.call("HSET", KEYS[1], ARGV[1], ARGV[2]) end
return 0
"""


def _field(*parts: str) -> str:
    # A JSON list: model names are the client's, so no separator could be trusted not to occur in one.
    return json.dumps(parts)


class RedisStore:
    name = "redis"

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(
            url, decode_responses=True, socket_timeout=SOCKET_TIMEOUT, socket_connect_timeout=SOCKET_TIMEOUT
        )
        self._admit = self.client.register_script(ADMIT)
        self._smaller = self.client.register_script(SMALLER)

    def admit(self, model: str, limit: int) -> bool:
        try:
            return bool(self._admit(keys=[MODELS], args=[model, limit]))
        except redis.RedisError as exc:
            raise CacheError(str(exc)) from None

    def admitted(self) -> set[str]:
        try:
            return {str(model) for model in self.client.smembers(MODELS)}
        except redis.RedisError as exc:
            raise CacheError(str(exc)) from None

    def add(self, tally: Tally, oldest_minute: int) -> None:
        # One round trip; MULTI, so a failure leaves none of it half added.
        pipe = self.client.pipeline(transaction=True)
        for (wire, model, name), count in tally.totals.items():
            pipe.hincrby(TOTALS, _field(wire, model, name), count)
        minutes = {minute for minute, _ in tally.series if minute >= oldest_minute}
        for (minute, name), count in tally.series.items():
            if minute in minutes:
                pipe.hincrby(f"{MINUTE}{minute}", name, count)
        if minutes:
            # A minute's hash goes by itself once it is past the history, as long as that is now (the newest minute
            # added is about now).
            span = max(minutes) - oldest_minute + BUCKET_SECONDS
            for minute in minutes:
                pipe.expireat(f"{MINUTE}{minute}", minute + span)
            pipe.zadd(MINUTES, {str(minute): minute for minute in minutes})
        pipe.zremrangebyscore(MINUTES, "-inf", f"({oldest_minute}")
        for (wire, model), window in tally.windows.items():
            self._smaller(keys=[WINDOWS], args=[_field(wire, model), window], client=pipe)
        try:
            pipe.execute()
        except redis.RedisError as exc:
            raise CacheError(str(exc)) from None

    def read(self, oldest_minute: int) -> Tally:
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(TOTALS)
        pipe.hgetall(WINDOWS)
        pipe.zrangebyscore(MINUTES, oldest_minute, "+inf")
        try:
            totals, windows, listed = pipe.execute()
            minutes = [int(minute) for minute in listed]
            for minute in minutes:
                pipe.hgetall(f"{MINUTE}{minute}")
            series = pipe.execute() if minutes else []
        except redis.RedisError as exc:
            raise CacheError(str(exc)) from None
        out = Tally()
        for key, value in totals.items():
            wire, model, name = json.loads(key)
            out.totals[(wire, model, name)] = int(value)
        for key, value in windows.items():
            wire, model = json.loads(key)
            out.windows[(wire, model)] = int(value)
        for minute, fields in zip(minutes, series, strict=True):
            for name, value in fields.items():
                out.series[(minute, name)] = int(value)
        return out

    def close(self) -> None:
        self.client.close()
