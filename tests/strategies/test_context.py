"""A compaction stops at its next checkpoint once its deadline has passed or it was cancelled."""

from __future__ import annotations

import pytest

from strategies import Chain, Context, Registry, TokenCounter
from strategies.context import CLOCK_EVERY, CompactionStopped, Deadline
from strategies.conversation import with_arguments
from strategies.registry import BUILTINS
from tests.factories import agent_loop, calls


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


def test_calibration_scales_every_count_and_so_every_default_budget(counter: TokenCounter) -> None:
    from strategies import ModelLimits
    from strategies.budget import default_total

    messages = agent_loop(10, output_chars=400)
    tools = [{"type": "function", "function": {"name": "read", "description": "Read a file.", "parameters": {}}}]
    plain = Context(model="m", tokens=counter, request={"tools": tools})
    scaled = Context(model="m", tokens=counter, request={"tools": tools}, calibration=1.5)
    assert scaled.count_message(messages[3]) == round(plain.count_message(messages[3]) * 1.5)
    assert scaled.count_request(messages) == pytest.approx(plain.count_request(messages) * 1.5, rel=0.01)
    limits = ModelLimits(context_window=10_000, max_output=1000)
    assert default_total(Context(model="m", tokens=counter, limits=limits)) == 10_000 - 1000 - 200
    assert default_total(Context(model="m", tokens=counter, limits=limits, safety_margin_percent=10)) == 8000


@pytest.mark.parametrize("calibration", [1.0, 1.37, 0.61])
def test_a_copy_whose_calls_changed_is_counted_from_the_calls_alone(counter: TokenCounter, calibration: float) -> None:
    message = calls("a", "b", "c")
    ctx = Context(model="gpt-4o", tokens=counter, calibration=calibration)
    changed = with_arguments(message, {"a": "{}", "c": "{}"})
    difference = sum(
        ctx.call_tokens(new) - ctx.call_tokens(old)
        for old, new in zip(message["tool_calls"], changed["tool_calls"], strict=True)
    )
    fresh = Context(model="gpt-4o", tokens=counter, calibration=calibration)
    assert ctx.count_message_with(message, difference) == fresh.count_message(changed)
    assert ctx.count_message_with(message, 0) == ctx.count_message(message)
