"""The notes cache backends (memory, SQLite, a real Redis) and the store's single flight on top of them."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from app.cache import Backend, MemoryBackend, open_backend
from app.cache.redis import RedisBackend
from app.cache.sqlite import SqliteBackend
from app.notes.store import NotesStore
from strategies.notes_io import NotesUnavailable
from tests.support.servers import closed_port
from tests.support.waiting import threads_in, wait_for

Opener = Callable[[float], Backend]


@pytest.fixture(params=["memory", "sqlite", "redis"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens backends of one kind on the same storage, as the processes sharing it would."""
    opened: list[Backend] = []

    def open_one(ttl: float) -> Backend:
        if request.param == "memory":
            url = "memory://"
        elif request.param == "sqlite":
            url = f"sqlite://{tmp_path}/notes.db"
        else:
            url = request.getfixturevalue("redis_url")
        backend = open_backend(url, ttl=ttl, max_entries=100)
        opened.append(backend)
        return backend

    yield open_one
    for backend in opened:
        backend.close()


def test_notes_are_stored_by_key(opener: Opener) -> None:
    backend = opener(60)
    assert backend.get("k1") is None
    backend.put("k1", "FACTS:\n- code HTL-1234-AB")
    assert backend.get("k1") == "FACTS:\n- code HTL-1234-AB"
    assert backend.get("k2") is None


def sleep_until(moment: float) -> None:
    """Until time.monotonic() reaches `moment`: what the test waits for is time itself passing."""
    time.sleep(max(0.0, moment - time.monotonic()))


def test_entries_expire_unless_used(opener: Opener) -> None:
    ttl = 1.0
    backend = opener(ttl)
    last_read = time.monotonic()  # at most when "used" was stored (or last read): its expiry counts from then
    backend.put("used", "a")
    backend.put("unused", "b")
    stored = time.monotonic()  # at least when "unused" was stored
    kept_since = last_read
    # Read "used" well within the ttl, for longer than it: each read keeps the entry another second. Each read is
    # timed, so a machine slow enough to let the ttl pass between two reads is told apart from an expiry.
    while time.monotonic() - kept_since < 1.8 * ttl:
        time.sleep(0.1)
        started = time.monotonic()
        value = backend.get("used")
        if time.monotonic() - last_read < ttl:
            assert value == "a"  # read within the ttl of the read before it: still there
        else:  # this process stalled past the ttl: start the run of reads again
            backend.put("used", "a")
            kept_since = started
        last_read = started
    sleep_until(stored + ttl + 0.05)  # never read since it was stored, by over the ttl
    assert backend.get("unused") is None
    sleep_until(time.monotonic() + ttl + 0.05)  # not read since, by over the ttl
    assert backend.get("used") is None


def test_the_memory_cache_is_a_bounded_lru() -> None:
    backend = MemoryBackend(ttl=60, max_entries=2)
    backend.put("a", "1")
    backend.put("b", "2")
    assert backend.get("a") == "1"  # now the newest
    backend.put("c", "3")
    assert (backend.get("a"), backend.get("b"), backend.get("c")) == ("1", None, "3")


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_the_fold_lock_is_shared_and_expires(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/notes.db" if kind == "sqlite" else request.getfixturevalue("redis_url")
    one, other = open_backend(url, ttl=60, max_entries=1), open_backend(url, ttl=60, max_entries=1)
    try:
        assert one.acquire("k", "token-1", 30)
        assert not other.acquire("k", "token-2", 30)
        other.release("k", "token-2")  # not the holder: nothing happens
        assert not other.acquire("k", "token-2", 30)
        one.release("k", "token-1")
        taken = time.monotonic()
        assert other.acquire("k", "token-2", 0.2)
        # A holder that died (token-2 is never released) frees the lock when it expires, not before.
        wait_for(lambda: one.acquire("k", "token-3", 30), what="the dead holder's lock to expire")
        assert time.monotonic() - taken >= 0.2
        one.put("k", "notes")
        assert other.get("k") == "notes"  # what one process stores, the other reads
    finally:
        one.close()
        other.close()


def test_a_sqlite_cache_survives_reopening(tmp_path: Path) -> None:
    SqliteBackend(tmp_path / "deep" / "notes.db", ttl=60).put("k", "notes")
    assert SqliteBackend(tmp_path / "deep" / "notes.db", ttl=60).get("k") == "notes"


def fold_concurrently(stores: list[NotesStore], make: Callable[[], str], n: int = 10) -> list[str | Exception]:
    def one(i: int) -> str | Exception:
        try:
            return stores[i % len(stores)].fold("key", make)
        except NotesUnavailable as exc:
            return exc

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


def waiting_folds(followers: int, leaders: int = 1) -> Callable[[], bool]:
    """Whether the other callers of fold are all waiting on the one making the notes: `followers` on their store's
    flight (Future.result), and each other store's leader (leaders - 1 of them) for the shared lock.
    """
    return lambda: (
        threads_in(NotesStore.fold, Future.result) == followers and threads_in(NotesStore._fold_locked) == leaders
    )


class SlowSummariser:
    """make() for a fold: counts its calls and returns only once the other callers are waiting on it (`waiting`),
    so concurrent folds overlap however slowly their threads start.
    """

    def __init__(self, waiting: Callable[[], bool] = lambda: True, fail: bool = False) -> None:
        self.calls = 0
        self.fail = fail
        self.waiting = waiting
        self.lock = threading.Lock()

    def __call__(self) -> str:
        with self.lock:
            self.calls += 1
        wait_for(self.waiting, what="the other folds to wait on this one")
        if self.fail:
            raise NotesUnavailable("summariser_error", "HTTP 500")
        return "FACTS:\n- code 42"


def test_concurrent_folds_of_one_key_make_one_call() -> None:
    store = NotesStore(MemoryBackend(60, 10), lock_seconds=10)
    make = SlowSummariser(waiting_folds(followers=9))
    assert fold_concurrently([store], make) == ["FACTS:\n- code 42"] * 10
    assert make.calls == 1


def test_a_failed_fold_fails_its_waiters_and_is_not_cached() -> None:
    store = NotesStore(MemoryBackend(60, 10), lock_seconds=10)
    failing = SlowSummariser(waiting_folds(followers=9), fail=True)
    results = fold_concurrently([store], failing)
    assert failing.calls == 1
    assert all(isinstance(r, NotesUnavailable) and r.reason == "summariser_error" for r in results)
    assert store.get("key") is None
    working = SlowSummariser()
    assert store.fold("key", working) == "FACTS:\n- code 42" and working.calls == 1


def test_stores_sharing_redis_make_one_call_between_them(redis_url: str) -> None:
    replicas = [NotesStore(RedisBackend(redis_url, 60), lock_seconds=10) for _ in range(2)]
    make = SlowSummariser(waiting_folds(followers=8, leaders=2))  # the other replica's leader waits for the lock
    assert fold_concurrently(replicas, make) == ["FACTS:\n- code 42"] * 10
    assert make.calls == 1


def test_an_unreachable_redis_is_a_notes_cache_error() -> None:
    store = NotesStore(RedisBackend(f"redis://127.0.0.1:{closed_port()}/0", 60), lock_seconds=10)
    with pytest.raises(NotesUnavailable) as excinfo:
        store.fold("key", SlowSummariser())
    assert excinfo.value.reason == "notes_cache_error"
