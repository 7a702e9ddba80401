"""The expand tool's stream reader in chat completions (app.wire.chat.expand.StreamedRound), chunk by chunk, with
usage in every chunk as vLLM sends it under continuous_usage_stats (issue 23, finding 6).
"""

from __future__ import annotations

import json
from typing import Any

from app.wire.chat.expand import StreamedRound, add_usage


def event(delta: dict[str, Any], *, finish: str | None = None, usage: dict[str, Any] | None = None) -> bytes:
    chunk: dict[str, Any] = {"id": "chatcmpl-2", "object": "chat.completion.chunk", "choices": []}
    chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    if usage is not None:
        chunk["usage"] = usage
    return b"data: " + json.dumps(chunk).encode()


def usage(completion: int) -> dict[str, Any]:
    return {"prompt_tokens": 1000, "completion_tokens": completion, "total_tokens": 1000 + completion}


def chunks(out: list[bytes]) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for part in out for line in part.split(b"\n") if line.startswith(b"data: {")]


def test_usage_in_every_chunk_is_neither_held_nor_re_emitted_and_memory_stays_flat() -> None:
    streamed = StreamedRound(first_id=None)
    words = 5000
    passed = [streamed.feed(event({"content": f"w{n} "}, usage=usage(n + 1))) for n in range(words)]
    passed.append(streamed.feed(event({}, finish="stop", usage=usage(words))))
    assert len(streamed.held) == 1  # the finish chunk, not one per chunk
    end = list(streamed.finish(None))
    assert end[-1] == b"data: [DONE]\n\n" and len(end) == 2  # the finish chunk, then [DONE]: no empty chunks
    sent = chunks([p for p in passed if p])
    assert len(sent) == words
    assert sent[0]["usage"] == usage(1)  # the first round's chunks pass as they came
    assert streamed.usage == usage(words)


def test_a_later_rounds_chunks_carry_the_usage_of_every_round_so_far() -> None:
    before = usage(7)
    streamed = StreamedRound(first_id="chatcmpl-1", before=before)
    sent = chunks([streamed.feed(event({"content": "hello"}, usage=usage(1))) or b""])
    assert sent[0]["usage"] == add_usage(before, usage(1))
    assert sent[0]["id"] == "chatcmpl-1"
