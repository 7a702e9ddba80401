"""The simulated agent's expand rounds: what a model does with a stub when what it needs lies behind it.

Two things make the agent expand. It reads in full what it just asked for: a tool result the request answers
(after the last assistant message) that a strategy cut on arrival is expanded first, for the newest results are
what the model reasons about now. And at a request that needs values (planted facts, and earlier values its next
call reuses), the replay hands over those not visible in the compacted request: for each, the agent looks for a
stub whose ref resolves to content holding the value and expands it. One call per round, reading on by line
ranges when the original comes in parts, at most expand_max_rounds rounds per request, as the proxy allows.
Each round is one more request to the provider (the request before it plus the round: mostly cached). The replay
remembers the rounds as the proxy does and shows them again at their place in the conversation's later requests
(app.expansion.rounds).

A real model may expand when it need not, or not when it should; this agent expands exactly then and never
otherwise. Its reachable share is an upper bound on a real model's; its rounds are a fair count for a model that
reads every new result whole and looks up only what it needs, the facts it needs being the probes the corpus
planted and the values its next call reused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.expansion.rounds import call_id
from app.settings import Settings
from strategies import Message
from strategies.conversation import is_assistant, is_tool_result, message_text, result_id
from strategies.markers import same_as_call
from strategies.refs import ExpandCall, Originals, expand, more_from, refs_in, stub_refs


def expand_limits() -> tuple[int, int]:
    """expand_max_rounds and expand_max_chars as the proxy ships them."""
    fields = Settings.model_fields
    rounds, chars = fields["expand_max_rounds"].default, fields["expand_max_chars"].default
    assert isinstance(rounds, int) and isinstance(chars, int)
    return rounds, chars


@dataclass
class Reading:
    """The rounds of one request: each one call (id, arguments), the values they brought back, the refs read."""

    calls: list[tuple[str, str]] = field(default_factory=list)
    found: set[str] = field(default_factory=set)
    refs: list[str] = field(default_factory=list)


def read_behind_refs(
    missing: list[str], compacted: list[Message], originals: Originals, max_rounds: int, max_chars: int, seq: int
) -> Reading:
    """The agent's rounds: the newest results cut on arrival, then the values it needs and cannot see; seq: calls
    made before in the conversation (their ids must stay distinct).
    """
    reading = Reading()

    def read(ref: str, until: str | None) -> None:
        """Expand ref part after part until `until` is found (None: to the end) or the rounds are used up."""
        start: int | None = None
        while len(reading.calls) < max_rounds:
            call = ExpandCall(ref, start_line=start)
            reading.calls.append((call_id(None, ref, seq + len(reading.calls)), call.arguments()))
            reading.refs.append(ref)
            text = expand(originals, call, max_chars)
            reading.found.update(v for v in missing if v in text)
            more = more_from(text)
            if (until is not None and until in reading.found) or more is None:
                return
            start = more

    for ref in _cut_newest(compacted):
        read(ref, None)
    refs = list(dict.fromkeys(stub_refs(compacted)))
    for value in missing:
        if value not in reading.found:
            holder = next((r for r in refs if value in (originals.resolve(r) or "")), None)
            if holder is not None:
                read(holder, value)
    return reading


def _cut_newest(compacted: list[Message]) -> list[str]:
    """The refs of the results this request answers (after the last assistant message) that were cut. A dedupe
    pointer to a copy the request shows whole (minified or not) is no cut: the model reads the copy.
    """
    last = max((i for i, m in enumerate(compacted) if is_assistant(m)), default=-1)
    whole = {result_id(m) for m in compacted if is_tool_result(m) and not refs_in(message_text(m))}
    cut = []
    for message in compacted[last + 1 :]:
        text = message_text(message)
        refs = refs_in(text) if is_tool_result(message) else []
        pointer = same_as_call(text)  # a dedupe pointer names the call whose result it repeats
        if refs and not (pointer is not None and pointer in whole):
            cut.append(refs[0])
    return cut
