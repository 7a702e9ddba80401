"""What the proxy did to the provider's prompt cache: whether the request it forwards for a conversation
extends the one it forwarded last time (a prompt cache can reuse it) or breaks that prefix (it re-bills it).

State per client and conversation, in the cache backend of `cache_url` (shared by workers and replicas like notes
are): the number of forwarded messages and the prefix digest of all of them, "12:<hex>". One get and one put per
request, from the worker thread that compacts it; the digests are the ones the token count already made.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Literal

from app.cache import Backend, CacheError, open_backend
from app.settings import Settings
from strategies.digests import message_digest, prefix_digests

Message = dict[str, Any]
Digest = Callable[[Message], bytes]
Outcome = Literal["new", "extends", "breaks", "unknown"]
OUTCOMES: tuple[Outcome, ...] = ("new", "extends", "breaks", "unknown")
# Notes keys are bare hex digests: this namespace keeps the two apart in a backend they share.
KEY_PREFIX = "prefix:"
logger = logging.getLogger("compaction_proxy.prefix")


def conversation_key(
    model: str,
    original: Sequence[Message],
    digest: Digest = message_digest,
    scope: bytes = b"",
    namespace: str = KEY_PREFIX,
) -> str:
    """The model plus the original messages up to and including the first user message (system prompt and task):
    what stays the same for a whole conversation, whatever compaction later does to the rest; within the
    client's scope (Keys.client_scope), so that two clients sending the same opening are two conversations.
    namespace: what the key is for, so that state of different kinds shares a backend without clashing.
    """
    anchor = next((i for i, m in enumerate(original) if m.get("role") == "user"), 0)
    # The model name seeds the chain: the same opening sent to two models is two caches at the provider.
    chained = prefix_digests((digest(m) for m in original[: anchor + 1]), seed=model.encode())
    # No messages at all (the upstream will refuse it): the model alone, in a form no digest can take.
    conversation = chained[-1].hex() if chained else "empty:" + model.encode().hex()
    # A hex digest and a colon: no scope, and no model name, can make one client's key another's.
    return namespace + (scope.hex() + ":" if scope else "") + conversation


def judge(stored: str | None, prefixes: Sequence[bytes]) -> Outcome:
    """stored: "k:<hex>" of the previous forwarded request; prefixes: the prefix digests of this one."""
    if stored is None:
        return "new"
    count, _, digest = stored.partition(":")
    try:
        k = int(count)
    except ValueError:
        return "new"  # not written by this module: as good as nothing stored
    if k == 0 or (0 < k <= len(prefixes) and prefixes[k - 1].hex() == digest):
        return "extends"
    return "breaks"


class PrefixTracker:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    @classmethod
    def open(cls, settings: Settings) -> PrefixTracker:
        """A backend of its own on cache_url: the TTL is set per backend object, and this state lives an hour,
        not the notes' week; with memory:// its LRU then never evicts notes, which cost a summariser call each.
        Raises CacheError when the cache cannot be opened (a SQLite file that cannot be created).
        """
        url, ttl, size = settings.cache_url, settings.prefix_tracking_ttl_seconds, settings.cache_max_entries
        return cls(open_backend(url, ttl=ttl, max_entries=size))

    def observe(
        self,
        model: str,
        original: Sequence[Message],
        forwarded: Sequence[Message],
        digest: Digest = message_digest,
        *,
        scope: bytes = b"",
    ) -> Outcome:
        """Judge `forwarded` against what was forwarded last for this conversation, then remember it.

        Blocking (backend I/O): call it from a worker thread. digest: Context.digest, so that messages the
        request already hashed are not hashed again. scope: Keys.client_scope of the request, so that no client
        learns from the answer what another sent, nor overwrites its state. Never raises for a backend failure:
        "unknown".
        Concurrent requests of one conversation race between the get and the put (the last write wins):
        this is a report, worth no cross-process lock.
        """
        key = conversation_key(model, original, digest, scope)
        prefixes = prefix_digests(digest(m) for m in forwarded)
        current = f"{len(prefixes)}:{prefixes[-1].hex() if prefixes else ''}"
        try:
            stored = self.backend.get(key)  # also renews the entry's expiry
            if stored != current:  # a retry of the same request needs no write
                self.backend.put(key, current)
        except CacheError as exc:
            # Only the error's text: the cache URL may hold a password.
            logger.warning("prefix tracking skipped, the cache failed: %s", exc)
            return "unknown"
        return judge(stored, prefixes)

    def close(self) -> None:
        self.backend.close()
