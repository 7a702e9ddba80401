"""Load generation: hey for latency and throughput, a raw socket for a stream's first event.

hey runs a closed loop: each of `concurrency` workers sends its next request when the previous answer is
in. With `-z` it stops sending after that many seconds and waits for the requests in flight, so slow
answers are counted too. wrk was tried first: it cuts the requests in flight at the deadline, so when
an answer takes longer than the run (a saturated proxy at 64 connections) only the fast ones were
counted, and the latency came out far too low.

The first event of a stream is timed on a plain socket: curl's time_starttransfer was tried, but for a
POST it marks the start of the upload (it equals time_pretransfer), not the first byte of the answer.
"""

from __future__ import annotations

import math
import re
import shutil
import socket
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

REQUEST_TIMEOUT = 60  # seconds; hey's own default of 20 could cut a 2 MB request to a saturated peer


@dataclass(frozen=True)
class LoadResult:
    requests: int  # answered, whatever the status, plus failed
    seconds: float
    errors: int  # answers other than 200, and requests that failed (refused, reset, timed out)
    p50_ms: float
    p99_ms: float
    rps: float


def require(tool: str, package: str) -> str:
    found = shutil.which(tool)
    if found is None:
        raise FileNotFoundError(f"{tool} not found: install it (Debian: apt-get install -y {package})")
    return found


def debian_version(package: str) -> str:
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def hey(url: str, body_path: Path, headers: dict[str, str], *, concurrency: int, seconds: int) -> LoadResult:
    """`concurrency` workers, each posting `body_path` to `url` on its own keep-alive connection and
    sending the next request when the answer is in, for `seconds`.
    """
    argv = [require("hey", "hey"), "-z", f"{seconds}s", "-c", str(concurrency), "-t", str(REQUEST_TIMEOUT)]
    # One core for the load tool, as the server under test gets the other one.
    argv += ["-cpus", "1", "-m", "POST", "-T", "application/json", "-D", str(body_path)]
    argv += [arg for name, value in headers.items() for arg in ("-H", f"{name}: {value}")]
    out = subprocess.run([*argv, url], capture_output=True, text=True, timeout=seconds + 2 * REQUEST_TIMEOUT)
    if out.returncode != 0 or "Summary:" not in out.stdout:
        raise RuntimeError(f"hey failed ({out.returncode}): {out.stderr.strip() or out.stdout.strip()}")
    return parse_hey(out.stdout)


def parse_hey(text: str) -> LoadResult:
    """hey's summary. Its percentiles have 0.1 ms resolution ("0.0123 secs"), and it leaves out those
    its sample is too small for (p99 under 100 answers): by the nearest-rank rule those are the slowest.
    """

    def number(pattern: str, default: float = math.nan) -> float:
        found = re.search(pattern, text)
        return float(found.group(1)) if found else default

    statuses = {int(code): int(n) for code, n in re.findall(r"\[(\d{3})\]\s+(\d+) responses", text)}
    errors_section = text.split("Error distribution:", 1)[1] if "Error distribution:" in text else ""
    failed = sum(int(n) for n in re.findall(r"^\s*\[(\d+)\]", errors_section, re.MULTILINE))
    answered = sum(statuses.values())
    slowest = number(r"Slowest:\s+([\d.]+) secs")
    return LoadResult(
        requests=answered + failed,
        seconds=number(r"Total:\s+([\d.]+) secs"),
        errors=answered - statuses.get(200, 0) + failed,
        p50_ms=number(r"50% in ([\d.]+) secs", slowest) * 1000,
        p99_ms=number(r"99% in ([\d.]+) secs", slowest) * 1000,
        rps=number(r"Requests/sec:\s+([\d.]+)"),
    )


@dataclass(frozen=True)
class FirstByteResult:
    samples: int
    errors: int  # answers other than 200 and streams that did not end with `data: [DONE]`
    p50_ms: float
    p90_ms: float


@dataclass(frozen=True)
class StreamRequest:
    host: str
    port: int
    data: bytes  # the whole request as it goes on the wire


def stream_request(url: str, body: bytes, headers: dict[str, str]) -> StreamRequest:
    """A POST of `body` to `url` on a connection of its own (`Connection: close`, so the end of the answer is the
    end of the connection).
    """
    parsed = urlsplit(url)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 80
    head = [f"POST {parsed.path} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}"]
    head += [f"{name}: {value}" for name, value in headers.items()] + ["Connection: close", "", ""]
    return StreamRequest(host, port, "\r\n".join(head).encode() + body)


def one_stream(request: StreamRequest, timeout: float) -> tuple[float, bool]:
    """Milliseconds from the first byte of the request sent to the first `data:` event received, and
    whether the answer was a 200 that ended with `data: [DONE]`.
    """
    with socket.create_connection((request.host, request.port), timeout=timeout) as sock:
        started = time.perf_counter()
        sock.sendall(request.data)
        received = b""
        first: float | None = None
        while chunk := sock.recv(65536):
            received += chunk
            if first is None and b"data:" in received:
                first = time.perf_counter()
    ok = received.startswith(b"HTTP/1.1 200") and b"data: [DONE]" in received and first is not None
    return ((first or time.perf_counter()) - started) * 1000, ok


def p90(ordered: list[float]) -> float:
    """The 90th percentile of sorted times, by the nearest rank below."""
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def first_byte(url: str, body_path: Path, headers: dict[str, str], *, samples: int) -> FirstByteResult:
    """Time to the first event of a streamed answer, over `samples` requests one after another, each on a
    new connection (`Connection: close`, so the end of the answer is the end of the connection). A raw
    socket rather than an HTTP client: nothing between the wire and the clock.
    """
    request = stream_request(url, body_path.read_bytes(), headers)
    one_stream(request, timeout=60)  # unmeasured: the first request may fill caches
    results = [one_stream(request, timeout=60) for _ in range(samples)]
    times = sorted(ms for ms, _ in results)
    return FirstByteResult(
        samples=samples,
        errors=sum(1 for _, ok in results if not ok),
        p50_ms=statistics.median(times),
        p90_ms=p90(times),
    )
