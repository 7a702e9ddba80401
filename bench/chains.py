"""The chains the compaction benchmark compares: the baseline, the default chain, every registered strategy at
its defaults, the peers' documented behaviours as reference chains, budget-bound variants, and a few combinations.

Strategies whose default budget comes from the model (window, fit, middle_out: gpt-4o's 128k window less the
output reserve, about 109k) do nothing on conversations shorter than that, so they also run at a `budget` that
binds; so does clear_tool_uses, whose default trigger is 100k tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from strategies import Chain, Registry

DEFAULT_CHAIN = "shorten_tools"


@dataclass(frozen=True)
class ChainCase:
    spec: str  # the X-Compaction-Strategies value
    kind: str  # baseline | default | strategy | peer | budget | combination
    note: str = ""  # what it stands for, shown in the tables

    @property
    def label(self) -> str:
        return self.spec


# What the strategies that stand for something stand for; any other registered strategy (a built-in added
# later, or a plugin) joins the tables at its defaults without an entry here.
NOTES = {
    "window": "budget from the model",
    "fit": "budget from the model",
    "middle_out": "OpenRouter middle-out (budget from the model)",
    "clear_tool_uses": "Anthropic clear_tool_uses defaults (trigger 100k, keep 3)",
    "minify": "lossless",
    "notes": "no summariser offline: its fallback chain (window) runs",
}
PEERS = frozenset({"middle_out", "clear_tool_uses"})


def cases(budget: int, registry: Registry) -> list[ChainCase]:
    b = budget
    at_defaults = [n for n in registry.names() if n not in ("none", DEFAULT_CHAIN)]
    return [
        ChainCase("none", "baseline", "forwarded as is"),
        ChainCase(DEFAULT_CHAIN, "default", "default chain"),
        *(ChainCase(n, "peer" if n in PEERS else "strategy", NOTES.get(n, "")) for n in at_defaults),
        ChainCase(f"window(budget={b})", "budget", "at the binding budget"),
        ChainCase(f"fit(total={b})", "peer", "LangChain trim_messages strategy=last, max_tokens=budget"),
        ChainCase(f"middle_out(budget={b})", "budget", "OpenRouter middle-out for a budget-sized window"),
        ChainCase(f"clear_tool_uses(trigger={b})", "budget", "at the binding budget"),
        ChainCase(f"minify,dedupe,{DEFAULT_CHAIN}", "combination", "lossless first, then the default"),
        ChainCase("minify,dedupe,clear_tool_uses,window", "combination", "cache-aware stack, model budget"),
        ChainCase(
            f"minify,dedupe,clear_tool_uses(trigger={b}),window(budget={b})",
            "combination",
            "cache-aware stack at the binding budget",
        ),
    ]


def build(case: ChainCase, registry: Registry) -> Chain:
    return Chain.parse(case.spec, registry)
