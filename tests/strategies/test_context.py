"""A compaction stops at its next checkpoint once its deadline has passed or it was cancelled."""

from __future__ import annotations

import pytest

from strategies import Chain, Context, Registry, TokenCounter
from strategies.context import CLOCK_EVERY, CompactionStopped, Deadline
from strategies.registry import BUILTINS
from tests.factories import agent_loop


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_clock_is_read_once_per_clock_every_checks() -> None:
    clock = Clock()
    deadline = Deadline(1.0, clock)
    clock.now = 2.0
    for _ in range(CLOCK_EVERY - 1):
        deadline.check()
    with pytest.raises(CompactionStopped) as stopped:
        deadline.check()
    assert stopped.value.reason == "deadline"


def test_cancel_stops_at_once_and_runs_what_was_registered() -> None:
    deadline = Deadline(None)
    ran: list[str] = []
    forget = deadline.on_cancel(lambda: ran.append("first"))
    deadline.on_cancel(lambda: ran.append("second"))
    forget()
    deadline.cancel()
    assert ran == ["second"]
    with pytest.raises(CompactionStopped, match="cancelled"):
        deadline.check()


def test_a_finished_deadline_no_longer_bounds_or_cancels() -> None:
    deadline = Deadline(0.001)
    deadline.finish()
    deadline.cancel()
    assert deadline.remaining() is None and not deadline.cancelled


@pytest.mark.parametrize("chain", ["minify,dedupe,window", "shorten_tools", "fit(total=2000)", "clear_tool_uses"])
def test_every_chain_stops_inside_its_work(counter: TokenCounter, chain: str) -> None:
    # A clock that passes the deadline on its first reading: the first checkpoint that looks stops the chain.
    clock = Clock()
    deadline = Deadline(1.0, clock)
    clock.now = 5.0
    ctx = Context(model="gpt-4o", tokens=TokenCounter(), deadline=deadline)
    with pytest.raises(CompactionStopped):
        Chain.parse(chain, Registry(BUILTINS)).run(agent_loop(200, 300), ctx)
