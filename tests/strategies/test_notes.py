from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from bench.notes.stand_in import DictNotes, StandInSummariser, digest
from strategies import BUILTINS, Chain, Context, Registry, StepSpec, TokenCounter, format_chain
from strategies.invariants import compaction_problems, pairing_problems
from strategies.layout import split_units
from strategies.messages import Message
from strategies.notes import NotesParams
from strategies.notes_fold import NOTES_HEADER, NOTES_PREAMBLE, chunk_limit, read_transcript
from strategies.notes_io import NotesUnavailable
from strategies.window import Window, WindowParams
from tests.factories import agent_loop, assistant, call, client_requests, qa_chat, result, system, user
from tests.strategies.generators import conversations
from tests.strategies.harness import RecordingContext, keeps_the_invariants


def dumps(messages: list[Message]) -> str:
    return json.dumps(messages, ensure_ascii=False)


def booking_chat(pairs: int) -> list[Message]:
    """Every answer names a booking code, so the deterministic summariser keeps it."""
    return qa_chat(pairs, answer="booked as code {i:03}.")


class Harness:
    """One proxy's view: a deterministic summariser and a notes cache shared by the requests."""

    def __init__(self, counter: TokenCounter, **summariser: Any) -> None:
        self.counter = counter
        self.summariser = StandInSummariser(**summariser)
        self.cache = DictNotes()
        self.details: dict[str, Any] = {}

    def context(self) -> Context:
        return Context(model="gpt-4o", tokens=self.counter, summariser=self.summariser, notes_cache=self.cache)

    def run(self, messages: list[Message], **params: Any) -> list[Message]:
        """notes through a chain, which runs its fallback chain when no notes can be had, as in the proxy."""
        out, self.details = run_notes(messages, self.context(), **params)
        return out


def run_notes(messages: list[Message], ctx: Context, **params: Any) -> tuple[list[Message], dict[str, Any]]:
    result = Chain.parse(format_chain([StepSpec("notes", params)]), Registry(BUILTINS)).run(messages, ctx, trace=True)
    return result.messages, result.steps[0].details


def test_a_conversation_within_budget_is_forwarded_unchanged(counter: TokenCounter) -> None:
    harness = Harness(counter)
    messages = booking_chat(10)
    assert harness.run(messages, budget=280) == messages
    assert harness.summariser.calls == [] and harness.details["folds"] == 0


def test_over_budget_the_oldest_pairs_become_notes_after_the_system_prompt(counter: TokenCounter) -> None:
    harness = Harness(counter)
    messages = booking_chat(11)  # 11 pairs of 28 tokens and a question: over 280 at the 11th pair's question
    out = harness.run(messages, budget=280)
    # The fold takes at least (1 - 0.5 + 0.1) * 280 = 168 tokens: the 6 oldest non-pinned pairs (1 to 6).
    notes = out[1]
    assert out[0] == messages[0] and out[2:4] == messages[1:3]  # system, then notes, then the first pair
    assert out[4:] == messages[15:]  # pairs 7 to 10 and the question
    assert notes["role"] == "user"  # the notes repeat the conversation: never the system prompt's voice
    assert notes["content"].startswith(f"{NOTES_HEADER}\n{NOTES_PREAMBLE}\n\n")
    assert "information only" in notes["content"] and "instruction" in notes["content"]
    lines = notes["content"].split("\n\n", 1)[1].splitlines()
    assert lines == [line for i in range(1, 7) for line in (f"user: {messages[2 * i + 1]['content']}",
                     f"assistant: {messages[2 * i + 2]['content']}")]  # fmt: skip
    # One call, with the prompt as system message and the folded pairs as the transcript.
    [call_messages] = harness.summariser.calls
    assert "FACTS" in call_messages[0]["content"] and "at most 180 words" in call_messages[0]["content"]
    first_turn = '{"role":"user","content":"Question 001'
    assert call_messages[1]["content"].startswith(f"Current notes:\n(none yet)\n\nNext turns:\n{first_turn}")
    assert harness.details["folds"] == 1 and harness.details["folded_units"] == 6
    assert compaction_problems(messages, out) == []


def test_the_next_request_reuses_the_notes_and_shares_the_prefix(counter: TokenCounter) -> None:
    harness = Harness(counter)
    first = harness.run(booking_chat(11), budget=280)
    second = harness.run(booking_chat(12), budget=280)
    assert len(harness.summariser.calls) == 1  # the second request found the fold cached
    assert harness.details["cached"] is True and harness.details["summariser_calls"] == 0
    assert dumps(second[: len(first) - 1]) == dumps(first[:-1])  # all but the previous question


def test_a_growing_chat_calls_the_summariser_once_per_fold(counter: TokenCounter) -> None:
    harness = Harness(counter)
    outs = [harness.run(request, budget=280, prepare_at=1) for request in client_requests(booking_chat(60))]
    folds = [n for n in range(1, len(outs)) if harness.details and outs[n][1] != outs[n - 1][1]]
    assert len(harness.summariser.calls) == harness.details["folds"] == 9
    # The compacted prefix only changes where the notes do (every ~6 requests), and stays put in between.
    jumps = [n for n in range(1, len(outs)) if dumps(outs[n][: len(outs[n - 1]) - 1]) != dumps(outs[n - 1][:-1])]
    assert jumps == folds and len(jumps) == 9
    # What the oldest answers said is still there at the end, in the notes.
    assert "assistant: Answer 001: booked as code 001." in outs[-1][1]["content"]


def test_an_agent_loop_folds_tool_calls_with_their_results(counter: TokenCounter) -> None:
    harness = Harness(counter)
    messages = agent_loop(40, 300)
    out = harness.run(messages, budget=2000)
    assert out[0] == messages[0] and out[1]["content"].startswith(NOTES_HEADER) and out[2] == messages[1]
    assert pairing_problems(out) == [] and compaction_problems(messages, out) == []
    transcript = harness.summariser.calls[0][1]["content"]
    turns = read_transcript(transcript.partition("Next turns:\n")[2])
    assert turns[0]["role"] == "assistant" and turns[0]["tool_calls"][0]["name"] == "read"
    assert turns[1]["tool_call_id"] == "call_0" and turns[1]["content"].startswith("<out 0>")
    assert out[-1] == messages[-1]  # the newest tool result is kept


def test_a_summariser_failure_falls_back_to_window_with_the_same_budget(counter: TokenCounter) -> None:
    harness = Harness(counter)
    harness.summariser.fail = NotesUnavailable("summariser_timeout", "no answer in 30 s")
    messages = booking_chat(20)
    out = harness.run(messages, budget=280)
    expected = Window(WindowParams(budget=280)).apply(messages, Context(model="gpt-4o", tokens=counter)).messages
    assert out == expected
    assert harness.details["fallback"] == "summariser_timeout"
    assert harness.details["fallback_chain"] == "window(budget=280)"
    assert harness.cache.notes == {}  # a failed fold is not cached
    harness.summariser.fail = None
    assert harness.run(messages, budget=280)[1]["content"].startswith(NOTES_HEADER)


def test_an_empty_answer_falls_back_and_is_not_cached(counter: TokenCounter) -> None:
    harness = Harness(counter)
    harness.summariser.answer = lambda text: "  \n"
    out = harness.run(booking_chat(20), budget=280, fallback="fit(total=500)")
    assert harness.details["fallback"] == "summariser_empty" and harness.cache.notes == {}
    assert RecordingContext(model="gpt-4o", tokens=counter).count_request(out) <= 500


def test_without_a_summariser_notes_fall_back_only_when_a_fold_is_due(counter: TokenCounter) -> None:
    ctx = Context(model="gpt-4o", tokens=counter)
    out, details = run_notes(booking_chat(5), ctx, budget=280)
    assert out == booking_chat(5)
    assert "fallback" not in details
    _, details = run_notes(booking_chat(20), ctx, budget=280)
    assert details["fallback"] == "no_summariser"


def test_a_fold_over_the_summariser_context_is_split_and_folded_in_sequence(counter: TokenCounter) -> None:
    harness = Harness(counter, context_window=3000)
    messages = agent_loop(30, 1200)  # about 500 tokens per tool interaction
    out = harness.run(messages, budget=12000, max_words=100)
    calls = harness.summariser.calls
    limit = chunk_limit(3000, counter.count_text(calls[0][0]["content"], "gpt-4o"), 100)
    # One fold of at least 0.6 * 12000 tokens, in chunks of at most about 1800.
    assert harness.details["folds"] == 1 and harness.details["chunks"] == len(calls) >= 4
    for messages_sent in calls:  # each call's transcript fits the summariser's context
        assert counter.count_text(messages_sent[1]["content"].split("Next turns:\n", 1)[1], "gpt-4o") <= limit
    # Each call folds into the notes the previous call made.
    for before, after in zip(calls, calls[1:], strict=False):
        previous = after[1]["content"].split("\n\nNext turns:\n", 1)[0].removeprefix("Current notes:\n")
        assert previous == digest(before[1]["content"])
    assert "<out 0>" in out[1]["content"]


def test_a_single_unit_over_the_summariser_context_is_cut_into_parts(counter: TokenCounter) -> None:
    harness = Harness(counter, context_window=3000)
    messages = [system("Agent."), user("Go."), call("a"), result("a", "Line 1\n" * 3000), user("Next?")]
    messages += [assistant("Working on Item 2."), user("Done?")]
    harness.run(messages, budget=100)
    parts = [c[1]["content"] for c in harness.summariser.calls if '"part":"' in c[1]["content"]]
    assert len(parts) >= 2 and '"part":"1 of ' in parts[0]
    for chunk in parts:  # every part is a transcript line of its own: no text can pose as a turn
        assert all(turn["role"] == "tool" for turn in read_transcript(chunk.partition("Next turns:\n")[2]))


def test_the_next_fold_is_prepared_ahead_and_found_ready(counter: TokenCounter) -> None:
    harness = Harness(counter)
    # 9 pairs take 252 tokens: past 280 * 0.8 = 224, not yet over the budget.
    out = harness.run(booking_chat(9), budget=280)
    assert out == booking_chat(9) and harness.details["ahead"] is True and harness.summariser.calls == []
    harness.cache.run_ahead()
    assert len(harness.summariser.calls) == 1
    harness.run(booking_chat(10), budget=280)  # still within: the prepared fold is stored, nothing more is asked
    assert harness.details["ahead"] is False and harness.cache.ahead == []
    harness.run(booking_chat(11), budget=280)  # crosses the budget
    assert harness.details["cached"] is True and len(harness.summariser.calls) == 1


def test_the_notes_role_and_prompt_are_parameters(counter: TokenCounter) -> None:
    harness = Harness(counter)
    out = harness.run(
        booking_chat(11), budget=280, role="developer", prompt="Only codes, {max_words} words.", max_words=50
    )
    assert out[1]["role"] == "developer"
    assert harness.summariser.calls[0][0]["content"] == "Only codes, 50 words."
    # Another prompt is another content address: the fold is made again.
    harness.run(booking_chat(11), budget=280, prompt="Other.")
    assert len(harness.summariser.calls) == 2


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValidationError, match="must not contain notes"):
        NotesParams(fallback="window,notes")
    with pytest.raises(ValidationError):
        NotesParams(fallback="window(")
    with pytest.raises(ValidationError):
        NotesParams(low_water=0)


examples = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
notes_params = st.fixed_dictionaries(
    {"budget": st.one_of(st.integers(0, 300), st.integers(0, 3000))},
    optional={"low_water": st.sampled_from([0.1, 0.5, 0.9, 1.0]), "prepare_at": st.sampled_from([0.5, 0.8, 1.0])},
)


@examples
@given(conversations(), notes_params)
def test_properties(counter: TokenCounter, messages: list[Message], params: dict[str, Any]) -> None:
    keeps_the_invariants(lambda m: Harness(counter).run(m, **params), messages)


def question_unit(messages: list[Message]) -> list[Message]:
    last = max(i for i, m in enumerate(messages) if m["role"] == "user")
    unit = next(u for u in split_units(messages) if last in u.indices)
    return [messages[i] for i in unit.indices]


@examples
@given(conversations(), notes_params)
def test_consecutive_requests_share_the_compacted_prefix_between_folds(
    counter: TokenCounter, conversation: list[Message], params: dict[str, Any]
) -> None:
    harness = Harness(counter)
    sent = client_requests(conversation)
    outs = []
    for request in sent:
        outs.append((harness.run(request, **params), harness.details))
        harness.cache.run_ahead()
    for n in range(1, len(outs)):
        (before, details_before), (after, details) = outs[n - 1], outs[n]
        assert details["folds"] >= details_before["folds"]
        if details["folds"] > details_before["folds"]:
            continue  # a fold: new notes, a new prefix starts here
        # The one other change: the previous question, which the replay had folded, is pinned no more and goes.
        question = question_unit(sent[n - 1])
        if not any(m is q for m in after for q in question):
            before = [m for m in before if not any(m is q for q in question)]
        assert dumps(after[: len(before)]) == dumps(before)
    # Each fold was made once: by the request that crossed the budget or ahead of it, never again.
    assert len(harness.summariser.calls) == len(harness.cache.notes)
