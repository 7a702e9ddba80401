"""Network namespaces: sockets in another process's (a container's), made from this test process; and a program run
in a private one of its own (isolated_report), so an agent CLI under test reaches nothing beyond its loopback.

A socket stays in the namespace it was created in, whichever thread uses it later: a short-lived thread
enters the namespace (setns(2); Linux, as root), creates the socket and ends. So a container run with
`--network=none`, which has its loopback and no route to anywhere, can still be reached by the test, and
can reach a stand-in server the test serves on its loopback.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

from tests.support.required import require
from tests.support.servers import LoopbackServer

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


class NetworkNamespace:
    def __init__(self, pid: int) -> None:
        # Held open, so this stays the same namespace even once the process is gone.
        self._fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)

    def tcp_socket(self) -> socket.socket:
        """A new TCP/IPv4 socket in the namespace."""
        made: list[socket.socket] = []
        failed: list[OSError] = []

        def make() -> None:
            if _libc.setns(self._fd, CLONE_NEWNET) != 0:
                errno = ctypes.get_errno()
                failed.append(OSError(errno, f"setns: {os.strerror(errno)}"))
                return
            made.append(socket.socket(socket.AF_INET, socket.SOCK_STREAM))

        thread = threading.Thread(target=make)
        thread.start()
        thread.join()
        if failed:
            raise failed[0]
        return made[0]

    def connect(self, host: str, port: int, timeout: float = 30) -> socket.socket:
        sock = self.tcp_socket()
        sock.settimeout(timeout)
        try:
            sock.connect((host, port))
        except OSError:
            sock.close()
            raise
        return sock

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> NetworkNamespace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SocketServer(LoopbackServer):
    """LoopbackServer's uvicorn server on a socket bound elsewhere: in a namespace, or to another address."""

    def __init__(self, app: Any, sock: socket.socket) -> None:
        super().__init__(app)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.servers[0].sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"


def isolated_report(argv: list[str], cwd: Path, timeout: float, reaching: str) -> dict[str, Any]:
    """`argv` run in a private network namespace (`unshare -n`; it brings its loopback up itself), and the JSON report
    it printed, once it exited 0. `reaching`: what must reach nothing else, for the reason a missing tool is given.
    """
    require(
        shutil.which("unshare") is not None and shutil.which("ip") is not None and os.geteuid() == 0,
        f"needs root, unshare(1) and ip(8) for a private network namespace, so {reaching} nothing else",
    )
    done = subprocess.run(["unshare", "-n", *argv], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report
