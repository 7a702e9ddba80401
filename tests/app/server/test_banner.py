"""The start-up banner: where to point each client and where each route forwards, never a key; and the log
format a person at a terminal gets."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

from app.server.banner import banner, client_url
from app.server.logs import resolved_format
from app.settings import Settings
from tests.support.servers import closed_port
from tests.support.upstream import StandInUpstream

ROOT = Path(__file__).resolve().parents[3]


def test_it_names_both_base_urls_each_routes_upstream_and_the_default_chain() -> None:
    settings = Settings(
        port=9123, upstream_base_url="http://llm.internal:8000/v1", anthropic_base_url="https://claude.internal"
    )
    lines = banner(settings)
    assert lines[0] == "compaction-proxy on http://127.0.0.1:9123"
    assert "OPENAI_BASE_URL=http://127.0.0.1:9123/v1" in lines[1]
    assert "ANTHROPIC_BASE_URL=http://127.0.0.1:9123" in lines[1].split("  ")[-1]
    assert "  /v1/chat/completions -> http://llm.internal:8000/v1/chat/completions" in lines
    assert "  /v1/responses -> http://llm.internal:8000/v1/responses" in lines
    assert "  /v1/messages -> https://claude.internal/v1/messages" in lines
    assert any(settings.default_strategies in line for line in lines)


def test_it_names_the_savings_page_where_a_browser_here_opens_it_and_says_when_it_asks_for_a_key() -> None:
    open_proxy = banner(Settings(host="0.0.0.0", port=9123))
    assert open_proxy[-1] == "  savings page: http://127.0.0.1:9123/dashboard"
    guarded = banner(Settings(port=9123, api_keys=["sk-proxy-key-1"]))
    assert guarded[-1] == "  savings page: http://127.0.0.1:9123/dashboard (it asks for a proxy key)"


def test_an_address_of_every_interface_is_written_as_loopback_for_clients_here() -> None:
    assert client_url(Settings(host="0.0.0.0", port=80)) == "http://127.0.0.1:80"
    assert client_url(Settings(host="::", port=80)) == "http://[::1]:80"
    assert client_url(Settings(host="fd00::5", port=80)) == "http://[fd00::5]:80"
    assert "(listening on 0.0.0.0)" in banner(Settings(host="0.0.0.0"))[0]


def test_no_key_or_credential_reaches_it() -> None:
    settings = Settings(
        upstream_base_url="https://user:sk-url-secret@llm.example/v1",
        anthropic_base_url="https://ant:sk-ant-url-secret@claude.example",
        api_keys=["sk-proxy-key-1", "sk-proxy-key-2"],
        upstream_api_key="sk-upstream-key",
        anthropic_api_key="sk-ant-upstream-key",
    )
    text = "\n".join(banner(settings))
    for secret in ("sk-url-secret", "sk-ant-url-secret", "sk-proxy-key-1", "sk-proxy-key-2", "sk-upstream-key"):
        assert secret not in text
    assert "sk-ant-upstream-key" not in text
    assert "one of the proxy's 2 keys" in text


class _Closed:
    def isatty(self) -> bool:
        raise ValueError("I/O operation on closed file")


def test_auto_is_text_on_a_terminal_and_json_elsewhere(tmp_path: Path) -> None:
    primary, secondary = os.openpty()
    try:
        with open(secondary, "w", closefd=False) as terminal:
            assert resolved_format("auto", terminal) == "text"
            assert resolved_format("json", terminal) == "json"
    finally:
        os.close(primary)
        os.close(secondary)
    with (tmp_path / "log").open("w") as file:
        assert resolved_format("auto", file) == "json"
        assert resolved_format("text", file) == "text"
    assert resolved_format("auto", _Closed()) == "json"  # type: ignore[arg-type]


def test_started_in_a_terminal_the_proxy_logs_its_banner_as_text(upstream: StandInUpstream) -> None:
    primary, secondary = os.openpty()
    port = closed_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPACTION_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "--port", str(port), "--upstream", f"{upstream.url}/v1"],  # type: ignore[attr-defined]
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=secondary,
    )
    os.close(secondary)
    output = b""
    try:
        deadline = time.monotonic() + 60
        while b"Application startup complete" not in output and time.monotonic() < deadline:
            if not select.select([primary], [], [], 1.0)[0]:
                continue
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # the terminal closed: the process is gone
                break
            output += chunk
    finally:
        process.terminate()
        process.wait(timeout=30)
        os.close(primary)
    text = output.decode()
    assert "Application startup complete" in text, text
    assert f"INFO compaction_proxy.cli [-] compaction-proxy on http://127.0.0.1:{port}" in text, text
    assert f"OPENAI_BASE_URL=http://127.0.0.1:{port}/v1" in text
    assert not [line for line in text.splitlines() if line.startswith("{")], text
