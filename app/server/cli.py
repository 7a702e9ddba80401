"""`compaction-proxy`: serves, its flags overriding the environment, which overrides the config file; or, when the
first argument names a subcommand (SUBCOMMANDS), runs that instead.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError
from uvicorn.config import STARTUP_FAILURE

from app.main import ConfigError, create_app
from app.server import inspect
from app.server.banner import banner
from app.server.connections import raise_open_file_limit
from app.server.flags import add_listen_flags, add_settings_flags, describe
from app.server.logs import configure_logging
from app.server.serve import DrainingServer, exit_cleanly_after_drain, server_config
from app.server.workers import run_workers
from app.settings import Settings
from app.wrap import cli as wrap

logger = logging.getLogger("compaction_proxy.cli")

# Each subcommand's main: its own arguments in, the exit status out.
SUBCOMMANDS: dict[str, Callable[[list[str]], int]] = {"wrap": wrap.main, "inspect": inspect.main}


def parse_args(argv: Sequence[str] | None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        prog="compaction-proxy",
        description="HTTP proxy that compacts LLM context in flight: OpenAI chat completions and Responses, "
        "Anthropic Messages.",
        epilog="compaction-proxy wrap --help: run a coding agent through a proxy of its own. "
        "compaction-proxy inspect --help: what compaction did to the newest requests.",
    )
    add_listen_flags(parser)
    add_settings_flags(parser)
    return {k: v for k, v in vars(parser.parse_args(argv)).items() if v is not None}


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in SUBCOMMANDS:
        sys.exit(SUBCOMMANDS[args[0]](args[1:]))
    serve(args)


def serve(argv: Sequence[str]) -> None:
    overrides = parse_args(argv)
    try:
        settings = Settings(**overrides)
        app = create_app(settings)
    except ValidationError as exc:
        sys.exit(f"compaction-proxy: invalid settings:\n{describe(exc)}")
    except (ConfigError, ValueError) as exc:
        sys.exit(f"compaction-proxy: invalid settings: {exc}")
    configure_logging(settings.log_level, settings.log_format)
    for line in banner(settings):
        logger.info("%s", line)
    exit_cleanly_after_drain()
    config = server_config(app, settings)
    # Per process (workers inherit the limit): the client connections, the upstream pool, a burst of accepted
    # sockets not yet closed for the limit (up to the listen backlog at once), and some for files and caches.
    raise_open_file_limit(settings.max_client_connections + settings.max_connections + config.backlog + 256)
    if settings.workers > 1:
        # The app built above only proved the settings work; each worker builds its own.
        sys.exit(run_workers(settings, overrides))
    server = DrainingServer(config, app.state.readiness)
    # As uvicorn.run does: Ctrl-C is a normal way to stop; a server that never started (its lifespan
    # start-up failed) is a failure.
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    if not server.started:
        sys.exit(STARTUP_FAILURE)
