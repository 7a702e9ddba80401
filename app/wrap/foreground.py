"""The agent in the foreground, the terminal its own: it inherits stdin, stdout and stderr, and stays in wrap's
process group, which is the terminal's foreground group, so what the terminal sends (Ctrl-C, Ctrl-\\, a resize)
reaches it directly. wrap passes on what is sent to wrap alone (kill), and survives the terminal's Ctrl-C to stop
the proxy once the agent has exited.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Mapping, Sequence
from types import FrameType
from typing import Any

# Sent to wrap's pid by another process (a supervisor, kill): the agent gets them too. SIGWINCH twice is harmless
# (the size is read again); it reaches the agent this way even where wrap is not in the foreground group.
FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGWINCH, signal.SIGUSR1, signal.SIGUSR2)
# The terminal sends these to the whole foreground group, the agent included: passing them on as well would make
# one Ctrl-C two (Claude Code exits on a second one).
SURVIVED = (signal.SIGINT, signal.SIGQUIT)


def exit_status(returncode: int) -> int:
    """A process's return code as a shell reports it: 128 + N for a process ended by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def run(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """Runs the command until it exits; its exit status, as a shell would give it."""
    child: list[subprocess.Popen[bytes]] = []
    pending: list[int] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        if child:
            child[0].send_signal(signum)
        else:
            pending.append(signum)  # arrived before the agent existed: sent once it does

    def survive(signum: int, frame: FrameType | None) -> None:
        # A handler, not SIG_IGN: an ignored signal stays ignored in the child across exec, a caught one does not.
        pass

    previous: dict[int, Any] = {}
    for forwarded in FORWARDED:
        previous[forwarded] = signal.signal(forwarded, forward)
    for survived in SURVIVED:
        previous[survived] = signal.signal(survived, survive)
    try:
        child.append(subprocess.Popen(list(argv), env=dict(env)))
        for signum in pending:
            child[0].send_signal(signum)
        return exit_status(child[0].wait())
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
