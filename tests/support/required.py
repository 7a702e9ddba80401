"""What a test needs from the machine (a tool, a Docker engine, root) and what its absence means.

On a developer's machine a test whose tool is missing is skipped, and says why. Under CI (CI=true) it fails instead:
scripts/test installs every one of these there, so a missing one is a broken install or an engine that would not
start, which a skip would pass over in silence.
"""

from __future__ import annotations

import os

import pytest


def on_ci() -> bool:
    return os.environ.get("CI") == "true"


def require(available: bool, reason: str) -> None:
    """Go on when `available`; else skip with `reason`, or fail with it under CI."""
    if available:
        return
    if on_ci():
        pytest.fail(f"{reason} (CI=true: scripts/test installs what this test needs, so here it fails, not skips)")
    pytest.skip(reason)
