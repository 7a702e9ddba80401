"""Checks of a Responses API `input` as the API reads it."""

from __future__ import annotations

from typing import Any


def pairing_problems(items: list[dict[str, Any]]) -> list[str]:
    """Calls without an output after them and outputs that answer no call before them, by call_id."""
    problems: list[str] = []
    open_calls: set[str] = set()
    answered: set[str] = set()
    for index, item in enumerate(items):
        kind = item.get("type", "")
        if kind.endswith("_call"):
            open_calls.add(item["call_id"])
        elif kind.endswith("_call_output"):
            if item["call_id"] not in open_calls:
                problems.append(f"input[{index}]: output {item['call_id']} answers no call before it")
            answered.add(item["call_id"])
    problems += [f"call {c} has no output" for c in sorted(open_calls - answered)]
    return problems
