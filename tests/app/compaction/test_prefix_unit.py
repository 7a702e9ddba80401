"""The prefix tracker on its own: the conversation key, the judgement, and what it costs the cache and the CPU."""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import pytest

import strategies.digests
from app.cache import CacheError, MemoryBackend
from app.compaction.compactor import Compactor
from app.compaction.prefix import PrefixTracker, conversation_key, judge
from app.policy.keys import Keys
from app.settings import Settings
from app.wire import ChatCompletions
from strategies import Encodings, ModelTable, Registry, TokenCounter
from strategies.digests import message_digest, prefix_digests
from tests.factories import assistant, qa_chat, system, user


class Recording(MemoryBackend):
    """A real memory backend that also records the calls made to it."""

    def __init__(self) -> None:
        super().__init__(ttl=60, max_entries=100)
        self.calls: list[tuple[str, str]] = []

    def get(self, key: str) -> str | None:
        self.calls.append(("get", key))
        return super().get(key)

    def put(self, key: str, notes: str) -> None:
        self.calls.append(("put", key))
        super().put(key, notes)


class Down(Recording):
    def get(self, key: str) -> str | None:
        raise CacheError("Error 111 connecting to 127.0.0.1:6390. Connection refused.")


def test_the_key_is_the_model_and_the_opening_up_to_the_first_user_message() -> None:
    opening = [system("Be brief."), user("Fix the test.")]
    key = conversation_key("gpt-4o", [*opening, assistant("Done."), user("Thanks")])
    assert key.startswith("prefix:")  # never a notes key, which is a bare hex digest
    assert key == conversation_key("gpt-4o", opening)
    assert key != conversation_key("gpt-4.1", opening)
    assert key != conversation_key("gpt-4o", [system("Be long."), user("Fix the test.")])
    assert key != conversation_key("gpt-4o", [system("Be brief."), user("Fix another test.")])
    # No user message: the first message alone.
    assert conversation_key("m", [system("a"), system("b")]) == conversation_key("m", [system("a"), system("c")])
    assert conversation_key("m", []) != conversation_key("n", [])


def test_judge() -> None:
    prefixes = prefix_digests(message_digest(m) for m in qa_chat(2))  # 6 messages
    assert judge(None, prefixes) == "new"
    assert judge(f"3:{prefixes[2].hex()}", prefixes) == "extends"
    assert judge(f"6:{prefixes[5].hex()}", prefixes) == "extends"  # a retry: the whole prefix is cached
    assert judge(f"3:{prefixes[3].hex()}", prefixes) == "breaks"
    assert judge(f"7:{prefixes[5].hex()}", prefixes) == "breaks"  # longer than this request
    assert judge("0:", prefixes) == "extends"
    assert judge("garbage", prefixes) == "new"


def test_a_conversation_new_then_extends_then_breaks_with_one_get_and_one_put_each() -> None:
    backend = Recording()
    tracker = PrefixTracker(backend)
    first, grown = qa_chat(2), qa_chat(3)
    edited = [*grown[:2], assistant("Answer 000: changed."), *grown[3:]]

    assert tracker.observe("gpt-4o", first, first) == "new"
    assert tracker.observe("gpt-4o", grown, grown) == "extends"
    assert tracker.observe("gpt-4o", edited, edited) == "breaks"
    assert tracker.observe("gpt-4o", edited, edited) == "extends"  # retried: read, nothing to write
    assert [op for op, _ in backend.calls] == ["get", "put", "get", "put", "get", "put", "get"]
    key = conversation_key("gpt-4o", first)
    assert {k for _, k in backend.calls} == {key}
    assert backend.get(key) == f"{len(edited)}:{prefix_digests(message_digest(m) for m in edited)[-1].hex()}"


def test_the_forwarded_messages_are_judged_not_the_original_ones() -> None:
    tracker = PrefixTracker(MemoryBackend(60, 100))
    first, grown = qa_chat(4), qa_chat(5)
    # A compaction that keeps the opening and the newest pair: the dropped part moves, so the prefix breaks,
    # although the client's own history only grew.
    assert tracker.observe("gpt-4o", first, [*first[:3], *first[-3:]]) == "new"
    assert tracker.observe("gpt-4o", grown, [*grown[:3], *grown[-3:]]) == "breaks"


def test_a_failing_cache_gives_unknown_and_one_warning_without_secrets(caplog: pytest.LogCaptureFixture) -> None:
    tracker = PrefixTracker(Down())
    with caplog.at_level(logging.WARNING, logger="compaction_proxy.prefix"):
        assert tracker.observe("gpt-4o", qa_chat(1), qa_chat(1)) == "unknown"
    assert len(caplog.records) == 1
    assert "Connection refused" in caplog.records[0].getMessage()


def test_compact_sync_hashes_each_message_once_and_tracks_what_it_forwards(monkeypatch: pytest.MonkeyPatch) -> None:
    hashed: list[int] = []
    serialise = strategies.digests.message_bytes

    def counting(message: dict[str, Any]) -> bytes:
        hashed.append(id(message))
        return serialise(message)

    # Every message digest serialises its message first: the tracker must reuse Context.digest's memo.
    monkeypatch.setattr(strategies.digests, "message_bytes", counting)
    compactor = Compactor(
        Settings(default_strategies="none"), Registry.with_plugins(), TokenCounter(Encodings()), ModelTable.packaged()
    )
    backend = Recording()
    tracker = PrefixTracker(backend)
    raw = json.dumps({"model": "gpt-4o", "messages": [system("Be brief."), user("hi")]}).encode()

    compacted = compactor.compact_sync(raw, ChatCompletions(), compactor.default_chain, prefix=tracker)
    assert compacted.prefix == "new"
    assert (b"x-compaction-prefix", b"new") in compacted.response_headers()
    assert len(hashed) == len(set(hashed)) == 2
    assert [op for op, _ in backend.calls] == ["get", "put"]

    assert compactor.compact_sync(raw, ChatCompletions(), compactor.default_chain, prefix=tracker).prefix == "extends"
    untracked = compactor.compact_sync(raw, ChatCompletions(), compactor.default_chain)
    assert untracked.prefix is None and all(name != b"x-compaction-prefix" for name, _ in untracked.response_headers())
    assert len(backend.calls) == 3  # the untracked request touched nothing


def bearer(key: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json")]


def test_the_client_scope_is_the_presented_proxy_key_as_a_digest() -> None:
    keys = Keys(Settings(api_keys=["sk-proxy-k1", "sk-proxy-k2"], upstream_api_key="sk-upstream"))
    k1, k2 = keys.client_scope(bearer("sk-proxy-k1")), keys.client_scope(bearer("sk-proxy-k2"))
    assert k1 != k2 and len(k1) == len(k2) == 32
    assert keys.client_scope([(b"Authorization", b"bearer  sk-proxy-k1 ")]) == k1  # as check() reads it
    assert keys.client_scope([*bearer("sk-proxy-k1"), (b"x-api-key", b"anything")]) == k1  # only the proxy key
    for scope in (k1, k2):
        assert b"sk-proxy" not in scope and "sk-proxy" not in scope.hex()
        assert scope not in (hashlib.sha256(b"sk-proxy-k1").digest(), hashlib.sha256(b"sk-proxy-k2").digest())


def test_without_proxy_keys_the_scope_is_the_clients_own_credential() -> None:
    keys = Keys(Settings())
    alice, bob = keys.client_scope(bearer("sk-alice")), keys.client_scope(bearer("sk-bob"))
    anthropic = keys.client_scope([(b"x-api-key", b"sk-ant-carol")])
    assert len({alice, bob, anthropic}) == 3
    assert keys.client_scope(bearer("sk-alice")) == alice
    assert keys.client_scope([(b"content-type", b"application/json")]) == b""  # anonymous clients share one


def test_scoped_conversations_neither_see_nor_overwrite_each_other() -> None:
    tracker = PrefixTracker(MemoryBackend(60, 100))
    k1, k2 = Keys(Settings()).client_scope(bearer("sk-k1")), Keys(Settings()).client_scope(bearer("sk-k2"))
    first, grown = qa_chat(2), qa_chat(3)
    assert tracker.observe("gpt-4o", first, first, scope=k1) == "new"
    # The same opening from another key tells it nothing about what k1 sent: a conversation of its own.
    assert tracker.observe("gpt-4o", first, first, scope=k2) == "new"
    edited = [*first[:2], assistant("Something else.")]
    assert tracker.observe("gpt-4o", edited, edited, scope=k2) == "breaks"  # k2's own state, changed
    assert tracker.observe("gpt-4o", grown, grown, scope=k1) == "extends"  # k2's requests left k1's state alone
    assert tracker.observe("gpt-4o", grown, grown) == "new"  # nor is an anonymous client k1
    keys = {conversation_key("gpt-4o", first, scope=s) for s in (b"", k1, k2)}
    assert len(keys) == 3 and all(key.startswith("prefix:") for key in keys)
