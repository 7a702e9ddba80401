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
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
        )
    return ""


def with_text(content: Any, text: str) -> Any:
    """Content carrying `text` in the shape the client used; non-text parts are kept after it."""
    if isinstance(content, list):
        others = [p for p in content if not (isinstance(p, dict) and p.get("type") == "text")]
        return [{"type": "text", "text": text}, *others]
    return text


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
