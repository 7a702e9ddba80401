"""What the model can still see after compaction: planted facts, and the values its next tool call used.

- Fact survival (synthetic corpora): at the request that needs a planted fact, is its current value anywhere in
  the compacted request (text and call arguments, notes included once a strategy writes notes): "visible"? When
  it is not, is it behind a stub's ref (the simulated agent expands it: "reachable"), and is only an outdated
  value there ("stale": the model would answer with a superseded decision)?
- Argument recall (every corpus): the strings of at least 4 characters in the arguments of the tool calls the
  model made next that it can only have taken from earlier in the conversation, i.e. they occur in a message
  compaction may touch and in none it must keep (system, first and last user message). Share still visible in
  the compacted request. In tau-bench these are a real agent's calls (user ids, reservation numbers read from
  earlier results); in BFCL the ground truth's; in the synthetic agent, random picks among earlier paths.
- Quoted lines (every corpus): each line of at least 30 characters of the model's next message, its text or its
  calls' arguments, that occurs in such an earlier message, in none it must keep. A real coding agent quotes what it
  read (an edit's old lines, a traceback line in its reasoning) without reusing any argument whole; this is issue
  28's expansion rule: a quote it could only have taken from an elided message is a read behind a stub.
"""

from __future__ import annotations

from dataclasses import dataclass

from strategies import Message
from strategies.conversation import arguments_of, text_of
from strategies.invariants import pinned_indices

from .corpora import Conversation, Probe, json_strings, message_text

MIN_VALUE_CHARS = 4
MIN_QUOTE_CHARS = 30


@dataclass(frozen=True)
class Needs:
    """What one request of a conversation needs to see: planted facts and earlier values its answer reuses."""

    probes: tuple[Probe, ...]
    values: tuple[str, ...]


def conversation_needs(conversation: Conversation, ends: list[int]) -> dict[int, Needs]:
    """Per request end, what it needs (the same for every chain)."""
    messages = conversation.messages
    texts = [message_text(m) for m in messages]
    probes: dict[int, list[Probe]] = {}
    for probe in conversation.probes:
        probes.setdefault(probe.answer_at, []).append(probe)
    needs: dict[int, Needs] = {}
    for end in ends:
        values = _reused_values(messages, texts, end)
        if values or end in probes:
            needs[end] = Needs(tuple(probes.get(end, ())), tuple(values))
    return needs


def _reused_values(messages: list[Message], texts: list[str], end: int) -> list[str]:
    answer = messages[end]
    strings = [v for arguments in arguments_of(answer) for v in json_strings(arguments)]
    candidates = [v for v in strings if len(v.strip()) >= MIN_VALUE_CHARS]
    candidates += _quoted_lines([text_of(answer.get("content")), *strings])
    if not candidates:
        return []
    pinned = set(pinned_indices(messages[:end]))
    kept = [texts[i] for i in pinned]
    compactable = [texts[i] for i in reversed(range(end)) if i not in pinned]  # newest first: found sooner
    return [
        v
        for v in dict.fromkeys(candidates)
        if not any(v in text for text in kept) and any(v in text for text in compactable)
    ]


def _quoted_lines(texts: list[str]) -> list[str]:
    """The lines of the answer's text and of its calls' argument strings long enough to count as a quote."""
    lines = (line.strip() for text in texts for line in text.splitlines())
    return [line for line in lines if len(line) >= MIN_QUOTE_CHARS]


@dataclass
class Seen:
    """Needed values, visible in the compacted request, and reachable (visible, or behind a ref the simulated
    agent expands: bench.compaction.agent)."""

    facts: int = 0
    facts_visible: int = 0
    facts_reachable: int = 0
    facts_stale: int = 0
    values: int = 0
    values_visible: int = 0
    values_reachable: int = 0

    def check(self, needs: Needs, compacted: list[Message]) -> list[str]:
        """Count what the request sees; returns the needed values it does not (for the agent to look up)."""
        haystack = "\n".join(message_text(m) for m in compacted)
        missing: list[str] = []
        for probe in needs.probes:
            self.facts += 1
            if probe.value in haystack:
                self.facts_visible += 1
                self.facts_reachable += 1
            else:
                missing.append(probe.value)
                if any(old in haystack for old in probe.stale):
                    self.facts_stale += 1
        self.values += len(needs.values)
        for value in needs.values:
            if value in haystack:
                self.values_visible += 1
                self.values_reachable += 1
            else:
                missing.append(value)
        return missing

    def reached(self, needs: Needs, found: set[str]) -> None:
        """The missing values the agent's rounds brought back."""
        self.facts_reachable += sum(1 for probe in needs.probes if probe.value in found)
        self.values_reachable += sum(1 for value in needs.values if value in found)
