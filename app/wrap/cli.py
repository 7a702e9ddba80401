"""`compaction-proxy wrap [--proxy URL] [proxy flags] claude|codex|opencode [ARGS...]`, or `... -- CMD [ARGS...]`:
the agent run in the foreground, pointed at a proxy (one it starts, or --proxy's), then one summary of what the
proxy did for this run. Its exit status is the agent's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

import httpx
from pydantic import ValidationError

from app.server.flags import add_settings_flags, describe
from app.settings import Settings
from app.upstream.client import printable_url
from app.wrap import foreground
from app.wrap.agents import AGENTS, Agent, Command, Upstreams, WrapError
from app.wrap.proxy import StartedProxy, attached, log_path
from app.wrap.summary import Samples, Summary

PROG = "compaction-proxy wrap"
NOT_FOUND = 127  # as a shell answers a command it cannot find
# The setting of the proxy wrap starts that an upstream the agent was configured with goes to, by API.
UPSTREAM_FIELDS = {"openai": "upstream_base_url", "anthropic": "anthropic_base_url"}


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        usage=f"{PROG} [--proxy URL] [proxy flags] {{{','.join(AGENTS)}}} [ARGS...]  |  {PROG} [...] -- CMD [ARGS...]",
        description="Run a coding agent through the proxy: a proxy on a free loopback port (or --proxy's), the agent "
        "pointed at it and in the foreground, then a summary of what the proxy did. Your config files are read, "
        "never changed. After `--`, any command, given OPENAI_BASE_URL and ANTHROPIC_BASE_URL.",
        allow_abbrev=False,  # the flags are handed on to the proxy as written
    )
    parser.add_argument("--proxy", metavar="URL", help="a proxy already running, instead of starting one")
    add_settings_flags(parser)
    return parser


def split(argv: Sequence[str]) -> tuple[list[str], list[str], bool]:
    """wrap's own flags, the command, and whether it came after `--`. Every flag takes a value (add_settings_flags),
    so the command starts at the first word that is neither a flag nor a flag's value.
    """
    at = 0
    while at < len(argv):
        word = argv[at]
        if word == "--":
            return list(argv[:at]), list(argv[at + 1 :]), True
        if not word.startswith("-"):
            break
        at += 1 if "=" in word or word in ("-h", "--help") else 2
    return list(argv[:at]), list(argv[at:]), False


def pick(command: list[str], after_dashes: bool) -> tuple[Agent, list[str]]:
    if after_dashes:
        if not command:
            raise WrapError("nothing to run after --")
        return Command(), command
    if not command or command[0] not in AGENTS:
        named = f"unknown agent {command[0]!r}" if command else "no agent named"
        raise WrapError(f"{named}: one of {', '.join(AGENTS)}, or -- CMD [ARGS...] for any other command")
    return AGENTS[command[0]](), command[1:]


def main(argv: list[str]) -> int:
    flags, command, after_dashes = split(argv)
    options = parser().parse_args(flags)
    try:
        agent, args = pick(command, after_dashes)
        return wrap(agent, args, options, _without_proxy(flags))
    except WrapError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1


def _without_proxy(flags: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for word in flags:
        if skip:
            skip = False
        elif word == "--proxy":
            skip = True
        elif not word.startswith("--proxy="):
            out.append(word)
    return out


def wrap(agent: Agent, args: list[str], options: argparse.Namespace, proxy_flags: list[str]) -> int:
    env = dict(os.environ)
    cwd = Path.cwd()
    executable = agent.executable or args[0]
    if shutil.which(executable, path=env.get("PATH")) is None:
        print(f"{PROG}: {executable}: not found on PATH", file=sys.stderr)
        return NOT_FOUND
    found = agent.upstreams(env, cwd)
    overrides = {k: v for k, v in vars(options).items() if v is not None and k != "proxy"}
    settings = _settings(overrides)
    started: StartedProxy | None = None
    if options.proxy:
        url = attached(options.proxy)
        # wrap cannot ask a running proxy where it forwards: it takes it to forward where the agent was going.
        forwards_to = Upstreams(
            openai=found.openai or settings.upstream_base_url, anthropic=found.anthropic or settings.anthropic_base_url
        )
        print(f"{PROG}: through the proxy at {url}", file=sys.stderr)
    else:
        settings, proxy_env = _taking(found, settings, overrides, env)
        forwards_to = Upstreams(openai=settings.upstream_base_url, anthropic=settings.anthropic_base_url)
        started = StartedProxy.start(proxy_flags, proxy_env, log_path(env))
        url = started.url
        openai, anthropic = printable_url(settings.upstream_base_url), printable_url(settings.anthropic_base_url)
        where = f"forwarding to {openai} (OpenAI API), {anthropic} (Anthropic API)"
        print(f"{PROG}: proxy at {url} {where}; its log: {started.log}", file=sys.stderr)
    print(f"{PROG}: savings page, while the agent runs: {url}/dashboard", file=sys.stderr)
    try:
        before = Samples.scrape(url)
        launch = agent.launch(args, url, forwards_to, env, cwd)
        for note in launch.notes:
            print(f"{PROG}: {note}", file=sys.stderr)
        status = foreground.run(launch.argv, launch.env)
        try:
            run = Samples.scrape(url).since(before)
        except httpx.HTTPError as exc:  # the proxy died, or --proxy's went away: the agent's status still counts
            print(f"{PROG}: no summary, the proxy's /metrics did not answer: {exc}", file=sys.stderr)
            return status
        print(f"{PROG}: {executable} exited with {status}; through the proxy:", file=sys.stderr)
        for line in Summary.of(run).lines():
            print(line, file=sys.stderr)
        return status
    finally:
        if started is not None:
            started.stop()


def _settings(overrides: dict[str, object]) -> Settings:
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise WrapError(f"invalid settings:\n{describe(exc)}") from None
    except ValueError as exc:
        raise WrapError(f"invalid settings: {exc}") from None


def _taking(
    found: Upstreams, settings: Settings, overrides: dict[str, object], env: dict[str, str]
) -> tuple[Settings, dict[str, str]]:
    """The proxy's settings with the agent's own upstreams where the user set none for the proxy (a flag, the
    environment or the config file), and the environment that hands them to the proxy.
    """
    taken = {
        field: url
        for api, field in UPSTREAM_FIELDS.items()
        if (url := getattr(found, api)) is not None and field not in settings.model_fields_set
    }
    if not taken:
        return settings, env
    return _settings({**overrides, **taken}), {**env, **{f"COMPACTION_{f.upper()}": url for f, url in taken.items()}}
