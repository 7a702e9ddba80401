"""One case of the flood: a fresh proxy process, the same agent-history request sent a few times, a poller on
/healthz beside it, and what the stand-in model (bench/hostile/upstream.py) received per round.
"""

from __future__ import annotations

import json
import re
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from ..canned import REPLY
from ..processes import cpu_seconds, memory_bytes

REQUEST_TIMEOUT = 120.0
POLL_INTERVAL = 0.020  # between one /healthz answer and the next poll
_CALLS = re.compile(r'^compaction_proxy_expand_calls_total\{result="(\w+)"\} ([0-9.e+]+)$', re.MULTILINE)


@dataclass(frozen=True)
class Target:
    proxy: str  # the proxy's base URL
    upstream: str  # the stand-in model's
    pid: int  # the proxy's process
    upstream_pid: int  # the stand-in's


@dataclass
class Sent:
    """One request of a case, as the client and the stand-in saw it."""

    seconds: float
    proxy_cpu: float  # the proxy's CPU seconds while it ran
    upstream_cpu: float  # the stand-in's
    healthz_longest: float  # the slowest /healthz answer during it
    polls: int
    rounds: list[int]  # bytes of each request the stand-in received for it, in order
    answers: list[int]  # bytes of the stand-in's answer to each
    flooded: int  # rounds the stand-in answered with a flood
    problem: str | None  # None: a whole answer, in words


@dataclass
class Case:
    calls: int  # the flood's calls per answer; 0: the model answers in words
    lines: bool  # each call asks for a line of its own (else all are the same call)
    sent: list[Sent] = field(default_factory=list)
    rss_start: int = 0  # the proxy's peak resident memory when ready, after the warm-up, after the case's requests
    rss_warm: int = 0
    rss_peak: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)  # expand calls by result, over the case
    healthz_errors: int = 0
    unsent: int = 0  # requests not sent: --max-seconds was reached

    @property
    def problems(self) -> list[str]:
        return [s.problem for s in self.sent if s.problem is not None]

    def median(self, measure: str) -> float:
        return float(statistics.median(getattr(s, measure) for s in self.sent))

    def worst(self, measure: str) -> float:
        return float(max(getattr(s, measure) for s in self.sent))


class Poller:
    """GET /healthz every POLL_INTERVAL on a thread of its own, each poll's start and end kept."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.errors = 0
        self._polls: list[tuple[float, float]] = []  # (start, end), perf_counter
        self._done = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="healthz-poller", daemon=True)

    def __enter__(self) -> Poller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def during(self, begun: float, ended: float) -> tuple[float, int]:
        """The slowest poll that overlapped [begun, ended], and how many did; a poll still running at `ended` is
        waited for (it may be the one the request held up).
        """
        with self._done:
            self._done.wait_for(lambda: bool(self._polls) and self._polls[-1][0] > ended, timeout=REQUEST_TIMEOUT)
            overlapping = [end - start for start, end in self._polls if start < ended and end > begun]
            self._polls = self._polls[-1:]
        return max(overlapping, default=0.0), len(overlapping)

    def _run(self) -> None:
        with httpx.Client(timeout=REQUEST_TIMEOUT) as client:
            while not self._stop.is_set():
                begun = time.perf_counter()
                try:
                    ok = client.get(self.url).status_code == 200
                except httpx.HTTPError:
                    ok = False
                with self._done:
                    self._polls.append((begun, time.perf_counter()))
                    self.errors += not ok
                    self._done.notify_all()
                self._stop.wait(POLL_INTERVAL)


def request_body(messages: list[Any], stream: bool) -> bytes:
    body: dict[str, Any] = {"model": "gpt-4o", "messages": messages, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    return json.dumps(body).encode()


def check(response: httpx.Response, data: bytes, stream: bool, rounds: int) -> str | None:
    """What is wrong with an answer, if anything: it must be whole and in words, the flood answered inside."""
    if response.status_code != 200:
        return f"status {response.status_code}: {data[:200]!r}"
    if not stream:
        answer = json.loads(data)
        message = answer["choices"][0]["message"]
        if message.get("tool_calls") or message.get("content") != REPLY:
            return f"not the answer in words: {json.dumps(message)[:200]}"
        if response.headers.get("x-compaction-expansions") != str(rounds - 1):
            return f"x-compaction-expansions {response.headers.get('x-compaction-expansions')}, {rounds} rounds"
        return None
    if not data.endswith(b"data: [DONE]\n\n"):
        return f"stream ended without [DONE]: {data[-200:]!r}"
    text = []
    for line in data.decode().splitlines():
        if not line.startswith("data: {"):
            continue
        chunk = json.loads(line[len("data: ") :])
        if "error" in chunk:
            return f"error event: {line[:200]}"
        for choice in chunk.get("choices", []):
            if choice["delta"].get("tool_calls"):
                return f"an internal call reached the client: {line[:200]}"
            text.append(choice["delta"].get("content") or "")
    return None if "".join(text) == REPLY else f"streamed text {''.join(text)[:200]!r}"


def send(target: Target, body: bytes, stream: bool, poller: Poller, client: httpx.Client) -> Sent:
    headers = {"content-type": "application/json", "authorization": "Bearer sk-hostile"}
    before = len(client.get(f"{target.upstream}/stats").json()["requests"])
    cpu = cpu_seconds(target.pid), cpu_seconds(target.upstream_pid)
    begun = time.perf_counter()
    answer = _post(client, f"{target.proxy}/v1/chat/completions", body, headers)
    ended = time.perf_counter()
    proxy_cpu, upstream_cpu = cpu_seconds(target.pid) - cpu[0], cpu_seconds(target.upstream_pid) - cpu[1]
    longest, polls = poller.during(begun, ended)
    received = client.get(f"{target.upstream}/stats").json()["requests"][before:]
    rounds, answers = [r["bytes"] for r in received], [r["answer_bytes"] for r in received]
    flooded = sum(r["answer"] == "flood" for r in received)
    problem = answer if isinstance(answer, str) else check(*answer, stream, len(rounds))
    return Sent(ended - begun, proxy_cpu, upstream_cpu, longest, polls, rounds, answers, flooded, problem)


def _post(client: httpx.Client, url: str, body: bytes, headers: dict[str, str]) -> tuple[httpx.Response, bytes] | str:
    """The answer and its bytes, or what went wrong on the way."""
    try:
        with client.stream("POST", url, content=body, headers=headers) as response:
            return response, response.read()
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"[:200]


def expand_outcomes(proxy: str, client: httpx.Client) -> dict[str, int]:
    """The proxy's compaction_proxy_expand_calls_total by result (of all its workers)."""
    text = client.get(f"{proxy}/metrics").text
    return {result: int(float(value)) for result, value in _CALLS.findall(text)}


def run_case(target: Target, calls: int, lines: bool, body: bytes, stream: bool, repeat: int, deadline: float) -> Case:
    """One warm-up request answered in words, then `repeat` requests each answered with a flood of `calls`: the
    flood is measured on a conversation the proxy has seen (its token counts cached), as a model flooding in the
    middle of an agent loop would be.
    """
    case = Case(calls, lines, rss_start=memory_bytes(target.pid, "VmHWM"))
    with httpx.Client(timeout=REQUEST_TIMEOUT) as client, Poller(f"{target.proxy}/healthz") as poller:
        client.post(f"{target.upstream}/flood", json={"calls": 0}).raise_for_status()
        warm = send(target, body, stream, poller, client)
        case.rss_warm = memory_bytes(target.pid, "VmHWM")
        client.post(f"{target.upstream}/flood", json={"calls": calls, "lines": lines}).raise_for_status()
        for _ in range(repeat if warm.problem is None else 0):
            if time.monotonic() > deadline:
                case.unsent += 1
                continue
            sent = send(target, body, stream, poller, client)
            if calls and not sent.flooded and sent.problem is None:
                sent.problem = "the stand-in found no stub to flood the expand tool on"
            case.sent.append(sent)
        if warm.problem is not None:
            case.sent.append(warm)
        case.rss_peak = memory_bytes(target.pid, "VmHWM")
        case.outcomes = expand_outcomes(target.proxy, client)
    case.healthz_errors = poller.errors
    return case
