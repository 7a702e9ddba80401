"""`python -m bench.overhead --smoke` runs nginx, hey and the proxy on loopback and reports every row.

Behaviour only: every request must succeed and every row be there; the timings are read by people, never
asserted. nginx and hey are required, not optional: CI installs them, so a missing one fails loudly here.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.overhead.nginx import find_nginx

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ("direct (nginx)", "compaction-proxy (none)", "compaction-proxy (default chain)")
PROXIES = TARGETS[1:]
BODIES = ("2 KB", "200 KB", "2 MB")
CONCURRENCY = (1, 16, 64)


def test_smoke_run_reports_every_target_body_and_concurrency_without_errors(tmp_path: Path) -> None:
    missing = [tool for tool, found in (("nginx", find_nginx()), ("hey", shutil.which("hey"))) if found is None]
    if missing:
        pytest.fail(f"bench.overhead needs {' and '.join(missing)} on PATH: apt-get install -y {' '.join(missing)}")
    out = tmp_path / "overhead.json"
    result = subprocess.run(
        [sys.executable, "-m", "bench.overhead", "--smoke", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())

    assert [b["label"] for b in report["bodies"]] == list(BODIES)
    load = {(r["target"], r["body"], r["concurrency"]): r for r in report["load"]}
    assert set(load) == {(t, b, c) for t in TARGETS for b in BODIES for c in CONCURRENCY}
    for key, row in load.items():
        assert row["requests"] > 0 and row["errors"] == 0, (key, row)
        assert (row["added_p50_ms"] is None) == (key[0] == TARGETS[0])

    first = {(r["target"], r["body"]): r for r in report["first_byte"]}
    assert set(first) == {(t, b) for t in TARGETS for b in BODIES}
    assert all(row["samples"] > 0 and row["errors"] == 0 for row in first.values()), first

    memory = {r["target"]: r for r in report["memory"]}
    assert set(memory) == set(PROXIES)
    assert all(row["peak_mb"] >= row["idle_mb"] > 0 for row in memory.values())

    # The peers are optional bench extras, never run in smoke mode; the report says so instead of hiding them.
    assert set(report["not_run"]) == {"LiteLLM proxy", "Headroom proxy"}
    headings = ("Latency and throughput", "Time to the first event", "Memory of the proxy process", "Not run:", "Goals")
    for heading in headings:
        assert heading in result.stdout
