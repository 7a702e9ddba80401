"""The servers a benchmark starts, and what /proc says about them.

A `Server` is a context manager around one child process. It writes the child's output to a file (a
pipe nobody reads would block a chatty server under load), waits until a readiness probe passes, and
on exit stops the child with SIGTERM, then SIGKILL if it lingers. What a process tree uses (memory, CPU,
open descriptors) is summed over the server and whatever it forked: uvicorn workers, LiteLLM's helpers.
"""

from __future__ import annotations

import http.client
import os
import resource
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

# Variables that would change what a server under test does, inherited from whoever runs the benchmark: this
# proxy's settings and its metrics' multiprocess directory, and the peers' settings and keys.
_CONFIGURATION = ("COMPACTION_", "PROMETHEUS_", "LITELLM_", "HEADROOM_", "OPENAI_")


def free_port() -> int:
    """A loopback port nothing listens on right now (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def server_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without the caller's configuration, plus `extra`: nothing the person running
    the benchmark has set may change what is measured.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(_CONFIGURATION)}
    return {**env, **(extra or {})}


def answers(
    url: str, body: bytes | None = None, headers: Mapping[str, str] | None = None, *, timeout: float = 10
) -> Callable[[], bool]:
    """A readiness probe for `Server`: whether `url` answers 200 to a GET, or to a POST of `body`."""

    def probe() -> bool:
        request = urllib.request.Request(url, data=body, headers=dict(headers or {}))
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                response.read()
                return bool(response.status == 200)
        except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError):
            return False

    return probe


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it: servers such as LiteLLM or uvicorn workers fork helpers."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # Field 4 of /proc/PID/stat is the parent; the command name before it may contain spaces.
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def memory_bytes(pid: int, field: str = "VmHWM") -> int:
    """A memory figure of /proc/PID/status (VmHWM: peak resident, VmRSS: resident now) summed over `pid`
    and its descendants. For several processes a sum of peaks is an upper bound; for one it is exact.
    """
    total = 0
    for each in descendants(pid):
        try:
            status = Path(f"/proc/{each}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith(f"{field}:"):
                total += int(line.split()[1]) * 1024
    return total


def open_fds(pid: int) -> int:
    """Open file descriptors of `pid` and its descendants."""
    total = 0
    for each in descendants(pid):
        try:
            total += len(os.listdir(f"/proc/{each}/fd"))
        except OSError:
            continue  # the process has just ended
    return total


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time used so far by `pid` and its descendants."""
    ticks = 0
    for each in descendants(pid):
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return ticks / os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    """CPU time all cores of the machine have spent busy since boot (/proc/stat; idle and iowait excluded)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    """CPU time of this process and every child it has waited for (their children included, once reaped)."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def wait_idle(pid: int, *, timeout: float = 5.0, interval: float = 0.2) -> None:
    """Wait until `pid` stops using CPU: when a timed load run ends, the server may still be working off
    requests the load tool abandoned, and that work must not be billed to the next run.
    """
    deadline = time.monotonic() + timeout
    before = cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(interval)
        now = cpu_seconds(pid)
        if now - before < 0.1 * interval:
            return
        before = now


class Server:
    """One child process, started by `__enter__` and ready when `ready()` returns True."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        ready: Callable[[], bool],
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        start_timeout: float = 120.0,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.ready = ready
        self.env = env
        self.cwd = cwd
        self.start_timeout = start_timeout
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None, "not started"
        return self.process.pid

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no output)"

    def __enter__(self) -> Server:
        with open(self.log_path, "wb") as log:
            # A session of its own, so stopping it also reaches whatever it forked.
            self.process = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.start_timeout
        while not self.ready():
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} not ready after {self.start_timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self.process.wait(timeout=15)
        # Helpers the server forked may outlive it; they share its process group.
        self._signal_group(signal.SIGKILL)

    def _signal_group(self, sig: signal.Signals) -> None:
        assert self.process is not None
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            pass

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
