"""The epochs table: each strategy that moves a boundary, its rule alone next to the same rule with epochs."""

from __future__ import annotations

from ..chains import EpochPair
from ..corpora import Corpus
from ..default_choice import AGENT_CORPORA
from ..replay import ChainRun
from .cells import facts, share

TITLE = "Epochs: each rule alone vs as it ships"


def intro(budget: int) -> str:
    return (
        "Every strategy that moves a boundary with epochs or steps of its own, per corpus: its rule alone, "
        "recomputed on every request (`shorten_tools(epoch=0,min_gain=0)`, `fit(room=0)`, `middle_out(room=0)`; "
        "for `window` a sliding window, `low_water=1`; for `notes` `low_water=1`), next to the same rule as it "
        "ships: with epochs (strategies/epochs.py: the boundary moves only after the conversation past it has "
        "grown by an epoch, and only when the jump removes at least `min_gain` of what the provider must cache "
        "again; `fit` and `middle_out` move it only when the request would pass their limit, leaving `room` free) "
        "or, for `window` and `notes`, their own hysteresis. `prune_tool_outputs` (each result cut once, on "
        "arrival) and `clear_tool_uses` (all it may at once, past its trigger) are prefix-stable as they are and "
        "have no epochs. At each strategy's defaults and, for "
        f"the budget-bound ones, at the binding budget ({budget}). Prompt tokens and billed input are relative to "
        "`none` on the same corpus; cached is cached tokens over prompt tokens after compaction; **default** marks "
        "which of the two the strategy's defaults are. tau-bench, BFCL and the coding agent are agent corpora; "
        "the planning chat is not, and is shown because it is cheap. `notes` has no summariser offline, so both "
        "its rows run its fallback chain (`window` at its defaults) and equal `window`'s row; `python -m "
        "bench.notes` measures notes with a stand-in summariser (docs/notes.md)."
    )


def table(corpus: Corpus, runs: dict[str, ChainRun], pairs: list[EpochPair]) -> str:
    kind = "agent corpus" if corpus.key in AGENT_CORPORA else "not an agent corpus"
    header = "| strategy | at | variant | chain | prompt tokens | cached | billed OpenAI | billed Anthropic |"
    rule = "| --- | --- | --- | --- | ---: | ---: | ---: | ---: |"
    if corpus.has_probes:
        header += " facts reachable |"
        rule += " ---: |"
    lines = [f"##### {corpus.title} ({kind})", "", header, rule]
    base = runs["none"]
    for pair in pairs:
        for side, spec in (("rule", pair.rule), ("epochs", pair.epochs)):
            run = runs[spec]
            variant = "rule alone" if side == "rule" else pair.epochs_label
            if side == pair.default_side:
                variant += " **default**"
            first = side == "rule"
            cells = [
                f"`{pair.strategy}`" if first else "",
                pair.setting if first else "",
                variant,
                f"`{spec}`",
                share(run.tokens_after, base.tokens_after),
                share(run.cached, run.tokens_after),
                share(run.billed_openai, base.billed_openai),
                share(run.billed_anthropic, base.billed_anthropic),
            ]
            if corpus.has_probes:
                cells.append(facts(run.seen.facts_reachable, run.seen.facts))
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def section(corpora: list[Corpus], results: dict[str, list[ChainRun]], pairs: list[EpochPair], budget: int) -> str:
    parts = [f"#### {TITLE}", intro(budget)]
    for corpus in corpora:
        runs = {run.chain: run for run in results.get(corpus.key, [])}
        if not corpus.skipped and "none" in runs:
            parts.append(table(corpus, runs, pairs))
    return "\n\n".join(parts)
