"""One chat completion as OpenAI sends it, always the same: what the benchmarks' upstreams answer (nginx in front
of the overhead benchmark, the soak's stand-in), so that all that varies is the proxy in between.
"""

from __future__ import annotations

import json
from typing import Any

MODEL = "gpt-4o"
REPLY = "The failing test expects the refund in cents; amounts are now converted before rounding."
USAGE = {"prompt_tokens": 1200, "completion_tokens": 18, "total_tokens": 1218}
_ID, _CREATED, _FINGERPRINT = "chatcmpl-bench0001", 1700000000, "fp_bench"


def _dumps(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"))


def completion_json() -> str:
    """The non-streaming answer, usage included (about 400 bytes)."""
    return _dumps(
        {
            "id": _ID,
            "object": "chat.completion",
            "created": _CREATED,
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": REPLY, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": USAGE,
            "system_fingerprint": _FINGERPRINT,
        }
    )


def completion_events(include_usage: bool = False) -> list[str]:
    """The same answer streamed, one `data:` event each: a role chunk, one chunk per word, a finish chunk, the
    usage chunk (no choices) when the request's stream_options asked for it, then [DONE].
    """

    def chunk(choices: list[dict[str, Any]], **extra: Any) -> str:
        base = {"id": _ID, "object": "chat.completion.chunk", "created": _CREATED, "model": MODEL}
        return f"data: {_dumps({**base, 'system_fingerprint': _FINGERPRINT, 'choices': choices, **extra})}\n\n"

    def delta(content: dict[str, str], finish: str | None = None) -> str:
        return chunk([{"index": 0, "delta": content, "logprobs": None, "finish_reason": finish}])

    words = REPLY.split(" ")
    events = [delta({"role": "assistant", "content": ""})]
    events += [delta({"content": word if i == 0 else f" {word}"}) for i, word in enumerate(words)]
    events.append(delta({}, "stop"))
    if include_usage:
        events.append(chunk([], usage=USAGE))
    return [*events, "data: [DONE]\n\n"]
