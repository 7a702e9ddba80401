"""The notes strategy over a long trip-planning chat with planted facts and changed decisions.

    python -m bench.notes                                       # deterministic stand-in summariser
    python -m bench.notes --turns 60                            # smoke size
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
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from strategies import Context, Message, TokenCounter
from strategies.content import text_of
from strategies.notes import Notes, NotesParams
from strategies.notes_fold import NO_NOTES, read_transcript
from strategies.notes_io import NotesUnavailable
from strategies.window import Window, WindowParams

# (turn, label, user message, value): a value to find later; a label planted twice is a changed decision.
FACTS = [
    (3, "traveller", "The traveller is Priya Raman, passport ending 4471.", "Priya Raman"),
    (8, "hotel booking", "Booked it: the confirmation code is HTL-4821-QX.", "HTL-4821-QX"),
    (14, "budget", "Our budget for the whole trip is $3,250.45.", "$3,250.45"),
    (21, "hotel", "Let's take Hotel Adler in Innsbruck.", "Hotel Adler"),
    (30, "flight", "The flight is LH 2417 on 14 March.", "LH 2417"),
    (38, "diet", "Remember that she needs a vegetarian menu everywhere.", "vegetarian"),
    (47, "departure", "We leave the hotel at 07:55 on the last day.", "07:55"),
    (60, "train", "Book the train ICE 578 from Munich.", "ICE 578"),
    (95, "budget", "Change of plan: the budget is now $3,900.15.", "$3,900.15"),
    (110, "hotel", "We changed our minds: Hotel Sonnenhof instead of Hotel Adler.", "Hotel Sonnenhof"),
    (130, "departure", "New time: we leave the hotel at 08:35 on the last day.", "08:35"),
]
SMALL_TALK = ["sounds good, thanks", "ok, what else should we look at?", "great, let us keep going", "nice"]
TOPICS = ["museums", "restaurants", "hiking trails", "ski passes", "markets", "day trips", "cafes", "parking"]


def conversation(turns: int, seed: int = 11) -> list[Message]:
    """System prompt, then `turns` user/assistant pairs and a last user message."""
    rng = random.Random(seed)
    planted = {turn: text for turn, _, text, _ in FACTS}
    messages: list[Message] = [{"role": "system", "content": "You are a travel assistant. Be concise."}]
    for turn in range(turns + 1):
        if turn in planted:
            ask, answer = planted[turn], "Noted, I will keep that in mind."
        elif rng.random() < 0.4:
            topic = rng.choice(TOPICS)
            ask = f"can you look up {topic} near the hotel?"
            options = [f"{n}. Option {rng.choice('ABCDEFGH')}{n}: {rng.randrange(5, 90)} min away" for n in range(1, 7)]
            answer = "Search results:\n" + "\n".join(options) + "\nWhich one do you like?"
        else:
            ask, answer = rng.choice(SMALL_TALK), "Happy to help with the next step of the trip."
        messages.append({"role": "user", "content": ask})
        if turn < turns:
            messages.append({"role": "assistant", "content": answer})
    return messages


def requests(history: list[Message]) -> list[list[Message]]:
    return [history[: i + 1] for i, m in enumerate(history) if m["role"] == "user"]


def informative(line: str) -> bool:
    said = line.split(": ", 1)[-1]
    return bool(re.search(r"\d", said)) or any(re.fullmatch(r"[A-Z][a-z]+", w.strip(".,:;")) for w in said.split()[1:])


def first_lines(turn: dict[str, Any]) -> list[str]:
    """A turn's first line of text with its speaker (`user: ...`, `tool result (id): ...`), and its calls."""
    role, text = turn["role"], turn.get("content") or ""
    speaker = f"tool result ({turn.get('tool_call_id') or turn.get('name')})" if role in ("tool", "function") else role
    lines = [f"{speaker}: {text.splitlines()[0]}"] if text.strip() else []
    return lines + [f"{role} called {call['name']}({call['arguments']})" for call in turn.get("tool_calls", [])]


class StandInSummariser:
    """Deterministic: the notes' lines, then the first line of each next message that carries a digit or a
    capitalised name (later lines of a message, such as a list of search results, are left out), each once;
    past max_words, the newest lines that fit. A crude stand-in for a model: it never replaces a decision.
    """

    def __init__(self, max_words: int) -> None:
        self.max_words = max_words

    default_model = None

    def context_window(self, model: str) -> int:
        return 128_000

    def summarise(self, messages: list[Message], model: str) -> str:
        head, _, turns = messages[-1]["content"].partition("\n\nNext turns:\n")
        notes = head.removeprefix("Current notes:\n")
        lines = [] if notes == NO_NOTES else notes.splitlines()
        said = [line for turn in read_transcript(turns) for line in first_lines(turn) if informative(line)]
        lines = list(dict.fromkeys(lines + said))
        kept: list[str] = []
        for line in reversed(lines):
            if sum(len(k.split()) for k in kept) + len(line.split()) > self.max_words:
                break
            kept.insert(0, line)
        return "\n".join(kept)


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


@dataclass
class CountingCache:
    """The NotesCache protocol over a dict. Folds asked for ahead of need run right after the request that asked,
    as the proxy's background task set would before the next turn arrives.
    """

    notes: dict[str, str] = field(default_factory=dict)
    pending: list[Callable[[], None]] = field(default_factory=list)
    calls: int = 0
    ahead_calls: int = 0
    running_ahead: bool = False

    def get(self, key: str) -> str | None:
        return self.notes.get(key)

    def fold(self, key: str, make: Callable[[], str]) -> str:
        if key not in self.notes:
            self.notes[key] = make()
            self.calls += 1
            self.ahead_calls += self.running_ahead
        return self.notes[key]

    def fold_ahead(self, key: str, job: Callable[[], None]) -> bool:
        self.pending.append(job)
        return True

    def run_ahead(self) -> None:
        jobs, self.pending = self.pending, []
        self.running_ahead = True
        try:
            for job in jobs:
                try:
                    job()
                except NotesUnavailable:
                    pass  # as in the proxy: a fold made ahead that fails is only logged; the request will try again
        finally:
            self.running_ahead = False


def dumps(messages: list[Message]) -> bytes:
    return json.dumps(messages, ensure_ascii=False).encode()


def prefix_kept(outs: list[list[Message]]) -> int:
    """Requests whose compacted messages start with the previous request's, byte for byte."""
    return sum(dumps(now).startswith(dumps(before)[:-1]) for before, now in zip(outs, outs[1:], strict=False))


def facts_in(messages: list[Message]) -> dict[str, tuple[bool, list[str]]]:
    """Per fact label: is its current value in the messages, and which replaced values still are."""
    text = "\n".join(text_of(m.get("content")) for m in messages)
    out: dict[str, tuple[bool, list[str]]] = {}
    for label in dict.fromkeys(label for _, label, _, _ in FACTS):
        values = [value for _, name, _, value in FACTS if name == label]
        out[label] = (values[-1] in text, [v for v in values[:-1] if v in text])
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    counter = TokenCounter()
    history = conversation(args.turns)
    sent = requests(history)
    if args.base_url:
        key = os.environ.get(args.api_key_env, "")
        summariser: Any = ModelSummariser(args.base_url, args.model, key, args.context_window)
    else:
        summariser = StandInSummariser(args.max_words)
    cache = CountingCache()
    notes = Notes(NotesParams(budget=args.budget, max_words=args.max_words))
    window = Window(WindowParams(budget=args.budget))
    notes_outs, window_outs, waited, fallbacks, used = [], [], 0, 0, 0
    for request in sent:
        ctx = Context(model=args.model, tokens=counter, summariser=summariser, notes_cache=cache)
        notes_outs.append(notes.apply(request, ctx))
        waited += bool(ctx.details.get("summariser_calls"))
        fallbacks += "fallback" in ctx.details
        used = ctx.details.get("chunks", used)
        cache.run_ahead()
        window_outs.append(window.apply(request, Context(model=args.model, tokens=counter)))
    last = Context(model=args.model, tokens=counter)
    return {
        "requests": len(sent),
        "tokens": (last.count(sent[-1]), last.count(notes_outs[-1]), last.count(window_outs[-1])),
        "calls": cache.calls,
        "used": used,
        "ahead": cache.ahead_calls,
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


if __name__ == "__main__":
    main()
