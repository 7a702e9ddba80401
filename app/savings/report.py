"""What GET /savings answers: the ledger's tally as figures, per wire format and model and in total, the series per
minute, the learned windows (docs/savings.md describes every field).

Billed input is what the provider charged at its full input price or above: uncached input and cache writes. Cache
reads, charged at a fraction of it, are reported apart. The estimate without the proxy scales the input the upstream
reported by the proxy's own count before compaction over its count after (its count is what X-Compaction-Tokens-*
say), and takes off the same cache reads: it assumes the provider's cache would have served as many tokens without the
proxy, which it cannot know.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from app.edge.metrics import EXPAND_CALL_OUTCOMES
from app.savings.tally import (
    BUCKET_SECONDS,
    COUNTED,
    EXPAND_CALL,
    EXPAND_ROUND,
    FALLBACK,
    REQUESTS,
    SERIES_FIELDS,
    TOKENS_AFTER,
    TOKENS_BEFORE,
    USAGE_REPORTED,
    Tally,
)
from app.upstream.models.usage import KINDS

EXPAND_ROUND_OUTCOMES = ("answered", "capped", "dropped")


def billed(counts: dict[str, int]) -> tuple[int, int]:
    """Billed input and the estimate without the proxy, of counts holding tokens before and after and the KINDS."""
    reported = sum(counts.get(kind, 0) for kind in KINDS)
    before, after = counts.get(TOKENS_BEFORE, 0), counts.get(TOKENS_AFTER, 0)
    scaled = round(reported * before / after) if before and after else reported
    billed_input = counts.get("uncached", 0) + counts.get("cache_write", 0)
    return billed_input, max(billed_input, scaled - counts.get("cache_read", 0))


def figures(counts: dict[str, int]) -> dict[str, Any]:
    before, after = counts.get(TOKENS_BEFORE, 0), counts.get(TOKENS_AFTER, 0)
    billed_input, estimate = billed(counts)
    return {
        "requests": counts.get(REQUESTS, 0),
        "counted": counts.get(COUNTED, 0),
        "tokens_before": before,
        "tokens_after": after,
        "tokens_saved": before - after,
        "saved_percent": round(100 * (before - after) / before, 1) if before else 0.0,
        "usage_reported": counts.get(USAGE_REPORTED, 0),
        "input": {kind: counts.get(kind, 0) for kind in KINDS},
        "billed_input": billed_input,
        "estimate_without_proxy": estimate,
        "expand": {
            "rounds": {outcome: counts.get(EXPAND_ROUND + outcome, 0) for outcome in EXPAND_ROUND_OUTCOMES},
            "calls": {outcome: counts.get(EXPAND_CALL + outcome, 0) for outcome in EXPAND_CALL_OUTCOMES},
        },
        "fallbacks": {
            name.removeprefix(FALLBACK): count for name, count in sorted(counts.items()) if name.startswith(FALLBACK)
        },
    }


def report(tally: Tally, *, store: str, history_minutes: int, max_models: int) -> dict[str, Any]:
    per_row: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for (wire, model, name), count in tally.totals.items():
        per_row[(wire, model)][name] = per_row[(wire, model)].get(name, 0) + count
    rows = [{"wire": wire, "model": model, **figures(counts)} for (wire, model), counts in per_row.items()]
    rows.sort(key=lambda row: (-row["tokens_before"], -row["requests"], row["wire"], row["model"]))
    total: dict[str, int] = defaultdict(int)
    for counts in per_row.values():
        for name, count in counts.items():
            total[name] += count
    totals = figures(total)
    # Summed row by row, as each row's ratio of before to after applies to its own input.
    totals["estimate_without_proxy"] = sum(row["estimate_without_proxy"] for row in rows)
    minutes: dict[int, dict[str, int]] = defaultdict(dict)
    for (minute, name), count in tally.series.items():
        minutes[minute][name] = count
    series = []
    for minute in sorted(minutes):
        counts = minutes[minute]
        billed_input, estimate = billed(counts)
        point = {name: counts.get(name, 0) for name in SERIES_FIELDS}
        series.append({"t": minute, **point, "billed_input": billed_input, "estimate_without_proxy": estimate})
    windows = [{"wire": w, "model": m, "context_window": window} for (w, m), window in sorted(tally.windows.items())]
    return {
        "store": store,
        "bucket_seconds": BUCKET_SECONDS,
        "history_minutes": history_minutes,
        "max_models": max_models,
        "totals": totals,
        "rows": rows,
        "series": series,
        "windows": windows,
    }
