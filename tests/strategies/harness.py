"""The strategies' tests' small harness: a Context that keeps what the last strategy found out (strategies
return it with their messages, strategies.base.Applied), and the design's invariants checked in one call.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import tiktoken

from strategies import Context, Encodings, Message, ModelLimits, Strategy, TokenCounter
from strategies.invariants import compaction_problems, pairing_problems
from strategies.layout import gather, pinned_units, split_units
from tests.factories import parallel_round


@dataclass(frozen=True)
class RecordingContext(Context):
    """A Context that keeps what the last strategy run through `apply` found out."""

    details: dict[str, Any] = field(default_factory=dict)


def ref(text: str) -> str:
    """A stub's ref, written out independently of strategies.refs: 10 hex digits of the text's SHA-256."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]


def expand_hint(text: str) -> str:
    """How every stub says its content comes back."""
    return f'call compaction_expand with ref="{ref(text)}"'


def apply(strategy: Strategy[Any], messages: list[Message], ctx: Context) -> list[Message]:
    """strategy.apply's messages; its details land in ctx.details when ctx is a RecordingContext."""
    applied = strategy.apply(messages, ctx)
    if isinstance(ctx, RecordingContext):
        ctx.details.clear()
        ctx.details.update(applied.details)
    return applied.messages


def keeps_the_invariants(run: Callable[[list[Message]], list[Message]], messages: list[Message]) -> list[Message]:
    """run(messages), asserting design.md's invariants: the input untouched, valid pairs stay valid, pinned
    messages forwarded byte-identical and in order, the same output again for the same input. Returns the output.
    """
    snapshot = copy.deepcopy(messages)
    out = run(messages)
    assert json.dumps(messages) == json.dumps(snapshot)  # 1. the input is untouched
    assert compaction_problems(messages, out) == []  # 2. and 3.
    assert pairing_problems(out) == []
    assert json.dumps(run(snapshot)) == json.dumps(out)  # 4. deterministic
    return out


# The share of the window every default total holds back, and the room the default kept-turns budget leaves for the
# question, as design.md and the parameters' help state them.
SAFETY_MARGIN_PERCENT = 2
QUESTION_ALLOWANCE_PERCENT = 5


def expected_total(limits: ModelLimits, request: Mapping[str, Any], reserve: int | None = None) -> int:
    """The default total of a request, worked out here rather than read from what the strategy reports: the window
    less the output reserve (reserve, else the request's max_completion_tokens or max_tokens, else the model's
    maximum output capped at half the window) less the safety margin.
    """
    if reserve is None:
        asked = [request.get(key) for key in ("max_completion_tokens", "max_tokens")]
        asked = [n for n in asked if isinstance(n, int) and n > 0]
        reserve = asked[0] if asked else min(limits.max_output, limits.context_window // 2)
    margin = limits.context_window * SAFETY_MARGIN_PERCENT // 100
    return max(0, limits.context_window - reserve - margin)


def expected_budget(messages: list[Message], limits: ModelLimits, counter: TokenCounter, model: str) -> int:
    """The default budget of the kept turns (window, notes), worked out here: the default total less the pinned units
    (the question's own unit aside) and less the question's size or its allowance, whichever is more.
    """
    units = split_units(messages)
    unit_of = {index: position for position, unit in enumerate(units) for index in unit.indices}
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    question = {unit_of[users[-1]]} if users and unit_of[users[-1]] != unit_of[users[0]] else set()
    steady = gather(messages, units, pinned_units(messages, units) - question)
    asked = sum(counter.count_message(messages[i], model) for p in question for i in units[p].indices)
    allowance = limits.context_window * QUESTION_ALLOWANCE_PERCENT // 100
    total = expected_total(limits, {})
    return max(0, total - counter.count_messages(steady, model) - max(asked, allowance))


# --- Counting the work, not timing it -------------------------------------------------------------------------


class ScannedCalls(list[Any]):
    """A `tool_calls` list that counts how often it is read through: a strategy that looks each call up by scanning
    its message reads it once per call, so n parallel calls cost O(n^2).
    """

    def __init__(self, calls: list[Any]) -> None:
        super().__init__(calls)
        self.scans = 0

    def __iter__(self) -> Any:
        self.scans += 1
        return super().__iter__()


class CountingEncodings(Encodings):
    """Another Encodings' loaded encodings, counting the characters given them to tokenize."""

    def __init__(self, loaded: Encodings) -> None:
        super().__init__()
        self.loaded = loaded
        self.characters = 0

    def get(self, name: str) -> tiktoken.Encoding:
        return _Counting(self.loaded.get(name), self)  # type: ignore[return-value]


@dataclass
class _Counting:
    encoding: tiktoken.Encoding
    counts: CountingEncodings

    @property
    def name(self) -> str:
        return self.encoding.name

    def encode(self, text: str, **options: Any) -> list[int]:
        self.counts.characters += len(text)
        return self.encoding.encode(text, **options)


def work_on_parallel_calls(
    run: Callable[[list[Message], Context], list[Message]], n: int, encodings: Encodings, **context: Any
) -> tuple[int, int]:
    """What `run` does to one round of n parallel calls (tests.factories.parallel_round) with a cold token cache: how
    often it reads the calls through, and how many characters it has tokenized.
    """
    messages = parallel_round(n, 120)
    listed = messages[2]["tool_calls"] = ScannedCalls(messages[2]["tool_calls"])
    counting = CountingEncodings(encodings)
    run(messages, RecordingContext(model="gpt-4o", tokens=TokenCounter(counting), **context))
    return listed.scans, counting.characters


BRANCH_SCANS = 4


def linear_in_parallel_calls(
    run: Callable[[list[Message], Context], list[Message]], encodings: Encodings, **context: Any
) -> tuple[int, int]:
    """Asserts that twice the parallel calls cost twice the work: their list read through as often (not once per
    call) and at most about twice the characters tokenized (not calls times the message). Returns the work at 1000.
    """
    scans, characters = work_on_parallel_calls(run, 1000, encodings, **context)
    scans_2n, characters_2n = work_on_parallel_calls(run, 2000, encodings, **context)
    # The two sizes may take different branches (an optional jump at 1000 calls, a forced one at 2000, which skips
    # the break-even rule and its look for stubs): a few reads apart, where reading per call would be a thousand.
    assert abs(scans_2n - scans) <= BRANCH_SCANS, (scans, scans_2n)
    assert characters_2n <= 2.05 * characters
    return scans, characters
