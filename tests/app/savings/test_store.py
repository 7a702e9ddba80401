"""The ledger's stores (memory, a real SQLite file, a real Redis) against one contract: counts add up atomically,
between every process that opens the same store, windows keep the smaller, the series keeps its history only, and at
most `limit` models are ever admitted between all of them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.cache import CacheError
from app.savings.store import Store, open_store
from app.savings.tally import Tally
from tests.support.servers import closed_port

Opener = Callable[[], Store]
NOW = 1_800_000_000 // 60 * 60


@pytest.fixture(params=["memory", "sqlite", "redis"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens stores of one kind on the same storage, as the processes sharing it would (memory: one process's)."""
    opened: list[Store] = []
    memory = open_store("memory://")

    def open_one() -> Store:
        if request.param == "memory":
            return memory
        url = f"sqlite://{tmp_path}/cache.db" if request.param == "sqlite" else request.getfixturevalue("redis_url")
        store = open_store(url)
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        store.close()


def tally(tokens: int, minute: int = NOW, window: int | None = None) -> Tally:
    out = Tally()
    out.add("chat.completions", "gpt-4o", "tokens_before", tokens, minute)
    out.add("messages", 'claude "x"|y', "cache_read", 7, minute)
    if window is not None:
        out.window("chat.completions", "gpt-4o", window)
    return out


def test_what_is_added_is_read_back_summed(opener: Opener) -> None:
    store = opener()
    store.add(tally(100, window=128_000), NOW - 600)
    store.add(tally(50, minute=NOW + 60, window=200_000), NOW - 600)
    read = store.read(NOW - 600)
    assert read.totals == {
        ("chat.completions", "gpt-4o", "tokens_before"): 150,
        ("messages", 'claude "x"|y', "cache_read"): 14,
    }
    assert read.series == {
        (NOW, "tokens_before"): 100,
        (NOW, "cache_read"): 7,
        (NOW + 60, "tokens_before"): 50,
        (NOW + 60, "cache_read"): 7,
    }
    assert read.windows == {("chat.completions", "gpt-4o"): 128_000}  # the smaller of the two stated


def test_processes_sharing_a_store_add_up_even_at_once(opener: Opener) -> None:
    stores = [opener(), opener()]

    def add_many(store: Store) -> None:
        for _ in range(50):
            store.add(tally(1), NOW - 600)

    threads = [threading.Thread(target=add_many, args=(store,)) for store in stores for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert opener().read(NOW - 600).totals[("chat.completions", "gpt-4o", "tokens_before")] == 200


def test_minutes_past_the_history_are_forgotten(opener: Opener) -> None:
    store = opener()
    store.add(tally(5, minute=NOW - 3600), NOW - 7200)
    store.add(tally(9), NOW - 600)  # the history now starts ten minutes ago
    read = store.read(NOW - 7200)
    assert {minute for minute, _ in read.series} == {NOW}
    assert read.totals[("chat.completions", "gpt-4o", "tokens_before")] == 14  # totals are kept for good


def test_at_most_limit_models_are_admitted_between_every_process(opener: Opener) -> None:
    first, second = opener(), opener()
    assert [first.admit(f"m{i}", 3) for i in range(2)] == [True, True]
    assert second.admit("m9", 3) is True
    assert first.admit("m10", 3) is False and second.admit("m11", 3) is False
    assert first.admit("m9", 3) is True  # one the other process admitted stays admitted


def test_a_sqlite_store_survives_reopening(tmp_path: Path) -> None:
    store = open_store(f"sqlite://{tmp_path}/cache.db")
    store.add(tally(42), NOW - 600)
    store.close()
    reopened = open_store(f"sqlite://{tmp_path}/cache.db")
    assert reopened.read(NOW - 600).totals[("chat.completions", "gpt-4o", "tokens_before")] == 42
    reopened.close()


def test_an_unreachable_redis_raises_cache_errors_not_its_own() -> None:
    store = open_store(f"redis://127.0.0.1:{closed_port()}/0")
    with pytest.raises(CacheError):
        store.add(tally(1), NOW - 600)
    with pytest.raises(CacheError):
        store.read(NOW - 600)
    with pytest.raises(CacheError):
        store.admit("gpt-4o", 3)
    store.close()
