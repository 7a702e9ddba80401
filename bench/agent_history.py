"""A coding agent's request of a chosen size: the task, then tool calls reading files, running tests, searching
and diffing. Cheap to build and seeded, for benchmarks that need big realistic bodies rather than planted facts
(bench.compaction's synthetic agent has those): speed times compacting one, overhead and soak send them.
"""

from __future__ import annotations

import json
import random

from strategies import Message


def agent_history(messages: int, total_chars: int, seed: int = 7) -> list[Message]:
    """A coding agent's request: the task, then tool calls whose outputs look like file reads, test
    logs, JSON and diffs, sized so the whole history is about `total_chars`.
    """
    rng = random.Random(seed)
    calls = max(1, (messages - 2) // 2)
    per_output = max(50, total_chars // calls)
    history: list[Message] = [
        {"role": "system", "content": "You are a coding agent working in a Python repository."},
        {"role": "user", "content": "The CI is red: fix the failing tests in the payments service."},
    ]
    kinds = ["read_file", "run_tests", "search", "git_diff"]
    for i in range(calls):
        kind = rng.choice(kinds)
        history.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{i:04d}",
                        "type": "function",
                        "function": {
                            "name": kind,
                            "arguments": json.dumps({"path": f"src/pay/m{rng.randrange(60)}.py"}),
                        },
                    }
                ],
            }
        )
        history.append({"role": "tool", "tool_call_id": f"call_{i:04d}", "content": _output(kind, per_output, rng)})
    return history


def _output(kind: str, size: int, rng: random.Random) -> str:
    lines: list[str] = []
    while sum(len(line) + 1 for line in lines) < size:
        n = len(lines)
        if kind == "read_file":
            lines.append(f"{n + 1:4d}  def handler_{rng.randrange(999)}(event, amount_cents={rng.randrange(10**6)}):")
        elif kind == "run_tests":
            lines.append(
                f"tests/test_pay.py::test_case_{n} {'PASSED' if rng.random() < 0.9 else 'FAILED'} [{n % 100}%]"
            )
        elif kind == "search":
            lines.append(
                json.dumps({"file": f"src/pay/m{rng.randrange(60)}.py", "line": rng.randrange(900), "hit": "refund"})
            )
        else:
            lines.append(f"{rng.choice('+- ')} amount = Decimal('{rng.randrange(10**5)}.{rng.randrange(100):02d}')")
    return "\n".join(lines)[:size]
