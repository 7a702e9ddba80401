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
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors.multiprocess import Multiprocess

from .metrics import MULTIPROCESS_DIR_ENV
from .server import server_config
from .settings import Settings

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


class Supervisor(Multiprocess):
    def terminate_all(self) -> None:
        # uvicorn keeps the listening socket open here, to hand to replacement workers. Left open while the
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
        supervisor = Supervisor(config, sockets=[config.bind_socket()])
        supervisor.run()
    if supervisor.failed_to_start:
        logger.error("a worker failed to start; see its lines above")
        return STARTUP_FAILURE
    return 0
