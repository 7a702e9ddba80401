"""What a real agent comes back to: the earlier tool results its next message quotes or reuses, by kind and by age.

    python -m bench.compaction.rereads --swe-data swe.json.gz      # SWE-agent sessions and tau-bench, a few seconds

A result is re-read at a request when the answer needs a value or a quoted line (bench.compaction.visibility) whose
newest earlier occurrence is that result. Age: tool results that arrived after it, so `mask(keep=K)` hides it from
age K on. Kind: the tool's name, and for a shell-like call ({"command": "..."}) its first word (`open`, `grep`,
`python`). Superseded: a later call of the same tool with the same arguments came before the request, so a newer copy
of the same output (or its update) is in the conversation. Chain-independent: it reads the sessions, not a replay.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from strategies import Message
from strategies.conversation import call_arguments, call_name, find_pairs
from strategies.epochs import answered_at

from .corpora import Conversation, Corpus, message_text, swe, tau
from .visibility import conversation_needs

AGES = ((1, 2), (3, 5), (6, 10), (11, 20), (21, 10**9))  # tool results after it, inclusive ranges


@dataclass
class Rereads:
    """Per kind: results seen, and results re-read at an age of 1 or more (each result counted once)."""

    results: Counter[str] = field(default_factory=Counter)
    reread: Counter[str] = field(default_factory=Counter)
    ages: Counter[tuple[int, int]] = field(default_factory=Counter)  # each re-read (result, request) once
    superseded: int = 0  # re-reads of a result superseded at the time
    requests: int = 0
    requests_rereading: int = 0


def kind(name: str, arguments: str | None) -> str:
    try:
        parsed = json.loads(arguments or "")
    except ValueError:
        parsed = None
    command = parsed.get("command") if isinstance(parsed, dict) else None
    words = command.split() if isinstance(command, str) else []
    return f"{name}: {words[0]}" if words else name


def measure(conversations: list[Conversation]) -> Rereads:
    out = Rereads()
    for conversation in conversations:
        _conversation(conversation, out)
    return out


def _call(message: Message, call_id: str | None) -> tuple[str, str | None]:
    return call_name(message, call_id), call_arguments(message, call_id)


def _conversation(conversation: Conversation, out: Rereads) -> None:
    messages = conversation.messages
    results = [(p.result_index, _call(messages[p.call_index], p.call_id)) for p in find_pairs(messages)]
    kinds = {i: kind(*call) for i, call in results}
    out.results.update(kinds.values())
    texts = {i: message_text(messages[i]) for i, _ in results}
    ends = answered_at(messages)
    needs = conversation_needs(conversation, ends)
    reread: set[int] = set()
    for end in ends:
        out.requests += 1
        before = [(i, call) for i, call in results if i < end]
        read: set[int] = set()  # positions in `before` this request reads again, each once
        for value in needs[end].values if end in needs else ():
            # The newest earlier result holding it is the one the model read it from.
            at = next((n for n in reversed(range(len(before))) if value in texts[before[n][0]]), None)
            if at is not None and at < len(before) - 1:
                read.add(at)
        for at in read:
            age = len(before) - 1 - at
            index, call = before[at]
            reread.add(index)
            out.ages[next(r for r in AGES if r[0] <= age <= r[1])] += 1
            out.superseded += any(later == call for _, later in before[at + 1 :])
        out.requests_rereading += bool(read)
    out.reread.update(kinds[i] for i in reread)


def table(title: str, out: Rereads, top: int = 12) -> list[str]:
    lines = [
        f"#### {title}: {out.requests} requests, {out.requests_rereading} re-read an earlier result "
        f"({out.requests_rereading / max(1, out.requests):.1%})",
        "",
        "| kind | results | re-read later | share |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, count in out.results.most_common(top):
        lines.append(f"| `{name}` | {count} | {out.reread[name]} | {out.reread[name] / count:.0%} |")
    total = sum(out.ages.values())
    lines += ["", "| age (tool results after it) | re-reads | share |", "| --- | ---: | ---: |"]
    for lo, hi in AGES:
        span = f"{lo}-{hi}" if hi < 10**9 else f"{lo}+"
        lines.append(f"| {span} | {out.ages[(lo, hi)]} | {out.ages[(lo, hi)] / max(1, total):.0%} |")
    lines += ["", f"Re-reads of a result superseded at the time (the same call made again since): {out.superseded}"]
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--swe-data", type=Path, default=swe.DATA, help="SWE-agent sessions (convert_swe_traj.py)")
    args = parser.parse_args(argv)
    corpora: list[Corpus] = [swe.load(path=args.swe_data), tau.load()]
    for corpus in corpora:
        if corpus.skipped:
            print(f"{corpus.title}: skipped ({corpus.skipped})\n")
            continue
        print("\n".join(table(corpus.title, measure(corpus.conversations))) + "\n")


if __name__ == "__main__":
    main()
