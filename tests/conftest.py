"""What the run cost in memory, shown at the end of every run, and bounded under CI.

The pytest process's peak resident memory is its VmHWM (/proc/self/status). Under CI=true a peak over
MEMORY_BOUND fails the run, whatever the tests said: the machine CI runs on also runs the engines the suite
starts (Docker, Redis, nginx, proxies, coding agents), and the suite once held 9.7 GB in this one process while
every test passed. A bound on memory, not on time: the peak hardly depends on the machine's load.
"""

from __future__ import annotations

import os
import resource

import pytest

MEMORY_BOUND = 2_000_000_000  # bytes; the suite's peak is about half of it
PEAK = pytest.StashKey[int]()


def peak_resident_bytes() -> int | None:
    """This process's peak resident set size (VmHWM), or None without /proc (not Linux)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # in kB
    except OSError:
        pass
    return None


def megabytes(size: int) -> str:
    return f"{size / 1e6:,.0f} MB"


def under_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1")


# Runs within the terminal reporter's own pytest_sessionfinish (a wrapper), so before its summary.
def pytest_sessionfinish(session: pytest.Session) -> None:
    peak = peak_resident_bytes()
    if peak is None:
        return
    session.config.stash[PEAK] = peak
    if peak > MEMORY_BOUND and under_ci() and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    peak = config.stash.get(PEAK, None)
    if peak is None:
        return
    # The largest ru_maxrss of the children waited for (in kB on Linux). A child's counts the pages it shared with
    # this process until its exec, so it is never below this process's own peak when the child was started.
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    terminalreporter.ensure_newline()
    terminalreporter.section("memory")
    terminalreporter.write_line(f"peak resident memory of the pytest process (VmHWM): {megabytes(peak)}")
    if children == 0:
        largest = "none"
    elif children <= peak:
        largest = f"{megabytes(children)} (counting the pytest process's own pages a child starts with)"
    else:
        largest = megabytes(children)
    terminalreporter.write_line(f"largest child process waited for (ru_maxrss): {largest}")
    if peak > MEMORY_BOUND:
        verdict = "the run fails (CI=true)" if under_ci() else "under CI=true the run would fail"
        terminalreporter.write_line(
            f"the pytest process's peak is over the bound of {megabytes(MEMORY_BOUND)}: {verdict}", red=True, bold=True
        )
