"""The benchmarks run at a tiny size, so they cannot rot. Their numbers are read by people, not asserted."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_speed_benchmark_runs_and_reports_every_measure() -> None:
    args = ["--messages", "40", "--chars", "300000", "--repeat", "2", "--repeat-cold", "1"]
    result = subprocess.run(
        [sys.executable, "-m", "bench.speed", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert re.search(r"history: 40 messages", out)
    before, after = map(int, re.search(r"tokens before -> after: (\d+) -> (\d+)", out).groups())  # type: ignore[union-attr]
    assert before > after > 0
    for label in ("cold caches:", "warm caches, same request:", "warm caches, one new msg:", "counting throughput"):
        assert label in out
