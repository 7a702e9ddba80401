"""The default chain chosen by measurement: who is eligible, how chains are scored, how ties are broken."""

from __future__ import annotations

import pytest

from bench.compaction.default_choice import Standing, choose, standings
from bench.compaction.replay import ChainRun
from bench.compaction.visibility import Seen


def run(
    corpus: str,
    chain: str,
    openai: float,
    anthropic: float | None = None,
    *,
    facts: tuple[int, int] = (0, 0),
    over: int = 0,
    violations: int = 0,
    ms: float = 1.0,
) -> ChainRun:
    """A ChainRun billed `openai` / `anthropic` (relative to a `none` billed 100 under both price models)."""
    out = ChainRun(corpus, chain, over_window_after=over, violations=violations, ms=[ms, ms, ms])
    out.billed_openai, out.billed_anthropic = openai, openai if anthropic is None else anthropic
    out.seen = Seen(facts=facts[1], facts_visible=facts[0], facts_reachable=facts[0])
    return out


def results(*runs: ChainRun, none_over: int = 0) -> dict[str, list[ChainRun]]:
    """Per corpus of the runs, `none` (billed 100, every fact kept, none_over requests over the window) first."""
    out: dict[str, list[ChainRun]] = {}
    for corpus in dict.fromkeys(r.corpus for r in runs):
        none = run(corpus, "none", 100.0, facts=(8, 8), over=none_over)
        out[corpus] = [none, *(r for r in runs if r.corpus == corpus)]
    return out


def ranked(*runs: ChainRun) -> list[str]:
    return [s.chain for s in standings(results(*runs))]


def test_the_score_is_the_worse_price_models_mean_over_the_agent_corpora() -> None:
    found = standings(results(run("tau", "a", 80, 60), run("agent", "a", 40, 100), run("chat", "a", 1, 1)))
    a = next(s for s in found if s.chain == "a")
    assert (a.openai, a.anthropic, a.score) == pytest.approx(
        (0.6, 0.8, 0.8)
    )  # the chat is not an agent corpus: not averaged


def test_a_cheaper_chain_ranks_higher_and_is_chosen() -> None:
    assert ranked(run("agent", "a", 50, facts=(8, 8)), run("agent", "b", 40, facts=(8, 8)))[:2] == ["b", "a"]


def test_a_chain_that_loses_a_fact_or_passes_the_window_or_breaks_an_invariant_is_not_eligible() -> None:
    found = standings(
        results(
            run("agent", "forgets", 10, facts=(7, 8)),
            run("agent", "overflows", 20, facts=(8, 8), over=1),
            run("agent", "keeps", 90, facts=(8, 8)),
            run("chat", "forgets", 10, facts=(1, 8)),  # facts lost in the chat do not count: not an agent corpus
            run("chat", "overflows", 10),
            run("chat", "keeps", 90, violations=1),  # but a violation on any corpus does
        )
    )
    problems = {s.chain: s.problems for s in found}
    assert problems["forgets"] == ("agent: 7/8 facts reachable",)
    assert problems["overflows"] == ("agent: 1 requests over the window",)
    assert problems["keeps"] == ("chat: 1 invariant violations",)
    chosen = choose(found)
    assert chosen is not None and chosen.chain == "none"  # the only eligible chain left


def test_the_ineligible_come_after_every_eligible_chain_however_cheap() -> None:
    assert ranked(run("agent", "forgets", 10, facts=(7, 8)), run("agent", "keeps", 95, facts=(8, 8))) == [
        "keeps",
        "none",
        "forgets",
    ]


def test_nothing_is_chosen_when_no_chain_is_eligible() -> None:
    found = standings(results(run("agent", "forgets", 10, facts=(7, 8)), none_over=3))
    assert choose(found) is None


def test_scores_within_half_a_point_tie_and_fewer_steps_then_less_time_win() -> None:
    found = ranked(
        run("agent", "minify,dedupe,window", 50.0, facts=(8, 8), ms=1.0),
        run("agent", "dedupe,window", 50.4, facts=(8, 8), ms=3.0),  # in the tie: two steps beat three
        run("agent", "window", 50.6, facts=(8, 8), ms=0.5),  # 0.6 points behind the best: no tie, ranked by score
        run("agent", "minify,window", 50.3, facts=(8, 8), ms=2.0),  # two steps, faster than dedupe,window
    )
    assert found[:4] == ["minify,window", "dedupe,window", "minify,dedupe,window", "window"]


def test_a_tie_keeps_the_shipped_default_and_only_a_tie_does() -> None:
    runs = results(
        run("agent", "minify,dedupe,middle_out", 50.0, facts=(8, 8), ms=0.5),
        run("agent", "minify,dedupe,window", 50.2, facts=(8, 8), ms=0.6),
        run("agent", "minify,dedupe,fit", 49.0, facts=(8, 8), ms=0.7),
    )
    assert standings(runs, shipped="minify,dedupe,window")[0].chain == "minify,dedupe,fit"  # a point better
    del runs["agent"][-1]
    assert standings(runs, shipped="minify,dedupe,window")[0].chain == "minify,dedupe,window"
    assert standings(runs)[0].chain == "minify,dedupe,middle_out"


def test_nothing_is_chosen_without_an_agent_corpus() -> None:
    assert standings(results(run("chat", "a", 50))) == []
    assert choose([]) is None


def test_a_standing_is_eligible_exactly_when_it_has_no_problems() -> None:
    assert Standing("a", 1, 0.5, 0.6, 1.0, ()).eligible
    assert not Standing("a", 1, 0.5, 0.6, 1.0, ("agent: 7/8 facts kept",)).eligible
