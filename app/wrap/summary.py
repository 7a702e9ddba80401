"""What the proxy did while the agent ran: its /metrics after the agent, less its /metrics before (so a proxy others
use too counts this run alone), in a few lines a person reads at a glance.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

from app.savings.report import billed as billed_input
from app.savings.tally import TOKENS_AFTER, TOKENS_BEFORE
from app.upstream.models.usage import KINDS

REQUESTS = "compaction_proxy_requests_total"
TOKENS = "compaction_proxy_prompt_tokens_total"
REMOVED = "compaction_proxy_tokens_removed_total"
# The upstream's own count of each answer's input: absent (a proxy older than the savings page), the summary says so.
BILLED = "compaction_proxy_upstream_input_tokens_total"
EXPAND_ROUNDS = "compaction_proxy_expand_rounds_total"
FALLBACKS = "compaction_proxy_fallbacks_total"
API_PREFIX = "/v1/"  # the routes the agent's requests take; /metrics and /readyz are wrap's own


Sample = tuple[str, frozenset[tuple[str, str]]]


class Samples:
    """One scrape: each sample's value by its name and labels."""

    def __init__(self, values: dict[Sample, float]) -> None:
        self.values = values

    @classmethod
    def parse(cls, text: str) -> Samples:
        return cls(
            {
                (s.name, frozenset(s.labels.items())): s.value
                for family in text_string_to_metric_families(text)
                for s in family.samples
            }
        )

    @classmethod
    def scrape(cls, url: str) -> Samples:
        response = httpx.get(f"{url}/metrics", timeout=10)
        response.raise_for_status()
        return cls.parse(response.text)

    def since(self, before: Samples) -> Samples:
        return Samples({key: value - before.values.get(key, 0.0) for key, value in self.values.items()})

    def has(self, name: str) -> bool:
        return any(sample == name for sample, _ in self.values)

    def by(self, name: str, label: str) -> dict[str, int]:
        """The samples of `name` summed by one label's value."""
        sums: dict[str, float] = defaultdict(float)
        for (sample, labels), value in self.values.items():
            if sample == name:
                sums[dict(labels).get(label, "")] += value
        return {key: round(value) for key, value in sums.items()}


@dataclass(frozen=True)
class Summary:
    requests: dict[str, int]  # by route
    tokens_before: int
    tokens_after: int
    removed: int
    billed: dict[str, int] | None  # by kind; None: the proxy does not count it
    expand_rounds: dict[str, int]  # by outcome
    fallbacks: dict[str, int]  # by reason

    @classmethod
    def of(cls, run: Samples) -> Summary:
        stages = run.by(TOKENS, "stage")
        billed = run.by(BILLED, "kind") if run.has(BILLED) else None
        return cls(
            requests={r: n for r, n in run.by(REQUESTS, "route").items() if r.startswith(API_PREFIX) and n},
            tokens_before=stages.get("before", 0),
            tokens_after=stages.get("after", 0),
            removed=sum(run.by(REMOVED, "wire").values()),
            billed=None if billed is None else {kind: billed.get(kind, 0) for kind in KINDS},
            expand_rounds={o: n for o, n in run.by(EXPAND_ROUNDS, "outcome").items() if n},
            fallbacks={r: n for r, n in run.by(FALLBACKS, "reason").items() if n},
        )

    def lines(self) -> list[str]:
        routes = ", ".join(f"{route} {n:,}" for route, n in sorted(self.requests.items()))
        lines = [
            f"  requests: {sum(self.requests.values()):,}" + (f" ({routes})" if routes else ""),
            f"  prompt tokens: {self.tokens_before:,} before compaction, {self.tokens_after:,} after, "
            f"{self.removed:,} removed",
        ]
        if self.billed is None:
            lines.append(f"  billed input: not counted by this proxy ({BILLED.removesuffix('_total')})")
        elif not any(self.billed.values()):
            lines.append("  billed input: none reported by the upstream")
        else:
            # As the savings page reckons it (app.savings.report): cache reads are charged at a fraction, apart.
            counts = {**self.billed, TOKENS_BEFORE: self.tokens_before, TOKENS_AFTER: self.tokens_after}
            charged, estimate = billed_input(counts)
            lines.append(
                f"  billed input: {charged:,} ({self.billed['uncached']:,} uncached, {self.billed['cache_write']:,} "
                f"cache writes; {self.billed['cache_read']:,} more read from the prompt cache), against ~{estimate:,} "
                "without the proxy"
            )
        lines.append(f"  expand rounds: {_counts(self.expand_rounds)}")
        lines.append(f"  fallbacks: {_counts(self.fallbacks)}")
        return lines


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n:,} {key}" for key, n in sorted(counts.items())) or "none"
