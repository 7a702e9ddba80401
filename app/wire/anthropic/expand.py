"""The expand tool in Anthropic's Messages API: a custom tool ({name, description, input_schema}) offered after the
client's own in `tools`, its tool_use blocks found in a whole answer (a stream's in wire.anthropic.stream), and the
one answer the client gets.

Offered as on chat completions: not when the client has a tool of that name (its calls are the client's), nor when
`tool_choice` names it (the client forces a tool it does not define: the API answers that request as it came).
`tool_choice` and `disable_parallel_tool_use` go as the client sent them: with `none` or a forced tool of the client's
the tool is in `tools` all the same (the same bytes as on the turns before) and the model cannot call it; with `any`
the model may call it as the tool it must use, and the answer the client gets still calls one of the client's tools,
since rounds go on until a call of the client's (or, past expand_max_rounds, a request without the tool).

A round is the proxy's when the model stopped to use tools (stop_reason `tool_use`) and called the expand tool alone.
The client's answer holds every block the model wrote in every round but the expand calls, in order: what it was
shown is what it keeps, and a later request shows the round again around it (wire.anthropic.rounds). Its
stop_reason is `end_turn` where a `tool_use` stop is left with no call of the client's; its usage is summed over the
rounds, and its id is the first round's, as in a stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from app.wire.anthropic.rounds import arguments, is_client_call, is_expand, round_turn, shown_handles, turn_again
from app.wire.anthropic.stream import StreamedRound
from app.wire.base import ExpandAnswer, ExpandStream, ModelCall, Parsed
from strategies import Message
from strategies.refs import EXPAND_DESCRIPTION, EXPAND_PARAMETERS, EXPAND_TOOL

TOOL: dict[str, Any] = {"name": EXPAND_TOOL, "description": EXPAND_DESCRIPTION, "input_schema": EXPAND_PARAMETERS}
# As the token counter prices tool definitions (wire.anthropic's parse does the same to the client's).
_COUNTED = {
    "type": "function",
    "function": {"name": EXPAND_TOOL, "description": EXPAND_DESCRIPTION, "parameters": EXPAND_PARAMETERS},
}


def add_usage(total: dict[str, Any] | None, usage: Any) -> dict[str, Any] | None:
    """Usage summed over rounds: every count (input, cache creation and reads, output, server tool uses) added, a
    count one round reports as null or leaves out taken as none, anything else (service_tier) the first round's.
    """
    if not isinstance(usage, dict):
        return total
    if total is None:
        return dict(usage)
    out = dict(total)
    for key, value in usage.items():
        mine = out.get(key)
        if _count(value) and _count(mine):
            out[key] = mine + value
        elif isinstance(value, dict) and isinstance(mine, dict):
            out[key] = add_usage(mine, value)
        elif mine is None:
            out[key] = value
    return out


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass
class Answer:
    """One round's whole answer, read; before: what the client was shown of the rounds before it."""

    body: dict[str, Any]
    before: list[Any] = field(default_factory=list)
    first_id: Any = None

    def _blocks(self) -> list[Any]:
        content = self.body.get("content")
        return list(content) if isinstance(content, list) else []

    def expand_calls(self) -> list[ModelCall]:
        if self.body.get("stop_reason") != "tool_use":
            return []  # cut off (max_tokens) or ended: no call of this answer is the proxy's to answer
        return [(b.get("id"), arguments(b)) for b in self._blocks() if is_expand(b)]

    def other_calls(self) -> bool:
        return any(is_client_call(b) for b in self._blocks())

    def turn(self, kept: Sequence[tuple[str, str]]) -> Message:
        return round_turn(self._blocks(), kept)

    def handles(self, kept: Sequence[tuple[str, str]]) -> tuple[str, ...]:
        return shown_handles(self._blocks(), kept)

    def visible(self) -> list[Any]:
        """What the client is shown of this round: every block but the expand calls."""
        return [*self.before, *(b for b in self._blocks() if not is_expand(b))]

    def for_client(self, usage: dict[str, Any] | None) -> dict[str, Any]:
        body = dict(self.body)
        blocks = self._blocks()
        dropped = any(is_expand(b) for b in blocks)
        if dropped or self.before:
            body["content"] = self.visible()
        if dropped and body.get("stop_reason") == "tool_use" and not self.other_calls():
            body["stop_reason"] = "end_turn"
        if self.first_id is not None:
            body["id"] = self.first_id
        if usage is not None:
            body["usage"] = usage
        return body


class MessagesExpandTool:
    """The expand tool as the Messages API carries it (wire.base.ExpandTool)."""

    definition = TOOL

    def offer(self, parsed: Parsed) -> Parsed | None:
        body = parsed.body
        tools = body.get("tools")
        if not isinstance(tools, list | None):
            return None  # forwarded as sent, for the API to refuse
        if any(isinstance(t, dict) and t.get("name") == EXPAND_TOOL for t in tools or ()):
            return None
        choice = body.get("tool_choice")
        if isinstance(choice, dict) and choice.get("name") == EXPAND_TOOL:
            return None
        offered = {**body, "tools": [*(tools or ()), TOOL]}
        counted = [*(parsed.request.get("tools") or ()), _COUNTED]
        return replace(parsed, body=offered, request={**parsed.request, "tools": counted})

    def answer(self, body: dict[str, Any], after: ExpandAnswer | None) -> Answer:
        if not isinstance(after, Answer):
            return Answer(body, first_id=None)
        return Answer(body, after.visible(), after.first_id if after.first_id is not None else after.body.get("id"))

    def stream(self, after: ExpandStream | None, before: dict[str, Any] | None) -> StreamedRound:
        assert after is None or isinstance(after, StreamedRound), "stream takes this format's readers"
        return StreamedRound(after, before)

    def add_usage(self, total: dict[str, Any] | None, usage: Any) -> dict[str, Any] | None:
        return add_usage(total, usage)

    def turn_again(self, calls: Sequence[tuple[str, str]], handles: tuple[str, ...]) -> Message:
        return turn_again(calls, handles)
