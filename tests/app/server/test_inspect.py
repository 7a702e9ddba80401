"""`compaction-proxy inspect` against a proxy on loopback that has forwarded a known request: its diff as text and
as JSON, the key from the flag or the environment, and a refusal said in one line that never shows the key.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.server import inspect
from strategies.refs import ref_of
from tests.app.conftest import ProxyFactory
from tests.factories import agent_loop
from tests.support.servers import LoopbackServer
from tests.support.upstream import StandInUpstream

ROOT = Path(__file__).resolve().parents[3]
KEY = "sk-proxy-cli-key"
CHAIN = "mask(keep=2,epoch=0,min_gain=0),window(budget=1900,low_water=0.9)"
MESSAGES = agent_loop(20, 1500)


@pytest.fixture(scope="module")
def served(start_proxy: ProxyFactory) -> Iterator[LoopbackServer]:
    with start_proxy(inspect_requests=5, api_keys=[KEY]) as server:
        yield server


@pytest.fixture
def inspected(served: LoopbackServer, upstream: StandInUpstream) -> LoopbackServer:
    headers = {"authorization": f"Bearer {KEY}", "X-Compaction-Strategies": CHAIN, "X-Request-Id": "cli-1"}
    answer = httpx.post(
        f"{served.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": MESSAGES}, headers=headers
    )
    assert answer.status_code == 200
    return served


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = inspect.main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def test_the_text_diff_shows_each_message_masked_dropped_or_kept_with_sizes_and_refs(
    inspected: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(capsys, "--proxy", inspected.url, "--key", KEY, "-n", "1")
    assert status == 0 and err == ""
    head, *lines = out.rstrip("\n").split("\n")
    assert "chat.completions  gpt-4o  request cli-1  tokens " in head and f"chain {CHAIN}" in head
    # Each line: index, role, what happened, sizes, then its refs, the steps that did it and its call ids.
    masked = [line.split() for line in lines if " masked " in line]
    dropped = [line.split() for line in lines if " dropped " in line]
    assert masked and dropped
    for index, role, _, before, arrow, after, ref, ref_value, by, call_id in masked:
        original = MESSAGES[int(index)]
        assert (role, arrow, ref, by, call_id) == ("tool", "->", "ref", "(mask)", original["tool_call_id"])
        assert (before, ref_value) == ("1,500", ref_of(original["content"])) and int(after) < 200
    for index, role, _, before, _, after, by, *call_ids in dropped:
        original = MESSAGES[int(index)]
        size = len(original["content"] or "") + sum(
            len(c["function"]["arguments"]) for c in original.get("tool_calls", [])
        )
        assert (role, before, after, by) == (original["role"], f"{size:,}", "0", "(window)")
        assert call_ids == [original.get("tool_call_id") or original["tool_calls"][0]["id"]]
    assert [line[0] for line in dropped] == [str(i) for i in range(2, 2 + len(dropped))]  # the oldest rounds
    assert lines[0].split()[:3] == ["0", "system", "kept"] and lines[-1].split()[:2] == [
        f"{len(MESSAGES) - 4}-{len(MESSAGES) - 1}",
        "kept",
    ]


def test_json_is_what_the_endpoint_answers_and_the_key_may_come_from_the_environment(
    inspected: LoopbackServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(inspect.KEY_ENV, KEY)
    status, out, _ = run(capsys, "--proxy", inspected.url, "--json", "-n", "1")
    assert status == 0
    expected = httpx.get(f"{inspected.url}/inspect?n=1", headers={"authorization": f"Bearer {KEY}"}).json()
    assert json.loads(out) == expected
    assert expected["requests"][0]["request_id"] == "cli-1"


def test_a_wrong_key_is_refused_in_one_line_that_does_not_show_it(
    served: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(capsys, "--proxy", served.url, "--key", "sk-not-this-one")
    assert (status, out) == (1, "")
    assert err.startswith("compaction-proxy inspect: 401: ") and "--key" in err and inspect.KEY_ENV in err
    assert "sk-not-this-one" not in err


def test_a_proxy_with_the_ring_off_says_how_to_turn_it_on(
    proxy: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = run(capsys, "--proxy", proxy.url)
    assert status == 1 and "404" in err and "inspect_requests" in err


def test_no_proxy_there_is_one_line_too(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "--proxy", "http://user:secret@127.0.0.1:9")
    assert status == 1 and err.startswith("compaction-proxy inspect: cannot reach http://127.0.0.1:9")
    assert "secret" not in err


def test_the_command_dispatches_inspect_before_the_serving_flags(inspected: LoopbackServer) -> None:
    command = [sys.executable, "-c", "from app.server.cli import main; main()", "inspect", "--proxy", inspected.url]
    done = subprocess.run([*command, "--key", KEY, "-n", "1"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "request cli-1" in done.stdout.split("\n", 1)[0]


def test_a_reader_that_stops_early_gets_no_traceback(inspected: LoopbackServer) -> None:
    # `compaction-proxy inspect | head -1`: the pipe closes while the diff is still being written.
    command = [sys.executable, "-m", "app", "inspect", "--proxy", inspected.url, "--key", KEY, "--json"]
    with subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0) as reader:
        assert reader.stdout is not None and reader.stderr is not None
        assert reader.stdout.read(1) == b"{"
        reader.stdout.close()
        err = reader.stderr.read().decode()
        status = reader.wait(timeout=60)
    assert status == 0 and "Traceback" not in err, err
