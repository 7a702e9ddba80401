"""Each session alone: a chain's bill relative to `none`'s per conversation, the worst beside the corpus's.

A saving on the whole corpus can hide sessions that cost more than sending everything: a jump that rewrote the
cached prefix and never paid back before the session ended. The guarantee users need is per session, so every run
reports, per price model, the corpus's ratio (its bill over `none`'s, the figure of the other tables), the worst
session's, and how many sessions billed more than `none` did (the corpus table's column, the section a `--chains`
run prints, and `--summary`'s `per_session`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..corpora import Corpus
from ..replay import ChainRun
from .cells import share

TITLE = "Sessions: billed relative to `none`, each session alone"
PRICES = ("openai", "anthropic")  # the order of ChainRun.sessions' pairs


@dataclass(frozen=True)
class Spread:
    """One chain on one corpus under one price model, relative to `none`."""

    corpus: float  # the corpus's bill over none's
    worst: float  # the highest of the sessions' own ratios
    worst_session: str  # its conversation id (ids may repeat in a corpus: the first such session)
    above: int  # sessions billed more than none
    sessions: int  # sessions none billed anything for


def spread(corpus: Corpus, run: ChainRun, base: ChainRun, price: str) -> Spread | None:
    """None when the runs have no sessions to compare (a corpus replayed before sessions were recorded, or empty)."""
    index = PRICES.index(price)
    total, base_total = (getattr(r, f"billed_{price}") for r in (run, base))
    pairs = [
        (conversation.id, mine[index] / theirs[index])
        for conversation, mine, theirs in zip(corpus.conversations, run.sessions, base.sessions, strict=False)
        if theirs[index] > 0
    ]
    if not pairs or not base_total:
        return None
    worst_id, worst = max(pairs, key=lambda pair: pair[1])
    return Spread(total / base_total, worst, worst_id, sum(ratio > 1.0 for _, ratio in pairs), len(pairs))


def cell(corpus: Corpus, run: ChainRun, base: ChainRun) -> str:
    """The corpus table's column: the worst session's share at OpenAI's / Anthropic's prices, and how many sessions
    of how many billed more than `none`.
    """
    spreads = [spread(corpus, run, base, price) for price in PRICES]
    if any(s is None for s in spreads):
        return "n/a"
    openai, anthropic = (s for s in spreads if s is not None)
    return (
        f"{share(openai.worst, 1)} / {share(anthropic.worst, 1)} "
        f"({openai.above} / {anthropic.above} of {openai.sessions} above)"
    )


def summary(corpus: Corpus, run: ChainRun, base: ChainRun | None) -> dict[str, Any]:
    """--summary's figures: every session's bill, and the spread per price model."""
    out: dict[str, Any] = {
        "sessions": [
            [conversation.id, *billed] for conversation, billed in zip(corpus.conversations, run.sessions, strict=False)
        ]
    }
    if base is not None:
        for price in PRICES:
            found = spread(corpus, run, base, price)
            out[price] = asdict(found) if found is not None else None
    return {"per_session": out}


def section(corpora: list[Corpus], results: dict[str, list[ChainRun]]) -> str:
    rows = [
        f"#### {TITLE}",
        "",
        "Per corpus and chain: billed input over `none`'s for the whole corpus (as in the other tables), for its worst "
        "session, and the sessions that billed more than `none` did, at OpenAI's cached price (50%) and at "
        "Anthropic's (writes 1.25x, reads 0.1x).",
        "",
        "| corpus | chain | sessions | OpenAI: corpus | worst session | above `none` | Anthropic: corpus "
        "| worst session | above `none` |",
        "| --- | --- |" + " ---: |" * 7,
    ]
    for corpus in corpora:
        runs = {r.chain: r for r in results.get(corpus.key, [])}
        if corpus.skipped or "none" not in runs:
            continue
        for run in runs.values():
            spreads = [spread(corpus, run, runs["none"], price) for price in PRICES]
            cells = [corpus.title, f"`{run.chain}`"]
            sessions = next((s.sessions for s in spreads if s is not None), 0)
            cells.append(str(sessions))
            for found in spreads:
                if found is None:
                    cells += ["n/a"] * 3
                else:
                    cells += [f"{found.corpus:.3f}", f"{found.worst:.3f} `{found.worst_session}`", str(found.above)]
            rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)
