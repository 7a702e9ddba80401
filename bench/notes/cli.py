"""The notes strategy over a long trip-planning chat with planted facts and changed decisions.

    python -m bench.notes                                       # deterministic stand-in summariser
    python -m bench.notes --turns 140 --budget 1200             # smoke size (the test's)
    python -m bench.notes --base-url https://api.openai.com/v1 --model gpt-4o-mini   # a real model
                                                                # (its key in OPENAI_API_KEY)

Every turn is one request, as a client sends it: the whole history so far, ending with the user's message.
Reported: summariser calls per 100 requests (made ahead of need, or while a request waited), how often the
compacted request starts with the previous request's compacted messages byte for byte (the provider's prompt
cache holds), and which planted facts are in the last request sent upstream: the current value of each fact,
and whether a value a later decision replaced is still there. `window` with the same budget, which drops old
turns without notes, runs alongside for comparison.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import httpx

from strategies import BUILTINS, Chain, Context, Message, Registry, TokenCounter
from strategies.conversation import text_of
from strategies.notes_io import NotesUnavailable
from strategies.window import Window, WindowParams

from .stand_in import DictNotes, StandInSummariser
from .trip import FACTS, conversation, facts_in, requests


class ModelSummariser:
    """A real model behind an OpenAI-compatible endpoint, called synchronously (the bench has no event loop)."""

    def __init__(self, base_url: str, model: str, key: str, context_window: int) -> None:
        headers = {"authorization": f"Bearer {key}"}
        self.client = httpx.Client(base_url=base_url.rstrip("/"), timeout=120, headers=headers)
        self.default_model = model
        self.window = context_window

    def context_window(self, model: str) -> int:
        return self.window

    def summarise(self, messages: list[Message], model: str) -> str:
        try:
            response = self.client.post("/chat/completions", json={"model": model, "messages": messages})
        except httpx.TransportError as exc:
            raise NotesUnavailable("summariser_error", type(exc).__name__) from None
        if response.status_code != 200:
            raise NotesUnavailable("summariser_error", f"HTTP {response.status_code}: {response.text[:200]}")
        return text_of(response.json()["choices"][0]["message"]["content"])


def dumps(messages: list[Message]) -> bytes:
    return json.dumps(messages, ensure_ascii=False).encode()


def prefix_kept(outs: list[list[Message]]) -> int:
    """Requests whose compacted messages start with the previous request's, byte for byte."""
    return sum(dumps(now).startswith(dumps(before)[:-1]) for before, now in zip(outs, outs[1:], strict=False))


def run(args: argparse.Namespace) -> dict[str, Any]:
    counter = TokenCounter()
    history = conversation(args.turns)
    sent = requests(history)
    if args.base_url:
        key = os.environ.get(args.api_key_env, "")
        summariser: Any = ModelSummariser(args.base_url, args.model, key, args.context_window)
    else:
        summariser = StandInSummariser(first_line_only=True, max_words=args.max_words, nothing="")
    cache = DictNotes()
    # A chain, not the strategy alone: it is the chain that runs notes' fallback when no notes can be had.
    notes = Chain.parse(f"notes(budget={args.budget},max_words={args.max_words})", Registry(BUILTINS))
    window = Window(WindowParams(budget=args.budget))
    notes_outs, window_outs, waited, fallbacks, used = [], [], 0, 0, 0
    for request in sent:
        ctx = Context(model=args.model, tokens=counter, summariser=summariser, notes_cache=cache)
        result = notes.run(request, ctx, trace=True)
        notes_outs.append(result.messages)
        details = result.steps[0].details
        waited += bool(details.get("summariser_calls"))
        fallbacks += result.fallback is not None
        used = details.get("chunks", used)
        cache.run_ahead()
        window_outs.append(window.apply(request, Context(model=args.model, tokens=counter)).messages)
    last = Context(model=args.model, tokens=counter)
    return {
        "requests": len(sent),
        "tokens": (last.count(sent[-1]), last.count(notes_outs[-1]), last.count(window_outs[-1])),
        "calls": cache.folds,
        "used": used,
        "ahead": cache.folds_ahead,
        "waited": waited,
        "fallbacks": fallbacks,
        "prefix": (prefix_kept(notes_outs), prefix_kept(window_outs)),
        "facts": (facts_in(notes_outs[-1]), facts_in(window_outs[-1])),
        "notes": notes_outs[-1][1]["content"] if len(notes_outs[-1]) > 1 else "",
    }


def report(args: argparse.Namespace, r: dict[str, Any]) -> None:
    n = r["requests"]
    who = f"model {args.model} at {args.base_url}" if args.base_url else "deterministic stand-in summariser"
    print(f"conversation: {n} requests ({args.turns} turns), budget {args.budget}, max_words {args.max_words}; {who}")
    before, with_notes, with_window = r["tokens"]
    print(f"last request, tokens: {before} sent by the client -> notes {with_notes}, window {with_window}")
    print(
        f"summariser calls: {r['calls']} ({100 * r['calls'] / n:.1f} per 100 requests); made ahead of need: "
        f"{r['ahead']}; requests that waited for one: {r['waited']}; fallbacks: {r['fallbacks']}"
    )
    print(f"folds in the last request's notes: {r['used']} (calls never used: {r['calls'] - r['used']})")
    notes_prefix, window_prefix = r["prefix"]
    print(
        f"compacted prefix byte-identical to the previous request's: notes {notes_prefix}/{n - 1} "
        f"({100 * notes_prefix / (n - 1):.1f}%), window {window_prefix}/{n - 1} ({100 * window_prefix / (n - 1):.1f}%)"
    )
    print("planted facts in the last request sent upstream (current value; replaced values still there):")
    notes_facts, window_facts = r["facts"]
    for label, (present, stale) in notes_facts.items():
        w_present, w_stale = window_facts[label]
        cell = "yes" if present else "NO "
        print(
            f"  {label:<14} notes: {cell} {'stale: ' + ', '.join(stale) if stale else '':<28}"
            f" window: {'yes' if w_present else 'NO '} {'stale: ' + ', '.join(w_stale) if w_stale else ''}"
        )
    kept, window_kept = (sum(p for p, _ in facts.values()) for facts in (notes_facts, window_facts))
    print(f"facts kept: notes {kept}/{len(notes_facts)}, window {window_kept}/{len(notes_facts)}")
    if args.show_notes:
        print("notes sent with the last request:\n" + r["notes"])


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.notes", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=200, help="user turns in the conversation (default 200)")
    parser.add_argument("--budget", type=int, default=1500, help="notes' and window's budget (default 1500)")
    parser.add_argument("--max-words", type=int, default=180)
    parser.add_argument("--base-url", help="OpenAI-compatible base URL of a real summariser")
    parser.add_argument("--model", default="gpt-4o-mini", help="summariser (and token-counting) model")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", help="variable holding the real model's key")
    parser.add_argument("--context-window", type=int, default=128_000, help="the real model's context window")
    parser.add_argument("--show-notes", action="store_true", help="print the last request's notes")
    args = parser.parse_args()
    if args.turns < max(turn for turn, *_ in FACTS) + 1:
        parser.error(f"--turns must be at least {max(turn for turn, *_ in FACTS) + 1}, for every fact to be planted")
    report(args, run(args))
