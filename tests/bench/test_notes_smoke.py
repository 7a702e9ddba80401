"""bench.notes runs at a small size, so it cannot rot. The run is deterministic (a stand-in summariser, folds made
ahead in line), so what it shows is checked as it shows it: a change in these numbers is a change in the result.
"""

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
    assert "summariser calls: 9 (6.4 per 100 requests); made ahead of need: 9; requests that waited for one: 0" in out
    assert "compacted prefix byte-identical to the previous request's: notes 131/140 (93.6%), window 130/140" in out
    # Notes keep the planted facts the window drops with the turns that said them.
    assert re.search(r"^facts kept: notes 7/8, window 1/8$", out, re.MULTILINE), out
    assert "fallbacks: 0" in out
