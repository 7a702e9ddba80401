"""What compaction saves, what the model can still see, and what it does to the prompt cache.

    python -m bench.compaction                                   # full run, markdown tables on stdout
    python -m bench.compaction --update-docs docs/benchmarks.md  # the same, also rewriting the doc's tables and charts
    python -m bench.compaction --update-readme README.md         # also the README's default-chain table
    python -m bench.compaction --smoke                           # tiny sizes, seconds (CI)
    python -m bench.compaction --wire messages --summary m.json  # another wire form; its figures as JSON, which
    python -m bench.compaction.forms c.json r.json m.json        # puts such runs side by side (see forms.py)
    python -m bench.compaction --judge-base-url URL --judge-model M  # also ask a model the planted questions

In process, no network (except the optional judge: see judge.py). Every request of every conversation
(each prefix ending where the model answered) goes through each chain; see docs/benchmarks.md for the corpora,
the metrics and the approximations.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from strategies import Chain, ChainSyntaxError, Registry, StrategyError
from strategies.budget import default_total
from strategies.context import Context

from . import default_choice, judge, report
from .chains import ChainCase, Peer, all_specs, cases, epoch_pairs, peers, plan, shipped_default
from .corpora import Corpus, bfcl, swe, synthetic_agent, synthetic_chat, tau
from .replay import ChainRun, Replayer
from .report import default_chain, forms, sessions
from .wire_forms import FORMS


@dataclass(frozen=True)
class Sizes:
    tau: int | None  # conversations (None: all 200)
    bfcl: int | None  # entries (None: all 200)
    swe: int | None  # sessions (None: all the file holds)
    agent_sessions: int
    agent_calls: int
    chat_sessions: int
    chat_exchanges: int
    budget: int


FULL = Sizes(None, None, None, 8, 240, 8, 200, 32_000)
SMOKE = Sizes(4, 3, 3, 1, 60, 1, 60, 8_000)
CORPORA = ("tau", "bfcl", "swe", "agent", "chat")


def build_corpora(sizes: Sizes, seed: int, wanted: list[str], swe_data: Path = swe.DATA) -> list[Corpus]:
    builders = {
        "tau": lambda: tau.load(sizes.tau),
        "bfcl": lambda: bfcl.load(sizes.bfcl),
        "swe": lambda: swe.load(sizes.swe, swe_data),
        "agent": lambda: synthetic_agent.generate(sizes.agent_sessions, sizes.agent_calls, seed),
        "chat": lambda: synthetic_chat.generate(sizes.chat_sessions, sizes.chat_exchanges, seed),
    }
    return [builders[key]() for key in wanted]


def run(corpora: list[Corpus], runners: dict[str, str], replayer: Replayer) -> dict[str, list[ChainRun]]:
    """Per corpus, a run of every spec in runners (spec -> the spec whose run stands for it, chains.plan), each
    distinct chain replayed once and reported under each of its specs.
    """
    results: dict[str, list[ChainRun]] = {}
    for corpus in corpora:
        if corpus.skipped:
            print(f"{corpus.key}: skipped: {corpus.skipped}", file=sys.stderr)
            continue
        charted = corpus.conversations[0].id if corpus.conversations else None
        done: dict[str, ChainRun] = {}
        for spec, runner in runners.items():
            if runner not in done:
                started = time.perf_counter()
                done[runner] = replayer.run(corpus, ChainCase(runner, "run"), charted)
                print(f"{corpus.key} x {runner}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
            results.setdefault(corpus.key, []).append(replace(done[runner], chain=spec))
    return results


def chosen_cases(every: list[ChainCase], shipped: str, specs: list[str], registry: Registry) -> list[ChainCase]:
    """none, the shipped default and specs (--chains), each as the main tables list it if they do."""
    for spec in specs:
        Chain.parse(spec, registry)
    listed = {case.spec: case for case in every}
    wanted = dict.fromkeys(["none", shipped, *specs])
    return [listed.get(spec, ChainCase(spec, "candidate", "asked for with --chains")) for spec in wanted]


def charted(shipped: str, chosen: str | None, peer_list: list[Peer], budget: int) -> list[str]:
    """The chains drawn in the session chart: the shipped default, the chosen one, the peers, and the two peers'
    rules with epochs (at most 10 lines, one colour each).
    """
    chains = ["none", shipped, *([chosen] if chosen else []), *(p.spec for p in peer_list)]
    return list(dict.fromkeys([*chains, "shorten_tools", f"fit(total={budget})"]))


def draw(
    corpora: list[Corpus], results: dict[str, list[ChainRun]], folder: Path, shown: list[str], window: int
) -> list[str]:
    """results: the main tables' runs (the bar and scatter charts show each); shown: the session chart's."""
    try:
        from . import charts
    except ImportError as exc:
        print(f"charts skipped: {exc} (pip install matplotlib)", file=sys.stderr)
        return []
    folder.mkdir(parents=True, exist_ok=True)
    billed, session, facts = charts.FILES
    charts.billed_vs_none(corpora, results, folder / billed)
    names = [billed]
    agent = next((c for c in corpora if c.key == "agent" and not c.skipped), None)
    if agent is not None:
        charts.session(agent, results["agent"], shown, window, folder / session)
        names.append(session)
    if any(c.has_probes and not c.skipped for c in corpora):
        charts.facts_vs_billed(corpora, results, folder / facts)
        names.append(facts)
    return names


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.compaction", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes for CI: a few conversations, seconds")
    parser.add_argument("--budget", type=int, help="tokens for the budget-bound chains (default 32000; smoke 8000)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the synthetic sessions")
    parser.add_argument("--model", default="gpt-4o", help="model whose tokenizer and context window apply")
    parser.add_argument(
        "--wire",
        choices=sorted(FORMS),
        default="chat",
        help="replay each request in this wire format's form, through it as the proxy compacts it, priced as its "
        "provider caches it: chat (messages), responses (a Responses body through app.wire.Responses; the figures "
        "should not depend on it), messages (Claude Code's shape through app.wire.AnthropicMessages, Anthropic's "
        "breakpoint rules)",
    )
    parser.add_argument("--corpora", default=",".join(CORPORA), help=f"comma-separated subset of {','.join(CORPORA)}")
    parser.add_argument(
        "--swe-data",
        type=Path,
        default=swe.DATA,
        help="the real SWE-agent sessions to replay as the swe corpus, as scripts/convert_swe_traj.py writes them "
        f"(default {swe.DATA.relative_to(swe.DATA.parents[3])}; skipped where it is missing)",
    )
    parser.add_argument("--charts", type=Path, help="write the PNG charts into this folder")
    parser.add_argument(
        "--update-docs", type=Path, help="rewrite the generated part of this markdown file, charts beside it"
    )
    parser.add_argument(
        "--update-readme", type=Path, help="rewrite the default-chain table between its markers in this README"
    )
    parser.add_argument(
        "--chains",
        help="';'-separated chain specs to run, beside none and the shipped default, instead of every chain (a quick "
        "comparison, e.g. of the wire forms; not with --update-docs or --update-readme, whose tables need them all)",
    )
    parser.add_argument(
        "--summary",
        type=Path,
        help="also write every chain's figures per corpus as JSON, for python -m bench.compaction.forms",
    )
    parser.add_argument("--judge-base-url", help="ask this OpenAI-compatible API the planted questions (e.g. .../v1)")
    parser.add_argument("--judge-model", help="the model the judge asks (required with --judge-base-url)")
    parser.add_argument(
        "--judge-api-key-env", default="OPENAI_API_KEY", help="environment variable holding the judge's API key"
    )
    parser.add_argument(
        "--judge-chains",
        help="';'-separated chain specs to judge (default: none, the default chain, peers, cache-aware)",
    )
    parser.add_argument("--judge-max-questions", type=int, default=50, help="questions per corpus (default 50)")
    parser.add_argument("--judge-timeout", type=float, default=60.0, help="seconds per judge request (default 60)")
    args = parser.parse_args(argv)
    sizes = SMOKE if args.smoke else FULL
    budget = args.budget if args.budget is not None else sizes.budget
    wanted = [key.strip() for key in args.corpora.split(",") if key.strip()]
    unknown = set(wanted) - set(CORPORA)
    if unknown:
        parser.error(f"unknown corpora {sorted(unknown)}; choose from {', '.join(CORPORA)}")
    if args.judge_base_url and not args.judge_model:
        parser.error("--judge-model is required with --judge-base-url")
    if args.judge_max_questions < 1 or args.judge_timeout <= 0:
        parser.error("--judge-max-questions and --judge-timeout must be positive")
    if args.chains is not None and (args.update_docs or args.update_readme):
        parser.error("--chains runs a subset: the tables --update-docs and --update-readme rewrite need every chain")
    if args.update_readme and not default_chain.markers_present(args.update_readme):
        parser.error(f"--update-readme: {args.update_readme} has no {default_chain.README_END} marker pair")

    started = time.perf_counter()
    registry = Registry.with_plugins()
    shipped = shipped_default()
    peer_list = peers(budget)
    judge_chains = judge.parse_chains(args.judge_chains) if args.judge_chains else judge.default_chains(budget)
    if args.judge_base_url:
        try:
            for spec in judge_chains:
                Chain.parse(spec, registry)
        except (ChainSyntaxError, StrategyError) as exc:
            parser.error(f"--judge-chains: {exc}")
    replayer = Replayer(args.model, registry, FORMS[args.wire])
    limits = replayer.limits
    default_budget = default_total(Context(model=args.model, tokens=replayer.compactor().counter, limits=limits))
    corpora = build_corpora(sizes, args.seed, wanted, args.swe_data)
    chain_cases = cases(budget, registry, shipped)
    pairs = epoch_pairs(budget)
    if args.chains is not None:
        try:
            chain_cases = chosen_cases(chain_cases, shipped, judge.parse_chains(args.chains), registry)
        except (ChainSyntaxError, StrategyError) as exc:
            parser.error(f"--chains: {exc}")
        pairs = []
    runners = plan(all_specs(chain_cases, pairs), registry)
    results = run(corpora, runners, replayer)
    # The choice is among distinct chains: a spec run as another is the same chain under a second name.
    distinct = {corpus: [r for r in runs if runners[r.chain] == r.chain] for corpus, runs in results.items()}
    ranked = default_choice.standings(distinct, shipped=shipped)
    folder = args.update_docs.parent if args.update_docs else args.charts
    chosen = default_choice.choose(ranked)
    shown = charted(shipped, chosen.chain if chosen else None, peer_list, budget)
    main_runs = report.main_runs(results, chain_cases)
    names = draw(corpora, main_runs, folder, shown, limits.context_window) if folder and results else []
    command = shlex.join(["python", "-m", "bench.compaction", *(argv if argv is not None else sys.argv[1:])])
    if args.chains is not None:
        # A subset: the main tables compare against chains it did not run, so only the form's section is shown, and
        # each session's bill against none's.
        block = "\n\n".join(
            [forms.section(corpora, results, shipped, args.wire), sessions.section(corpora, results), f"{command}\n"]
        )
    else:
        block = report.document(
            corpora,
            results,
            chain_cases,
            pairs=pairs,
            peers=peer_list,
            plan=runners,
            ranked=ranked,
            shipped=shipped,
            wire=args.wire,
            command=command,
            seconds=time.perf_counter() - started,
            window=limits.context_window,
            default_budget=default_budget,
            budget=budget,
            charts=names,
        )
    print(block)
    if args.update_docs:
        report.update_docs(args.update_docs, block)
    if args.summary:
        figures = forms.summary(
            corpora, results, wire=args.wire, shipped=shipped, command=command, commit=report.commit()
        )
        args.summary.write_text(json.dumps(figures, indent=1) + "\n")
    if args.update_readme:
        readme = default_chain.readme_block(corpora, results, ranked, (shipped, runners[shipped]), peer_list, command)
        default_chain.update_readme(args.update_readme, readme)
    if args.judge_base_url:
        api_key = os.environ.get(args.judge_api_key_env)
        if not api_key:
            print(f"judge: ${args.judge_api_key_env} is not set: asking without an API key", file=sys.stderr)
        asker = judge.Judge(args.judge_base_url, args.judge_model, api_key, args.judge_timeout)
        try:
            rows = judge.run(corpora, judge_chains, replayer, registry, asker, args.judge_max_questions)
        finally:
            asker.close()
        titles = {c.key: c.title for c in corpora}
        judged = judge.document(rows, titles, model=args.judge_model, command=command)
        print(judged)
        if args.update_docs:
            judge.update_docs(args.update_docs, judged)
