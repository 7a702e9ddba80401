"""`python -m bench.soak --smoke` runs end to end: both servers as processes, no request lost or cut short.

Behaviour only: latency, memory and descriptor figures are printed for people, never asserted.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_soak_smoke_run_has_no_errors() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bench.soak", "--smoke"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert re.search(r"^requests: 200 in ", out, re.MULTILINE), out
    assert re.search(r"^errors: 0$", out, re.MULTILINE), out
    for label in ("latency: p50 ", "proxy RSS: after warm-up ", "proxy open fds (idle): at start "):
        assert label in out, out
