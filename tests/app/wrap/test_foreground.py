"""The agent in the foreground: its exit status comes back as a shell gives it, what is sent to wrap reaches it, and
in a terminal it owns the terminal: its stdio is the tty, it is in the foreground group, a resize and Ctrl-C reach
it once, and wrap outlives the Ctrl-C.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from app.wrap.foreground import exit_status

ROOT = Path(__file__).resolve().parents[3]
# wrap's foreground run of the command given as arguments, exiting with its status.
RUNNER = "import os, sys; from app.wrap.foreground import run; sys.exit(run(sys.argv[1:], os.environ))"
AGENT = """
import os, signal, sys, time
interrupts = []
signal.signal(signal.SIGINT, lambda *_: interrupts.append(1))
signal.signal(signal.SIGWINCH, lambda *_: print("resized to", os.get_terminal_size(0), flush=True))
ttys = all(os.isatty(fd) for fd in (0, 1, 2))
print("tty", ttys, "foreground", os.tcgetpgrp(0) == os.getpgrp(), flush=True)
while not interrupts:
    time.sleep(0.01)
time.sleep(0.5)  # a second SIGINT, had wrap passed the terminal's on, would have arrived by now
print("interrupts", len(interrupts), flush=True)
sys.exit(5)
"""


def _runner(*command: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", RUNNER, *command], cwd=ROOT, stdout=subprocess.PIPE, text=True, start_new_session=True
    )


@pytest.mark.parametrize(("code", "status"), [("sys.exit(3)", 3), ("sys.exit(0)", 0), ("os.kill(os.getpid(), 9)", 137)])
def test_the_commands_exit_status_is_wraps_128_plus_n_for_a_signal(code: str, status: int) -> None:
    runner = _runner(sys.executable, "-c", f"import os, sys; {code}")
    assert runner.wait(30) == status


def test_exit_status() -> None:
    assert [exit_status(0), exit_status(2), exit_status(-15)] == [0, 2, 143]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_sent_to_wrap_reaches_the_agent_and_its_death_is_wraps_status(signum: int) -> None:
    agent = "import signal, time; print('ready', flush=True); time.sleep(60)"
    runner = _runner(sys.executable, "-c", agent)
    assert runner.stdout is not None and runner.stdout.readline() == "ready\n"
    runner.send_signal(signum)  # to wrap alone: the agent is in wrap's group, not wrap's pid
    assert runner.wait(30) == 128 + signum  # wrap itself was not killed by it (that would be -signum)


def _read_until(fd: int, marker: str, seen: list[str], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while marker not in "".join(seen):
        assert time.monotonic() < deadline, f"no {marker!r} in {''.join(seen)!r}"
        if select.select([fd], [], [], 0.1)[0]:
            seen.append(os.read(fd, 4096).decode(errors="replace"))


def test_in_a_terminal_the_agent_owns_it_and_a_resize_and_one_ctrl_c_reach_it() -> None:
    pid, terminal = pty.fork()
    if pid == 0:  # the child: a session leader whose controlling terminal is the pty, as a shell's job is
        os.chdir(ROOT)
        os.execv(sys.executable, [sys.executable, "-c", RUNNER, sys.executable, "-c", AGENT])
    seen: list[str] = []
    try:
        _read_until(terminal, "tty True foreground True", seen)
        # The kernel signals the terminal's foreground group on a resize, and on Ctrl-C (when the line discipline
        # reads ^C): wrap and the agent alike.
        fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
        _read_until(terminal, "resized to os.terminal_size(columns=100, lines=40)", seen)
        os.write(terminal, b"\x03")
        _read_until(terminal, "interrupts 1", seen)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(terminal)
    assert os.waitstatus_to_exitcode(status) == 5  # wrap lived through Ctrl-C and passed the agent's status on
