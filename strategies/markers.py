"""What the model reads where content was removed: markers that say so, with the original's size and a short
content hash, so the model (and a human) can tell what went and match a marker to its original.
"""

from __future__ import annotations

import hashlib


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


# --- Each strategy's marker ------------------------------------------------------------------------------------

PRUNE_NOTE = "\n[... output truncated ...]"


def pruned(text: str, max_chars: int) -> str:
    """prune_tool_outputs: the head of a long tool result, then the note, its size and hash."""
    return f"{text[:max_chars]}{PRUNE_NOTE} ({len(text)} chars, sha256 {short_hash(text)})"


def cleared(name: str, result: str, arguments: str | None) -> str:
    """clear_tool_uses: what the model reads instead of a cleared result: the tool, and what went."""
    text = f"[cleared: result of tool {name or '?'}, {len(result)} chars, sha256 {short_hash(result)}"
    if arguments is not None:
        text += f"; arguments {len(arguments)} chars, sha256 {short_hash(arguments)}"
    return text + "]"


def same_as(call_id: str, text: str) -> str:
    """dedupe: a repeated tool result, pointing at its first copy."""
    return f"[same output as tool call {call_id} above: {len(text)} chars, sha256 {short_hash(text)}]"


def repeated(n: int) -> str:
    """minify: N more copies of the line above, collapsed (lossless: the marker says exactly what it stands for)."""
    return f"[previous line repeated {n} time{'' if n == 1 else 's'}]"


def shown_to_the_user(label: str, options: int) -> str:
    """trim_bulky: the long-chat recipe's stub for bulky output the user has seen."""
    return f"[{label} ({options} options) shown to the user; omitted]"
