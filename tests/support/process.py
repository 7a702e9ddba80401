"""The proxy as its users run it: `python -m app ...` in a subprocess, with its log lines collected."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import httpx

from tests.support.servers import closed_port


class ProxyProcess:
    def __init__(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        preexec: Callable[[], None] | None = None,
        arrived: threading.Condition | None = None,
    ) -> None:
        """preexec: run in the child before the proxy starts (e.g. to lower a resource limit); arrived: notified as
        each line of its output is read (processes may share one, to wait for a line from any of them).
        """
        self.port = closed_port()
        self.args = [sys.executable, "-m", "app", "--host", "127.0.0.1", "--port", str(self.port), *args]
        # The tests' own COMPACTION_* variables must not change what the process under test does.
        base = {k: v for k, v in os.environ.items() if not k.startswith("COMPACTION_")}
        self.env = {**base, **(env or {})}
        self.preexec = preexec
        self.lines: list[str] = []
        self.arrived = arrived if arrived is not None else threading.Condition()
        self.process: subprocess.Popen[str] | None = None
        self.reader: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _read(self) -> None:
        # Drains the pipe as the process writes, so a chatty process never blocks on a full pipe.
        assert self.process is not None and self.process.stderr is not None
        for line in self.process.stderr:
            with self.arrived:
                self.lines.append(line.rstrip("\n"))
                self.arrived.notify_all()

    def __enter__(self) -> ProxyProcess:
        # A process group of its own, so stop() can end the workers of `--workers N` along with it.
        self.process = subprocess.Popen(
            self.args, stderr=subprocess.PIPE, text=True, env=self.env, start_new_session=True, preexec_fn=self.preexec
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        deadline = time.monotonic() + 30  # hang guard
        while True:
            try:
                httpx.get(f"{self.url}/healthz", timeout=5)
                return self
            except httpx.TransportError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("the proxy did not start:\n" + "\n".join(self.lines)) from None
                time.sleep(0.05)

    def wait_for(self, condition: Callable[[], bool], timeout: float = 30, what: str = "a log line") -> None:
        """Until condition() (on self.lines, say) holds, checked as each line arrives; fails after `timeout`."""
        wait_for_output(self.arrived, condition, timeout, what)

    def terminate(self, signum: int = signal.SIGTERM) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    def wait(self, timeout: float = 30) -> int:
        """The exit status, once the process has ended and all its output is read."""
        assert self.process is not None and self.reader is not None
        code = self.process.wait(timeout=timeout)
        self.reader.join(timeout=timeout)
        return code

    def stop(self) -> None:
        if self.process is None:
            return
        try:
            # The whole group: killing a supervisor alone would leave its workers serving the port.
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # everything has exited already
        self.wait()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_for_output(arrived: threading.Condition, condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Until condition() holds, checked whenever `arrived` (ProxyProcess.arrived) is notified of a new line."""
    deadline = time.monotonic() + timeout
    with arrived:
        while not condition():
            left = deadline - time.monotonic()
            assert left > 0, f"timed out after {timeout:g} s waiting for {what}"
            arrived.wait(left)
