"""The proxy wrap sends the agent to: one it starts (`python -m app` on a free loopback port, its output to a log
file, in a session of its own so the terminal's Ctrl-C never reaches it, stopped with SIGTERM when the agent is
done and when wrap dies), or one already running (--proxy URL), left running.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx

from app.wrap.agents import WrapError

READY_SECONDS = 30
STOP_SECONDS = 10  # the agent is gone: nothing is in flight to drain
PR_SET_PDEATHSIG = 1
ATTEMPTS = 3  # a free port can be taken by another process before the proxy binds it


def ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def attached(url: str) -> str:
    """A running proxy's base URL (what a user may write: a trailing /v1 or slash), once it answers /readyz."""
    base = url.rstrip("/").removesuffix("/v1")
    if not ready(base):
        raise WrapError(f"no proxy ready at {base} (GET {base}/readyz)")
    return base


def log_path(env: Mapping[str, str]) -> Path:
    """A new file under $XDG_STATE_HOME/compaction-proxy/wrap (~/.local/state by default)."""
    state = Path(env["XDG_STATE_HOME"]) if env.get("XDG_STATE_HOME") else Path(env.get("HOME", "~")) / ".local/state"
    directory = state.expanduser() / "compaction-proxy" / "wrap"
    directory.mkdir(parents=True, exist_ok=True)
    return directory / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _dies_with(parent: int) -> None:
    """In the proxy's process before exec: SIGTERM when wrap dies, even by SIGKILL (Linux; elsewhere it outlives a
    killed wrap).
    """
    if not sys.platform.startswith("linux"):
        return
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # wrap died before the request was made
        os.kill(os.getpid(), signal.SIGTERM)


class StartedProxy:
    def __init__(self, process: subprocess.Popen[bytes], url: str, log: Path) -> None:
        self.process = process
        self.url = url
        self.log = log

    @classmethod
    def start(cls, flags: Sequence[str], env: Mapping[str, str], log: Path) -> StartedProxy:
        """A proxy with these settings flags, once it answers /readyz."""
        parent = os.getpid()
        for _ in range(ATTEMPTS):
            port = _free_port()
            url = f"http://127.0.0.1:{port}"
            with open(log, "ab") as out:
                process = subprocess.Popen(
                    [sys.executable, "-m", "app", "--host", "127.0.0.1", "--port", str(port), *flags],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    env=dict(env),
                    start_new_session=True,
                    preexec_fn=lambda: _dies_with(parent),
                )
            proxy = cls(process, url, log)
            if proxy._wait_ready():
                return proxy
            if "address already in use" not in _tail(log).lower():
                break
        raise WrapError(f"the proxy did not start (its log, {log}):\n{_tail(log)}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if ready(self.url):
                return True
            if self.process.poll() is not None:
                return False
            time.sleep(0.05)
        self.stop()
        return False

    def stop(self) -> None:
        """SIGTERM to its process group (the workers of --workers too), SIGKILL if it has not exited in time."""
        if self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        except ProcessLookupError:
            pass


def _tail(log: Path, lines: int = 20) -> str:
    with open(log, errors="replace") as text:
        return "".join(text.readlines()[-lines:])
