"""What is learned, per upstream and exact model name (the window apart for the 1M beta, the ratio per client),
bounded, in the cache backend."""

from __future__ import annotations

import pytest

from app.cache import MemoryBackend, open_backend
from app.upstream.models.store import MAX_CLIENTS, MAX_RATIO, MIN_RATIO, LearnedStore


def store(max_models: int = 8, upstream: str = "http://u/v1") -> LearnedStore:
    return LearnedStore(MemoryBackend(60, 100), upstream, max_models)


def test_the_first_sample_sets_the_ratio_then_it_is_smoothed() -> None:
    learned = store()
    assert learned.observe("m", "chat.completions", "c", 1000, 1300).ratio == 1.3
    assert learned.observe("m", "chat.completions", "c", 1000, 1000).ratio == pytest.approx(1.3 - 0.3 * 0.3)


def test_small_or_absurd_samples_do_not_move_it_past_its_bounds() -> None:
    learned = store()
    assert learned.observe("m", "chat.completions", "c", 10, 1000).samples == 0  # too small a prompt to learn from
    # A client's claimed unseen tokens, say:
    assert learned.observe("m", "chat.completions", "c", 1000, 1).ratio == MIN_RATIO
    for _ in range(50):
        ratio = learned.observe("m", "chat.completions", "c", 100, 100_000).ratio
    assert MAX_RATIO - 0.01 <= ratio <= MAX_RATIO


def test_a_window_is_kept_per_exact_model_and_upstream() -> None:
    backend = MemoryBackend(60, 100)
    one, other = LearnedStore(backend, "http://one/v1", 8), LearnedStore(backend, "http://two/v1", 8)
    assert one.learn_window("acme/model", "chat.completions", 4096) == 4096
    assert one.get("acme/model", "chat.completions").window == 4096
    assert (
        one.get("model", "chat.completions").window is None and one.get("ACME/model", "chat.completions").window is None
    )
    assert other.get("acme/model", "chat.completions").window is None
    assert one.get("acme/model", "messages").window is None  # another wire format: another upstream
    assert one.learn_window("acme/model", "chat.completions", 8192) == 4096  # the smaller of two refusals
    assert one.learn_window("acme/model", "chat.completions", 5) == 4096  # not a window
    # A refusal without the 1M-context beta says nothing of the window with it.
    assert one.get("acme/model", "chat.completions", extended=True).window is None


def test_a_process_learns_at_most_max_models() -> None:
    learned = store(max_models=2)
    kept = [learned.learn_window(name, "chat.completions", 4096) for name in ("a", "b", "c")]
    assert [learned.get(name, "chat.completions").window for name in ("a", "b", "c")] == [4096, 4096, None]
    assert kept == [4096, 4096, 4096]  # what was stated, for the retry, kept or not
    learned.learn_window("a", "chat.completions", 2048)  # one it keeps already is still updated
    assert learned.get("a", "chat.completions").window == 2048


def test_what_another_writer_put_under_the_key_is_ignored() -> None:
    backend = MemoryBackend(60, 100)
    learned = LearnedStore(backend, "http://u/v1", 8)
    junks = ("not json", "[1]", '{"window": "4096", "clients": 99}', '{"window": 10, "clients": {"c": [0.01, 5]}}')
    for junk in junks:
        backend.put(learned.window_key("m", "chat.completions"), junk)
        backend.put(learned.ratio_key("m", "chat.completions"), junk)
        got = learned.get("m", "chat.completions", client="c")
        assert (got.window, got.ratio) == (None, 1.0)


def test_shared_through_redis(redis_url: str) -> None:
    writer = LearnedStore(open_backend(redis_url, ttl=60, max_entries=10), "http://u/v1", 8)
    reader = LearnedStore(open_backend(redis_url, ttl=60, max_entries=10), "http://u/v1", 8)
    writer.learn_window("m", "chat.completions", 4096)
    writer.observe("m", "chat.completions", "c", 1000, 1200)
    got = reader.get("m", "chat.completions", client="c")
    assert (got.window, got.ratio) == (4096, 1.2)
    writer.close()
    reader.close()


def test_an_unreachable_cache_learns_nothing_and_fails_nothing() -> None:
    learned = LearnedStore(open_backend("redis://127.0.0.1:1/0", ttl=60, max_entries=10), "http://u/v1", 8)
    learned.learn_window("m", "chat.completions", 4096)
    learned.observe("m", "chat.completions", "c", 1000, 1300)
    got = learned.get("m", "chat.completions", client="c")
    assert (got.window, got.ratio) == (None, 1.0)


def test_each_client_moves_its_own_ratio_only_and_the_newest_clients_are_kept() -> None:
    learned = store()
    learned.observe("m", "chat.completions", "hostile", 1000, 1)
    learned.observe("m", "chat.completions", "honest", 1000, 1100)
    assert learned.get("m", "chat.completions", client="hostile").ratio == MIN_RATIO
    assert learned.get("m", "chat.completions", client="honest").ratio == 1.1
    assert learned.get("m", "chat.completions", client="new").ratio == 1.0  # counted as the tokenizer counts
    for n in range(MAX_CLIENTS):
        learned.observe("m", "chat.completions", f"client-{n}", 1000, 1200)
    assert learned.get("m", "chat.completions", client="hostile").samples == 0  # the oldest went
    assert learned.get("m", "chat.completions", client=f"client-{MAX_CLIENTS - 1}").ratio == 1.2
