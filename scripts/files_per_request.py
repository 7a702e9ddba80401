"""Which project files one request with the default chain enters (app/ and strategies/), per wire format, and how
often its path comes back to a file it had left.

    .venv/bin/python scripts/files_per_request.py [chat|responses|messages ...]   # default: all three

A profiler hook in every thread, installed before any server starts, records the file of every function called
while the second of two similar requests runs (the first warms imports, caches and worker threads): the proxy on
loopback before a stand-in upstream, a short agent conversation, no X-Compaction-Strategies header.

A return is a call into a project file that the request had entered before and that is not on the calling
thread's stack at that moment: the path left the file and comes back to it (a route that calls the compactor, is
handed back, and calls it again through another module, counts one; a call down into a helper and back does not,
nor does a coroutine resumed after an await).
"""

from __future__ import annotations

import inspect
import sys
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PREFIXES = (str(ROOT / "app"), str(ROOT / "strategies"))
entered: set[str] = set()
returns: Counter[str] = Counter()
recording = threading.Event()
stacks = threading.local()
ignored: set[int] = set()  # the stand-in upstream's thread: what it runs is not the proxy's path
resumable: set[int] = set()  # coroutine and generator frames already started: a resume is no new entry
RESUMABLE = inspect.CO_COROUTINE | inspect.CO_GENERATOR | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


def hook(frame: FrameType, event: str, arg: Any) -> None:
    if not recording.is_set() or threading.get_ident() in ignored:
        return
    stack: list[str] = stacks.__dict__.setdefault("files", [])
    if event == "call":
        name = frame.f_code.co_filename
        resumed = id(frame) in resumable
        if frame.f_code.co_flags & RESUMABLE:
            resumable.add(id(frame))
        if name.startswith(PREFIXES):
            name = str(Path(name).relative_to(ROOT))
            if name in entered and name not in stack and not resumed:
                returns[name] += 1
            entered.add(name)
        stack.append(name)
    elif event == "return" and stack:
        stack.pop()


sys.setprofile(hook)
threading.setprofile(hook)

import httpx  # noqa: E402  (after the hook: the servers' threads must start with it)

from app import Settings, create_app  # noqa: E402
from tests.support.servers import LoopbackServer  # noqa: E402
from tests.support.upstream import StandInUpstream  # noqa: E402

CALL = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
CHAT = [
    {"role": "system", "content": "s"},
    {"role": "user", "content": "go"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c", "content": '{ "a": 1 }'},
    {"role": "user", "content": "next"},
]
RESPONSES = [
    {"role": "user", "content": "go"},
    {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c", "output": '{ "a": 1 }'},
    {"role": "user", "content": "next"},
]
MESSAGES = [
    {"role": "user", "content": "go"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "f", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c", "content": '{ "a": 1 }'}]},
    {"role": "user", "content": "next"},
]
# path, the body of the first request, the same conversation one user message longer, extra headers
FORMATS: dict[str, tuple[str, dict[str, Any], dict[str, Any], dict[str, str]]] = {
    "chat": (
        "/v1/chat/completions",
        {"model": "gpt-4o", "messages": CHAT},
        {"model": "gpt-4o", "messages": [*CHAT, {"role": "user", "content": "and now?"}]},
        {},
    ),
    "responses": (
        "/v1/responses",
        {"model": "gpt-4o", "instructions": "s", "input": RESPONSES},
        {"model": "gpt-4o", "instructions": "s", "input": [*RESPONSES, {"role": "user", "content": "and now?"}]},
        {},
    ),
    "messages": (
        "/v1/messages",
        {"model": "claude-sonnet-4-5", "max_tokens": 64, "system": "s", "messages": MESSAGES},
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 64,
            "system": "s",
            "messages": [*MESSAGES[:-1], {"role": "user", "content": "next, and now?"}],
        },
        {"anthropic-version": "2023-06-01"},
    ),
}


def trace(name: str) -> tuple[set[str], Counter[str]]:
    path, first, second, extra = FORMATS[name]
    upstream = StandInUpstream()
    with LoopbackServer(upstream.app) as stand_in:
        ignored.clear()  # thread ids are reused once a thread ends
        ignored.add(stand_in.thread.ident or 0)
        settings = Settings(upstream_base_url=f"{stand_in.url}/v1", anthropic_base_url=stand_in.url)
        with LoopbackServer(create_app(settings)) as proxy:
            headers = {"Authorization": "Bearer sk-any", **extra}
            httpx.post(f"{proxy.url}{path}", json=first, headers=headers).raise_for_status()
            entered.clear()
            returns.clear()
            recording.set()
            response = httpx.post(f"{proxy.url}{path}", json=second, headers=headers)
            recording.clear()
            response.raise_for_status()
    return set(entered), Counter(returns)


def main() -> None:
    for name in sys.argv[1:] or list(FORMATS):
        files, back = trace(name)
        app_files = sorted(f for f in files if f.startswith("app/"))
        app_back = sum(n for f, n in back.items() if f.startswith("app/"))
        print(
            f"{name}: {len(files)} files ({len(app_files)} app/, {len(files) - len(app_files)} strategies/); ", end=""
        )
        print(f"returns to a file left: {sum(back.values())} ({app_back} in app/)")
        for file in app_files:
            print(f"  {file}" + (f"  (returned to {back[file]}x)" if back[file] else ""))


if __name__ == "__main__":
    main()
