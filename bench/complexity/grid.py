"""The grid: the requests an attacker would pick (as many and as small messages as a body allows), and every chain
on the shapes that could make it slow, each request timed alone with cold caches, since an attacker sends a fresh
conversation every time.
"""

from __future__ import annotations

import cProfile
import math
import pstats
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from app.notes.runtime import NotesTools
from app.settings import Settings
from app.wire import ChatCompletions
from strategies import Chain, Encodings, Message, TokenCounter
from strategies.notes_io import SUMMARISER_LIMIT, NotesUnavailable

from ..compactor import compactor
from ..notes.stand_in import DictNotes, StandInSummariser


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


def parallel(n: int) -> list[Message]:
    """One task, then one assistant message with n parallel calls, each answered by a result of about 200 characters
    (long enough to be masked or cleared): a strategy that looks a call up in its message is quadratic here.
    """
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": f'{{"path":"src/m{i}.py"}}'}}
        for i in range(n)
    ]
    results = [
        {"role": "tool", "tool_call_id": f"c{i}", "content": " ".join(str(i + k) for k in range(40))} for i in range(n)
    ]
    return [{"role": "user", "content": "task"}, {"role": "assistant", "content": None, "tool_calls": calls}, *results]


SHAPES: dict[str, Callable[[int], list[Message]]] = {
    "chat": chat,
    "tools": tools,
    "pinned": pinned,
    "escapes": escapes,
    "parallel": parallel,
}


@dataclass(frozen=True)
class Case:
    chain: str
    shapes: tuple[str, ...]
    body: dict[str, Any] | None = None  # extra request fields
    notes: bool = False


CASES = [
    Case("none", ("chat", "tools", "parallel")),
    Case("minify,mask,window", ("chat", "tools", "escapes", "parallel")),
    Case("minify", ("tools", "escapes", "parallel")),
    Case("dedupe", ("tools", "parallel")),
    Case("window", ("chat", "pinned", "parallel")),
    Case("fit(total=1200)", ("chat", "tools", "pinned", "parallel")),
    Case("middle_out(total=1200)", ("chat", "tools", "pinned", "parallel")),
    Case("middle_out(max_messages=10)", ("chat",)),
    Case("shorten_tools", ("chat", "tools", "parallel")),
    Case("shorten_tools", ("chat",), body={"max_completion_tokens": 127_000}),  # a limit of 0 tokens
    Case("shorten_tools(epoch=1,min_gain=1)", ("tools",)),
    # Every call's arguments and result looked at: no tier drops any.
    Case("shorten_tools(max_tool_chars=0,max_tool_calls=1000000)", ("tools", "parallel")),
    Case("prune_tool_outputs(max_chars=0)", ("tools", "parallel")),
    Case("clear_tool_uses(trigger=0,keep=1)", ("tools", "parallel")),
    Case("clear_tool_uses(trigger=0,keep=1,clear_tool_inputs=true)", ("tools", "parallel")),
    Case("mask(keep=1,epoch=1,min_gain=0.01)", ("tools", "parallel")),  # a jump on every request: the rule at its most
    Case("mask(keep=1,max_chars=1)", ("tools", "parallel")),
    Case("trim_bulky", ("chat",)),
    Case("notes(budget=200,prepare_at=1)", ("chat", "parallel"), notes=True),
]


class CappedSummariser(StandInSummariser):
    """bench.notes' stand-in summariser with the proxy's per-request call limit."""

    def __init__(self, calls: int) -> None:
        super().__init__(first_line_only=True, max_words=180, nothing="")
        self.calls_left = calls

    def summarise(self, messages: list[Message], model: str) -> str:
        if self.calls_left <= 0:
            raise NotesUnavailable(SUMMARISER_LIMIT)
        self.calls_left -= 1
        return super().summarise(messages, model)


def time_once(
    case: Case, shape: str, size: int, settings: Settings, encodings: Encodings, function_calls: bool = False
) -> float:
    """Seconds of one request; function_calls: the Python function calls it made instead (cProfile's count, which
    no other load on the machine changes).
    """
    body = orjson.dumps({"model": "gpt-4o", "messages": SHAPES[shape](size), **(case.body or {})})
    # Cold: a fresh token cache and memo, as for an attacker's fresh conversation (the tokenizer stays loaded).
    c = compactor(settings, encodings)
    chain: Chain = c.chain_for(case.chain)
    notes = NotesTools(CappedSummariser(settings.summariser_max_calls), DictNotes()) if case.notes else None
    if function_calls:
        profile = cProfile.Profile()
        profile.runcall(c.compact_sync, body, ChatCompletions(), chain, notes=notes)
        return float(pstats.Stats(profile).total_calls)  # type: ignore[attr-defined]
    started = time.perf_counter()
    c.compact_sync(body, ChatCompletions(), chain, notes=notes)
    return time.perf_counter() - started


def run_grid(
    sizes: list[int],
    repeat: int,
    quick: bool,
    shapes: set[str] | None = None,
    chains: set[str] | None = None,
    function_calls: bool = False,
) -> list[tuple[Case, str, list[float]]]:
    """Every case's row on each of its shapes; quick: the first cases only; shapes, chains: only these (None: all);
    function_calls: each cell the function calls of one request (time_once), not its time.
    """
    settings = Settings()
    encodings = Encodings()
    TokenCounter(encodings).count_text("load the encoding", "gpt-4o")
    rows = []
    cases = CASES[:4] if quick else CASES
    for case in cases:
        if chains is not None and case.chain not in chains:
            continue
        for shape in case.shapes:
            if shapes is not None and shape not in shapes:
                continue
            if function_calls:
                cells = [time_once(case, shape, n, settings, encodings, function_calls=True) for n in sizes]
                shown = " ".join(f"{int(calls):11,}" for calls in cells)
            else:
                cells = [min(time_once(case, shape, n, settings, encodings) for _ in range(repeat)) for n in sizes]
                shown = " ".join(f"{t * 1000:11.1f}" for t in cells)
            rows.append((case, shape, cells))
            print(f"{case.chain:60} {shape:8} {shown}", flush=True)
    return rows


def growth(sizes: list[int], times: list[float]) -> float:
    return math.log(times[-1] / times[-2]) / math.log(sizes[-1] / sizes[-2])
