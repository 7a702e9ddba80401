"""redis://host:port/db: one cache for every replica, with the fold lock as SET NX PX, so that replicas
make one summariser call between them for the same fold.
"""

from __future__ import annotations

import redis

from app.cache.base import CacheError

# The names the cache had when it held notes alone: kept, so what replicas and earlier versions stored stays read.
PREFIX = "compaction-proxy:notes:"
LOCK_PREFIX = "compaction-proxy:notes-lock:"
# Delete the lock only if it still holds our token: it may have expired and been taken by another replica.
RELEASE = """
if redis.call("GET", KEYS[1]) == ARGV[1] then
    return redis.call("DEL", KEYS[1])
end
return 0
"""
SOCKET_TIMEOUT = 5.0


class RedisBackend:
    def __init__(self, url: str, ttl: float) -> None:
        self.ttl = max(1, int(ttl))
        # A pooled, thread-safe client; decode_responses: values are text.
        self.client = redis.Redis.from_url(
            url, decode_responses=True, socket_timeout=SOCKET_TIMEOUT, socket_connect_timeout=SOCKET_TIMEOUT
        )
        self._release = self.client.register_script(RELEASE)

    def ping(self) -> None:
        try:
            self.client.ping()
        except redis.RedisError as exc:
            raise CacheError(str(exc)) from None

    def get(self, key: str) -> str | None:
        try:
            # GETEX: read and renew the expiry in one round trip (Redis 6.2+).
            value = self.client.getex(PREFIX + key, ex=self.ttl)
        except redis.RedisError as exc:
            raise CacheError(str(exc)) from None
        return value if isinstance(value, str) else None

    def put(self, key: str, value: str) -> None:
        try:
            self.client.set(PREFIX + key, value, ex=self.ttl)
        except redis.RedisError as exc:
            raise CacheError(str(exc)) from None

    def acquire(self, key: str, token: str, seconds: float) -> bool:
        try:
            return bool(self.client.set(LOCK_PREFIX + key, token, nx=True, px=max(1, int(seconds * 1000))))
        except redis.RedisError as exc:
            raise CacheError(str(exc)) from None

    def release(self, key: str, token: str) -> None:
        try:
            self._release(keys=[LOCK_PREFIX + key], args=[token])
        except redis.RedisError as exc:
            raise CacheError(str(exc)) from None

    def close(self) -> None:
        self.client.close()
