"""Which project files one chat completion with the default chain enters (app/ and strategies/).

    .venv/bin/python scripts/files_per_request.py

A profiler hook in every thread, installed before any server starts, records the file of every function called
while the second of two identical-looking requests runs (the first warms imports, caches and worker threads):
the proxy on loopback before a stand-in upstream, a short agent conversation, no X-Compaction-Strategies header.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PREFIXES = (str(ROOT / "app"), str(ROOT / "strategies"))
seen: set[str] = set()
recording = threading.Event()


def hook(frame: FrameType, event: str, arg: Any) -> None:
    if event == "call" and recording.is_set() and frame.f_code.co_filename.startswith(PREFIXES):
        seen.add(str(Path(frame.f_code.co_filename).relative_to(ROOT)))


sys.setprofile(hook)
threading.setprofile(hook)

import httpx  # noqa: E402  (after the hook: the servers' threads must start with it)

from app import Settings, create_app  # noqa: E402
from tests.support.servers import LoopbackServer  # noqa: E402
from tests.support.upstream import StandInUpstream  # noqa: E402

CALL = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
MESSAGES = [
    {"role": "system", "content": "s"},
    {"role": "user", "content": "go"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c", "content": '{ "a": 1 }'},
    {"role": "user", "content": "next"},
]


def main() -> None:
    upstream = StandInUpstream()
    with LoopbackServer(upstream.app) as stand_in:
        app = create_app(Settings(upstream_base_url=f"{stand_in.url}/v1"))
        with LoopbackServer(app) as proxy:
            url = f"{proxy.url}/v1/chat/completions"
            headers = {"Authorization": "Bearer sk-any"}
            httpx.post(url, json={"model": "gpt-4o", "messages": MESSAGES}, headers=headers)
            recording.set()
            more = [*MESSAGES, {"role": "user", "content": "and now?"}]
            response = httpx.post(url, json={"model": "gpt-4o", "messages": more}, headers=headers)
            recording.clear()
            response.raise_for_status()
    print(len(seen), "files")
    print("\n".join(sorted(seen)))


if __name__ == "__main__":
    main()
