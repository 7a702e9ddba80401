"""mask past its limit: the order of degradation, so an agent over its window keeps its recent work and reaches
the rest (issue 26).

Mask's own rule, on every jump (`Inputs`: with mask's `inputs`, what the model wrote too): all tool results but the
newest `keep` become stubs with a ref; with inputs, also the long strings in those calls' arguments are cut head and
tail around a stub with a ref, and so is a long assistant text older than the turn of the oldest of the newest
`keep` calls (never the latest assistant turn, nor a pinned message, nor a text that quotes a ref, which would name
other content).

A request that would pass mask's limit is brought under a target (the limit less the room for growth) by the
least it takes, in this order, each step only while the request is still over:
1. mask's own rule;
2. the long strings in the arguments of those calls are cut head and tail around a stub with a ref (what the
   model wrote: whole files, long scripts), the arguments staying valid JSON;
3. fewer results whole: the newest but one, then the next, becomes a stub (and its arguments are cut), down to
   the newest result alone (the latest assistant turn's arguments stay as the model wrote them: that turn goes
   back whole in some wire formats, Anthropic's signed thinking);
4. the oldest units go whole (a call with all its results, pairs intact; older turns' messages), oldest first,
   never the newest call's unit (without calls, the latest assistant turn's) nor anything after it, and one
   message says what was left out, with the ref of an index of those calls (strategies.refs.left_out_ref) where
   the request can expand refs;
5. the newest result is cut head and tail with a ref, as much as it takes to fit the limit (a single result
   larger than the window); never to leave room.
Pinned messages (strategies.layout) are never touched. Deterministic; every count is of one message.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .base import Applied
from .context import Context
from .conversation import CallIndex, ToolPair, find_pairs, is_assistant, is_tool_result, message_text, with_arguments
from .conversation import with_message_text as with_text
from .layout import Layout, pinned_units, split_units
from .markers import elided, left_out, shorten_arguments, truncate_middle
from .messages import Message
from .refs import LeftOutRef, ordered_pairs, refs_in

# Characters an argument string keeps (head and tail) once its call's result is masked past the limit (or on every
# jump, with mask's inputs): a path or a command stays whole, a file's content goes.
ARGUMENT_CHARS = 100


@dataclass(frozen=True)
class Inputs:
    """What of the model's own writing mask's rule cuts besides the results: the long strings in the masked calls'
    arguments (to ARGUMENT_CHARS) and old assistant texts longer than `text_chars` (to text_chars, head and tail).
    """

    text_chars: int


@dataclass
class _Masking:
    """The messages as masked so far, and their prompt tokens."""

    messages: list[Message]
    ctx: Context
    out: list[Message] = field(init=False)
    tokens: int = field(init=False)
    calls: CallIndex = field(default_factory=CallIndex)
    stubbed: int = 0
    shortened: int = 0
    texts: int = 0

    def __post_init__(self) -> None:
        self.out = list(self.messages)
        self.tokens = self.ctx.count_request(self.messages)
        # The latest assistant turn goes back as the model wrote it in some wire formats (Anthropic's signed
        # thinking), so its calls' arguments are never shortened: that would not take.
        self.latest = max((i for i, m in enumerate(self.messages) if is_assistant(m)), default=-1)
        self._shortened: set[tuple[int, str | None]] = set()
        self._texts_from = 0  # the assistant texts before this were considered by cut_texts already
        self._pinned: set[int] | None = None

    def replace(self, index: int, message: Message) -> None:
        count = self.ctx.count_message
        self.tokens += count(message) - count(self.out[index])
        self.out[index] = message

    def stub(self, pairs: list[ToolPair]) -> None:
        """Each pair's result a stub with its ref, where that is shorter."""
        for pair in pairs:
            self.ctx.checkpoint()
            result = self.messages[pair.result_index]
            text = message_text(result)
            stub = elided(self.calls.name(self.messages[pair.call_index], pair.call_id), text, self.ctx.ref_for(text))
            if len(stub) < len(text) and self.out[pair.result_index] is result:
                self.replace(pair.result_index, with_text(result, stub))
                self.stubbed += 1

    def shorten(self, pairs: list[ToolPair], size: int = ARGUMENT_CHARS) -> None:
        """The long strings of these calls' arguments cut to `size` characters: each message rebuilt once."""
        by_message: dict[int, dict[str | None, str]] = {}
        for pair in pairs:
            self.ctx.checkpoint()
            key = (pair.call_index, pair.call_id)
            arguments = self.calls.arguments(self.messages[pair.call_index], pair.call_id)
            if arguments is None or pair.call_index == self.latest or key in self._shortened:
                continue
            self._shortened.add(key)  # step 2 and 3 come back to calls step 1 shortened with inputs
            new = shorten_arguments(arguments, size, self.ctx.ref_for)
            if new != arguments:
                by_message.setdefault(pair.call_index, {})[pair.call_id] = new
        for index, changed in by_message.items():
            self.replace(index, with_arguments(self.out[index], changed))
            self.shortened += len(changed)

    def cut_texts(self, before: int, size: int) -> None:
        """The assistant texts before message `before` longer than `size` cut head and tail around a stub with a ref:
        not the latest assistant turn, no pinned message, no text holding a ref (the model quoting a stub: its ref
        would name that stub's content, not this text). Each message is considered once, so moving `before` on costs
        only the messages it passes.
        """
        if self._pinned is None:
            units = split_units(self.messages)
            self._pinned = {i for position in pinned_units(self.messages, units) for i in units[position].indices}
        start, end = self._texts_from, min(before, self.latest)
        self._texts_from = max(start, end)
        for index in range(start, end):
            message = self.messages[index]
            if not is_assistant(message) or index in self._pinned:
                continue
            self.ctx.checkpoint()
            text = message_text(message)
            if len(text) <= size or refs_in(text):
                continue
            shortened = truncate_middle(text, size, self.ctx.ref_for(text))
            if shortened != text:
                self.replace(index, with_text(self.out[index], shortened))
                self.texts += 1

    def mask_inputs(self, pairs: list[ToolPair], whole: int, inputs: Inputs, kept_from: list[int]) -> None:
        """With mask's inputs: the long argument strings of the calls whose results are masked, and the assistant texts
        before the turn of the oldest call kept whole (kept_from[i]: the first message of pairs[i:]'s calls).
        """
        self.shorten(pairs[: len(pairs) - whole])
        self.cut_texts(kept_from[len(pairs) - whole], inputs.text_chars)


def fit_masked(
    messages: list[Message], ctx: Context, keep: int, limit: int, target: int, inputs: Inputs | None = None
) -> Applied:
    """Step 1; then, if that leaves the request over `limit` prompt tokens, the messages brought under `target`
    in the order above (as far as the pinned ones allow).
    """
    pairs = find_pairs(messages)
    work = _Masking(messages, ctx)
    whole = min(keep, len(pairs))
    work.stub(pairs[: len(pairs) - whole])
    kept_from = _kept_from(pairs, len(messages))
    if inputs is not None and whole < len(pairs):  # a conversation with no result masked is left as it came
        work.mask_inputs(pairs, whole, inputs, kept_from)
    if work.tokens <= limit:
        return Applied(work.out, _rule_details(work, inputs))
    work.shorten(pairs[: len(pairs) - whole])
    while work.tokens > target and whole > 1:
        whole -= 1
        newly = [pairs[len(pairs) - whole - 1]]
        work.stub(newly)
        work.shorten(newly)
        if inputs is not None:
            work.cut_texts(kept_from[len(pairs) - whole], inputs.text_chars)
    details: dict[str, Any] = {"target": target, "whole": whole, **_rule_details(work, inputs)}
    out = work.out
    if work.tokens > target:
        out, left = _leave_out(work, pairs, limit, target)
        details.update(left)
    details["arguments_shortened"] = work.shortened
    return Applied(out, details)


def _kept_from(pairs: list[ToolPair], end: int) -> list[int]:
    """For each i, the first message making one of the calls of pairs[i:] (`end` for none): what stays as the model
    wrote it while those results are whole.
    """
    firsts = [end] * (len(pairs) + 1)
    for i in range(len(pairs) - 1, -1, -1):
        firsts[i] = min(firsts[i + 1], pairs[i].call_index)
    return firsts


def _rule_details(work: _Masking, inputs: Inputs | None) -> dict[str, Any]:
    if inputs is None:
        return {"masked": work.stubbed}
    return {"masked": work.stubbed, "arguments_shortened": work.shortened, "texts_cut": work.texts}


def _leave_out(work: _Masking, pairs: list[ToolPair], limit: int, target: int) -> tuple[list[Message], dict[str, Any]]:
    """Step 4 down to `target`, then step 5 if that is not enough, down to `limit` only: the newest result is not cut
    to make room for growth.
    """
    ctx = work.ctx
    layout = Layout.of(work.out, ctx)
    # Never the newest call's unit nor what follows it; without calls, never the latest assistant turn (some wire
    # formats send it back whole whatever the chain did).
    last = pairs[-1].call_index if pairs else work.latest
    newest = layout.unit_of()[last] if last >= 0 else len(layout.units)
    removable = [p for p in layout.removable if p < newest]
    left = _LeftOut(work)
    tokens, marker_tokens = work.tokens, 0
    for position in removable:
        if tokens + marker_tokens <= target:
            break
        ctx.checkpoint()
        tokens -= layout.tokens[position]
        left.add(layout.units[position].indices)
        marker_tokens = ctx.count_message(left.marker())
    tokens += marker_tokens
    details: dict[str, Any] = {"left_out_units": left.units, "left_out_messages": len(left.gone)}
    if tokens > limit and pairs:
        tokens = _cut_newest(work, pairs[-1], tokens, limit)
        details["newest_cut"] = True
    details["overflow"] = tokens > limit
    if not left.gone:
        return work.out, details
    out = [m for i, m in enumerate(work.out) if i not in left.gone]
    first = min(left.gone)
    out.insert(sum(1 for i in range(first) if i not in left.gone), left.marker())
    return out, details


class _LeftOut:
    """The units left out so far, oldest first, and what the message in their place says of them: the calls of each
    tool, the other messages, the characters, and the ref of the index of their calls (strategies.refs).
    """

    def __init__(self, work: _Masking) -> None:
        self.work = work
        self.by_call: dict[int, list[ToolPair]] = {}
        for pair in ordered_pairs(work.messages):
            self.by_call.setdefault(pair.call_index, []).append(pair)
        self.gone: set[int] = set()
        self.units = self.others = self.chars = 0
        self.tools: Counter[str] = Counter()
        self.refs = LeftOutRef()

    def add(self, indices: tuple[int, ...]) -> None:
        messages, ctx, calls = self.work.messages, self.work.ctx, self.work.calls
        self.units += 1
        self.gone.update(indices)
        for index in indices:
            message = messages[index]
            self.chars += len(message_text(message))
            made = self.by_call.get(index, [])
            for pair in made:
                self.tools[calls.name(message, pair.call_id)] += 1
                self.chars += len(calls.arguments(message, pair.call_id) or "")
                self.refs.add(ctx.ref_for(message_text(messages[pair.result_index])) or "")
            self.others += not made and not is_tool_result(message)

    def marker(self) -> Message:
        tools = dict(sorted(self.tools.items(), key=lambda item: (-item[1], item[0])))
        ref = self.refs.ref() if self.work.ctx.expandable and self.tools else None
        return {"role": "user", "content": left_out(tools, self.others, self.chars, ref)}


def _cut_newest(work: _Masking, pair: ToolPair, tokens: int, target: int) -> int:
    """Step 5: the newest result cut head and tail, to the most that fits (found by halving); returns the request's
    tokens after.
    """
    ctx = work.ctx
    result = work.messages[pair.result_index]
    if tokens <= target or work.out[pair.result_index] is not result:
        return tokens
    text = message_text(result)
    ref = ctx.ref_for(text)
    base = tokens - ctx.count_message(result)

    def cut(size: int) -> Message:
        return with_text(result, truncate_middle(text, size, ref))

    lo, hi = 0, len(text)
    while lo < hi:  # the largest size that fits
        ctx.checkpoint()
        mid = (lo + hi + 1) // 2
        if base + ctx.count_message(cut(mid)) <= target:
            lo = mid
        else:
            hi = mid - 1
    new = cut(lo)
    work.replace(pair.result_index, new)
    return base + ctx.count_message(new)
