"""The chains the compaction benchmark compares, as data.

- The main tables: the baseline, the shipped default chain (read from the settings at run time), the peers'
  documented behaviours as reference chains (without epochs where the peer has none), every registered strategy
  at its defaults, budget-bound variants, and the candidate combinations for the default chain.
- The epochs table: every strategy that moves a boundary, its rule alone (recomputed on every request) next to
  the same rule as it ships: with epochs (shorten_tools) or room (fit, middle_out), or with its own steps (window
  and notes: low_water; clear_tool_uses: its trigger; prune_tool_outputs: once per result), at its defaults and,
  for the budget-bound ones, at the binding budget.

Strategies whose default budget comes from the model (window, fit, middle_out: gpt-4o's 128k window less the
output reserve, about 109k) do nothing on conversations shorter than that, so they also run at a `budget` that
binds; so does clear_tool_uses, whose default trigger is 100k tokens.

Specs that configure the same strategies with the same parameters (`fit(room=0)` and `fit(total=...,room=0)` when
the total is the default) are run once per corpus and reported under each name (`plan`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from strategies import Chain, Registry

RULE_ALONE = "epoch=0,min_gain=0"  # `shorten_tools(epoch=0,min_gain=0)`: the rule alone, recomputed every request
CUT_ALONE = "room=0"  # the same for fit and middle_out, which jump only at their limit
HYSTERESIS = "low_water 0.5"  # window's and notes' own steps: each cut takes the kept part down to half the budget


def shipped_default() -> str:
    """The chain the proxy runs when a request names none, as the settings define it now."""
    from app.settings import Settings  # bench reads the app's settings; the app never imports bench

    value = Settings.model_fields["default_strategies"].default
    assert isinstance(value, str)
    return value


@dataclass(frozen=True)
class ChainCase:
    spec: str  # the X-Compaction-Strategies value
    kind: str  # baseline | default | peer | strategy | budget | combination | candidate
    note: str = ""  # what it stands for, shown in the tables

    @property
    def label(self) -> str:
        return self.spec


@dataclass(frozen=True)
class Peer:
    title: str  # the headline's column
    spec: str
    note: str


@dataclass(frozen=True)
class EpochPair:
    strategy: str
    setting: str  # "defaults" or "budget B"
    rule: str  # the rule alone
    epochs: str  # the same rule with epochs (or its own hysteresis)
    default_side: Literal["rule", "epochs"]  # which of the two the strategy's defaults are
    epochs_label: str = "with epochs"  # window and notes step by their own hysteresis instead


# What the strategies that stand for something stand for; any other registered strategy (a built-in added
# later, or a plugin) joins the tables at its defaults without an entry here.
NOTES = {
    "window": "budget from the model; cuts in steps of half the budget (low_water 0.5)",
    "fit": "budget from the model, epochs of half of it",
    "middle_out": "budget from the model, epochs of half of it",
    "clear_tool_uses": "trigger 100k, keep 3; clears in jumps, no epochs",
    "shorten_tools": "epochs of 20 tool calls, min_gain 0.35",
    "minify": "lossless",
    "mask": "keep 10, epochs of 20 tool calls, min_gain 0.35; stubs with refs",
    "notes": "no summariser offline: its fallback chain (window) runs",
}


def peers(budget: int) -> list[Peer]:
    """The peers' documented behaviours, written without epochs where the peer has none."""
    return [
        Peer(
            "scout-ai `shorten_tools`", f"shorten_tools({RULE_ALONE})", "scout-ai shorten_tools: recomputed every call"
        ),
        Peer(
            "scout-ai `shorten_tools_epoch`",
            "shorten_tools(max_tool_chars=0,full_tool_outputs=20,full_tool_calls=20,max_tool_calls=100,"
            "epoch=20,min_gain=0)",
            "scout-ai shorten_tools_epoch: full 20, compacted 80, epochs of 20 tool calls; its threshold of 50 "
            "tool calls approximated: the tiers apply from the start (max_tool_chars=0)",
        ),
        Peer("OpenRouter `middle-out`", f"middle_out({CUT_ALONE})", "OpenRouter middle-out (budget from the model)"),
        Peer(
            "Anthropic `clear_tool_uses`",
            "clear_tool_uses",
            "Anthropic clear_tool_uses defaults (trigger 100k, keep 3)",
        ),
        Peer(
            f"LangChain trim last at {budget}",
            f"fit(total={budget},{CUT_ALONE})",
            "LangChain trim_messages strategy=last, max_tokens=budget",
        ),
    ]


def epoch_pairs(budget: int) -> list[EpochPair]:
    b = budget
    return [
        EpochPair("shorten_tools", "defaults", f"shorten_tools({RULE_ALONE})", "shorten_tools", "epochs"),
        EpochPair("mask", "defaults", f"mask({RULE_ALONE})", "mask", "epochs"),
        EpochPair("window", "defaults", "window(low_water=1)", "window", "epochs", HYSTERESIS),
        EpochPair(
            "window", f"budget {b}", f"window(budget={b},low_water=1)", f"window(budget={b})", "epochs", HYSTERESIS
        ),
        EpochPair("fit", "defaults", f"fit({CUT_ALONE})", "fit", "epochs"),
        EpochPair("fit", f"budget {b}", f"fit(total={b},{CUT_ALONE})", f"fit(total={b})", "epochs"),
        EpochPair("middle_out", "defaults", f"middle_out({CUT_ALONE})", "middle_out", "epochs"),
        EpochPair(
            "middle_out", f"budget {b}", f"middle_out(total={b},{CUT_ALONE})", f"middle_out(total={b})", "epochs"
        ),
        # Offline notes has no summariser: both run its fallback chain (window at its defaults), see docs/notes.md.
        EpochPair("notes", "defaults", "notes(low_water=1)", "notes", "epochs", "low_water 0.5 (offline: fallback)"),
    ]


def candidates(budget: int) -> list[ChainCase]:
    """Combinations that could be the default chain; the choice itself is among every chain run."""
    listed = [
        ("minify,dedupe,window", "lossless first, then window's cuts in steps"),
        ("minify,dedupe,clear_tool_uses,window", "cache-aware stack, model budget"),
        ("minify,dedupe,clear_tool_uses(trigger=64000),window", "the same, clearing from 64k"),
        ("minify,dedupe,prune_tool_outputs,window", "long results cut once, as they arrive"),
        ("minify,dedupe,shorten_tools", "lossless first, then shorten_tools with epochs"),
        ("minify,dedupe,shorten_tools,window", "the same, window as the backstop"),
        ("minify,dedupe,fit", "lossless first, then fit with epochs"),
        ("minify,dedupe,middle_out", "lossless first, then middle_out with epochs"),
        ("dedupe,window", "without minify (its time)"),
        ("minify,window", "without dedupe"),
        ("minify,dedupe,mask,window", "reversible masking: the newest 10 results whole, older ones stubs with refs"),
        ("minify,dedupe,mask(keep=5),window", "the same, 5 whole"),
        ("minify,dedupe,mask(keep=20),window", "the same, 20 whole"),
        ("minify,dedupe,mask(epoch=10),window", "the same, epochs of 10 calls"),
        ("minify,dedupe,mask(keep=5,epoch=10),window", "5 whole, epochs of 10 calls"),
        ("minify,dedupe,mask(max_chars=16000),window", "masking, and new results cut to 16000 chars on arrival"),
        ("minify,dedupe,mask(max_chars=8000),window", "masking, and new results cut to 8000 chars on arrival"),
        ("minify,dedupe,mask(max_chars=4000),window", "masking, and new results cut to 4000 chars on arrival"),
        ("minify,dedupe,mask(max_chars=2000),window", "masking, and new results cut to 2000 chars on arrival"),
        ("minify,dedupe,mask(keep=5,max_chars=8000),window", "5 whole, new results cut to 8000 chars"),
        ("minify,mask,window", "masking without dedupe"),
        ("minify,dedupe,clear_tool_uses(trigger=0,keep=10),window", "clear_tool_uses as masking, from the start"),
        (
            "minify,dedupe,prune_tool_outputs(max_chars=2000),clear_tool_uses(trigger=0,keep=5),window",
            "the issue's best saver, its stubs now reversible",
        ),
    ]
    b = budget
    stack = f"minify,dedupe,clear_tool_uses(trigger={b}),window(budget={b})"
    return [
        *(ChainCase(spec, "candidate", note) for spec, note in listed),
        ChainCase(stack, "combination", "cache-aware stack at the binding budget"),
    ]


def cases(budget: int, registry: Registry, default: str | None = None) -> list[ChainCase]:
    """The main tables' chains, each spec once, in the order the tables show them."""
    b = budget
    default = default if default is not None else shipped_default()
    listed = [
        ChainCase("none", "baseline", "forwarded as is"),
        ChainCase(default, "default", "shipped default chain (app.settings)"),
        *(ChainCase(p.spec, "peer", p.note) for p in peers(b)),
        *(ChainCase(n, "strategy", NOTES.get(n, "")) for n in registry.names() if n != "none"),
        ChainCase(f"window(budget={b})", "budget", "at the binding budget"),
        ChainCase(f"fit(total={b})", "budget", "at the binding budget, epochs of half of it"),
        ChainCase(f"middle_out(total={b})", "budget", "at the binding budget, room of half of it"),
        ChainCase(f"clear_tool_uses(trigger={b})", "budget", "at the binding budget"),
        *candidates(b),
    ]
    seen: set[str] = set()
    out = []
    for case in listed:
        if case.spec not in seen:
            seen.add(case.spec)
            out.append(case)
    return out


def all_specs(main: list[ChainCase], pairs: list[EpochPair]) -> list[str]:
    """Every chain the benchmark runs: the main tables' and the epochs table's, each once."""
    specs = [c.spec for c in main]
    specs += [spec for pair in pairs for spec in (pair.rule, pair.epochs)]
    return list(dict.fromkeys(specs))


def plan(specs: list[str], registry: Registry) -> dict[str, str]:
    """For each spec, the spec whose run stands for it: the first one with the same steps and parameters."""
    runner: dict[tuple[tuple[str, str], ...], str] = {}
    out = {}
    for spec in specs:
        chain = Chain.parse(spec, registry)
        key = tuple((step.name, step.params.model_dump_json()) for step in chain.steps)
        out[spec] = runner.setdefault(key, spec)
    return out


def build(case: ChainCase, registry: Registry) -> Chain:
    return Chain.parse(case.spec, registry)
