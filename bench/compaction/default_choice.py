"""The default chain, chosen by measurement among every chain the benchmark ran.

Eligible: 0 invariant violations and 0 requests over the context window after compaction on every corpus, and
every planted fact still visible when needed (facts kept == facts) on every agent corpus with planted facts.
A default that breaks a conversation, or makes the model forget, cannot be bought back by a lower bill.

Score: the worse of the two price models' means over the agent corpora of the input billed relative to `none`
(OpenAI's 50% cached price; Anthropic's cache writes and reads). Taking the worse keeps a chain that wins under
one provider's cache rules and loses badly under the other's (a boundary that moves every request) off the top.

Lowest score wins; scores within TIE of the best are a tie. A tie keeps the shipped default when it is in it:
chains the measurement cannot tell apart (after minify and dedupe the agent sessions stay under the model's
window, where window, fit and middle_out all forward the same bytes) are no reason to change what users run.
Otherwise fewer steps (less to explain and to run) win, then the lower median time per request.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from strategies.chain_syntax import parse_chain

from .replay import ChainRun

AGENT_CORPORA = ("tau", "bfcl", "agent")
TIE = 0.005  # half a percentage point of billed-vs-none


@dataclass(frozen=True)
class Standing:
    chain: str
    steps: int
    openai: float  # mean over the agent corpora of billed / none's billed, OpenAI's prices
    anthropic: float  # the same under Anthropic's prices
    p50_ms: float  # median time per request over the agent corpora's requests
    problems: tuple[str, ...]  # why the chain is not eligible; empty when it is

    @property
    def eligible(self) -> bool:
        return not self.problems

    @property
    def score(self) -> float:
        return max(self.openai, self.anthropic)


def _problems(chain: str, by_corpus: Mapping[str, Mapping[str, ChainRun]], agents: Sequence[str]) -> list[str]:
    found = []
    for corpus, runs in by_corpus.items():
        run = runs[chain]
        if run.violations:
            found.append(f"{corpus}: {run.violations} invariant violations")
        if run.over_window_after:
            found.append(f"{corpus}: {run.over_window_after} requests over the window")
        if corpus in agents and run.seen.facts_reachable < run.seen.facts:
            found.append(f"{corpus}: {run.seen.facts_reachable}/{run.seen.facts} facts reachable")
    return found


def standings(
    results: Mapping[str, Sequence[ChainRun]], agent_corpora: Sequence[str] = AGENT_CORPORA, shipped: str | None = None
) -> list[Standing]:
    """Every chain run on every corpus, best first: the tie group by the tie-break, the other eligible chains by
    score, then the ineligible ones by score. Empty when no agent corpus was run (nothing to score on).
    """
    by_corpus = {corpus: {run.chain: run for run in runs} for corpus, runs in results.items() if runs}
    agents = [corpus for corpus in agent_corpora if corpus in by_corpus]
    if not agents or any("none" not in by_corpus[corpus] for corpus in agents):
        return []
    chains = [chain for chain in by_corpus[agents[0]] if all(chain in runs for runs in by_corpus.values())]
    out = []
    for chain in chains:
        runs = [by_corpus[corpus][chain] for corpus in agents]
        bases = [by_corpus[corpus]["none"] for corpus in agents]
        out.append(
            Standing(
                chain=chain,
                steps=len(parse_chain(chain)),
                openai=statistics.fmean(r.billed_openai / b.billed_openai for r, b in zip(runs, bases, strict=True)),
                anthropic=statistics.fmean(
                    r.billed_anthropic / b.billed_anthropic for r, b in zip(runs, bases, strict=True)
                ),
                p50_ms=statistics.median_low([ms for r in runs for ms in r.ms]) if any(r.ms for r in runs) else 0.0,
                problems=tuple(_problems(chain, by_corpus, agents)),
            )
        )
    eligible = sorted((s for s in out if s.eligible), key=lambda s: s.score)
    tied = [s for s in eligible if eligible and s.score <= eligible[0].score + TIE]
    rest = [s for s in eligible if s not in tied]
    ineligible = sorted((s for s in out if not s.eligible), key=lambda s: s.score)
    return [*sorted(tied, key=lambda s: (s.chain != shipped, s.steps, s.p50_ms, s.score)), *rest, *ineligible]


def choose(ranked: Sequence[Standing]) -> Standing | None:
    """The chosen chain: the first of the standings, when it is eligible."""
    return ranked[0] if ranked and ranked[0].eligible else None
