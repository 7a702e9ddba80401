"""Refs: how the model gets back tool output a strategy removed (reversible compaction).

Every stub that stands for removed tool output (strategies.markers) carries the ref of what it replaced and says
how to get it back: call the expand tool (EXPAND_TOOL) with that ref. The proxy answers such a call itself, from
the request's own uncompacted messages (`Originals`): the client resends its whole history, so nothing is stored,
any replica can answer, and a ref can only resolve to content of the same request.

A ref is a content hash (REF_DIGITS hex digits of SHA-256), so the same content has the same ref on every request
(stubs stay byte-identical and the provider's prompt cache keeps matching), and a repeated result's ref is the
first copy's. Content past `max_chars` comes in parts: by lines, numbered from 1, where a line longer than
LINE_CHARS counts as several, so a 200 KB one-line JSON output can be read in parts too.

Tool calls left out whole (mask past its limit, strategies.degrade) are named by one ref for all of them:
left_out_ref of their results' refs, oldest first. It resolves to an index of those calls (one line each: its
id, tool, arguments and the ref of its result), made from the request's own messages, so the model finds the one
it needs and expands it by its own ref. Such a block is always the conversation's oldest calls (a prefix of
ordered_pairs), so resolving one costs a hash of each result's ref, not one per block.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .conversation import CallIndex, ToolPair, arguments_of, find_pairs, is_assistant, is_tool_result, message_text
from .messages import Message

REF_DIGITS = 10  # 40 bits: two of a request's thousand results share a ref once in two billion requests
EXPAND_TOOL = "compaction_expand"
LINE_CHARS = 2000
# The stub's own phrase (how_to_expand), also when it sits in a JSON string of a call's arguments (\").
_REF = re.compile(r'ref=\\?"([0-9a-f]{' + str(REF_DIGITS) + r'})\\?"')
_MORE = f"; call {EXPAND_TOOL} with start_line="
# The note that opens a part `expand` returns when lines are left to read (more_from); group 1: the line to go on from.
MORE_PATTERN = re.compile(r'\[ref=".*?": lines \d+-\d+ of \d+' + re.escape(_MORE) + r"(\d+) for more\]\n")

EXPAND_DESCRIPTION = (
    "Show the original of content elided from this conversation: pass the ref its marker gives "
    "(optionally a range of lines, numbered from 1)."
)
EXPAND_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "ref": {"type": "string", "description": 'The ref a marker gives, e.g. ref="0a1b2c3d4e".'},
        "start_line": {"type": "integer", "minimum": 1, "description": "The first line to show (default 1)."},
        "end_line": {"type": "integer", "minimum": 1, "description": "The last line to show (default: the last)."},
    },
    "required": ["ref"],
    "additionalProperties": False,
}


def ref_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:REF_DIGITS]


def stands_for(text: str) -> str:
    """The ref a stub standing for `text` carries: the ref of the original a stub in it names already (a pruned
    result, a dedupe pointer, an expand round's part), else its own.
    """
    held = refs_in(text)
    return held[0] if held else ref_of(text)


# What a left-out block's ref hashes: this, then its results' refs joined by commas.
_LEFT_OUT = "left out:"
# An argument string longer than this is shown in the index by its head, its size and its ref.
INDEX_ARGUMENT_CHARS = 120


class LeftOutRef:
    """The ref of tool calls left out whole, made from the refs of their results added oldest first (ordered_pairs):
    the ref of _LEFT_OUT and those refs joined by commas, hashed as they come, so every block of the oldest calls
    has its ref at the cost of one hash of each.
    """

    def __init__(self) -> None:
        self._running = hashlib.sha256(_LEFT_OUT.encode())
        self._count = 0

    def add(self, result_ref: str) -> None:
        self._running.update((result_ref if not self._count else "," + result_ref).encode())
        self._count += 1

    def ref(self) -> str:
        return self._running.copy().hexdigest()[:REF_DIGITS]


def left_out_ref(result_refs: Sequence[str]) -> str:
    """The ref of tool calls left out whole, from the refs of their results, oldest first (ordered_pairs)."""
    running = LeftOutRef()
    for ref in result_refs:
        running.add(ref)
    return running.ref()


def ordered_pairs(messages: list[Message]) -> list[ToolPair]:
    """The answered calls in the order a left-out block takes them: by the message that made them, then by result."""
    return sorted(find_pairs(messages), key=lambda pair: (pair.call_index, pair.result_index))


def how_to_expand(ref: str) -> str:
    """The words every stub uses to say how its content comes back."""
    return f'call {EXPAND_TOOL} with ref="{ref}"'


def refs_in(text: str) -> list[str]:
    """The refs the stubs in a text carry (the text of a message, or a call's raw JSON arguments)."""
    if EXPAND_TOOL not in text:
        return []
    return _REF.findall(text)


def stub_refs(messages: list[Message]) -> Iterator[str]:
    """Every ref in the stubs of these messages: in their text and in their calls' arguments."""
    for message in messages:
        yield from refs_in(message_text(message))
        for arguments in arguments_of(message):
            yield from refs_in(arguments)


class Originals:
    """What the refs of one request resolve to: the text of every tool result and of every assistant message (mask's
    inputs cuts old ones), and the arguments of every tool call with the strings inside them (shorten_tools and mask
    cut long argument strings). Hashed as lookups need, in
    conversation order and each once: a request whose model expands nothing costs nothing, and a lookup stops at
    the first content with its ref (the oldest stubs, which the others follow, resolve early).
    """

    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages
        self._by_ref: dict[str, str] = {}
        self._unhashed = self._contents()
        self._blocks: dict[str, int] | None = None  # a left-out block's ref -> how many of ordered_pairs it holds
        self._pairs: list[ToolPair] = []

    def resolve(self, ref: str) -> str | None:
        found = self._by_ref.get(ref)
        if found is not None:
            return found
        for text in self._unhashed:
            key = ref_of(text)
            self._by_ref.setdefault(key, text)  # of contents with one ref (identical ones), the first
            if key == ref:
                return self._by_ref[key]
        return self._left_out(ref)

    def _left_out(self, ref: str) -> str | None:
        """The index of the oldest calls whose left_out_ref is `ref`, if any: each block of the oldest calls that
        ends with a message's last call, hashed on from the one before.
        """
        if self._blocks is None:
            self._pairs = ordered_pairs(self.messages)
            self._blocks = {}
            running = LeftOutRef()
            for n, pair in enumerate(self._pairs):
                running.add(stands_for(message_text(self.messages[pair.result_index])))
                following = self._pairs[n + 1] if n + 1 < len(self._pairs) else None
                if following is None or following.call_index != pair.call_index:
                    self._blocks.setdefault(running.ref(), n + 1)
        count = self._blocks.get(ref)
        return None if count is None else self._index(self._pairs[:count])

    def _index(self, pairs: list[ToolPair]) -> str:
        calls = CallIndex()
        lines = [f"{len(pairs)} earlier tool calls, oldest first, left out to fit the context window:\n"]
        for pair in pairs:
            call = self.messages[pair.call_index]
            arguments = calls.arguments(call, pair.call_id) or ""
            if len(arguments) > INDEX_ARGUMENT_CHARS:
                head = arguments[:INDEX_ARGUMENT_CHARS]
                arguments = f'{head}... ({len(arguments):,} chars, ref="{ref_of(arguments)}")'
            # One line per call, whatever the arguments hold (JSON escapes its own line breaks; a raw string may not).
            arguments = arguments.replace("\r", "\\r").replace("\n", "\\n")
            text = message_text(self.messages[pair.result_index])
            lines.append(
                f"{pair.call_id or '-'} {calls.name(call, pair.call_id) or 'tool'} {arguments} -> "
                f'{len(text):,} chars, ref="{ref_of(text)}"\n'
            )
        return "".join(lines)

    def _contents(self) -> Iterator[str]:
        for message in self.messages:
            if is_tool_result(message) or is_assistant(message):
                yield message_text(message)
            for arguments in arguments_of(message):
                yield arguments
                yield from _strings(arguments)


def _strings(arguments: str) -> Iterator[str]:
    try:
        stack: list[Any] = [json.loads(arguments)]
    except ValueError:
        return
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            yield value
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.values())


@dataclass(frozen=True)
class ExpandCall:
    """One call of the expand tool, as the model made it."""

    ref: str
    start_line: int | None = None
    end_line: int | None = None

    @classmethod
    def parse(cls, arguments: Any) -> ExpandCall | str:
        """The call its JSON arguments describe, or what is wrong with them (the tool's error result)."""
        try:
            data = json.loads(arguments) if isinstance(arguments, str) else None
        except ValueError:
            data = None
        if not isinstance(data, dict):
            return "Error: the arguments must be a JSON object with a string 'ref'."
        ref = data.get("ref")
        if not isinstance(ref, str) or not ref:
            return "Error: 'ref' must be a string: the ref a marker gives."
        lines = []
        for name in ("start_line", "end_line"):
            value = data.get(name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                return f"Error: '{name}' must be a whole number from 1."
            lines.append(value)
        # A ref is short; a long one is no ref and is not echoed back whole.
        return cls(ref[:64], lines[0], lines[1])

    def arguments(self) -> str:
        """The arguments as the proxy writes them: the same bytes whenever the same call is made."""
        data: dict[str, Any] = {"ref": self.ref}
        if self.start_line is not None:
            data["start_line"] = self.start_line
        if self.end_line is not None:
            data["end_line"] = self.end_line
        return json.dumps(data, separators=(",", ":"))


def expand(originals: Originals, call: ExpandCall, max_chars: int) -> str:
    """The expand tool's result: the original behind the ref, whole or the lines asked for, at most max_chars
    characters of it with a note saying where to go on; or an error that says what was wrong.
    """
    text = originals.resolve(call.ref)
    if text is None:
        return (
            f'Error: no content with ref="{call.ref}" in this conversation. A ref is the {REF_DIGITS} hex '
            f"digits a marker shows after ref=."
        )
    lines = _lines(text)
    total = len(lines)
    first = call.start_line or 1
    last = min(call.end_line or total, total)
    if first > total or last < first:
        return f'Error: ref="{call.ref}" has lines 1-{total}; start_line {first} to end_line {call.end_line} is none.'
    shown: list[str] = []
    size = 0
    for line in lines[first - 1 : last]:
        if shown and size + len(line) > max_chars:
            break
        shown.append(line)
        size += len(line)
    whole = first == 1 and len(shown) == total
    if whole and size <= max_chars:
        return text
    body = "".join(shown)[:max_chars]
    end = first + len(shown) - 1
    note = f'[ref="{call.ref}": lines {first}-{end} of {total}'
    if end < last:
        note += f"{_MORE}{end + 1} for more"
    return note + "]\n" + body


def expand_turn(calls: Sequence[tuple[str, str]]) -> Message:
    """An assistant message that calls the expand tool, (call id, arguments) each, in the conversation view."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": EXPAND_TOOL, "arguments": arguments}}
            for cid, arguments in calls
        ],
    }


def more_from(text: str) -> int | None:
    """The line an expand result says to read on from (its start_line), or None where it shows the rest."""
    found = MORE_PATTERN.match(text)
    return int(found.group(1)) if found is not None else None


def _lines(text: str) -> list[str]:
    out: list[str] = []
    for line in text.splitlines(keepends=True) or [""]:
        out.extend(line[i : i + LINE_CHARS] for i in range(0, max(len(line), 1), LINE_CHARS))
    return out
