"""Epochs (strategies.epochs): jumps at whole epochs, the break-even rule, forced jumps, and the property that
between two jumps every compacted request extends the previous one byte for byte.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from strategies import (
    BUILTINS,
    Applied,
    Chain,
    Context,
    Memo,
    ModelLimits,
    Params,
    Registry,
    StepSpec,
    TokenCounter,
    format_chain,
)
from strategies.conversation import tool_calls_of
from strategies.digests import message_bytes
from strategies.epochs import GEOMETRIC, EpochStrategy, request_ends
from strategies.fit import Fit, FitParams
from strategies.invariants import compaction_problems
from strategies.layout import Layout
from strategies.mask import Mask, MaskParams
from strategies.messages import Message
from strategies.prune_tool_outputs import PruneToolOutputs, PruneToolOutputsParams
from strategies.refs import stub_refs
from strategies.replay import CACHE_READ, CACHE_WRITE
from strategies.shorten_tools import ShortenTools, ShortenToolsParams
from tests.factories import agent_loop, call, client_requests, output, qa_chat, result, system, user
from tests.strategies.generators import conversations, fit, mask, middle_out, shorten_tools
from tests.strategies.harness import RecordingContext, apply

REGISTRY = Registry(BUILTINS)


class TrimParams(Params):
    max_chars: int = 100
    epoch: int = 1
    min_gain: float = 0.35
    pace: bool = False


class Trim(EpochStrategy[TrimParams]):
    """prune_tool_outputs' rule with epochs on top: the smallest strategy that shows them at work."""

    name = "trim_with_epochs"
    params_model = TrimParams
    summary = "A test strategy."

    def epoch_calls(self) -> int:
        return self.params.epoch

    def min_gain(self) -> float:
        return self.params.min_gain

    def pace(self) -> bool:
        return self.params.pace

    def compact(self, messages: list[Message], ctx: Context) -> Applied:
        return PruneToolOutputs(PruneToolOutputsParams(max_chars=self.params.max_chars)).apply(messages, ctx)


def run(
    strategy: EpochStrategy[Any], messages: list[Message], counter: TokenCounter, memo: Memo | None = None
) -> tuple[list[Message], dict[str, Any]]:
    ctx = RecordingContext(model="gpt-4o", tokens=counter, memo=memo)
    return apply(strategy, messages, ctx), dict(ctx.details)


def as_bytes(messages: list[Message]) -> list[bytes]:
    return [message_bytes(m) for m in messages]


def test_the_boundary_jumps_every_epoch_tool_calls_and_stays_in_between(counter: TokenCounter) -> None:
    params = dict(max_tool_chars=0, full_tool_outputs=2, max_tool_calls=6, epoch=4, min_gain=0)
    strategy = ShortenTools(ShortenToolsParams(**params))
    rule = ShortenTools(ShortenToolsParams(**{**params, "epoch": 0}))
    conversation = agent_loop(13, 900)
    boundaries = []
    previous: list[Message] = []
    length = 0
    for request in client_requests(conversation):
        out, details = run(strategy, request, counter)
        boundaries.append(details["epoch_boundary"])
        if details["epoch_boundary"] == len(request):  # a jump here: the rule over the whole request
            assert out == run(rule, request, counter)[0]
        else:
            assert as_bytes(out[: len(previous)]) == as_bytes(previous)
            assert out[len(previous) :] == request[length:]
        previous, length = out, len(request)
    calls_before = [sum(len(tool_calls_of(m)) for m in conversation[:b]) for b in sorted(set(boundaries))]
    assert calls_before == [0, 4, 8, 12]


def test_a_jump_that_does_not_pay_for_the_rewritten_cache_waits(counter: TokenCounter) -> None:
    # One long result to cut: the cut removes most of what the jump rewrites (from that result on), so it pays
    # at min_gain 0.35 but never at 1 (it would have to remove all it rewrites).
    request = [system("s"), user("task"), call("c0"), result("c0", output(0, 4000)), call("c1"), result("c1", "ok")]
    assert request_ends(request) == [2, 4, 6]
    out, details = run(Trim(TrimParams(max_chars=100, epoch=1)), request, counter)
    assert details["jumps"] >= 1 and "[... output truncated: " in out[3]["content"]
    out, details = run(Trim(TrimParams(max_chars=100, epoch=1, min_gain=1)), request, counter)
    assert details["evaluated"] == 2 and details["jumps"] == 0 and out == request


def paced(chatter: int, system_chars: int = 10) -> list[Message]:
    """`chatter` question/answer pairs (a request each), then one long result and a note as long after it: cutting
    the result removes about half of what the jump rewrites.
    """
    head = [system("s" * system_chars), user("task")]
    for i in range(chatter):
        head += [user(f"question {i}"), {"role": "assistant", "content": f"answer {i}"}]
    note = user(output(1, 4000))
    return [*head, call("c0"), result("c0", output(0, 4000)), note, call("c1"), result("c1", "ok")]


def test_with_pace_a_short_session_declines_a_jump_that_a_long_one_takes(counter: TokenCounter) -> None:
    # The jump removes about half of what it rewrites: break-even at Anthropic's prices after about 10 more requests
    # (strategies.epochs). After 2 requests the session is expected to run 2 more, after 42 about 42 more.
    short, long = paced(0), paced(40)
    cut = "[... output truncated: "
    for messages in (short, long):
        out, details = run(Trim(TrimParams(min_gain=0)), messages, counter)
        assert cut in out[-4]["content"], details  # without pace both take it
    out, details = run(Trim(TrimParams(min_gain=0, pace=True)), short, counter)
    assert details["evaluated"] >= 1 and details["jumps"] == 0 and out == short
    out, details = run(Trim(TrimParams(min_gain=0, pace=True)), long, counter)
    assert details["jumps"] >= 1 and cut in out[-4]["content"]


@pytest.mark.parametrize(
    "params", [MaskParams(keep=0, epoch=1, min_gain=0.3), MaskParams(keep=0, epoch=1, min_gain=0, pace=True)]
)
def test_the_first_stub_counts_the_whole_request_as_rewritten(counter: TokenCounter, params: MaskParams) -> None:
    # The proxy offers the expand tool from mask's first stub on: the tools, in front of every message, change, and
    # the provider caches nothing of that request. A long system prompt the jump leaves as it is is rewritten too.
    strategy = Mask(params)
    out, details = run(strategy, paced(40), counter)
    assert details["jumps"] >= 1 and "output elided" in out[-4]["content"]
    conversation = paced(40, system_chars=40_000)
    out, details = run(strategy, conversation, counter)
    assert details["evaluated"] >= 1 and details["jumps"] == 0 and out == conversation


def test_with_pace_a_request_over_the_limit_still_jumps(counter: TokenCounter) -> None:
    # A short session declines the optional jump (above), but over the limit the jump is forced whatever pace says.
    messages = paced(0)
    limits = ModelLimits(context_window=2500, max_output=100)
    strategy = Trim(TrimParams(min_gain=0, pace=True))
    ctx = RecordingContext(model="gpt-4o", tokens=counter, limits=limits)
    assert ctx.count_request(messages[:-2]) > strategy.limit(ctx)
    out = apply(strategy, messages, ctx)
    assert ctx.details["jumps"] >= 1 and ctx.count_request(out) <= strategy.limit(ctx)


def test_a_jump_that_makes_the_request_longer_is_never_taken(counter: TokenCounter) -> None:
    # Cutting an 11-character result to 10 adds a longer note than it removes.
    conversation = [*agent_loop(3, 11)]
    strategy = Trim(TrimParams(max_chars=10, epoch=1, min_gain=0.01))
    out, details = run(strategy, conversation, counter)
    assert out == conversation
    assert details["evaluated"] >= 1 and details["jumps"] == 0


def test_fit_jumps_only_when_the_request_would_pass_its_total(counter: TokenCounter) -> None:
    strategy = Fit(FitParams(total=3000, room=10**9))
    ctx = RecordingContext(model="gpt-4o", tokens=counter)
    for request in client_requests(qa_chat(300)):
        out, details = run(strategy, request, counter)
        assert ctx.count_request(out) <= 3000
    assert details["jumps"] > 2


def test_a_jump_of_fit_leaves_room_for_one_epoch(counter: TokenCounter) -> None:
    ctx = RecordingContext(model="gpt-4o", tokens=counter)
    sizes = []
    for request in client_requests(qa_chat(300)):
        out, details = run(Fit(FitParams(total=4000)), request, counter)  # room: half the total
        sizes.append(ctx.count_request(out))
        if details["epoch_boundary"] == len(request) and details["jumps"]:
            assert ctx.count_request(out) <= 2000
    assert max(sizes) <= 4000 and min(sizes[len(sizes) // 2 :]) < 2100


def test_the_memo_gives_the_same_bytes_and_spares_the_replay(counter: TokenCounter) -> None:
    strategy = ShortenTools(ShortenToolsParams(max_tool_chars=0, full_tool_outputs=2, max_tool_calls=6, epoch=3))
    memo = Memo(1_000_000)
    for request in client_requests(agent_loop(40, 700)):
        remembered, details = run(strategy, request, counter, memo)
        assert as_bytes(remembered) == as_bytes(run(strategy, request, counter)[0])
        assert details["evaluated"] <= 1  # only this request's own end is new


def test_a_different_model_or_parameter_does_not_reuse_the_memo(counter: TokenCounter) -> None:
    memo = Memo(1_000_000)
    request = agent_loop(30, 700)
    run(ShortenTools(ShortenToolsParams(max_tool_chars=0, epoch=3)), request, counter, memo)
    _, details = run(ShortenTools(ShortenToolsParams(max_tool_chars=0, epoch=4)), request, counter, memo)
    assert details["evaluated"] > 1


def test_the_same_request_remembered_at_another_calibration_still_fits_the_limit(counter: TokenCounter) -> None:
    # The upstream's answers recalibrate the counts between two requests (app.upstream.models); the same request
    # again (a retry, a dry run) resumes the state remembered at the old ratio, which may be over the limit now.
    memo = Memo(1_000_000)
    strategy = Fit(FitParams(total=3000))
    request = qa_chat(120)
    first = RecordingContext(model="gpt-4o", tokens=counter, memo=memo)
    remembered = apply(strategy, request, first)
    later = RecordingContext(model="gpt-4o", tokens=counter, memo=memo, calibration=1.7)
    assert later.count_request(remembered) > 3000  # what the memo would give, at the new counts
    assert later.count_request(apply(strategy, request, later)) <= 3000


def without_max_chars(spec: StepSpec) -> StepSpec:
    return StepSpec(spec.name, {k: v for k, v in spec.params.items() if k != "max_chars"})


# Every strategy with epochs, with epochs, a break-even rule or room switched on (else it is the rule alone).
epoch_steps = st.one_of(shorten_tools, fit, middle_out)
# And mask, without max_chars (which cuts new results on arrival, after the jumps). Not in the small-window test:
# mask fits its own limit by degrading, tested in tests/strategies/test_mask.py.
jumping_steps = st.one_of(epoch_steps, mask.map(without_max_chars))


def growth(messages: list[Message]) -> int:
    return sum(len(tool_calls_of(m)) for m in messages if m.get("role") == "assistant")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), jumping_steps, st.booleans())
def test_between_two_jumps_every_request_extends_the_previous_byte_for_byte(
    counter: TokenCounter, conversation: list[Message], spec: StepSpec, with_memo: bool
) -> None:
    [strategy] = Chain.parse(format_chain([spec]), REGISTRY).steps
    assert isinstance(strategy, EpochStrategy)
    ctx = RecordingContext(model="gpt-4o", tokens=counter)
    assume(not strategy.recomputed_every_request(ctx))
    memo = Memo(1_000_000) if with_memo else None
    previous: list[Message] = []
    boundary, length = 0, 0
    for request in client_requests(conversation):
        out, details = run(strategy, request, counter, memo)
        assert compaction_problems(request, out) == []
        new = request[length:]
        staying = previous + new
        if details["epoch_boundary"] == boundary:
            assert as_bytes(out) == as_bytes(staying)  # the previous compacted request, plus the new messages
        else:
            assert details["epoch_boundary"] == len(request)  # boundaries move only to a request's end
            forced = strategy.over_limit(ctx.count_request(staying), len(staying), ctx)
            grown = growth(request[boundary:])
            assert forced or (not strategy.jumps_at_limit_only and grown >= strategy.epoch_calls())
            if not forced and as_bytes(out) != as_bytes(staying):
                kept = 0
                for old, new_message in zip(staying, out, strict=False):
                    if message_bytes(old) != message_bytes(new_message):
                        break
                    kept += ctx.count_message(old)
                removed = ctx.count_request(staying) - ctx.count_request(out)
                rewritten = ctx.count_request(staying) - ctx.count_request([]) - kept
                if strategy.reversible and next(stub_refs(out), None) and next(stub_refs(staying), None) is None:
                    rewritten = ctx.count_request(staying)  # the expand tool comes: nothing of the request is cached
                assert removed > 0 and removed >= strategy.min_gain() * rewritten
                if strategy.pace():  # paid back within as many more requests as the session has sent
                    requests = len(request_ends(request))
                    assert removed * (CACHE_WRITE + requests * CACHE_READ) >= rewritten * (CACHE_WRITE - CACHE_READ)
        if memo is not None:
            assert as_bytes(out) == as_bytes(run(strategy, request, counter)[0])
        previous, boundary, length = out, details["epoch_boundary"], len(request)


def test_request_ends_are_where_the_model_answered_and_now() -> None:
    conversation = agent_loop(2, 10)
    assert request_ends(conversation) == [2, 4, 6]
    assert request_ends([]) == []
    assert [len(r) for r in client_requests(conversation)] == request_ends(conversation)


def test_the_rule_is_evaluated_again_only_after_the_conversation_grew_by_an_eighth(counter: TokenCounter) -> None:
    # A jump that never pays (min_gain 1) used to be tried again at every request end: n evaluations of
    # the whole prefix. Now at most about GEOMETRIC * ln(n) of them.
    conversation = agent_loop(3000, 10)
    strategy = Trim(TrimParams(max_chars=5, epoch=1, min_gain=1))
    _, details = run(strategy, conversation, counter)
    ends = len(request_ends(conversation))
    assert details["jumps"] == 0 and details["evaluated"] <= GEOMETRIC * (math.log(ends) + 1)


def test_over_its_limit_a_rule_with_epochs_cuts_like_fit_and_leaves_half_the_limit(counter: TokenCounter) -> None:
    # shorten_tools cannot shorten a chat without tool calls: past the window it drops the oldest pairs.
    limits = ModelLimits(context_window=3000, max_output=500)
    ctx = RecordingContext(model="gpt-4o", tokens=counter, limits=limits)
    strategy = ShortenTools(ShortenToolsParams())
    limit = strategy.limit(ctx)
    sizes = []
    for request in client_requests(qa_chat(400)):
        out = apply(strategy, request, ctx)
        assert compaction_problems(request, out) == []
        sizes.append(ctx.count_request(out))
    assert max(sizes) <= limit and min(sizes[200:]) <= limit // 2 + 30  # right after a cut: about half the limit
    assert ctx.details["limit_cuts"] >= 5 and ctx.details["evaluated"] == 0  # no tool calls: no epoch ever ends


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), epoch_steps, st.sampled_from([600, 1500, 4000]))
def test_with_a_small_window_requests_stay_valid_within_the_limit_and_extend_between_jumps(
    counter: TokenCounter, conversation: list[Message], spec: StepSpec, window: int
) -> None:
    [strategy] = Chain.parse(format_chain([spec]), REGISTRY).steps
    assert isinstance(strategy, EpochStrategy)
    ctx = RecordingContext(model="gpt-4o", tokens=counter, limits=ModelLimits(context_window=window, max_output=100))
    assume(not strategy.recomputed_every_request(ctx))
    previous: list[Message] = []
    boundary = length = 0
    for request in client_requests(conversation):
        ctx = RecordingContext(model="gpt-4o", tokens=counter, limits=ctx.limits)
        out = apply(strategy, request, ctx)
        assert compaction_problems(request, out) == []
        if ctx.details["epoch_boundary"] == boundary:
            assert as_bytes(out) == as_bytes(previous + request[length:])
        pinned = Layout.of(request, ctx).prefix(len(request)).pinned_tokens  # the pinned units, priced
        if pinned <= strategy.limit(ctx) - strategy.room(ctx):  # a cut can bring it under
            assert ctx.count_request(out) <= strategy.limit(ctx)
        previous, boundary, length = out, ctx.details["epoch_boundary"], len(request)
