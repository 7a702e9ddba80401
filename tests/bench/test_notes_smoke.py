"""bench.notes runs at a small size, so it cannot rot; its numbers are read by people, so only its shape is checked."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_notes_benchmark_runs_and_reports_every_measure() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bench.notes", "--turns", "140", "--budget", "1200"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    calls = re.search(r"summariser calls: (\d+) \(([\d.]+) per 100 requests\)", out)
    assert calls is not None and int(calls.group(1)) > 0
    assert re.search(r"compacted prefix byte-identical to the previous request's: notes \d+/140", out)
    assert re.search(r"facts kept: notes \d/8, window \d/8", out)
    assert "fallbacks: 0" in out
