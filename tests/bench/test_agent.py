"""The simulated agent of the compaction benchmark: it expands what it needs and what it just asked for."""

from __future__ import annotations

from bench.compaction.agent import read_behind_refs
from bench.compaction.prompt_cache import ConversationCache, MessageTokens
from strategies import Encodings
from strategies.markers import elided, same_as, truncate_middle
from strategies.refs import ExpandCall, Originals
from tests.factories import assistant, call, output, result, user
from tests.strategies.harness import ref


def masked(text: str) -> str:
    return elided("read", text, ref(text))


def test_a_needed_value_behind_a_stub_is_expanded_once_and_found() -> None:
    secret = "the deploy window is 21:35"
    original = output(0, 3000) + secret
    messages = [user("go"), call("a"), result("a", original), call("b"), result("b", "ok")]
    compacted = [*messages[:2], result("a", masked(original)), *messages[3:]]
    reading = read_behind_refs(["21:35", "not anywhere"], compacted, Originals(messages), 3, 20_000, seq=0)
    assert reading.found == {"21:35"} and reading.refs == [ref(original)]
    assert ExpandCall.parse(reading.calls[0][1]) == ExpandCall(ref(original))


def test_a_value_deep_in_a_long_original_is_read_part_by_part_within_the_round_cap() -> None:
    lines = [f"line {n}\n" for n in range(5000)]
    original = "".join(lines)
    messages = [user("go"), call("a"), result("a", original), assistant("next")]
    compacted = [*messages[:2], result("a", masked(original)), messages[3]]
    deep = read_behind_refs(["line 1500\n"], compacted, Originals(messages), 3, 10_000, seq=0)
    assert deep.found == {"line 1500\n"} and len(deep.calls) == 2  # about 1,000 lines per part
    assert ExpandCall.parse(deep.calls[1][1]).start_line > 1  # type: ignore[union-attr]
    too_deep = read_behind_refs(["line 4900\n"], compacted, Originals(messages), 3, 10_000, seq=0)
    assert too_deep.found == set() and len(too_deep.calls) == 3


def test_a_result_the_request_answers_that_was_cut_on_arrival_is_read_whole_first() -> None:
    original = output(1, 9000)
    messages = [user("go"), call("a"), result("a", original)]
    compacted = [*messages[:2], result("a", truncate_middle(original, 2000, ref(original)))]
    reading = read_behind_refs([], compacted, Originals(messages), 3, 20_000, seq=0)
    assert reading.refs == [ref(original)]
    # An older cut result the next request does not answer is not read unless a value in it is needed.
    later = [*compacted, assistant("done"), user("and now?")]
    assert read_behind_refs([], later, Originals([*messages, *later[3:]]), 3, 20_000, seq=0).calls == []


def test_a_pointer_to_a_copy_shown_above_is_not_read() -> None:
    original = output(1, 9000)
    messages = [user("go"), call("a"), result("a", original), call("b"), result("b", original)]
    pointer = [*messages[:4], result("b", same_as("a", original, ref(original)))]
    assert read_behind_refs([], pointer, Originals(messages), 3, 20_000, seq=0).calls == []
    # Also when the copy shown was rewritten losslessly (minify): its text is no longer the original's.
    minified = [*messages[:2], result("a", original.replace("\n", " ")), *pointer[3:]]
    assert read_behind_refs([], minified, Originals(messages), 3, 20_000, seq=0).calls == []
    # With the copy masked too, the newest result is read.
    both = [*messages[:2], result("a", masked(original)), pointer[3], pointer[4]]
    assert read_behind_refs([], both, Originals(messages), 3, 20_000, seq=0).refs == [ref(original)]


def test_other_tools_on_a_request_cache_nothing_of_it() -> None:
    cache = ConversationCache(MessageTokens(Encodings().get("o200k_base")), tools_tokens=100)
    messages = [user(output(0, 20_000))]
    cache.request(messages)
    assert cache.request([*messages, assistant("a")]).cached > 0
    changed = cache.request([*messages, assistant("a"), user("b")], tools_tokens=180)
    assert changed.cached == 0 and changed.prompt > 180
    assert cache.request([*messages, assistant("a"), user("b"), assistant("c")], tools_tokens=180).cached > 0
