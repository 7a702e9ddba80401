"""PNG charts of the compaction benchmark (matplotlib, drawn off-screen)."""

from __future__ import annotations

from pathlib import Path

# matplotlib is an optional bench dependency: without it (as in the test environment) mypy still checks the rest.
import matplotlib  # type: ignore[import-not-found,unused-ignore]

matplotlib.use("Agg")  # no display on benchmark machines

import matplotlib.pyplot as plt  # type: ignore[import-not-found,unused-ignore]  # noqa: E402

from .corpora import Corpus  # noqa: E402
from .prompt_cache import OPENAI_CACHED_PRICE  # noqa: E402
from .replay import ChainRun  # noqa: E402

STYLES = ("-", "--", "-.", ":")  # lines that coincide (chains that change nothing) stay visible
FILES = ("compaction-billed.png", "compaction-session.png", "compaction-facts.png")


def billed_vs_none(corpora: list[Corpus], results: dict[str, list[ChainRun]], path: Path) -> None:
    """One panel per corpus: billed input of every chain relative to `none`, under both price models."""
    shown = [c for c in corpora if not c.skipped and results.get(c.key)]
    chains = [r.chain for r in results[shown[0].key]]
    fig, axes = plt.subplots(1, len(shown), figsize=(3.2 * len(shown) + 3.5, 0.32 * len(chains) + 1.6), sharey=True)
    axes_list = list(axes) if len(shown) > 1 else [axes]
    positions = list(range(len(chains)))
    for ax, corpus in zip(axes_list, shown, strict=True):
        runs = results[corpus.key]
        base = runs[0]
        openai = [100 * r.billed_openai / base.billed_openai for r in runs]
        anthropic = [100 * r.billed_anthropic / base.billed_anthropic for r in runs]
        ax.barh([p - 0.2 for p in positions], openai, height=0.4, label="OpenAI prices", color="#4c72b0")
        ax.barh([p + 0.2 for p in positions], anthropic, height=0.4, label="Anthropic prices", color="#dd8452")
        ax.axvline(100, color="black", linewidth=0.8)
        ax.set_title(corpus.title, fontsize=9)
        ax.set_xlabel("billed input, % of none", fontsize=8)
        ax.tick_params(labelsize=7)
    axes_list[0].set_yticks(positions, chains)
    axes_list[0].invert_yaxis()
    axes_list[-1].legend(fontsize=7, loc="lower right")
    fig.suptitle("Billed input tokens relative to no compaction (prompt cache included)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def session(corpus: Corpus, runs: list[ChainRun], chains: list[str], window: int, path: Path) -> None:
    """One long session: prompt tokens per request, and the input billed so far (OpenAI prices)."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7.5), sharex=True)
    drawn = [run for run in runs if run.chain in chains and run.series_tokens]
    for n, run in enumerate(drawn):
        style = {"linewidth": 1.2, "linestyle": STYLES[n % len(STYLES)], "label": run.chain}
        x = list(range(1, len(run.series_tokens) + 1))
        top.plot(x, run.series_tokens, **style)
        total, billed = 0.0, []
        for prompt, cached in zip(run.series_tokens, run.series_cached, strict=True):
            total += prompt - cached + OPENAI_CACHED_PRICE * cached
            billed.append(total / 1e6)
        bottom.plot(x, billed, **style)
    top.axhline(window, color="black", linestyle="--", linewidth=0.8, label="context window")
    top.set_ylabel("prompt tokens sent")
    top.set_title(f"{corpus.title}: {corpus.conversations[0].id}, every request", fontsize=10)
    top.legend(fontsize=7)
    bottom.set_ylabel("input billed so far, M tokens (OpenAI prices)")
    bottom.set_xlabel("request")
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def facts_vs_billed(corpora: list[Corpus], results: dict[str, list[ChainRun]], path: Path) -> None:
    """The trade-off on the corpora with planted facts: what a chain saves against what the model still sees.

    Points are numbered (chains that change nothing on a corpus coincide), the legend names the numbers.
    """
    shown = [c for c in corpora if c.has_probes and not c.skipped and results.get(c.key)]
    fig, axes = plt.subplots(1, len(shown), figsize=(6 * len(shown) + 4, 5.5), squeeze=False)
    for ax, corpus in zip(axes[0], shown, strict=True):
        runs = results[corpus.key]
        base = runs[0]
        points: dict[tuple[float, float], list[int]] = {}
        for n, run in enumerate(runs, start=1):
            x = round(100 * run.billed_openai / base.billed_openai, 1)
            y = round(100 * run.seen.facts_reachable / run.seen.facts, 1) if run.seen.facts else 0.0
            points.setdefault((x, y), []).append(n)
            ax.scatter(x, y, s=18, color=f"C{(n - 1) % 10}", label=f"{n} {run.chain}")
        for (x, y), numbers in points.items():
            ax.annotate(",".join(map(str, numbers)), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.set_title(corpus.title, fontsize=10)
        ax.set_xlabel("billed input, % of none (OpenAI prices)")
        ax.set_ylabel("planted facts visible when needed, %")
        ax.set_ylim(-5, 105)
    axes[0][-1].legend(fontsize=6, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
