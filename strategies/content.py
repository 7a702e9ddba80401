"""Reading and rewriting message content, which is a string, a list of content parts, or absent."""

from __future__ import annotations

import hashlib
from typing import Any

from .base import Message

TOOL_RESULT_ROLES = frozenset({"tool", "function"})


def is_tool_result(message: Message) -> bool:
    return message.get("role") in TOOL_RESULT_ROLES


def text_of(content: Any) -> str:
    """The text the model reads: a string as is, the text parts of a part list joined, else ''."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part["text"] for part in content if _is_text_part(part) and isinstance(part.get("text"), str))
    return ""


def _is_text_part(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "text"


def with_text(content: Any, text: str) -> Any:
    """Content carrying `text` in the shape the client used. In a part list, the first text part takes the
    text (keeping its other keys, such as cache_control) and the other text parts go; other parts stay.
    """
    if not isinstance(content, list):
        return text
    out: list[Any] = []
    for part in content:
        if not _is_text_part(part):
            out.append(part)
        elif not any(_is_text_part(p) for p in out):
            out.append({**part, "text": text})
    return out if any(_is_text_part(p) for p in out) else [{"type": "text", "text": text}, *out]


def short_hash(text: str) -> str:
    """8 hex digits of the SHA-256 of the text, so a reader can match a marker to its original."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def truncate_middle(text: str, size: int) -> str:
    """Keep `size` characters (head and tail halves) around a marker with the original size and hash.

    Text that the marker would not make shorter is returned as is.
    """
    n = len(text)
    if n <= size:
        return text
    head, tail = size - size // 2, size // 2
    shortened = f"Truncated ({n}): {text[:head]}<...{n} - {short_hash(text)}...>{text[n - tail :] if tail else ''}"
    return shortened if len(shortened) < n else text
