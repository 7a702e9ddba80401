from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from app.wrap.agents import WrapError
from app.wrap.proxy import StartedProxy, attached, log_path
from tests.support.process import ProxyProcess
from tests.support.servers import closed_port, refuses_connections

ROOT = Path(__file__).resolve().parents[3]


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _gone(port: int, timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while not refuses_connections(port):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_started_proxy_serves_on_loopback_logs_to_its_file_and_stops(tmp_path: Path) -> None:
    log = log_path({"XDG_STATE_HOME": str(tmp_path)})
    assert log.parent == tmp_path / "compaction-proxy" / "wrap"
    proxy = StartedProxy.start(["--context-window", "5000"], dict(os.environ), log)
    try:
        assert httpx.get(f"{proxy.url}/readyz").status_code == 200
        assert proxy.url.startswith("http://127.0.0.1:")
    finally:
        proxy.stop()
    assert proxy.process.returncode == 0  # SIGTERM is a clean stop
    assert _gone(_port(proxy.url))
    assert f"compaction-proxy on {proxy.url}" in log.read_text()  # its banner: in the file, not wrap's terminal


def test_a_proxy_that_cannot_start_is_reported_with_its_log(tmp_path: Path) -> None:
    with pytest.raises(WrapError, match="did not start") as raised:
        StartedProxy.start(["--context-window", "-1"], dict(os.environ), tmp_path / "proxy.log")
    assert "default_context_window" in str(raised.value)


def test_the_proxy_stops_when_wrap_is_killed(tmp_path: Path) -> None:
    script = (
        "import os, sys, time; from pathlib import Path; from app.wrap.proxy import StartedProxy\n"
        f"proxy = StartedProxy.start([], dict(os.environ), Path({str(tmp_path / 'p.log')!r}))\n"
        "print(proxy.url, flush=True); time.sleep(60)"
    )
    wrap = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert wrap.stdout is not None
    url = wrap.stdout.readline().strip()
    assert httpx.get(f"{url}/readyz").status_code == 200
    wrap.send_signal(signal.SIGKILL)  # no handler runs: the kernel tells the proxy (PR_SET_PDEATHSIG)
    wrap.wait()
    assert _gone(_port(url)), "the proxy outlived wrap"


def test_a_running_proxy_is_found_whichever_way_its_url_is_written() -> None:
    with ProxyProcess() as proxy:
        assert attached(f"{proxy.url}/v1/") == attached(proxy.url) == proxy.url
    with pytest.raises(WrapError, match="no proxy ready"):
        attached(f"http://127.0.0.1:{closed_port()}")
