"""The requests an attacker would pick, at n messages each: as many and as small messages as the body allows."""

from __future__ import annotations

from collections.abc import Callable

from strategies import Message


def chat(n: int) -> list[Message]:
    """n one-character messages, user and assistant in turn: the issue's 2 MB attack at 60,000."""
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": "a"} for i in range(n)] + [
        {"role": "user", "content": "a"}
    ]


def tools(n: int) -> list[Message]:
    """One task, then n/2 tool calls with one-character results."""
    messages: list[Message] = [{"role": "user", "content": "task"}]
    for i in range(n // 2):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": "a"},
        ]
    return messages


def pinned(n: int) -> list[Message]:
    """Half system messages: the pinned part alone is over any total, so every request end must cut."""
    return [{"role": "system" if i % 2 == 0 else "user", "content": "a"} for i in range(n)]


def escapes(n: int) -> list[Message]:
    """Tool results whose escape codes nest, so that each pass of a naive clean-up uncovers one more."""
    out = tools(n)
    for message in out:
        if message["role"] == "tool":
            message["content"] = "\x1b" * 20 + "[m" * 20
    return out


SHAPES: dict[str, Callable[[int], list[Message]]] = {"chat": chat, "tools": tools, "pinned": pinned, "escapes": escapes}
