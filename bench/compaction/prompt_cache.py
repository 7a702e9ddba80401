"""A prompt-cache model: how many of a request's tokens the provider would have cached, and what it bills.

Each message is rendered to a deterministic token sequence: a 3-token frame (start, separator, end; marker
ids outside the vocabulary, like the chat template's special tokens), one marker for a `name` key, and the
tokens of exactly the texts the project's TokenCounter counts, in the message's key order. So a request's
sequence is as long as its counted prompt: the tool definitions (a constant block, the same for every request
of a conversation), the messages, and the 3 tokens that prime the reply. Real chat templates differ in their
framing tokens, not in which text comes in which order, which is what prefix caching depends on.

Caching, per request against the previous request of the same conversation (what the provider saw last):
- OpenAI: an exact common prefix of at least 1024 tokens is cached, in steps of 128 tokens.
- The same prefix priced two ways: OpenAI bills cached tokens at 50% of the input price; Anthropic bills cache
  reads at 10% and writes at 125%, and with a cache breakpoint at the end of every request (the usual set-up
  of agent loops) reads the shared prefix whole (no 128-token steps) and writes every other token of a prompt of
  at least 1024 tokens. Shorter prompts are not cached. Where a jump rewrites from a message far back this is
  kinder than Anthropic's own rules, which find an earlier entry only within 20 blocks of a breakpoint: the
  Messages form prices by those.
- The Messages form (--wire messages) is priced by Anthropic's own rules on the body as sent (BreakpointCache):
  explicit breakpoints, a prefix read only where it ends at an earlier breakpoint within 20 blocks of one of this
  request's, written up to the last breakpoint.

Every upstream request is priced by one of the two (Pricing: PrefixPricing, BreakpointPricing), the client's
requests and the proxy's expand rounds alike, so a round is billed by the rules its form's provider applies.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
import tiktoken

from app.wire.cache_control import marker
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
        self.head_tokens = tools_tokens  # the tool definitions
        self._previous: list[tuple[bytes, array[int]]] = []
        # Messages a strategy left alone are the same objects from one request to the next: remembering them by
        # identity skips serialising and hashing them again. Holding the message keeps its id from being reused.
        self._known: dict[int, tuple[Any, bytes, array[int]]] = {}

    def request(self, messages: list[Message], tools_tokens: int | None = None, *, remember: bool = True) -> CacheHit:
        """tools_tokens: the tool definitions of this request, when they differ from the conversation's (the
        proxy's expand tool is added once a stub holds a ref); tools come first, so a change caches nothing.
        remember: False for a one-off request the next one is not compared with (the last expand round, sent without
        the expand tool: the provider still holds the prefix of the request before it, which the next one shares).
        """
        head = self._head if tools_tokens is None else tools_tokens
        changed = head != self._head
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
        shared = head
        for (old_key, old), (new_key, new) in zip(self._previous, current, strict=False):
            if old_key != new_key:
                shared += _common_prefix(old, new)
                break
            shared += len(new)
        prompt = head + sum(len(tokens) for _, tokens in current) + REPLY_PRIMING
        if first or changed:
            shared = 0  # the first request of a conversation (or with other tools) finds nothing cached
        if remember:
            self._previous, self._known, self._head = current, known, head
        return CacheHit(prompt, shared, openai_cached(shared))


# --- Anthropic's explicit breakpoints, for the Messages form (--wire messages) ----------------------------------

ANTHROPIC_LOOKBACK = 20  # blocks before a breakpoint at which the API still finds an earlier cache entry
MESSAGE_FRAME = 3  # tokens framing each message, as the TokenCounter prices it


@dataclass(frozen=True)
class BreakpointHit:
    prompt: int  # tokens of the whole request
    read: int  # tokens read from the cache: the longest prefix up to an earlier request's breakpoint
    written: int  # tokens written to it: from the read prefix to this request's last breakpoint

    def billed(self) -> float:
        """In units of the input price: the rest at 1x, writes at 1.25x (5-minute TTL), reads at 0.1x."""
        plain = self.prompt - self.read - self.written
        return plain + ANTHROPIC_WRITE_PRICE * self.written + ANTHROPIC_READ_PRICE * self.read


def _block_text(block: Any) -> str:
    if not isinstance(block, dict):
        return str(block)
    kind = block.get("type")
    if kind == "tool_use":
        return str(block.get("name", "")) + orjson.dumps(block.get("input")).decode()
    if kind == "tool_result":
        content = block.get("content")
        return content if isinstance(content, str) else text_of(content)
    if kind == "thinking":
        return str(block.get("thinking", ""))
    return str(block.get("text", "")) if kind == "text" else ""


class BreakpointCache:
    """One conversation's prompt cache under Anthropic's rules, request after request (all within the TTL):

    - every breakpoint (cache_control on a tool, a system block or a message block, at most 4) writes the prefix up
      to and including its block, if that prefix is at least 1024 tokens;
    - a request reads the longest prefix written by an earlier one that ends at one of the ANTHROPIC_LOOKBACK blocks
      up to one of its breakpoints, byte for byte the same up to there;
    - it writes from there to its last breakpoint; what follows its last breakpoint is plain input.
    Blocks are rendered in the API's order (tools, system, messages); a block's identity is its JSON without its
    cache_control, with its message's role, and its tokens are those of the texts it holds (o200k, as counted).
    Another tool_choice keeps the tools' and the system's entries and misses every message's (the API's rule: the
    last expand round of a client without tools goes with tool_choice none).
    """

    def __init__(self, encoding: tiktoken.Encoding, tools_tokens: int) -> None:
        self._encoding = encoding
        self._tools_tokens = tools_tokens
        self._entries: set[bytes] = set()
        self._tokens: dict[bytes, int] = {}

    def _count(self, key: bytes, block: Any) -> int:
        count = self._tokens.get(key)
        if count is None:
            count = len(self._encoding.encode(_block_text(block), disallowed_special=()))
            if len(self._tokens) > 500_000:
                self._tokens.clear()
            self._tokens[key] = count
        return count

    def request(self, body: dict[str, Any], tools_tokens: int | None = None) -> BreakpointHit:
        """tools_tokens: the tool definitions of this request, as the TokenCounter counts them (the proxy's expand
        tool comes and goes); None: the conversation's.
        """
        blocks: list[tuple[str, Any]] = []  # (role, block) in the API's order; tools priced as one head
        system = body.get("system")
        for block in system if isinstance(system, list) else ([{"type": "text", "text": system}] if system else []):
            blocks.append(("system", block))
        system_blocks = len(blocks)
        framed: list[bool] = []
        for message in body.get("messages", []):
            content = message.get("content")
            items = [{"type": "text", "text": content}] if isinstance(content, str) else content
            items = items if isinstance(items, list) else []
            for n, block in enumerate(items):
                blocks.append((str(message.get("role")), block))
                framed.append(n == 0)
        framed = [False] * (len(blocks) - len(framed)) + framed
        digests: list[bytes] = []
        ends: list[int] = []
        breakpoints: list[int] = []
        tools = body["tools"] if isinstance(body.get("tools"), list) else []
        current = hashlib.blake2b(message_bytes({"tools": tools}), digest_size=16).digest()
        total = self._tools_tokens if tools_tokens is None else tools_tokens
        if any(isinstance(t, dict) and "cache_control" in t for t in tools):
            digests.append(current)
            ends.append(total)
            breakpoints.append(0)
        choice = message_bytes({"tool_choice": body.get("tool_choice")})
        for n, ((role, block), first) in enumerate(zip(blocks, framed, strict=True)):
            bare = {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, dict) else block
            key = hashlib.blake2b(message_bytes({"role": role, "block": bare}), digest_size=16).digest()
            if n == system_blocks:
                current = hashlib.blake2b(current + choice, digest_size=16).digest()  # the messages' entries only
            current = hashlib.blake2b(current + key, digest_size=16).digest()
            total += self._count(key, bare) + (MESSAGE_FRAME if first else 0)
            digests.append(current)
            ends.append(total)
            if marker(block) is not None:
                breakpoints.append(len(digests) - 1)
        read = 0
        for b in breakpoints:
            for j in range(b, max(-1, b - ANTHROPIC_LOOKBACK), -1):
                if digests[j] in self._entries:
                    read = max(read, ends[j])
                    break
        written = 0
        cacheable = [b for b in breakpoints if ends[b] >= ANTHROPIC_MIN_PROMPT]
        if cacheable:
            written = max(0, ends[cacheable[-1]] - read)
            self._entries.update(digests[b] for b in cacheable)
        return BreakpointHit(total + REPLY_PRIMING, read, written)


# --- Pricing: every upstream request of one conversation, by its form's provider's rules ------------------------


@dataclass(frozen=True)
class Priced:
    """One upstream request as its provider would bill its input, in units of the input price."""

    prompt: int  # tokens of the whole request
    cached: int  # of those, read from the cache
    openai: float  # at OpenAI's price for cached input (50%)
    anthropic: float  # at Anthropic's prices for cache reads and writes


class Pricing(Protocol):
    """One conversation's prompt cache at the provider, request after request, the expand rounds among them."""

    def request(
        self, messages: list[Message], tools_tokens: int, body: Callable[[], bytes], *, remember: bool = True
    ) -> Priced:
        """messages: the request as chat messages (measured); tools_tokens: its tool definitions, counted; body: the
        bytes that go upstream (called only by a pricing that reads them); remember: False for a one-off request
        (ConversationCache.request).
        """
        ...


class PrefixPricing:
    """OpenAI's automatic prefix cache over the chat messages; Anthropic's prices on the same hits, a breakpoint
    on the last message of every request (the chat and Responses forms).
    """

    def __init__(self, tokens: MessageTokens, tools_tokens: int) -> None:
        self._cache = ConversationCache(tokens, tools_tokens)

    def request(
        self, messages: list[Message], tools_tokens: int, body: Callable[[], bytes], *, remember: bool = True
    ) -> Priced:
        hit = self._cache.request(messages, tools_tokens, remember=remember)
        # Anthropic reads the prefix up to the last request's breakpoint exactly, not in OpenAI's 128-token steps: a
        # request a few tokens shorter must not lose a step of its read (which made lossless minify bill above none).
        read = hit.shared_prefix if hit.shared_prefix >= ANTHROPIC_MIN_PROMPT else 0
        return Priced(hit.prompt, hit.cached, billed_openai(hit.prompt, hit.cached), billed_anthropic(hit.prompt, read))


class BreakpointPricing:
    """Anthropic's breakpoints over the Messages body as sent (the Messages form); OpenAI's price on the same reads.
    Every entry a request wrote stays (all within the TTL), so a one-off request needs no care: what it wrote is
    there, and the next request reads what it shares with any earlier one.
    """

    def __init__(self, encoding: tiktoken.Encoding, tools_tokens: int) -> None:
        self._cache = BreakpointCache(encoding, tools_tokens)

    def request(
        self, messages: list[Message], tools_tokens: int, body: Callable[[], bytes], *, remember: bool = True
    ) -> Priced:
        hit = self._cache.request(orjson.loads(body()), tools_tokens)
        return Priced(hit.prompt, hit.read, billed_openai(hit.prompt, hit.read), hit.billed())
