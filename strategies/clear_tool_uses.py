"""Anthropic's clear_tool_uses context edit on any upstream: past a token trigger, old tool results become
placeholders. What to clear is decided by walking the conversation from its start, so nothing is stored between
requests and the requests of a growing conversation share their compacted prefix until the next clearing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from .base import Applied, Params, Strategy
from .context import Context
from .conversation import (
    CallIndex,
    ToolPair,
    find_pairs,
    is_assistant,
    message_text,
    with_arguments,
    with_message_text,
)
from .markers import elided
from .messages import Message

# The smallest valid JSON object: OpenAI expects the arguments to parse as one.
ARGUMENTS_STUB = "{}"


def provider_clears(request: Mapping[str, Any]) -> bool:
    """Whether the request asks the provider to clear old tool uses itself: an Anthropic context_management edit
    of type clear_tool_uses_*.
    """
    management = request.get("context_management")
    edits = management.get("edits") if isinstance(management, dict) else None
    return isinstance(edits, list) and any(
        isinstance(e, dict) and str(e.get("type", "")).startswith("clear_tool_uses") for e in edits
    )


class ClearToolUsesParams(Params):
    trigger: int = Field(
        100_000, ge=0, description="Prompt tokens (messages plus tool definitions) above which clearing starts."
    )
    keep: int = Field(3, ge=0, description="Newest tool uses (call and result) that are never cleared.")
    clear_at_least: int = Field(
        0, ge=0, description="Tokens a clearing must free; a smaller clearing is not done (yet)."
    )
    exclude_tools: tuple[str, ...] = Field((), description="Tool names whose uses are never cleared.")
    clear_tool_inputs: bool | tuple[str, ...] = Field(
        False,
        description="Also replace the arguments of cleared calls by {}: true for every tool, or a list of tool names.",
    )


@dataclass
class _Inputs:
    """The calls of one assistant message whose arguments are stubbed, cleared already or pending, with what their
    stubs change in the message's count before calibration (TokenCounter.count_call). So the message as cleared so
    far, or with the pending stubs too, is counted without being built (Context.count_message_with); it is built
    once, at the end. Building and counting it anew for each of its n parallel calls cost O(n^2) (issue 23).
    """

    cleared: list[str | None] = field(default_factory=list)
    cleared_change: int = 0
    pending: list[str | None] = field(default_factory=list)
    pending_change: int = 0


class _Clearing:
    """The clearing decisions of every earlier request of this conversation, remade in one walk.

    Tool uses leave the keep window one by one as newer results arrive; an eligible one that would save
    tokens joins `pending` with its gain. At each checkpoint (after a tool result, before an assistant
    message, i.e. where an earlier request ended, and at the end) the running prompt total, with the
    clearing so far applied, is compared with the trigger; past it, all pending uses are cleared at once if
    together they free clear_at_least tokens. Every count is of one message (cached by the TokenCounter), or
    of one call, so a conversation of n messages and calls costs O(n) counts, not O(n^2).
    """

    def __init__(self, messages: list[Message], ctx: Context, params: ClearToolUsesParams) -> None:
        self.messages = messages
        self.ctx = ctx
        self.params = params
        self.calls = CallIndex()
        self.out = list(messages)
        self.pending: list[tuple[ToolPair, Message]] = []  # uses to clear next, with their new result
        self.pending_gain = 0
        # Per assistant message whose call arguments are (or are about to be) stubbed, those calls; and the
        # messages with pending stubs, which the next clearing applies.
        self.inputs: dict[int, _Inputs] = {}
        self.pending_inputs: dict[int, _Inputs] = {}
        self.cleared = 0
        self.cleared_tokens = 0

    def run(self) -> list[Message]:
        pairs = find_pairs(self.messages)
        if not pairs:
            return self.out
        p = self.params
        use_at = {pair.result_index: n for n, pair in enumerate(pairs)}
        total = self.ctx.count_request([])  # reply priming and tool definitions
        leaving = 0  # the oldest tool use still inside the keep window
        last = len(self.messages) - 1
        # Every message this pass changes lies before the current index, so the originals are counted here.
        for index, message in enumerate(self.messages):
            self.ctx.checkpoint()
            total += self.ctx.count_message(message)
            n = use_at.get(index)
            if n is not None:
                while leaving <= n - p.keep:
                    self._consider(pairs[leaving])
                    leaving += 1
            elif index < last and not is_assistant(self.messages[index + 1]):
                continue  # no request ended here
            if total > p.trigger and self.pending and self.pending_gain >= p.clear_at_least:
                total -= self._clear()
        for at, inputs in self.inputs.items():
            if inputs.cleared:
                self.out[at] = with_arguments(self.messages[at], dict.fromkeys(inputs.cleared, ARGUMENTS_STUB))
        return self.out

    def _clears_inputs(self, name: str) -> bool:
        wanted = self.params.clear_tool_inputs
        return wanted if isinstance(wanted, bool) else name in wanted

    def _consider(self, pair: ToolPair) -> None:
        """Queue a tool use that left the keep window, unless it is excluded or clearing it saves nothing."""
        count = self.ctx.count_message
        call = self.messages[pair.call_index]
        name = self.calls.name(call, pair.call_id)
        if name in self.params.exclude_tools:
            return
        arguments = self.calls.arguments(call, pair.call_id)
        if not (self._clears_inputs(name) and arguments is not None and len(arguments) > len(ARGUMENTS_STUB)):
            arguments = None
        result = self.messages[pair.result_index]
        text = message_text(result)
        inputs = (arguments, self.ctx.ref_for(arguments)) if arguments is not None else None
        new_result = with_message_text(result, elided(name, text, self.ctx.ref_for(text), inputs))
        gain = count(result) - count(new_result)
        if arguments is None:
            if gain > 0:
                self._queue(pair, new_result, gain)
            return
        # Stubbing is measured on the whole assistant message, which may hold other (parallel) calls: what the
        # message with this stub and the pending ones saves, less what it saves with the pending ones alone. A call
        # of a message is paired once (find_pairs), so this one is not among them.
        at = pair.call_index
        stubs = self.inputs.get(at)
        if stubs is None:
            stubs = _Inputs()
        rewritten = self.calls.rewritten(call, pair.call_id, ARGUMENTS_STUB)
        change = sum(self.ctx.call_tokens(new) - self.ctx.call_tokens(old) for old, new in rewritten)
        with_pending = self.ctx.count_message_with(call, stubs.cleared_change + stubs.pending_change)
        gain += with_pending - self.ctx.count_message_with(call, stubs.cleared_change + stubs.pending_change + change)
        if gain > 0:
            stubs.pending.append(pair.call_id)
            stubs.pending_change += change
            self.inputs[at] = self.pending_inputs[at] = stubs
            self._queue(pair, new_result, gain)

    def _queue(self, pair: ToolPair, new_result: Message, gain: int) -> None:
        self.pending.append((pair, new_result))
        self.pending_gain += gain

    def _clear(self) -> int:
        """Apply every pending clearing; returns the tokens it freed."""
        for pair, new_result in self.pending:
            self.out[pair.result_index] = new_result
        for stubs in self.pending_inputs.values():
            stubs.cleared += stubs.pending
            stubs.cleared_change += stubs.pending_change
            stubs.pending, stubs.pending_change = [], 0
        gained = self.pending_gain
        self.cleared += len(self.pending)
        self.cleared_tokens += gained
        self.pending, self.pending_inputs, self.pending_gain = [], {}, 0
        return gained


class ClearToolUses(Strategy[ClearToolUsesParams]):
    """Once the prompt passes `trigger` tokens, the oldest tool results (all but the newest `keep` tool
    uses, and none of `exclude_tools`) become a placeholder naming the tool with the result's size and
    hash; the message keeps its role and tool_call_id. With clear_tool_inputs the call's arguments become
    `{}` (id and name kept). Decided oldest first, at every tool result and every earlier request, as if
    each had been compacted the same way, so the cleared set only grows, in steps of at least
    clear_at_least tokens, and requests in between share their compacted prefix: it clears in jumps of its
    own and needs no epochs.
    """

    name = "clear_tool_uses"
    reversible = True
    params_model = ClearToolUsesParams
    summary = "Past a token trigger, replace old tool results by placeholders (Anthropic's clear_tool_uses)."

    def apply(self, messages: list[Message], ctx: Context) -> Applied:
        if provider_clears(ctx.request):
            # The request asks the provider to clear tool uses itself (Anthropic's context_management): it will clear
            # what it sees; clearing first would only move its trigger and its cache boundary.
            return Applied(messages, {"cleared_tool_uses": 0, "cleared_tokens": 0, "provider_clears": True})
        clearing = _Clearing(messages, ctx, self.params)
        out = clearing.run()
        return Applied(out, {"cleared_tool_uses": clearing.cleared, "cleared_tokens": clearing.cleared_tokens})
