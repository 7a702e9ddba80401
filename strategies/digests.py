"""Content digests of messages, and of every prefix of a message list: how a conversation is recognised.

A prefix digest chains the message digests (h_i = H(h_{i-1} + d_i)), so the digest of a request's first k
messages is known for every k in one pass, and two lists agree on their first k messages exactly when their
k-th prefix digests agree.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

import orjson

DIGEST_SIZE = 16


def message_bytes(message: dict[str, Any]) -> bytes:
    """A canonical serialisation, also for text orjson refuses (lone surrogates, which clients can send)."""
    try:
        return orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return json.dumps(message, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass")


def message_digest(message: dict[str, Any]) -> bytes:
    return hashlib.blake2b(message_bytes(message), digest_size=DIGEST_SIZE).digest()


def prefix_digests(digests: Iterable[bytes], seed: bytes = b"") -> list[bytes]:
    """The digest of each prefix: element i covers messages 0..i, started from seed (which can scope it)."""
    out: list[bytes] = []
    current = hashlib.blake2b(seed, digest_size=DIGEST_SIZE).digest()
    for digest in digests:
        current = hashlib.blake2b(current + digest, digest_size=DIGEST_SIZE).digest()
        out.append(current)
    return out
