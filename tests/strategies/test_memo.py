from __future__ import annotations

import threading

from strategies import Memo, TokenCounter
from strategies.memo import ENTRY_OVERHEAD
from strategies.minify import Minify, MinifyParams
from tests.factories import agent_loop, result
from tests.strategies.harness import RecordingContext


def test_a_key_is_computed_once_then_remembered() -> None:
    memo, calls = Memo(100), []
    assert memo.get_or_compute(b"k", lambda: calls.append(1) or "value") == "value"
    assert memo.get_or_compute(b"k", lambda: calls.append(1) or "other") == "value"
    assert calls == [1]


def test_the_least_recently_used_go_first_once_the_characters_are_over_the_bound() -> None:
    memo = Memo(10 + 2 * ENTRY_OVERHEAD)
    memo.get_or_compute(b"a", lambda: "aaaa")
    memo.get_or_compute(b"b", lambda: "bbbb")
    memo.get_or_compute(b"a", lambda: "new")  # a hit: a is now the most recent
    memo.get_or_compute(b"c", lambda: "cccc")  # 12 characters: b, the least recent, goes
    assert memo.get_or_compute(b"a", lambda: "new") == "aaaa"
    assert memo.get_or_compute(b"c", lambda: "new") == "cccc"
    assert memo.get_or_compute(b"b", lambda: "bb") == "bb"


def test_many_tiny_values_are_bounded_by_their_entry_overhead() -> None:
    memo = Memo(100 * ENTRY_OVERHEAD)
    for i in range(1000):
        memo.put(str(i).encode(), "1")
    assert len(memo) < 100
    assert memo.get(b"999") == "1" and memo.get(b"0") is None


def test_put_replaces_a_value_and_keeps_the_count_of_characters() -> None:
    memo = Memo(2 * ENTRY_OVERHEAD + 8)
    memo.put(b"a", "1234")
    memo.put(b"a", "5678")
    memo.put(b"b", "1234")
    assert (memo.get(b"a"), memo.get(b"b")) == ("5678", "1234")


def test_a_value_larger_than_the_bound_is_returned_but_not_kept() -> None:
    memo = Memo(3)
    assert memo.get_or_compute(b"k", lambda: "long value") == "long value"
    assert len(memo) == 0


def test_concurrent_use_keeps_the_bound() -> None:
    memo = Memo(1000 + 10 * ENTRY_OVERHEAD)

    def work(n: int) -> None:
        for i in range(500):
            memo.get_or_compute(f"{n}-{i % 50}".encode(), lambda: "x" * 40)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(memo) * (40 + ENTRY_OVERHEAD) <= memo.max_chars


def test_minify_with_a_memo_gives_the_same_messages_and_reuses_the_work(counter: TokenCounter) -> None:
    messages = [*agent_loop(3, 300), result("call_x", '{\n  "a": 1,\n  "b": [1, 2]\n}')]
    strategy = Minify(MinifyParams())
    without = strategy.apply(messages, RecordingContext(model="gpt-4o", tokens=counter)).messages
    memo = Memo(1_000_000)
    first = strategy.apply(messages, RecordingContext(model="gpt-4o", tokens=counter, memo=memo)).messages
    remembered = len(memo)
    second = strategy.apply(messages, RecordingContext(model="gpt-4o", tokens=counter, memo=memo)).messages
    assert first == without == second
    assert first[-1]["content"] == '{"a":1,"b":[1,2]}'
    assert remembered == len([m for m in messages if m["role"] == "tool"])
    assert len(memo) == remembered  # the second request found every result remembered
