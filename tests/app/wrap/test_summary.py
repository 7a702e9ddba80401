from __future__ import annotations

from app.edge.metrics import Metrics
from app.wrap.summary import Samples, Summary


def _scrape(metrics: Metrics) -> Samples:
    return Samples.parse(metrics.exposition().decode())


def _serve(metrics: Metrics, before: int, after: int, route: str = "/v1/messages") -> None:
    metrics.requests.labels(route, "200").inc()
    metrics.tokens.labels("messages", "before").inc(before)
    metrics.tokens.labels("messages", "after").inc(after)
    metrics.tokens_removed.labels("messages").inc(before - after)


def test_only_what_happened_between_the_two_scrapes_is_counted() -> None:
    metrics = Metrics()
    _serve(metrics, 5000, 1000)  # someone else's request on a shared proxy, before the agent started
    metrics.fallbacks.labels("strategy_error").inc()
    before = _scrape(metrics)
    _serve(metrics, 12_000, 4_000)
    _serve(metrics, 3_000, 3_000, route="/v1/chat/completions")
    metrics.requests.labels("/readyz", "200").inc()  # wrap's own calls are not the agent's requests
    metrics.expand_rounds.labels("answered").inc(2)
    metrics.fallbacks.labels("not_expandable").inc()
    summary = Summary.of(_scrape(metrics).since(before))
    assert summary == Summary(
        requests={"/v1/messages": 1, "/v1/chat/completions": 1},
        tokens_before=15_000,
        tokens_after=7_000,
        removed=8_000,
        billed={"uncached": 0, "cache_read": 0, "cache_write": 0},
        expand_rounds={"answered": 2},
        fallbacks={"not_expandable": 1},
    )
    assert summary.lines() == [
        "  requests: 2 (/v1/chat/completions 1, /v1/messages 1)",
        "  prompt tokens: 15,000 before compaction, 7,000 after, 8,000 removed",
        "  billed input: none reported by the upstream",
        "  expand rounds: 2 answered",
        "  fallbacks: 1 not_expandable",
    ]


def test_billed_input_is_the_upstreams_count_by_kind_against_the_estimate_without_the_proxy() -> None:
    metrics = Metrics()
    billed = metrics.upstream_input_tokens
    before = _scrape(metrics)
    _serve(metrics, 20_000, 9_000)
    billed.labels("messages", "uncached").inc(1_000)
    billed.labels("messages", "cache_read").inc(7_500)
    billed.labels("chat.completions", "cache_read").inc(500)
    summary = Summary.of(_scrape(metrics).since(before))
    assert summary.billed == {"uncached": 1_000, "cache_read": 8_000, "cache_write": 0}
    # Reported 9,000 for 9,000 counted after compaction, 20,000 before: ~20,000 without the proxy, less the same
    # 8,000 cache reads.
    assert summary.lines()[2] == (
        "  billed input: 1,000 (1,000 uncached, 0 cache writes; 8,000 more read from the prompt cache), against "
        "~12,000 without the proxy"
    )
    assert summary.lines()[3:] == ["  expand rounds: none", "  fallbacks: none"]


def test_a_proxy_that_does_not_count_the_upstreams_input_is_said_to_not_count_it() -> None:
    metrics = Metrics()
    _serve(metrics, 5000, 1000)
    older = "\n".join(
        line for line in metrics.exposition().decode().splitlines() if "upstream_input_tokens" not in line
    )
    summary = Summary.of(Samples.parse(older))
    assert summary.billed is None and summary.tokens_before == 5000
    assert summary.lines()[2] == "  billed input: not counted by this proxy (compaction_proxy_upstream_input_tokens)"
