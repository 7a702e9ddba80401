"""Small windows in every wire format: an agent session sent request by request through the proxy's own path
(bench.compaction.wire_forms: parsed by the format, the default chain, settled, rendered) into windows of 2k, 8k and
32k tokens. Each request stays within the window, its pairs intact and its pinned messages as they came; the newest
result goes whole, the newest results are whole and the older ones stubs, and every result of the conversation is
still reachable: forwarded, or listed in the index the left-out stub's ref expands to.
"""

from __future__ import annotations

import re

import pytest

from bench.compaction.wire_forms import FORMS, Replayed, compact
from bench.compactor import compactor, shipped_settings
from strategies import Chain, Encodings, Message, Registry
from strategies.conversation import text_of
from strategies.invariants import compaction_problems, pairing_problems
from strategies.refs import refs_in
from strategies.replay import request_ends
from tests.factories import coding_session

MAX_TOKENS = 256
MARGIN_PERCENT = 2  # the safety margin every default total holds back (design.md)
LEFT_OUT = re.compile(r"left out to fit the context window; call compaction_expand with ref=\"(\w+)\"")


@pytest.fixture(scope="module")
def encodings() -> Encodings:
    return Encodings()


def results(messages: list[Message]) -> list[tuple[str, str]]:
    return [(m["tool_call_id"], text_of(m.get("content"))) for m in messages if m.get("role") == "tool"]


def left_out(replayed: Replayed) -> list[str]:
    """The calls the left-out stub's ref lists, resolved as the expand tool resolves it."""
    refs = [found.group(1) for m in replayed.result.messages if (found := LEFT_OUT.search(text_of(m.get("content"))))]
    if not refs:
        return []
    assert len(refs) == 1 and replayed.originals is not None
    index = replayed.originals.resolve(refs[0])
    assert index is not None
    return [line.split(" ", 1)[0] for line in index.split("\n")[1:-1]]


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("window", [2048, 8192, 32768])
def test_an_agent_session_keeps_its_newest_work_and_reaches_the_rest_within_the_window(
    encodings: Encodings, form: str, window: int
) -> None:
    settings = shipped_settings(models={"local-model": {"context_window": window, "max_output": 4096}})
    proxy = compactor(settings, encodings)
    chain = Chain.parse("minify,mask,window", Registry.with_plugins())
    session = coding_session(60)  # 75 results, about 40k tokens
    request = {"model": "local-model", "max_tokens": MAX_TOKENS}
    limit = window - MAX_TOKENS - window * MARGIN_PERCENT // 100
    ends = [end for end in request_ends(session) if session[end - 1]["role"] == "tool"]
    left_out_at_all = False
    for end in ends:
        sent = session[:end]
        replayed = compact(FORMS[form], proxy, chain, sent, request)
        out = replayed.result.messages
        assert replayed.problems == [], (end, replayed.problems)
        # The conversation as the chain saw it (a Messages body's view, with its system blocks).
        assert pairing_problems(out) == [] and compaction_problems(replayed.seen, out) == [], end
        assert replayed.result.tokens_after <= limit, end  # never over the window
        before, after = results(replayed.seen), results(out)
        assert after[-1] == before[-1], end  # the newest result, whole
        # Whole results are the newest ones: no stub comes after a whole result.
        stubbed = [bool(refs_in(text)) for _, text in after]
        assert stubbed == sorted(stubbed, reverse=True), end
        # Every result is forwarded or listed by the left-out stub's ref, the listed ones the oldest.
        listed = left_out(replayed)
        left_out_at_all |= bool(listed)
        assert listed + [call_id for call_id, _ in after] == [call_id for call_id, _ in before], end
    # 32k holds every result of the session as a stub; 2k and 8k do not, and leave out the oldest.
    assert left_out_at_all is (window < 32768)
