"""`compaction-proxy inspect`: what compaction did to each message of the most recent requests, read from a running
proxy's GET /inspect (app.routes.inspect) and printed as a diff, or as the endpoint's JSON with --json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import httpx

from app.upstream.client import printable_url

KEY_ENV = "COMPACTION_PROXY_KEY"
DEFAULT_PROXY = "http://127.0.0.1:8080"
# Runs of kept messages at least this long are one line: the changes are what the diff is read for.
KEPT_RUN = 3


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="compaction-proxy inspect",
        description="What compaction did to each message of the most recent requests (original against compacted): "
        "kept, masked, cut, dropped, folded or minified, with sizes and refs. Needs inspect_requests set on the proxy.",
    )
    parser.add_argument("--proxy", default=DEFAULT_PROXY, metavar="URL", help=f"the proxy (default {DEFAULT_PROXY})")
    parser.add_argument("--json", action="store_true", help="print GET /inspect's JSON, for tools")
    parser.add_argument("-n", type=int, default=3, metavar="N", help="the newest N requests (default 3)")
    parser.add_argument("--key", help=f"a proxy key, where api_keys is set (default: ${KEY_ENV})")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("-n must be 1 or more")
    return args


def main(argv: Sequence[str]) -> int:
    """The exit status: 0, or 1 with a line on stderr saying why (the proxy unreachable, refusing, or off)."""
    args = parse_args(argv)
    key = args.key if args.key is not None else os.environ.get(KEY_ENV, "")
    url = args.proxy.rstrip("/")
    headers = {"authorization": f"Bearer {key}"} if key else {}
    try:
        answer = httpx.get(f"{url}/inspect", params={"n": args.n}, headers=headers, timeout=30)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        # The exception's type only: its text may quote the URL, which may hold credentials.
        print(f"compaction-proxy inspect: cannot reach {_printable(url)}: {type(exc).__name__}", file=sys.stderr)
        return 1
    if answer.status_code != 200:
        print(f"compaction-proxy inspect: {_refusal(answer)}", file=sys.stderr)
        return 1
    body = answer.json()
    try:
        print(json.dumps(body, indent=2, ensure_ascii=False) if args.json else render(body["requests"]), end="\n")
        sys.stdout.flush()
    except BrokenPipeError:
        # Read by `head` or a pager that quit: the reader has what it wanted. Python's own flush at exit would
        # raise again, so stdout goes to /dev/null for it.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _printable(url: str) -> str:
    try:
        return printable_url(url)
    except httpx.InvalidURL:
        return "the --proxy URL (not a URL)"


def _refusal(answer: httpx.Response) -> str:
    try:
        message = str(answer.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        message = answer.reason_phrase
    if answer.status_code == 401:
        message += f" Pass --key or set {KEY_ENV}."
    return f"{answer.status_code}: {message}"


def render(requests: list[dict[str, Any]]) -> str:
    """One block per request, the newest first: a header line, then a line per message (runs of kept ones as one)."""
    if not requests:
        return "No requests yet: none forwarded since the proxy started (or since inspect_requests was set)."
    return "\n\n".join(_block(entry) for entry in requests)


def _block(entry: dict[str, Any]) -> str:
    before, after = entry["tokens_before"], entry["tokens_after"]
    tokens = f"tokens {before:,} -> {after:,}" if before is not None and after is not None else "tokens not counted"
    if before and after is not None:
        tokens += f" ({(after - before) / before:+.0%})"
    head = [entry["time"], entry["wire"], entry["model"] or "-", f"request {entry['request_id']}", tokens]
    head.append(f"chain {entry['chain']}")
    if entry["fallback"]:
        head.append(f"fallback {entry['fallback']}")
    if entry["retried"]:
        head.append("retried")
    lines = ["  ".join(head)]
    lines += _message_lines(entry["messages"])
    unlisted = entry["unlisted"]
    if unlisted:
        counts = ", ".join(f"{n} {action}" for action, n in sorted(unlisted.items()))
        lines.append(f"  ... {sum(unlisted.values())} more not listed (inspect_entry_chars): {counts}")
    return "\n".join(lines)


def _message_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    run: list[dict[str, Any]] = []

    def flush() -> None:
        if len(run) >= KEPT_RUN:
            chars = sum(row["chars_before"] for row in run)
            where = f"{run[0]['index']}-{run[-1]['index']}"
            lines.append(f"  {where:>7}  {'':<9}  {'kept':<9}  {len(run)} messages, {chars:,} chars")
        else:
            lines.extend(_line(row) for row in run)
        run.clear()

    for row in rows:
        if row["action"] == "kept":
            run.append(row)
            continue
        flush()
        lines.append(_line(row))
    flush()
    return lines


def _line(row: dict[str, Any]) -> str:
    index = "+" if row["index"] is None else str(row["index"])
    action = row["action"]
    if action == "kept":
        size = f"{row['chars_before']:,}"
    elif action == "added":
        size = f"-> {row['chars_after']:,}"
    else:
        size = f"{row['chars_before']:,} -> {row['chars_after']:,}"
    parts = [f"  {index:>7}  {row['role']:<9}  {action:<9}  {size:<18}"]
    if row["refs"]:
        parts.append("ref " + ", ".join(row["refs"]))
    if row["by"]:
        parts.append(f"({', '.join(row['by'])})")
    if row["call_ids"]:
        parts.append(" ".join(row["call_ids"]))
    return "  ".join(parts).rstrip()
