"""The savings ledger: each count made once for /metrics and the ledger, every structure bounded (models are the
client's to name), and a store that fails costs no request and no count.
"""

from __future__ import annotations

import logging

import pytest
from prometheus_client import generate_latest

from app.cache import CacheError
from app.compaction.compactor import Compacted
from app.edge.metrics import Metrics
from app.savings.ledger import Ledger
from app.savings.store import MemoryStore, Store
from app.savings.tally import MAX_MODEL_CHARS, MAX_REASONS, OTHER, Tally
from app.upstream.models.usage import InputUsage
from strategies import BUILTINS, Chain, ChainResult, Registry
from tests.support.metrics import Samples

NOW = 1_800_000_000.0
CHAIN = Chain.parse("none", Registry(BUILTINS))


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


class Flaky(MemoryStore):
    """A memory store that fails while `down`, as Redis does when it is unreachable."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False

    def add(self, tally: Tally, oldest_minute: int) -> None:
        if self.down:
            raise CacheError("Connection refused")
        super().add(tally, oldest_minute)

    def admit(self, model: str, limit: int) -> bool:
        if self.down:
            raise CacheError("Connection refused")
        return super().admit(model, limit)

    def read(self, oldest_minute: int) -> Tally:
        if self.down:
            raise CacheError("Connection refused")
        return super().read(oldest_minute)


def ledger(store: Store | None = None, *, max_models: int = 3, history: int = 60, clock: Clock | None = None) -> Ledger:
    return Ledger(
        store or MemoryStore(), Metrics(), max_models=max_models, history_minutes=history, clock=clock or Clock()
    )


def compacted(model: str = "gpt-4o", before: int = 1000, after: int = 400, fallback: str | None = None) -> Compacted:
    return Compacted(b"{}", CHAIN, ChainResult([], before, after), fallback=fallback, model=model)


def totals(book: Ledger, name: str) -> dict[str, int]:
    return {model: count for (_, model, field), count in book.read().totals.items() if field == name}


def metric(book: Ledger, name: str, **labels: str) -> float:
    return Samples(generate_latest(book.metrics.registry).decode()).get(name, **labels)


def test_a_request_is_counted_once_for_metrics_and_the_ledger_alike() -> None:
    book = ledger()
    book.compacted(compacted(fallback="summariser_error"), "chat.completions")
    book.usage("chat.completions", "gpt-4o", InputUsage(uncached=300, cache_read=100))
    book.expand_round("chat.completions", "gpt-4o", "answered")
    book.expand_calls("chat.completions", "gpt-4o", "repeated", 2)
    read = book.read().totals
    row = {
        field: count for (wire, model, field), count in read.items() if (wire, model) == ("chat.completions", "gpt-4o")
    }
    assert row == {
        "requests": 1,
        "counted": 1,
        "tokens_before": 1000,
        "tokens_after": 400,
        "fallback:summariser_error": 1,
        "usage_reported": 1,
        "uncached": 300,
        "cache_read": 100,
        "expand_round:answered": 1,
        "expand_call:repeated": 2,
    }
    prompt = "compaction_proxy_prompt_tokens_total"
    assert metric(book, prompt, wire="chat.completions", stage="before") == 1000
    assert metric(book, prompt, wire="chat.completions", stage="after") == 400
    inputs = "compaction_proxy_upstream_input_tokens_total"
    assert metric(book, inputs, wire="chat.completions", kind="uncached") == 300
    assert metric(book, inputs, wire="chat.completions", kind="cache_read") == 100
    assert metric(book, "compaction_proxy_expand_calls_total", result="repeated") == 2
    assert metric(book, "compaction_proxy_fallbacks_total", reason="summariser_error") == 1


def test_a_request_stopped_before_its_count_adds_a_request_and_no_tokens() -> None:
    book = ledger()
    book.compacted(Compacted.uncompacted(b"{}", CHAIN, "compaction_deadline"), "responses")
    assert totals(book, "requests") == {"": 1}
    assert totals(book, "tokens_before") == {}
    assert totals(book, "fallback:compaction_deadline") == {"": 1}


def test_past_max_models_every_other_model_is_other_between_all_processes_sharing_the_store() -> None:
    store = MemoryStore()
    first, second = ledger(store), ledger(store)
    for model in ("a", "b"):
        first.compacted(compacted(model), "chat.completions")
    first.flush()
    for model in ("c", "d", "e"):
        second.compacted(compacted(model), "chat.completions")
    first.compacted(compacted("f"), "chat.completions")
    first.flush()  # before the second process's: f is the third the store took
    assert totals(second, "requests") == {"a": 1, "b": 1, "f": 1, OTHER: 3}
    # Known full, the ledger asks the store no more: a client cycling names costs nothing.
    second.compacted(compacted("g"), "chat.completions")
    assert second._model("h") == OTHER


def test_between_two_flushes_the_pending_tally_holds_at_most_max_models_names() -> None:
    book = ledger(max_models=3)
    for i in range(1000):
        book.compacted(compacted(f"invented-{i}"), "messages")
    assert len(book._pending.models()) == 4  # three names and "other"
    book.flush()
    assert totals(book, "requests") == {"invented-0": 1, "invented-1": 1, "invented-2": 1, OTHER: 997}


class Counting(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    def admit(self, model: str, limit: int) -> bool:
        self.asked += 1
        return super().admit(model, limit)


def test_once_the_store_is_full_names_a_client_invents_cost_it_nothing() -> None:
    store = Counting()
    for model in ("a", "b", "c"):
        store.admit(model, 3)  # another process's
    book = ledger(store, max_models=3)
    for i in range(100):
        book.compacted(compacted(f"x{i}"), "messages")
        book.compacted(compacted("b"), "messages")
        book.flush()
    assert store.asked == 3 + 1  # x0 only: refused, so the store is full, and what it holds (b too) is read once
    assert totals(book, "requests") == {"b": 100, OTHER: 100}


def test_long_names_and_many_fallback_reasons_are_bounded() -> None:
    book = ledger()
    book.compacted(compacted("m" * 10_000), "chat.completions")
    for i in range(MAX_REASONS + 5):
        book.compacted(compacted("m" * 10_000, fallback=f"plugin_reason_{i}"), "chat.completions")
    rows = book.read().totals
    assert {len(model) for _, model, _ in rows} == {MAX_MODEL_CHARS}
    reasons = {field for _, _, field in rows if field.startswith("fallback:")}
    assert len(reasons) == MAX_REASONS + 1 and rows[("chat.completions", "m" * MAX_MODEL_CHARS, "fallback:other")] == 5


def test_a_learned_window_is_kept_for_a_model_kept_apart_only() -> None:
    book = ledger(max_models=1)
    book.learned_window("chat.completions", "a", 8192)
    book.flush()
    book.learned_window("chat.completions", "a", 4096)
    book.learned_window("chat.completions", "b", 2048)  # "other" has no window of its own
    book.flush()
    assert book.read().windows == {("chat.completions", "a"): 4096}


def test_the_series_keeps_the_history_only() -> None:
    clock = Clock()
    book = ledger(history=10, clock=clock)
    book.compacted(compacted(), "chat.completions")
    book.flush()
    clock.now += 30 * 60
    book.compacted(compacted(), "chat.completions")
    series = book.read().series
    assert {minute for minute, _ in series} == {int(clock.now) // 60 * 60}
    assert totals(book, "requests") == {"gpt-4o": 2}


def test_a_failing_store_is_logged_once_counted_and_loses_nothing(caplog: pytest.LogCaptureFixture) -> None:
    store = Flaky()
    book = ledger(store)
    store.down = True
    with caplog.at_level(logging.INFO, logger="compaction_proxy.savings"):
        for _ in range(3):
            book.compacted(compacted("a"), "chat.completions")  # counting never touches the store
            book.flush()
        with pytest.raises(CacheError):
            book.read()
        store.down = False
        book.flush()
    logs = caplog.records
    warnings = [r for r in logs if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "savings store (memory) failed: CacheError" in warnings[0].getMessage()
    assert any("works again" in r.getMessage() for r in logs)
    assert metric(book, "compaction_proxy_savings_store_errors_total") == 4
    assert totals(book, "requests") == {"a": 3}
