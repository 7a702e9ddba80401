"""mask: the newest tool results whole, older ones one-line stubs with a ref, the boundary moved in epochs."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.compaction.compactor import Compactor
from bench.compaction.wire_forms import FORMS, chat_messages, compact
from bench.compactor import compactor, shipped_settings
from strategies import BUILTINS, Chain, Context, Encodings, Registry, TokenCounter
from strategies.conversation import text_of
from strategies.invariants import compaction_problems
from strategies.mask import Mask, MaskParams
from strategies.messages import Message
from strategies.refs import Originals, refs_in
from tests.factories import RULE_ALONE, agent_loop, assistant, call, output, parts, result, system, tool_call, user
from tests.strategies.generators import long_assistant_texts
from tests.strategies.harness import apply, expand_hint, keeps_the_invariants, linear_in_parallel_calls

REGISTRY = Registry(BUILTINS)


def mask(messages: list[Message], ctx: Context, **params: Any) -> list[Message]:
    return apply(Mask(MaskParams(**{**RULE_ALONE, **params})), messages, ctx)


def stub(name: str, text: str) -> str:
    """The stub format, written out independently of strategies.markers."""
    return f"[{name} output elided: {len(text):,} chars; {expand_hint(text)} to see it]"


def whole_results(messages: list[Message]) -> list[str]:
    return [m["tool_call_id"] for m in messages if m["role"] == "tool" and not refs_in(text_of(m["content"]))]


def test_all_but_the_newest_keep_results_become_stubs_naming_tool_and_ref(ctx: Context) -> None:
    messages = agent_loop(6, 1000)
    out = mask(messages, ctx, keep=2)
    assert whole_results(out) == ["call_4", "call_5"]
    assert out[3] == result("call_0", stub("read", output(0, 1000)))
    # Only results change: every call, its id and every other message stay the very same objects.
    assert [m for m in out if m["role"] != "tool"] == [m for m in messages if m["role"] != "tool"]
    assert all(a is b for a, b in zip(out, messages, strict=True) if a["role"] != "tool")
    assert ctx.details["masked"] == 4


def test_a_result_shorter_than_its_stub_stays_and_part_lists_keep_their_shape(ctx: Context) -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    messages = [user("go"), call("a"), result("a", "ok"), call("b"), result("b", [*parts(output(1, 900)), image])]
    messages += [call("c"), result("c", output(2, 900))]
    out = mask(messages, ctx, keep=1)
    assert out[2] is messages[2]
    assert out[4]["content"] == [*parts(stub("read", output(1, 900))), image]


def test_every_stub_resolves_to_the_clients_original_also_after_minify(ctx: Context) -> None:
    pretty = json.dumps({"files": [f"src/module_{i}.py" for i in range(60)]}, indent=4)
    messages = [user("go"), call("a", "ls"), result("a", pretty), call("b"), result("b", output(1, 900))]
    out = Chain.parse("minify,mask(keep=1,epoch=0,min_gain=0)", Registry(BUILTINS)).run(messages, ctx).messages
    (ref,) = refs_in(out[2]["content"])
    assert Originals(messages).resolve(ref) == pretty
    # The stub counts what the model would have read: the minified text.
    compact = json.dumps(json.loads(pretty), separators=(",", ":"))
    assert out[2]["content"].startswith(f"[ls output elided: {len(compact):,} chars;")


def test_max_chars_cuts_whole_results_on_arrival_and_leaves_stubs(ctx: Context) -> None:
    messages = agent_loop(4, 3000)
    out = mask(messages, ctx, keep=2, max_chars=500)
    assert out[3]["content"] == stub("read", output(0, 3000))
    newest = out[-1]["content"]
    assert newest.startswith(output(3, 3000)[:250]) and newest.endswith(output(3, 3000)[-250:])
    assert f"2,500 of 3,000 chars elided; {expand_hint(output(3, 3000))}" in newest


def test_between_jumps_each_request_extends_the_one_before(ctx: Context) -> None:
    """An agent loop sends one request per tool result: with epochs of 5 calls, the compacted requests share
    their prefix except at a jump, and at most keep + epoch results are whole."""
    full = agent_loop(30, 1000)
    previous: list[Message] | None = None
    jumps = 0
    for n in range(1, 31):
        out = mask(full[: 2 + 2 * n], ctx, keep=3, epoch=5, min_gain=0)
        assert len(whole_results(out)) <= 3 + 5
        if previous is not None and out[: len(previous)] != previous:
            jumps += 1
        previous = out
    assert 3 <= jumps <= 6


def test_the_invariants_hold(ctx: Context) -> None:
    messages = agent_loop(12, 800)
    keeps_the_invariants(lambda m: mask(m, ctx, keep=2, max_chars=300), messages)
    keeps_the_invariants(lambda m: mask(m, ctx, keep=0, epoch=2, min_gain=0.35), messages)


def test_thousands_of_parallel_results_cost_work_linear_in_the_calls(shared_encodings: Encodings) -> None:
    """Each stub names its call's tool: looked up in an index of the message's calls, not by scanning them."""

    def run(messages: list[Message], ctx: Context) -> list[Message]:
        out = mask(messages, ctx, keep=1)
        assert len(whole_results(out)) == 1
        return out

    linear_in_parallel_calls(run, shared_encodings)
    linear_in_parallel_calls(
        lambda m, ctx: mask(m, ctx, keep=1, max_chars=50, epoch=1, min_gain=0.01), shared_encodings
    )


# --- inputs: what the model wrote, masked too -------------------------------------------------------------------

CUT = re.compile(
    r"\[\.\.\. ([\d,]+) of ([\d,]+) chars elided; call compaction_expand with ref=\"(\w+)\" to see them all"
)


def writing_session(rounds: int, text_chars: int = 1200, content_chars: int = 800) -> list[Message]:
    """An agent that thinks aloud before each call and writes whole files: round i's text and file are distinct."""
    messages: list[Message] = [system("You are a coding agent."), user("Implement it.")]
    for i in range(rounds):
        thought = (f"Round {i}: I will now write module {i} because " + "the tests need it. " * 200)[:text_chars]
        content = "".join(f"def f{i}_{n}(): return {n}\n" for n in range(200))[:content_chars]
        write = tool_call(f"call_{i}", "write_file", {"path": f"src/m{i}.py", "content": content})
        messages += [
            {"role": "assistant", "content": thought, "tool_calls": [write]},
            result(f"call_{i}", output(i, 900)),
        ]
    return messages


def inputs_mask(messages: list[Message], ctx: Context, **params: Any) -> list[Message]:
    return mask(messages, ctx, inputs=True, **params)


def test_with_inputs_old_arguments_and_old_texts_are_cut_head_and_tail_with_refs_to_the_originals(ctx: Context) -> None:
    messages = writing_session(6)
    out = keeps_the_invariants(lambda m: inputs_mask(m, ctx, keep=2, text_chars=300), messages)
    originals = Originals(messages)
    assert whole_results(out) == ["call_4", "call_5"]
    # The turns of the newest two calls, and what follows them, go as the model wrote them.
    assert all(a is b for a, b in zip(out[10:], messages[10:], strict=True) if a["role"] == "assistant")
    for before, after in zip(messages[2:10:2], out[2:10:2], strict=True):
        text = after["content"]
        assert len(text) < 450 and text.startswith(before["content"][:150]) and text.endswith(before["content"][-150:])
        (ref,) = refs_in(text)
        assert originals.resolve(ref) == before["content"]
        new = json.loads(after["tool_calls"][0]["function"]["arguments"])
        old = json.loads(before["tool_calls"][0]["function"]["arguments"])
        assert new["path"] == old["path"] and len(new["content"]) < 250
        (ref,) = refs_in(new["content"])
        assert originals.resolve(ref) == old["content"]
    assert ctx.details["arguments_shortened"] == 4 and ctx.details["texts_cut"] == 4


def test_with_inputs_short_texts_pinned_replies_quoted_refs_and_short_conversations_stay(ctx: Context) -> None:
    long = "I read the task: " + "a plan in detail. " * 60
    quoting = f"Earlier output, {expand_hint('x')}, had it. " + "More of my reasoning. " * 60
    messages = [system("s"), user("Fix it."), assistant(long), user("Go on.")]
    messages += [
        {"role": "assistant", "content": "Short.", "tool_calls": [tool_call("a")]},
        result("a", output(0, 900)),
    ]
    messages += [{"role": "assistant", "content": quoting, "tool_calls": [tool_call("b")]}, result("b", output(1, 900))]
    messages += [{"role": "assistant", "content": long, "tool_calls": [tool_call("c")]}, result("c", output(2, 900))]
    messages += [call("d"), result("d", output(3, 900))]
    out = inputs_mask(messages, ctx, keep=1, text_chars=100)
    assert whole_results(out) == ["d"]
    # The reply in the task's unit is pinned, a short text is shorter than its stub would be, a text quoting a ref
    # would get a stub naming that ref's content: all three stay. The long one before the kept call is cut.
    assert [m for m in out[:8] if m["role"] != "tool"] == [m for m in messages[:8] if m["role"] != "tool"]
    (ref,) = refs_in(out[8]["content"])
    assert Originals(messages).resolve(ref) == long
    # No more calls than keep: nothing masked, so nothing the model wrote is cut either.
    assert inputs_mask(messages, ctx, keep=4, text_chars=100) == messages


def test_without_inputs_what_the_model_wrote_goes_as_it_came(ctx: Context) -> None:
    messages = writing_session(6)
    out = mask(messages, ctx, keep=2)
    assert [m for m in out if m["role"] == "assistant"] == [m for m in messages if m["role"] == "assistant"]


def test_with_inputs_between_jumps_each_request_extends_the_one_before(ctx: Context) -> None:
    """The model's writing is cut on the same jumps as the results, by the break-even rule: the requests of one
    conversation share their compacted prefix but at a jump, and a jump cuts the texts and arguments it passes."""
    full = writing_session(30)
    previous: list[Message] | None = None
    jumps = 0
    for n in range(1, 31):
        out = inputs_mask(full[: 2 + 2 * n], ctx, keep=3, epoch=5, min_gain=0.35, text_chars=300)
        if previous is not None and out[: len(previous)] != previous:
            jumps += 1
        previous = out
    assert 3 <= jumps <= 6
    assert previous is not None
    cut = [m for m in previous if m["role"] == "assistant" and refs_in(m["content"])]
    assert len(cut) >= 30 - 3 - 5  # all but the newest keep + epoch texts at most


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=long_assistant_texts(), keep=st.integers(0, 3), text_chars=st.integers(1, 400))
def test_with_inputs_every_new_stub_resolves_to_exactly_what_it_replaced(
    counter: TokenCounter, messages: list[Message], keep: int, text_chars: int
) -> None:
    ctx = Context(model="gpt-4o", tokens=counter)  # a window this conversation stays under: the rule alone
    out = keeps_the_invariants(lambda m: inputs_mask(m, ctx, keep=keep, text_chars=text_chars), messages)
    cuts_resolve(messages, out, Originals(messages), text_chars)


def cuts_resolve(messages: list[Message], out: list[Message], originals: Originals, text_chars: int) -> None:
    """What the model wrote changed only where a stub's ref resolves to exactly what it replaced: an assistant text
    longer than text_chars, not the latest, or a string in a call's arguments, the arguments the same JSON otherwise.
    """
    assert len(out) == len(messages)
    latest = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    for index, (before, after) in enumerate(zip(messages, out, strict=True)):
        if before["role"] != "assistant" or after == before:
            continue
        assert index != latest
        old, new = text_of(before.get("content")), text_of(after.get("content"))
        if new != old:
            assert len(old) > text_chars and len(new) < len(old)
            (ref,) = refs_in(new)
            assert originals.resolve(ref) == old
        for old_call, new_call in zip(before.get("tool_calls") or [], after.get("tool_calls") or [], strict=True):
            old_args, new_args = old_call["function"]["arguments"], new_call["function"]["arguments"]
            if new_args != old_args:
                _same_but_cut(json.loads(old_args), json.loads(new_args), originals)


def _same_but_cut(old: Any, new: Any, originals: Originals) -> None:
    """The same JSON but for strings cut head and tail, whose refs resolve to exactly the string they replaced."""
    if isinstance(old, dict):
        assert isinstance(new, dict) and new.keys() == old.keys()
        for key in old:
            _same_but_cut(old[key], new[key], originals)
    elif isinstance(old, list):
        assert isinstance(new, list) and len(new) == len(old)
        for a, b in zip(old, new, strict=True):
            _same_but_cut(a, b, originals)
    elif isinstance(old, str) and new != old:
        found = CUT.search(new)
        assert found is not None and originals.resolve(found.group(3)) == old
    else:
        assert new == old


# In every wire format, through the proxy's own path: the body parsed, the chain, settled, rendered.
INPUTS_CHAIN = "mask(keep=2,epoch=0,min_gain=0,inputs=true,text_chars=200)"


@pytest.fixture(scope="module")
def proxy(shared_encodings: Encodings) -> Compactor:
    return compactor(shipped_settings(), shared_encodings)


def sent_arguments(form: str, body: dict[str, Any]) -> list[tuple[str, Any]]:
    """Each call's (tool, arguments) as the upstream receives them: chat's and Responses' a string, Anthropic's
    tool_use input an object.
    """
    if form == "chat":
        return [
            (c["function"]["name"], c["function"]["arguments"])
            for m in body["messages"]
            for c in m.get("tool_calls") or []
        ]
    if form == "responses":
        return [(i["name"], i["arguments"]) for i in body["input"] if i["type"] == "function_call"]
    return [
        (b["name"], b["input"])
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_use"
    ]


def sent_texts(form: str, body: dict[str, Any]) -> list[str]:
    """The assistant texts as the upstream receives them."""
    if form == "responses":
        turns = [i for i in body["input"] if i.get("type") == "message" and i["role"] == "assistant"]
    else:
        turns = [m for m in body["messages"] if m["role"] == "assistant"]
    texts = []
    for turn in turns:
        content = turn.get("content") or ""
        parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
        texts += [p["text"] for p in parts if p.get("type") in ("text", "output_text")]
    return texts


def valid_for_its_api(form: str, body: dict[str, Any]) -> None:
    """Each call's arguments as the API takes them: chat's and Responses' a string, Anthropic's tool_use input an
    object.
    """
    for _, arguments in sent_arguments(form, body):
        assert isinstance(arguments, dict if form == "messages" else str)


@pytest.mark.parametrize("form", sorted(FORMS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=long_assistant_texts(), keep=st.integers(0, 3), text_chars=st.sampled_from([1, 150, 400]))
def test_with_inputs_in_every_wire_format_the_request_stays_valid_and_every_cut_resolves(
    proxy: Compactor, form: str, messages: list[Message], keep: int, text_chars: int
) -> None:
    chain = Chain.parse(f"mask(keep={keep},epoch=0,min_gain=0,inputs=true,text_chars={text_chars})", REGISTRY)
    request = {"model": "gpt-4o" if form != "messages" else "claude-sonnet-4-5"}
    replayed = compact(FORMS[form], proxy, chain, messages, request, check_input=True)
    # Messages: tool uses answered, thinking blocks as they came, the latest assistant turn whole.
    assert replayed.problems == []
    out = replayed.result.messages
    assert compaction_problems(replayed.seen, out) == []
    valid_for_its_api(form, orjson.loads(replayed.sent))
    if replayed.originals is not None:  # offered the expand tool: a stub's ref resolves
        # The conversation as the chain saw it: the format's view of the body (Responses: an assistant message item
        # and the calls after it are one message).
        wire = FORMS[form].wire
        seen = chat_messages(wire.parse(FORMS[form].body(messages, request), 64).messages)
        cuts_resolve(seen, chat_messages(out), replayed.originals, text_chars)
    else:
        assert all(not refs_in(text_of(m.get("content"))) for m in out if m["role"] == "assistant")


@pytest.mark.parametrize("form", sorted(FORMS))
def test_with_inputs_every_wire_format_sends_a_valid_request_whose_new_refs_resolve(
    proxy: Compactor, form: str
) -> None:
    messages = writing_session(6)
    request = {"model": "gpt-4o" if form != "messages" else "claude-sonnet-4-5"}
    replayed = compact(FORMS[form], proxy, Chain.parse(INPUTS_CHAIN, REGISTRY), messages, request)
    assert replayed.problems == []  # Messages: thinking blocks as they came, the latest turn whole, pairs intact
    assert compaction_problems(replayed.seen, replayed.result.messages) == []
    body = orjson.loads(replayed.sent)
    originals = replayed.originals
    assert originals is not None  # the expand tool offered: the stubs' refs resolve
    written = {json.loads(m["tool_calls"][0]["function"]["arguments"])["content"] for m in messages[2::2]}
    valid_for_its_api(form, body)
    arguments = sent_arguments(form, body)
    assert len(arguments) == 6
    cut = 0
    for name, sent in arguments:
        data = sent if form == "messages" else json.loads(sent)
        if name == "write_file" and refs_in(data["content"]):
            (ref,) = refs_in(data["content"])
            assert originals.resolve(ref) in written
            cut += 1
    assert cut == 4
    thoughts = {m["content"] for m in messages[2::2]}
    texts = sent_texts(form, body)
    stubs = [text for text in texts if refs_in(text)]
    assert len(stubs) == 4 and all(originals.resolve(refs_in(t)[0]) in thoughts for t in stubs)
    assert texts[-2:] == [m["content"] for m in messages[-4::2]]  # the newest two turns' texts as they came
