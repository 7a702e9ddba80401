"""The machine a compaction run measured on, as the report opens with it."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from importlib.metadata import PackageNotFoundError, version

from ... import CHECKOUT


def describe() -> str:
    """What `nproc` and `lscpu | head` say, the load while the run ended (other work on the machine skews the
    times, never the token figures), the commit measured, and the Python and package versions.
    """
    lines = [f"$ nproc\n{os.cpu_count()}"]
    if shutil.which("lscpu"):
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout.splitlines()
        lines.append("$ lscpu | head -n 14\n" + "\n".join(lscpu[:14]))
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    lines.append(f"load average at the end of the run (1, 5, 15 min): {load}")
    lines.append(_commit())
    packages = []
    for name in ("tiktoken", "bfcl-eval", "matplotlib"):
        try:
            packages.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            packages.append(f"{name} not installed")
    lines.append(f"Python {platform.python_version()} ({platform.python_implementation()}), {', '.join(packages)}")
    return "```\n" + "\n".join(lines) + "\n```"


def _commit() -> str:
    if not shutil.which("git"):
        return "commit: unknown (no git)"
    git = ["git", "-C", str(CHECKOUT)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    if head.returncode:
        return "commit: unknown (not a git checkout)"
    dirty = subprocess.run([*git, "status", "--porcelain", "--", "strategies", "bench"], capture_output=True, text=True)
    changed = " with uncommitted changes in strategies/ or bench/" if dirty.stdout.strip() else ""
    return f"commit: {head.stdout.strip()}{changed}"
