"""What one request's expand rounds may add, and the answer a round's calls get within it.

A model (a buggy one, or one steered by text in a tool result) may call the expand tool thousands of times in one
answer, and every round is one more upstream request carrying all that came before. So a round costs what an
honest one does: at most expand_max_calls calls are answered, the same call twice in a round once (the others are
left out of the round, as if never made, so calls and results stay paired); the results of one request's rounds
add up to at most expand_max_request_chars characters; a call the request has answered already gets a pointer
to that answer, not the original again; and no result is given that would take the prompt past the model's
limit (the window less the answer's reserve and the safety margin, strategies.budget.default_total): an original
larger than what is free comes as its first lines that fit, with the note saying which lines and where to read on
(strategies.refs.expand's parts), and where not even a few hundred characters fit, the call gets a tool error
saying how much fits, so the model goes on without it.

Only a round whose every call was answered whole from the originals is remembered (app.expansion.memory): a
later request makes those results again from its own messages, byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.expansion import Expansion
from app.expansion.rounds import call_id, tool_results
from app.wire.base import ModelCall
from strategies import Message
from strategies.budget import default_total
from strategies.refs import ExpandCall, expand

# A model's arguments for one expand call are a few dozen bytes; more is not read.
MAX_ARGUMENTS = 4096
# An original larger than the room left in the window comes in the first lines that fit, if at least this many
# characters do (less is no use to read: the tool error says how much fits instead); sized in at most PART_TRIES.
MIN_PART_CHARS = 200
PART_TRIES = 4
# About what a short answer (a pointer to an earlier expansion, a tool error) and its share of a round's assistant
# turn cost: a part leaves this much per call of a round free for them.
SHORT_ANSWER_TOKENS = 40


@dataclass(frozen=True)
class Answered:
    """One round as answered: the messages to append (the calls kept and their results) and what happened."""

    messages: list[Message]
    calls: tuple[tuple[str, str], ...]  # (call id, arguments) of the calls kept
    remembered: bool  # every call answered whole from the originals
    resolved: int  # calls answered with the original
    unresolved: int  # calls answered with an error: bad arguments, or a ref the request does not hold
    refused: int  # calls answered with a bound's error (the request's characters, the model's window) or a part
    repeated: int  # calls answered with a pointer to this request's earlier answer
    left_out: int  # calls past expand_max_calls, or made twice in the round


class Allowance:
    """The bounds of one request's rounds; `tokens`: the prompt's size so far, in the model's tokens."""

    def __init__(self, expansion: Expansion, *, max_calls: int, max_chars: int, request_chars: int) -> None:
        self.expansion = expansion
        self.max_calls = max_calls
        self.max_chars = max_chars
        self.chars_left = request_chars
        ctx = expansion.ctx
        self.limit = default_total(ctx)
        self.tokens = ctx.count_request(expansion.forwarded)
        self.answered: set[str] = set()  # arguments answered whole in this request
        self.calls_made = 0

    def answer(self, calls: Sequence[ModelCall], turn: Callable[[Sequence[tuple[str, str]]], Message]) -> Answered:
        """The round for these calls (the model's ids and raw arguments), within what is left; turn: the round's
        assistant message for the calls kept (ExpandRound.turn).
        """
        kept: list[tuple[str, str, ExpandCall | str]] = []
        seen: set[str] = set()
        left_out = 0
        for model_id, raw in calls:
            if len(kept) >= self.max_calls:  # the rest are left out unread
                left_out += 1
                continue
            call = ExpandCall.parse(raw[:MAX_ARGUMENTS])
            arguments = raw[:MAX_ARGUMENTS] if isinstance(call, str) else call.arguments()
            if arguments in seen:
                left_out += 1
                continue
            seen.add(arguments)
            ref = "invalid" if isinstance(call, str) else call.ref
            kept.append((call_id(model_id, ref, self.calls_made), arguments, call))
            self.calls_made += 1
        pairs = tuple((cid, arguments) for cid, arguments, _ in kept)
        ctx = self.expansion.ctx
        # The calls' own message first: the results must fit beside it.
        assistant = turn(pairs)
        self.tokens += ctx.count_message(assistant)
        results: list[str] = []
        counts = {"resolved": 0, "unresolved": 0, "refused": 0, "repeated": 0}
        for cid, arguments, call in kept:
            text, outcome = self._result(cid, arguments, call)
            results.append(text)
            counts[outcome] += 1
        messages = [assistant, *tool_results(pairs, results)]
        remembered = counts["resolved"] == len(kept)
        return Answered(messages, pairs, remembered, left_out=left_out, **counts)

    def _result(self, cid: str, arguments: str, call: ExpandCall | str) -> tuple[str, str]:
        if isinstance(call, str):
            return self._fits(cid, call), "unresolved"
        if arguments in self.answered:
            return self._fits(cid, f'[ref="{call.ref}": expanded above in this conversation, as asked]'), "repeated"
        text = expand(self.expansion.originals, call, self.max_chars)  # an error text for a ref it does not hold
        if self.expansion.originals.resolve(call.ref) is None:
            return self._fits(cid, text), "unresolved"
        if len(text) > self.chars_left:
            error = (
                f"Error: the expansions of this request reached their limit (expand_max_request_chars); "
                f'ref="{call.ref}" was not expanded. Go on with what was expanded.'
            )
            return self._fits(cid, error), "refused"
        tokens = self._tokens(cid, text)
        free = self.limit - self.tokens
        if tokens > free:
            # What a part may take leaves room for a round's short answers (pointers, errors), which go in whatever
            # is left.
            part = self._part(cid, call, text, tokens, free - (self.max_calls + 1) * SHORT_ANSWER_TOKENS)
            if part is None:
                error = (
                    f'Error: ref="{call.ref}" as asked is about {tokens} tokens and {max(free, 0)} fit in the context '
                    f"now; ask for fewer lines (start_line, end_line), or go on without it."
                )
                return self._fits(cid, error), "refused"
            # Only what fits, with the note saying where to read on: a bound's answer, not remembered (a later
            # request's window may fit another part).
            text, tokens = part
            self.tokens += tokens
            self.chars_left -= len(text)
            return text, "refused"
        self.tokens += tokens
        self.chars_left -= len(text)
        self.answered.add(arguments)
        return text, "resolved"

    def _part(self, cid: str, call: ExpandCall, text: str, tokens: int, free: int) -> tuple[str, int] | None:
        """The first lines asked for that fit in `free` tokens (expand's own parts, with their note), and their tokens;
        None when not even MIN_PART_CHARS of them do. Sized by the text's own characters per token, then smaller
        until it fits (a few tries: each halves the overshoot at least).
        """
        chars = len(text) * free // max(tokens, 1)
        for _ in range(PART_TRIES):
            if chars < MIN_PART_CHARS:
                return None
            part = expand(self.expansion.originals, call, chars)
            part_tokens = self._tokens(cid, part)
            if part_tokens <= free:
                return part, part_tokens
            chars = chars * free // part_tokens * 9 // 10
        return None

    def _fits(self, cid: str, text: str) -> str:
        """A short result (an error, a pointer), counted against the window like any."""
        self.tokens += self._tokens(cid, text)
        return text

    def _tokens(self, cid: str, text: str) -> int:
        return self.expansion.ctx.count_message({"role": "tool", "tool_call_id": cid, "content": text})
