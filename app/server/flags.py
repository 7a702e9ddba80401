"""The flags that set the proxy's settings, and what an invalid setting says: shared by the server command and
`compaction-proxy wrap`, which hands them on to the proxy it starts.
"""

from __future__ import annotations

import argparse

from pydantic import ValidationError


def add_listen_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port to listen on (default 8080)")


def add_settings_flags(parser: argparse.ArgumentParser) -> None:
    """Every flag but where to listen. Each takes a value (wrap's command line relies on it)."""
    parser.add_argument(
        "--upstream",
        dest="upstream_base_url",
        metavar="BASE_URL",
        help="OpenAI-compatible upstream base URL (default https://api.openai.com/v1)",
    )
    parser.add_argument(
        "--context-window",
        dest="default_context_window",
        type=int,
        metavar="TOKENS",
        help="context window of models the proxy cannot otherwise learn (default 128000)",
    )
    parser.add_argument("--config", metavar="FILE", help="TOML settings file (or COMPACTION_CONFIG)")
    parser.add_argument("--log-level", choices=["debug", "info", "warning", "error"])
    parser.add_argument(
        "--log-format",
        choices=["auto", "json", "text"],
        help="auto (default: text on a terminal), json or text",
    )
    parser.add_argument("--workers", type=int, metavar="N", help="worker processes serving the port (default 1)")


def describe(exc: ValidationError) -> str:
    # Field and reason only: the rejected value could be a secret.
    return "\n".join(f"  {'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}" for e in exc.errors())
