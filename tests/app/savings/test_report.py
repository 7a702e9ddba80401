"""What /savings answers: billed input, the estimate without the proxy, totals as the sum of the rows."""

from __future__ import annotations

from app.savings.report import report
from app.savings.tally import Tally

MINUTE = 1_800_000_000 // 60 * 60


def row(tally: Tally, wire: str, model: str, **counts: int) -> None:
    for name, count in counts.items():
        tally.add(wire, model, name.replace("__", ":"), count, MINUTE)


def test_billed_input_leaves_cache_reads_out_and_the_estimate_scales_the_reported_input_by_before_over_after() -> None:
    tally = Tally()
    # Compaction halved the prompt: without it the upstream would have counted twice the input, less the same reads.
    row(
        tally,
        "chat.completions",
        "gpt-4o",
        requests=2,
        tokens_before=2000,
        tokens_after=1000,
        uncached=600,
        cache_read=400,
    )
    row(tally, "messages", "claude", requests=1, tokens_before=300, tokens_after=300, uncached=10, cache_write=290)
    found = report(tally, store="memory", history_minutes=60, max_models=50)
    chat, messages = found["rows"]
    assert (chat["billed_input"], chat["estimate_without_proxy"], chat["saved_percent"]) == (600, 1600, 50.0)
    assert (messages["billed_input"], messages["estimate_without_proxy"]) == (300, 300)  # nothing cut: the same
    totals = found["totals"]
    assert totals["billed_input"] == 900 and totals["estimate_without_proxy"] == 1900  # row by row, each its ratio
    assert totals["input"] == {"uncached": 610, "cache_read": 400, "cache_write": 290}
    assert found["series"] == [
        {
            "t": MINUTE,
            "requests": 3,
            "tokens_before": 2300,
            "tokens_after": 1300,
            "uncached": 610,
            "cache_read": 400,
            "cache_write": 290,
            "billed_input": 900,
            "estimate_without_proxy": max(900, round(1300 * 2300 / 1300) - 400),
        }
    ]


def test_expand_and_fallback_counts_are_reported_by_outcome_and_reason() -> None:
    tally = Tally()
    row(tally, "responses", "gpt-5", requests=3, expand_round__answered=2, expand_call__repeated=1, fallback__x=1)
    totals = report(tally, store="redis", history_minutes=60, max_models=50)["totals"]
    assert totals["expand"]["rounds"] == {"answered": 2, "capped": 0, "dropped": 0}
    assert totals["expand"]["calls"]["repeated"] == 1 and totals["fallbacks"] == {"x": 1}
    assert totals["estimate_without_proxy"] == totals["billed_input"] == 0  # no usage reported: nothing estimated
