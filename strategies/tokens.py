"""Prompt token counts with tiktoken, per OpenAI's documented chat overhead, cached per message."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

from .base import Message
from .content import message_bytes, text_of
from .encodings import Encodings

# Per OpenAI's cookbook ("How to count tokens with tiktoken") for current chat models.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3

_CL100K_PREFIXES = ("gpt-4", "gpt-3.5", "gpt-35", "text-embedding-3", "text-embedding-ada")
_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "chatgpt-4o", "o1", "o3", "o4", "gpt-oss", "codex")


def encoding_for_model(model: str) -> str:
    """o200k for current OpenAI models, cl100k for gpt-4 and gpt-3.5, o200k for anything else."""
    name = model.rsplit("/", 1)[-1].lower()  # "openai/gpt-4o" on routers
    name = name.removeprefix("ft:")  # fine-tunes: "ft:gpt-4-0613:org::id"
    if name.startswith(_O200K_PREFIXES):
        return "o200k_base"
    if name.startswith(_CL100K_PREFIXES):
        return "cl100k_base"
    return "o200k_base"


class TokenCounter:
    """Counts chat messages; remembers each message's count by content hash (bounded LRU), so a history
    re-sent with one new message costs about one message's tokenization.
    """

    def __init__(self, encodings: Encodings | None = None, cache_size: int = 100_000) -> None:
        self._encodings = encodings or Encodings()
        self._cache: OrderedDict[bytes, int] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def count_text(self, text: str, model: str) -> int:
        encoding = self._encodings.get(encoding_for_model(model))
        return len(encoding.encode(text, disallowed_special=()))

    def count_messages(self, messages: list[Message], model: str) -> int:
        encoding_name = encoding_for_model(model)
        return REPLY_PRIMING + sum(self._count_cached(m, encoding_name) for m in messages)

    def _count_cached(self, message: Message, encoding_name: str) -> int:
        key = hashlib.blake2b(message_bytes(message), digest_size=16).digest() + encoding_name.encode()
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return cached
        count = self._count_message(message, encoding_name)
        with self._lock:
            self._cache[key] = count
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return count

    def _count_message(self, message: Message, encoding_name: str) -> int:
        encoding = self._encodings.get(encoding_name)
        texts: list[str] = []
        count = TOKENS_PER_MESSAGE
        for key, value in message.items():
            if key == "name":
                count += TOKENS_PER_NAME
            if isinstance(value, str):
                texts.append(value)
            elif key == "content":
                texts.append(text_of(value))
            elif key in ("tool_calls", "function_call"):
                texts.extend(_call_texts(value))
        return count + sum(len(encoding.encode(t, disallowed_special=())) for t in texts)


def _call_texts(value: Any) -> list[str]:
    calls = value if isinstance(value, list) else [value]
    texts: list[str] = []
    for call in calls:
        function = call.get("function", call) if isinstance(call, dict) else None
        if isinstance(function, dict):
            texts.extend(v for v in (function.get("name"), function.get("arguments")) if isinstance(v, str))
    return texts
