"""The compaction report's tables: the headline, the chains run, and one table per corpus."""

from __future__ import annotations

from ..chains import ChainCase, Peer
from ..corpora import Corpus
from ..replay import ChainRun
from . import sessions
from .cells import facts, percentile, share, tokens

HEADER = (
    "| chain | tokens after | saved | peak | > window | violations | facts visible | reachable | stale | arg recall "
    "| expand rounds | cache hit | billed OpenAI | billed Anthropic | worst session (sessions above none) | p50 ms "
    "| p99 ms |"
)


def chains_table(cases: list[ChainCase], plan: dict[str, str]) -> str:
    """plan: each spec's runner (chains.plan); a spec run as another says so."""
    rows = ["| chain | kind | stands for |", "| --- | --- | --- |"]
    for c in cases:
        same = (
            f"{'; ' if c.note else ''}the same chain as `{plan[c.spec]}` (run once)" if plan[c.spec] != c.spec else ""
        )
        rows.append(f"| `{c.spec}` | {c.kind} | {c.note}{same} |")
    return "\n".join(rows)


def corpus_table(corpus: Corpus, runs: list[ChainRun], window: int, default_budget: int, budget: int) -> str:
    """runs: `none` first."""
    if corpus.skipped:
        return f"#### {corpus.title}\n\nSkipped: {corpus.skipped}.\n"
    base = runs[0]
    binding = _binding(base.peak_before, default_budget, budget)
    lines = [
        f"#### {corpus.title}",
        "",
        f"{corpus.description[:1].upper()}{corpus.description[1:]}. {len(corpus.conversations)} conversations, "
        f"{base.requests} requests; before compaction {tokens(base.tokens_before)} prompt tokens in all, peak "
        f"{tokens(base.peak_before)}, {base.over_window_before} requests over the {tokens(window)} context window; "
        f"{base.seen.values} earlier values reused by the next call (arg recall). {binding}",
        "",
        HEADER,
        "| --- |" + " ---: |" * 16,
    ]
    for run in runs:
        seen = run.seen
        visible = facts(seen.facts_visible, seen.facts) if corpus.has_probes else "n/a"
        reachable = facts(seen.facts_reachable, seen.facts) if corpus.has_probes else "n/a"
        stale = str(seen.facts_stale) if corpus.has_probes else "n/a"
        cells = [
            f"`{run.chain}`",
            tokens(run.tokens_after),
            share(run.tokens_before - run.tokens_after, run.tokens_before),
            tokens(run.peak_after),
            str(run.over_window_after),
            str(run.violations),
            visible,
            reachable,
            stale,
            f"{share(seen.values_visible, seen.values)} / {share(seen.values_reachable, seen.values)}",
            rounds(run),
            share(run.cached, run.tokens_after),
            share(run.billed_openai, base.billed_openai),
            share(run.billed_anthropic, base.billed_anthropic),
            sessions.cell(corpus, run, base),
            f"{percentile(run.ms, 50):.2f}",
            f"{percentile(run.ms, 99):.2f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    problems = [f"- `{run.chain}`: {p}" for run in runs for p in run.problems]
    if problems:
        lines += ["", "Invariant violations (first few per chain):", *problems]
    return "\n".join(lines) + "\n"


def rounds(run: ChainRun) -> str:
    """Expand rounds in all, per request, how many expanded a ref the conversation had expanded before, and how
    often the tools changed (the expand tool added or dropped: each change caches nothing).
    """
    if not run.rounds and not run.tool_changes:
        return "0"
    return (
        f"{run.rounds:,} ({run.rounds / run.requests:.2f}/req, {run.re_expansions} again; "
        f"tools changed {run.tool_changes}x)"
    )


def _billed_openai(run: ChainRun) -> float:
    return run.billed_openai


def _billed_anthropic(run: ChainRun) -> float:
    return run.billed_anthropic


def _binding(peak: int, default_budget: int, budget: int) -> str:
    """Which budget-bound rows can differ from `none` on this corpus, and why the others cannot."""
    if peak > default_budget:
        return (
            f"The largest request ({tokens(peak)}) is over the model's default budget ({tokens(default_budget)}) "
            f"and the binding budget ({tokens(budget)})."
        )
    if peak > budget:
        return (
            f"The largest request ({tokens(peak)}) is under the model's default budget ({tokens(default_budget)}): "
            "window, fit and middle_out at their defaults (and clear_tool_uses at its 100k trigger) change nothing "
            f"here; their rows with a budget show them at the binding budget ({tokens(budget)})."
        )
    return (
        f"No request is over the model's default budget ({tokens(default_budget)}) or the binding budget "
        f"({tokens(budget)}): window, fit, middle_out and clear_tool_uses, at either, change nothing here."
    )


def headline(corpora: list[Corpus], results: dict[str, list[ChainRun]], shipped: str, peers: list[Peer]) -> str:
    """Billed input relative to `none` per corpus and price model: the shipped default, the peers' reference
    chains (their specs in the chains table), and the best chain run on the corpus.
    """
    columns = [shipped, *(p.spec for p in peers)]
    rows = [
        f"| corpus | prices | none | shipped default `{shipped}` | "
        + " | ".join(p.title for p in peers)
        + " | best chain here (facts kept) |",
        "| --- | --- | ---: |" + " ---: |" * len(columns) + " --- |",
    ]
    for corpus in corpora:
        runs = {r.chain: r for r in results.get(corpus.key, [])}
        if corpus.skipped or "none" not in runs:
            continue
        base = runs["none"]
        for prices, billed in (("OpenAI", _billed_openai), ("Anthropic", _billed_anthropic)):
            clean = [r for r in runs.values() if r.violations == 0]
            best = min(clean, key=billed)
            kept = f", {share(best.seen.facts_reachable, best.seen.facts)}" if corpus.has_probes else ""
            cells = [corpus.title, prices, "100%", *(share(billed(runs[p]), billed(base)) for p in columns)]
            cells.append(f"{share(billed(best), billed(base))} `{best.chain}`{kept}")
            rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)
