"""What a stand-in for Anthropic's Messages API answers: a message with a signed thinking block, text, and a tool
use when the request offers tools and its last message answers none; streamed as Anthropic's server-sent events.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

MESSAGES_HEADERS = {
    "request-id": "req_standin_msg",
    "anthropic-ratelimit-requests-remaining": "99",
    "set-cookie": "__cf_bm=secret; path=/",
}


def signature(thinking: str) -> str:
    """A stand-in signature: what the real API sends is opaque, so any fixed text tied to the thinking will do."""
    return hashlib.sha256(b"standin-signature:" + thinking.encode()).hexdigest()


def _answers_a_tool(payload: dict[str, Any]) -> bool:
    messages = payload.get("messages") or [{}]
    content = messages[-1].get("content")
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def refusal(payload: dict[str, Any]) -> dict[str, Any] | None:
    """The 400 the API answers a body the proxy forwards as sent but the API itself refuses, in the fields this
    stand-in reads besides `messages` (which the proxy checks): `tools` that is no array. None: the body is read.
    """
    if "tools" in payload and not isinstance(payload["tools"], list):
        return {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "tools: Input should be a valid list"},
        }
    return None


def message(payload: dict[str, Any], input_tokens: int = 11) -> dict[str, Any]:
    """The answer to a request: it says how many messages it saw, so a test can tell what arrived."""
    seen = len(payload.get("messages") or [])
    thinking = f"I have {seen} messages to go on — déjà vu? ✓"  # not ASCII: the stream carries it as UTF-8
    content: list[dict[str, Any]] = [{"type": "thinking", "thinking": thinking, "signature": signature(thinking)}]
    tools = [t for t in payload.get("tools") or [] if isinstance(t, dict) and "name" in t]
    if tools and not _answers_a_tool(payload):
        content.append({"type": "text", "text": "Let me look."})
        content.append({"type": "tool_use", "id": f"toolu_{seen:04}", "name": tools[0]["name"], "input": {"n": seen}})
        stop = "tool_use"
    else:
        content.append({"type": "text", "text": f"seen {seen} messages"})
        stop = "end_turn"
    usage = {
        "input_tokens": input_tokens,
        "output_tokens": 7,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    return {
        "id": "msg_standin",
        "type": "message",
        "role": "assistant",
        "model": payload.get("model", "claude-sonnet-4-5"),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }


def _event(name: str, data: dict[str, Any]) -> bytes:
    # As the API sends it: text in UTF-8, not escaped.
    return f"event: {name}\ndata: {json.dumps({'type': name, **data}, ensure_ascii=False)}\n\n".encode()


def cut(events: list[bytes], size: int) -> list[bytes]:
    """The stream in chunks of `size` bytes, whatever falls where: events, lines and characters split across them."""
    stream = b"".join(events)
    return [stream[i : i + size] for i in range(0, len(stream), size)]


def message_events(answer: dict[str, Any]) -> list[bytes]:
    """The message as Anthropic streams it: thinking_delta and signature_delta, text_delta, input_json_delta; a
    redacted_thinking block whole in its content_block_start.
    """
    start = {**answer, "content": [], "stop_reason": None}
    events = [_event("message_start", {"message": start}), _event("ping", {})]
    for index, block in enumerate(answer["content"]):
        kind = block["type"]
        if kind == "redacted_thinking":  # it comes whole in its start, with no deltas
            events.append(_event("content_block_start", {"index": index, "content_block": block}))
            events.append(_event("content_block_stop", {"index": index}))
            continue
        empty = {"thinking": {"thinking": "", "signature": ""}, "text": {"text": ""}, "tool_use": {"input": {}}}[kind]
        head = {k: v for k, v in block.items() if k not in ("thinking", "signature", "text", "input")}
        events.append(_event("content_block_start", {"index": index, "content_block": {**head, **empty}}))
        if kind == "thinking":
            deltas = [
                {"type": "thinking_delta", "thinking": block["thinking"]},
                {"type": "signature_delta", "signature": block["signature"]},
            ]
        elif kind == "text":
            half = len(block["text"]) // 2
            deltas = [{"type": "text_delta", "text": t} for t in (block["text"][:half], block["text"][half:])]
        else:
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        events += [_event("content_block_delta", {"index": index, "delta": delta}) for delta in deltas]
        events.append(_event("content_block_stop", {"index": index}))
    stop = {"stop_reason": answer["stop_reason"], "stop_sequence": None}
    events.append(
        _event("message_delta", {"delta": stop, "usage": {"output_tokens": answer["usage"]["output_tokens"]}})
    )
    events.append(_event("message_stop", {}))
    return events
