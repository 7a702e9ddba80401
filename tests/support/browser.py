"""Headless Chromium (Debian's chromium package) loading a page: its DOM once its scripts have run, or a screenshot.
Missing, a test is skipped and says so, or fails under CI (tests/support/required.py): scripts/test installs it.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support.required import require

INSTALL = "apt-get install -y chromium"
# Virtual time: the page's timers and fetches run as fast as they can, up to this much page time.
BUDGET_MS = 5000


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    require(found is not None, f"chromium is not installed; the savings page is tested in a real browser: {INSTALL}")
    assert found is not None
    return found


def _run(url: str, *flags: str) -> str:
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        command = [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            f"--virtual-time-budget={BUDGET_MS}",
            *flags,
            url,
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def dump_dom(url: str) -> str:
    """The page's DOM, serialized, after its scripts ran."""
    return _run(url, "--dump-dom")


def screenshot(url: str, path: Path, size: tuple[int, int] = (1200, 900)) -> None:
    # Every compositor stage before the capture: otherwise tiles still being rasterized come out blank.
    flags = ["--run-all-compositor-stages-before-draw", "--hide-scrollbars"]
    _run(url, f"--screenshot={path}", f"--window-size={size[0]},{size[1]}", *flags)
    assert path.stat().st_size > 10_000, "an empty page"
