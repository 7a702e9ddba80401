"""Parse a chain spec such as `shorten_tools(full_tool_outputs=3, max_tool_chars=0),prune_tool_outputs`.

Values are JSON literals (3, true, "a,b", ["x"]) or bare words, which are taken as strings.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_CLOSING = {"(": ")", "[": "]", "{": "}"}
# A chain can come from a request header: its size bounds the work it can buy (each step is a pass over the
# whole request) and the nesting bounds the JSON parser's recursion.
MAX_LENGTH = 4096
MAX_STEPS = 16
MAX_NESTING = 8


class ChainSyntaxError(ValueError):
    pass


@dataclass(frozen=True)
class StepSpec:
    name: str
    params: dict[str, Any] = field(default_factory=dict)


def _split_top_level(text: str, sep: str) -> list[str]:
    """Split on `sep` outside brackets and double-quoted strings."""
    parts: list[str] = []
    stack: list[str] = []
    start = 0
    in_string = escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in _CLOSING:
            stack.append(_CLOSING[ch])
            if len(stack) > MAX_NESTING:
                raise ChainSyntaxError(f"brackets nested more than {MAX_NESTING} deep at position {i}")
        elif ch in ")]}":
            if not stack or stack.pop() != ch:
                raise ChainSyntaxError(f"unbalanced {ch!r} at position {i} in {text!r}")
        elif ch == sep and not stack:
            parts.append(text[start:i])
            start = i + 1
    if in_string:
        raise ChainSyntaxError(f"unterminated string in {text!r}")
    if stack:
        raise ChainSyntaxError(f"missing {stack[-1]!r} in {text!r}")
    parts.append(text[start:])
    return parts


def _parse_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _parse_step(item: str) -> StepSpec:
    item = item.strip()
    if not item:
        raise ChainSyntaxError("empty strategy name (a stray comma?)")
    name, paren, rest = item.partition("(")
    name = name.strip()
    if not _NAME.match(name):
        raise ChainSyntaxError(f"invalid strategy name {name!r}")
    if not paren:
        return StepSpec(name)
    if not rest.endswith(")"):
        raise ChainSyntaxError(f"text after the closing parenthesis of {name!r}")
    params: dict[str, Any] = {}
    inner = rest[:-1].strip()
    for assignment in _split_top_level(inner, ",") if inner else []:
        key, eq, raw = assignment.partition("=")
        key = key.strip()
        if not eq or not _NAME.match(key):
            raise ChainSyntaxError(f"expected key=value in {name}(...), got {assignment.strip()!r}")
        if key in params:
            raise ChainSyntaxError(f"parameter {key!r} given twice to {name!r}")
        params[key] = _parse_value(raw.strip())
    return StepSpec(name, params)


def parse_chain(text: str) -> list[StepSpec]:
    if not text.strip():
        raise ChainSyntaxError("empty chain; use 'none' to turn compaction off")
    if len(text) > MAX_LENGTH:
        raise ChainSyntaxError(f"the chain is longer than {MAX_LENGTH} characters")
    items = _split_top_level(text, ",")
    if len(items) > MAX_STEPS:
        raise ChainSyntaxError(f"{len(items)} steps; a chain has at most {MAX_STEPS}")
    return [_parse_step(item) for item in items]


def format_value(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def format_chain(steps: list[StepSpec]) -> str:
    """The inverse of parse_chain, ASCII only so it fits in an HTTP header."""
    return ",".join(
        f"{s.name}({','.join(f'{k}={format_value(v)}' for k, v in s.params.items())})" if s.params else s.name
        for s in steps
    )


def fallback_chain(value: str, strategy: str) -> str:
    """A strategy's fallback chain parameter, checked: it parses, and it does not contain the strategy itself,
    which would fall back to itself.
    """
    try:
        specs = parse_chain(value)
    except ChainSyntaxError as exc:
        raise ValueError(str(exc)) from None
    if any(spec.name == strategy for spec in specs):
        raise ValueError(f"the fallback chain must not contain {strategy} itself")
    return value
