"""`--workers N`: this process binds the port and supervises N worker processes that serve it.

uvicorn's supervisor does the work: it spawns the workers (fresh interpreters), pings them, replaces one that
dies or hangs, and on SIGTERM or SIGINT sends each a SIGTERM, then waits for them; each worker drains its
requests in flight for up to shutdown_grace_seconds, as a single process does. A worker imports the app
through app.main:create_app_from_env and so reads its settings from the environment, which is prepared here:
the command-line flags become COMPACTION_* variables. Flags carry no secrets; keys reach the workers the way
they reached this process, through its own environment or the config file.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors.multiprocess import Multiprocess, Process

from app.edge.metrics import MULTIPROCESS_DIR_ENV
from app.server.serve import server_config
from app.settings import Settings

WORKER_APP = "app.main:create_app_from_env"
logger = logging.getLogger("compaction_proxy.workers")


def flag_environment(overrides: Mapping[str, Any]) -> dict[str, str]:
    """The command-line settings as the environment variables that Settings reads, so that a worker resolves
    the same settings as this process: flags still win over the environment, which wins over the file.
    """
    return {f"COMPACTION_{name.upper()}": str(value) for name, value in overrides.items()}


@contextmanager
def shared_metrics_dir() -> Iterator[str]:
    """The directory where the workers keep their metric values, in the environment they inherit.

    An operator's PROMETHEUS_MULTIPROC_DIR (say, a writable volume under a read-only root) is used and its
    value files from an earlier run are removed, since they would be added to this run's totals; otherwise a
    fresh temporary directory is made, and removed when the supervisor ends.
    """
    given = os.environ.get(MULTIPROCESS_DIR_ENV)
    if given:
        Path(given).mkdir(parents=True, exist_ok=True)
        for stale in Path(given).glob("*.db"):
            stale.unlink()
        yield given
        return
    made = tempfile.mkdtemp(prefix="compaction-proxy-metrics-")
    os.environ[MULTIPROCESS_DIR_ENV] = made
    try:
        yield made
    finally:
        del os.environ[MULTIPROCESS_DIR_ENV]
        shutil.rmtree(made, ignore_errors=True)


def reuseport_sockets(host: str, port: int, count: int) -> list[socket.socket]:
    """`count` listening sockets on one address (SO_REUSEPORT), one per worker: the kernel spreads new connections
    over them evenly. On one shared socket, the worker that wakes first accepts every connection waiting, so a
    burst of keep-alive connections (a load balancer's pool, a benchmark's) could all land on one worker.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(family, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((host, port))
            port = sock.getsockname()[1]  # port 0: the one the first socket got, for all
            sock.set_inheritable(True)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


class Supervisor(Multiprocess):
    """uvicorn's supervisor, each worker with a listening socket of its own (self.sockets[i] is worker i's)."""

    def _spawn(self, index: int) -> Process:
        process = Process(self.config, [self.sockets[index]])
        process.start()
        return process

    def init_processes(self) -> None:
        self.processes = [self._spawn(index) for index in range(self.processes_num)]

    def keep_subprocess_alive(self) -> None:
        # uvicorn's, but the replacement gets the dead worker's socket, whose queued connections it then serves.
        if self.should_exit.is_set():
            return
        for index, process in enumerate(self.processes):
            if process.is_alive(timeout=self.config.timeout_worker_healthcheck):
                continue
            process.kill()
            process.join()
            if process.exitcode == STARTUP_FAILURE:  # the app is broken: every restart would fail the same way
                logger.error("worker [%s] failed to start; stopping", process.pid)
                self.should_exit.set()
                return
            logger.info("worker [%s] died; starting another on its socket", process.pid)
            self.processes[index] = self._spawn(index)

    def restart_all(self) -> None:
        # SIGHUP: each worker replaced in turn, the new one serving before the old one is stopped.
        for index, old in enumerate(self.processes):
            if self.should_exit.is_set():
                return
            new = self._spawn(index)
            if not new.wait_until_ready(self.config.timeout_worker_healthcheck, self.should_exit):
                new.kill()
                new.join()
                logger.error("worker [%s] was not ready in time; keeping [%s]", new.pid, old.pid)
                return
            old.terminate()
            old.join()
            self.processes[index] = new

    def terminate_all(self) -> None:
        # uvicorn keeps the listening sockets open here, to hand to replacement workers. Left open while the
        # workers drain, the kernel would go on completing new connections that no worker ever accepts, so
        # clients and load balancers would hang instead of being refused and retrying elsewhere.
        for sock in self.sockets:
            sock.close()
        super().terminate_all()

    @property
    def failed_to_start(self) -> bool:
        return any(process.exitcode == STARTUP_FAILURE for process in self.processes)


def run_workers(settings: Settings, overrides: Mapping[str, Any]) -> int:
    """Serve with settings.workers processes until SIGTERM or SIGINT; the exit status for the CLI."""
    # Spawned workers inherit this process's environment as it is when each one starts.
    os.environ.update(flag_environment(overrides))
    with shared_metrics_dir():
        config = server_config(WORKER_APP, settings, factory=True, workers=settings.workers)
        sockets = reuseport_sockets(settings.host, settings.port, settings.workers)
        supervisor = Supervisor(config, sockets=sockets)
        supervisor.run()
    if supervisor.failed_to_start:
        logger.error("a worker failed to start; see its lines above")
        return STARTUP_FAILURE
    return 0
