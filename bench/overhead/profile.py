"""Where a proxied request's time goes: py-spy samples this proxy under hey's load and draws a flame graph.

    python -m bench.overhead.profile                                  # 2 KB, 16 connections, 10 s
    python -m bench.overhead.profile --body "200 KB" --concurrency 1 --out /tmp/flame.svg

The proxy runs as bench.overhead runs it (python -m app against nginx's canned completion, the default chain
unless --chain), warmed up for a second, then loaded with hey while py-spy records every thread at 200 Hz
(wall-clock: a thread waiting is drawn too). Needs py-spy (pip install py-spy), nginx and hey.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .load import hey
from .measure import BODIES, write_bodies
from .nginx import NginxUpstream
from .proxies import compaction_proxy

RATE = 200  # samples a second


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.overhead.profile",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--body", default="2 KB", choices=list(BODIES), help="request body (default 2 KB)")
    parser.add_argument("--concurrency", type=int, default=16, help="hey's connections (default 16)")
    parser.add_argument("--seconds", type=int, default=10, help="seconds of load, sampled (default 10)")
    parser.add_argument("--chain", help="sent as X-Compaction-Strategies (default: none sent, the default chain)")
    parser.add_argument("--out", type=Path, default=Path("flamegraph.svg"), help="the SVG (default flamegraph.svg)")
    args = parser.parse_args(argv)
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        sys.exit("bench.overhead.profile: py-spy not found: pip install py-spy")
    target = compaction_proxy(args.chain)
    with NginxUpstream() as nginx, tempfile.TemporaryDirectory(prefix="bench-profile-") as tmp:
        body = next(b for b in write_bodies(Path(tmp)) if b.label == args.body)
        with target.running(nginx.json_base, Path(tmp), stream=False) as endpoint:
            assert endpoint.pid is not None
            url = f"{endpoint.base_url}/chat/completions"
            headers = {"Content-Type": "application/json", **endpoint.headers}
            hey(url, body.path, headers, concurrency=4, seconds=1)  # pools and caches filled, as in bench.overhead
            record = [spy, "record", "--pid", str(endpoint.pid), "--rate", str(RATE), "--duration", str(args.seconds)]
            record += ["--nonblocking", "--format", "flamegraph", "--output", str(args.out)]
            with subprocess.Popen(record, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as sampling:
                result = hey(url, body.path, headers, concurrency=args.concurrency, seconds=args.seconds)
                _, errors = sampling.communicate(timeout=args.seconds + 60)
            if sampling.returncode != 0:
                sys.exit(f"bench.overhead.profile: py-spy failed: {errors.strip()}")
    print(f"{target.name}, {args.body}, {args.concurrency} connections: {result.rps:,.0f} req/s, "
          f"p50 {result.p50_ms:.1f} ms, p99 {result.p99_ms:.1f} ms, errors {result.errors}")  # fmt: skip
    print(f"flame graph: {args.out}")


if __name__ == "__main__":
    main()
