"""Each session alone (bench.compaction.report.sessions): a saving on the corpus does not hide a session that bills
more than `none`, and a run's sessions are billed as the replay billed them.
"""

from __future__ import annotations

from bench.compaction.chains import ChainCase
from bench.compaction.corpora import Conversation, Corpus
from bench.compaction.replay import ChainRun, Replayer
from bench.compaction.report.sessions import Spread, section, spread
from strategies import Registry
from tests.factories import agent_loop


def billed(chain: str, *sessions: tuple[float, float]) -> ChainRun:
    out = ChainRun("c", chain, sessions=list(sessions))
    out.billed_openai = sum(s[0] for s in sessions)
    out.billed_anthropic = sum(s[1] for s in sessions)
    return out


CORPUS = Corpus("c", "a corpus", "two sessions", [Conversation("long", []), Conversation("short", [])])


def test_the_worst_session_and_those_above_none_show_beside_the_corpus_ratio() -> None:
    # The long session saves enough for the corpus to bill less than none; the short one bills 1.2x at Anthropic's.
    base = billed("none", (100.0, 100.0), (10.0, 10.0))
    run = billed("mask", (50.0, 60.0), (10.0, 12.0))
    assert spread(CORPUS, run, base, "anthropic") == Spread(72 / 110, 1.2, "short", 1, 2)
    assert spread(CORPUS, run, base, "openai") == Spread(60 / 110, 1.0, "short", 0, 2)  # as none: not above
    assert "| a corpus | `mask` | 2 | 0.545 | 1.000 `short` | 0 | 0.655 | 1.200 `short` | 1 |" in section(
        [CORPUS], {"c": [base, run]}
    )


def test_a_replay_bills_each_session_and_the_sessions_add_up_to_the_corpus() -> None:
    corpus = Corpus(
        "agent", "agent", "three sessions", [Conversation(f"s{n}", agent_loop(n, 3000)) for n in (2, 8, 30)]
    )
    run = Replayer("gpt-4o", Registry.with_plugins()).run(corpus, ChainCase("mask(keep=1,epoch=1)", "run"))
    assert len(run.sessions) == 3 and all(openai > 0 and anthropic > 0 for openai, anthropic in run.sessions)
    assert abs(sum(s[0] for s in run.sessions) - run.billed_openai) < 1e-6
    assert abs(sum(s[1] for s in run.sessions) - run.billed_anthropic) < 1e-6
    assert run.sessions[0] < run.sessions[1] < run.sessions[2]  # longer sessions bill more
