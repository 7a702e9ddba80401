"""A prompt-cache model: how many of a request's tokens the provider would have cached, and what it bills.

Each message is rendered to a deterministic token sequence: a 3-token frame (start, separator, end; marker
ids outside the vocabulary, like the chat template's special tokens), one marker for a `name` key, and the
tokens of exactly the texts the project's TokenCounter counts, in the message's key order. So a request's
sequence is as long as its counted prompt: the tool definitions (a constant block, the same for every request
of a conversation), the messages, and the 3 tokens that prime the reply. Real chat templates differ in their
framing tokens, not in which text comes in which order, which is what prefix caching depends on.

Caching, per request against the previous request of the same conversation (what the provider saw last):
- OpenAI: an exact common prefix of at least 1024 tokens is cached, in steps of 128 tokens.
- The same hits priced two ways: OpenAI bills cached tokens at 50% of the input price; Anthropic bills cache
  reads at 10% and writes at 125%, and with a cache breakpoint at the end of every request (the usual set-up
  of agent loops) every uncached token of a prompt of at least 1024 tokens is written. Shorter prompts are not cached.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import tiktoken

from strategies import Message
from strategies.conversation import text_of
from strategies.digests import message_bytes
from strategies.messages import REPLY_PRIMING

START, SEPARATOR, END, NAME = -1, -2, -3, -4
OPENAI_MIN_PREFIX, OPENAI_STEP = 1024, 128
OPENAI_CACHED_PRICE = 0.5
ANTHROPIC_WRITE_PRICE, ANTHROPIC_READ_PRICE, ANTHROPIC_MIN_PROMPT = 1.25, 0.1, 1024


def openai_cached(shared_prefix: int) -> int:
    if shared_prefix < OPENAI_MIN_PREFIX:
        return 0
    return OPENAI_MIN_PREFIX + (shared_prefix - OPENAI_MIN_PREFIX) // OPENAI_STEP * OPENAI_STEP


def billed_openai(prompt: int, cached: int) -> float:
    return prompt - cached + OPENAI_CACHED_PRICE * cached


def billed_anthropic(prompt: int, cached: int) -> float:
    if prompt < ANTHROPIC_MIN_PROMPT:
        return float(prompt)
    return ANTHROPIC_WRITE_PRICE * (prompt - cached) + ANTHROPIC_READ_PRICE * cached


def _texts(message: Message) -> list[str]:
    """The texts TokenCounter counts for a message, in the same order (see strategies/tokens.py)."""
    texts: list[str] = []
    for key, value in message.items():
        if isinstance(value, str):
            texts.append(value)
        elif key == "content":
            texts.append(text_of(value))
        elif key in ("tool_calls", "function_call"):
            for call in value if isinstance(value, list) else [value]:
                function = call.get("function", call) if isinstance(call, dict) else None
                if isinstance(function, dict):
                    texts.extend(v for v in (function.get("name"), function.get("arguments")) if isinstance(v, str))
    return texts


class MessageTokens:
    """Token sequences of messages, cached by content (bounded), shared by every replay in one process."""

    def __init__(self, encoding: tiktoken.Encoding, cache_size: int = 200_000) -> None:
        self._encoding = encoding
        self._cache: OrderedDict[bytes, array[int]] = OrderedDict()
        self._cache_size = cache_size

    def of(self, message: Message) -> tuple[bytes, array[int]]:
        key = hashlib.blake2b(message_bytes(message), digest_size=16).digest()
        tokens = self._cache.get(key)
        if tokens is None:
            tokens = array("i", [START, NAME] if "name" in message else [START])
            for text in _texts(message):
                tokens.extend(self._encoding.encode(text, disallowed_special=()))
            tokens.extend((SEPARATOR, END))
            self._cache[key] = tokens
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return key, tokens


@dataclass(frozen=True)
class CacheHit:
    prompt: int  # tokens of the whole request, as rendered
    shared_prefix: int  # tokens in common with the previous request, from the start
    cached: int  # of those, what OpenAI's rule caches


def _common_prefix(a: array[int], b: array[int]) -> int:
    low, high = 0, min(len(a), len(b))
    while low < high:  # binary search over slice equality, which compares in C
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


class ConversationCache:
    """The provider's view of one conversation under one chain: each request against the one before."""

    def __init__(self, tokens: MessageTokens, tools_tokens: int) -> None:
        self._tokens = tokens
        self._head = tools_tokens
        self._previous: list[tuple[bytes, array[int]]] = []
        # Messages a strategy left alone are the same objects from one request to the next: remembering them by
        # identity skips serialising and hashing them again. Holding the message keeps its id from being reused.
        self._known: dict[int, tuple[Any, bytes, array[int]]] = {}

    def request(self, messages: list[Message], tools_tokens: int | None = None) -> CacheHit:
        """tools_tokens: the tool definitions of this request, when they differ from the conversation's (the
        proxy's expand tool is added once a stub holds a ref); tools come first, so a change caches nothing.
        """
        changed = tools_tokens is not None and tools_tokens != self._head
        if tools_tokens is not None:
            self._head = tools_tokens
        known: dict[int, tuple[Any, bytes, array[int]]] = {}
        current: list[tuple[bytes, array[int]]] = []
        for message in messages:
            entry = self._known.get(id(message))
            if entry is None:
                key, tokens = self._tokens.of(message)
                entry = (message, key, tokens)
            known[id(message)] = entry
            current.append((entry[1], entry[2]))
        first = not self._previous
        shared = self._head
        for (old_key, old), (new_key, new) in zip(self._previous, current, strict=False):
            if old_key != new_key:
                shared += _common_prefix(old, new)
                break
            shared += len(new)
        prompt = self._head + sum(len(tokens) for _, tokens in current) + REPLY_PRIMING
        if first or changed:
            shared = 0  # the first request of a conversation (or with other tools) finds nothing cached
        self._previous, self._known = current, known
        return CacheHit(prompt, shared, openai_cached(shared))
