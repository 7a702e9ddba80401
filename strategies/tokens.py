"""Prompt token counts with tiktoken, per OpenAI's documented chat overhead, cached per message."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from .conversation import text_of
from .digests import message_digest
from .encodings import Encodings
from .messages import REPLY_PRIMING, WIRE_KEY, Message

# Per OpenAI's cookbook ("How to count tokens with tiktoken") for current chat models.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
# The cookbook's constants for tool definitions (gpt-4o family; gpt-4 and gpt-3.5 start functions at 10).
FUNC_INIT, FUNC_INIT_CL100K, PROP_INIT, PROP_KEY, ENUM_INIT, ENUM_ITEM, FUNC_END = 7, 10, 3, 3, -3, 3, 12

MAX_UNSEEN_TOKENS = 1 << 32
# An image part, whose pixels the counter never sees: what OpenAI bills a 1024x1024 image at high detail (85 + 4
# tiles of 170), and 85 at low detail. Anthropic's (width x height / 750) is of the same order for such an image.
# Uncounted, every image made a prompt look 765 tokens smaller than the upstream's count, which moved the
# calibration of every client of the model (issue 23).
IMAGE_TOKENS, LOW_DETAIL_IMAGE_TOKENS = 765, 85
IMAGE_PARTS = frozenset({"image_url", "input_image", "image"})
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
        """Prompt tokens of a message list: each message plus the reply priming."""
        encoding_name = encoding_for_model(model)
        return REPLY_PRIMING + sum(self._count_cached(m, encoding_name) for m in messages)

    def count_message(self, message: Message, model: str, digest: bytes | None = None) -> int:
        """One message with its per-message overhead, without the reply priming. digest: the message's
        strategies.digests.message_digest, when the caller has it already.
        """
        return self._count_cached(message, encoding_for_model(model), digest)

    def count_call(self, call: Any, model: str) -> int:
        """The tokens one call (an entry of tool_calls, or a function_call) adds to its message's count. A message
        counts its overhead plus the tokens of each of its texts, so a copy whose calls differ counts exactly what
        those calls' counts differ by (Context.count_message_with), without tokenizing the whole copy.
        """
        encoding = self._encodings.get(encoding_for_model(model))
        return sum(len(encoding.encode(t, disallowed_special=())) for t in _call_texts(call))

    def count_tools(self, tools: Any, model: str) -> int:
        """Tokens the `tools` definitions add, per the OpenAI cookbook's estimate (num_tokens_for_tools)."""
        if not isinstance(tools, list) or not tools:
            return 0
        encoding = self._encodings.get(encoding_for_model(model))
        legacy = encoding.name == "cl100k_base"
        count = functions = 0
        for tool in tools:
            function = tool.get("function") if isinstance(tool, dict) else None
            if not isinstance(function, dict):
                continue
            functions += 1
            count += FUNC_INIT_CL100K if legacy else FUNC_INIT
            description = str(function.get("description", "")).removesuffix(".")
            count += len(encoding.encode(f"{function.get('name', '')}:{description}", disallowed_special=()))
            parameters = function.get("parameters")
            properties = parameters.get("properties") if isinstance(parameters, dict) else None
            if isinstance(properties, dict) and properties:
                count += PROP_INIT
                for key, spec in properties.items():
                    spec = spec if isinstance(spec, dict) else {}
                    count += PROP_KEY
                    if isinstance(spec.get("enum"), list):
                        count += ENUM_INIT
                        for item in spec["enum"]:
                            count += ENUM_ITEM + len(encoding.encode(str(item), disallowed_special=()))
                    p_desc = str(spec.get("description", "")).removesuffix(".")
                    line = f"{key}:{spec.get('type', '')}:{p_desc}"
                    count += len(encoding.encode(line, disallowed_special=()))
        return count + FUNC_END if functions else 0

    def _count_cached(self, message: Message, encoding_name: str, digest: bytes | None = None) -> int:
        key = (digest or message_digest(message)) + encoding_name.encode()
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
            if key == WIRE_KEY:
                count += _unseen_tokens(value)
                texts.extend(_unseen_text(value))
                continue
            if key == "name":
                count += TOKENS_PER_NAME
            if isinstance(value, str):
                texts.append(value)
            elif key == "content":
                texts.append(text_of(value))
                count += _image_tokens(value)
            elif key in ("tool_calls", "function_call"):
                texts.extend(_call_texts(value))
        return count + sum(len(encoding.encode(t, disallowed_special=())) for t in texts)


def _image_tokens(content: Any) -> int:
    """The images of a part list (chat's image_url, Responses' input_image, Anthropic's image blocks)."""
    if not isinstance(content, list):
        return 0
    count = 0
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if isinstance(kind, str) and kind in IMAGE_PARTS:
            image = part.get("image_url")
            detail = image.get("detail") if isinstance(image, dict) else part.get("detail")
            count += LOW_DETAIL_IMAGE_TOKENS if detail == "low" else IMAGE_TOKENS
    return count


def _unseen_tokens(value: Any) -> int:
    """What a wire format says rides with a message unseen (messages.WIRE_KEY); a client's own claim, from a chat
    body, can only make its own request look larger, and only so much.
    """
    tokens = value.get("tokens") if isinstance(value, dict) else None
    return min(max(tokens, 0), MAX_UNSEEN_TOKENS) if type(tokens) is int else 0


def _unseen_text(value: Any) -> list[str]:
    """Text a wire format says rides with a message unseen by the strategies but read by the model (thinking)."""
    text = value.get("text") if isinstance(value, dict) else None
    return [text] if isinstance(text, str) else []


def _call_texts(value: Any) -> list[str]:
    calls = value if isinstance(value, list) else [value]
    texts: list[str] = []
    for call in calls:
        function = call.get("function", call) if isinstance(call, dict) else None
        if isinstance(function, dict):
            texts.extend(v for v in (function.get("name"), function.get("arguments")) if isinstance(v, str))
    return texts
