"""Every invariant of a compacted Messages body (bench.compaction.wire_forms.messages_problems: tool uses and results
paired, thinking blocks as they came, the latest assistant turn whole, system kept, at most 4 breakpoints, roles
alternating), over random Claude Code-shaped bodies and random chains of every registered strategy; plus: the input
never mutated, the same bytes for the same input, an unchanged body forwarded as it came, unknown blocks untouched.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.compaction.compactor import settled
from app.wire import AnthropicMessages
from app.wire.anthropic import AnthropicParsed
from app.wire.cache_control import CACHEABLE
from bench.compaction.wire_forms import bare_run, messages_body, messages_problems
from strategies import BUILTINS, Chain, ModelLimits, Registry, TokenCounter, format_chain
from tests.strategies.generators import conversations, steps
from tests.strategies.harness import RecordingContext

REGISTRY = Registry(BUILTINS)
WIRE = AnthropicMessages()
chains = st.lists(steps, min_size=1, max_size=3).map(lambda specs: Chain.parse(format_chain(specs), REGISTRY))
examples = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
UNKNOWN = {"type": "x_future_block", "payload": {"nested": [1, "two"]}}
REDACTED = {"type": "redacted_thinking", "data": "opaque-bytes=="}
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}


@st.composite
def bodies(draw: st.DrawFn) -> dict[str, Any]:
    """A chat conversation in Claude Code's Messages shape, with what else such bodies carry: a system message inside
    `messages`, redacted thinking, server compaction blocks, images, blocks of types unknown here, breakpoints with
    either TTL anywhere.
    """
    body: dict[str, Any] = json.loads(messages_body(draw(conversations()), {"model": "claude-sonnet-4-5"}))
    messages = body["messages"]
    blocks = [(i, k) for i, m in enumerate(messages) for k in range(len(m["content"]))]
    breakpoints = 0  # the client's own: at most 2 more than system's and the last block's, 4 in all
    # Either TTL, 1-hour ones first in request order as the API requires (system's, if any, is 1-hour).
    hours = draw(st.integers(0, 2))
    for i, k in sorted(draw(st.lists(st.sampled_from(blocks), max_size=3, unique=True))) if blocks else []:
        kind = draw(st.sampled_from(["unknown", "redacted", "image", "breakpoint", "compaction"]))
        block = messages[i]["content"][k]
        if kind == "breakpoint" and block["type"] in CACHEABLE and breakpoints < 2 and "cache_control" not in block:
            breakpoints += 1
            ttl = "1h" if breakpoints <= hours else "5m"
            messages[i]["content"][k] = {**block, "cache_control": {"type": "ephemeral", "ttl": ttl}}
        elif kind == "redacted" and messages[i]["role"] == "assistant":
            messages[i]["content"].insert(0, REDACTED)
        elif kind == "compaction" and messages[i]["role"] == "assistant":  # server compaction's summary
            messages[i]["content"].insert(0, {"type": "compaction", "content": f"Summary up to message {i}."})
        elif kind in ("unknown", "image") and block["type"] not in ("tool_result",):
            messages[i]["content"].insert(k + 1, UNKNOWN if kind == "unknown" else IMAGE)
    if draw(st.booleans()) and "system" in body:
        body["system"][-1]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    if draw(st.booleans()):
        messages.insert(1, {"role": "system", "content": "Tools you may use: " + draw(st.text(max_size=20))})
    return body


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter()


small_windows = st.builds(ModelLimits, context_window=st.integers(2000, 20_000), max_output=st.integers(1, 2000))


def compact(body: dict[str, Any], chain: Chain, limits: ModelLimits, counter: TokenCounter) -> tuple[bytes, set[int]]:
    """The body as the proxy would send it, and the original messages whose every view came back untouched."""
    raw = orjson.dumps(body)
    parsed = WIRE.parse(raw, 64)
    assert isinstance(parsed, AnthropicParsed)
    ctx = RecordingContext(model=parsed.model, tokens=counter, request=parsed.request, limits=limits)
    out = settled(WIRE, parsed, chain.run(parsed.messages, ctx), ctx).messages
    kept = {id(m) for m in out}
    untouched = {i for i, views in enumerate(parsed.views) if all(id(v) in kept for v in views)}
    if len(out) == len(parsed.messages) and all(a is b for a, b in zip(out, parsed.messages, strict=True)):
        return raw, untouched
    return WIRE.render(parsed, out), untouched


@examples
@given(bodies(), chains, small_windows)
def test_compacted_bodies_keep_every_invariant(
    counter: TokenCounter, body: dict[str, Any], chain: Chain, limits: ModelLimits
) -> None:
    assert messages_problems(body, body) == []  # the generator builds only valid bodies
    snapshot = copy.deepcopy(body)
    sent, _ = compact(body, chain, limits, counter)
    assert body == snapshot  # 1. the input untouched
    after = orjson.loads(sent)
    assert messages_problems(body, after) == []
    unknown = [b for m in after["messages"] if isinstance(m["content"], list) for b in m["content"] if "payload" in b]
    assert all(block == UNKNOWN for block in unknown)
    assert compact(snapshot, chain, limits, counter)[0] == sent  # deterministic, byte for byte


@examples
@given(bodies(), chains, small_windows)
def test_untouched_messages_go_as_they_came(
    counter: TokenCounter, body: dict[str, Any], chain: Chain, limits: ModelLimits
) -> None:
    sent, untouched = compact(body, chain, limits, counter)
    after = orjson.loads(sent)
    if len(untouched) == len(body["messages"]):
        assert sent == orjson.dumps(body)  # nothing changed: as it came
    runs = [bare_run(m) for m in after["messages"]]
    for index in untouched:  # whole (wire_forms.bare_run: a breakpoint may have moved onto it, a turn merged)
        assert any(bare_run(body["messages"][index]) in run for run in runs), index
