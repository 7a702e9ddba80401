"""What the model expanded, shown to it again on the conversation's later requests.

The client never sees the proxy's expand rounds, so its next request does not hold them; without them the model
would find the stub again and expand the same ref on every turn. So the rounds are remembered per conversation
(app.compaction.prefix.conversation_key, within the client's scope) in the cache at cache_url, shared by workers
and replicas: where each happened and the calls made, never content (app.expansion.rounds.Round). A later request
gets them back at their place with their results made again from its own messages, and so extends, byte for
byte, the request the provider saw with the round in it, which its prompt cache holds.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from app.cache import Backend, CacheError, open_backend
from app.expansion.rounds import MAX_ID_CHARS, Round
from app.settings import Settings

NAMESPACE = "expanded:"
# A conversation's newest rounds, and their calls in all: every one is shown again on each later request.
MAX_ROUNDS = 32
MAX_CALLS = 64
MAX_TAG_CHARS = 256  # a round's tag (Round.shown): a few dozen characters
logger = logging.getLogger("compaction_proxy.expansion")


class ExpansionMemory:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    @classmethod
    def open(cls, settings: Settings) -> ExpansionMemory:
        """A backend of its own on cache_url, with its own expiry (as PrefixTracker.open). Raises CacheError."""
        url, ttl, size = settings.cache_url, settings.expand_memory_ttl_seconds, settings.cache_max_entries
        return cls(open_backend(url, ttl=ttl, max_entries=size))

    def recall(self, key: str) -> list[Round]:
        """The rounds remembered for the conversation; none when the cache fails or holds something else.
        Blocking: call it from a worker thread.
        """
        try:
            stored = self.backend.get(key)
        except CacheError as exc:
            logger.warning("expand rounds not recalled, the cache failed: %s", exc)
            return []
        return _decode(stored) if stored else []

    def remember(self, key: str, rounds: Sequence[Round]) -> None:
        """Add the rounds of one request to what is remembered. They replace what was remembered at their place (a
        retry of the same turn, its rounds asked anew), so a place holds one request's rounds; the newest
        MAX_ROUNDS rounds, with MAX_CALLS calls in all, are kept. Blocking.
        """
        if not rounds:
            return
        places = {(r.at, r.anchor) for r in rounds}
        try:
            known = _decode(self.backend.get(key) or "")
            merged = [*(r for r in known if (r.at, r.anchor) not in places), *rounds]
            self.backend.put(key, _encode(_newest(merged)))
        except CacheError as exc:
            logger.warning("expand rounds not remembered, the cache failed: %s", exc)

    def close(self) -> None:
        self.backend.close()


def _newest(rounds: Sequence[Round]) -> list[Round]:
    """The newest rounds within MAX_ROUNDS and MAX_CALLS."""
    kept: list[Round] = []
    calls = 0
    for r in reversed(rounds[-MAX_ROUNDS:]):
        calls += len(r.calls)
        if calls > MAX_CALLS:
            break
        kept.append(r)
    return kept[::-1]


def _encode(rounds: Sequence[Round]) -> str:
    # A round's tag (Round.shown) only where it has one: what was remembered before tags read the same.
    items = [[r.at, r.anchor, [list(c) for c in r.calls], *([r.shown] if r.shown else [])] for r in rounds]
    return json.dumps(items, separators=(",", ":"))


def _decode(stored: str) -> list[Round]:
    """What the cache holds, read as untrusted: anything malformed is dropped, never raised."""
    try:
        data = json.loads(stored)
    except ValueError:
        return []
    rounds: list[Round] = []
    for item in data if isinstance(data, list) else []:
        try:
            at, anchor, calls, *tag = item
            parsed = tuple((str(cid), str(arguments)) for cid, arguments in calls)
        except (TypeError, ValueError):
            continue
        shown = tag[0] if len(tag) == 1 else "" if not tag else None
        valid = isinstance(at, int) and at > 0 and isinstance(anchor, str) and parsed
        if not isinstance(shown, str) or len(shown) > MAX_TAG_CHARS:
            continue
        if valid and all(len(cid) <= MAX_ID_CHARS and len(arguments) <= 256 for cid, arguments in parsed):
            rounds.append(Round(at, anchor, parsed, shown))
    return _newest(rounds)
