"""The compaction benchmark's prices of an expand round: the request the proxy sends after it, by its form's rules."""

from __future__ import annotations

from typing import Any

from app.expansion.rounds import round_messages
from app.wire.chat.expand import TOOL
from bench.compaction.prompt_cache import (
    ANTHROPIC_READ_PRICE,
    ANTHROPIC_WRITE_PRICE,
    BreakpointPricing,
    ConversationCache,
    MessageTokens,
    PrefixPricing,
)
from bench.compaction.replay import Replayer
from bench.compaction.wire_forms import FORMS, Replayed, compact, round_body
from strategies import Chain, Encodings, Registry
from strategies.messages import REPLY_PRIMING
from strategies.refs import ExpandCall, stub_refs
from tests.factories import agent_loop, assistant, user

TOOLS = [{"type": "function", "function": {"name": "read", "description": "Read a file.", "parameters": {}}}]


def masked(tools: list[dict[str, Any]] | None) -> tuple[Replayed, list[dict[str, Any]], int]:
    """A Messages request whose older results the proxy masked: as compacted, one expand round of it, the tools'
    tokens with the expand tool.
    """
    registry = Registry.with_plugins()
    replayer = Replayer("gpt-4o", registry, FORMS["messages"])
    proxy = replayer.compactor()
    request = {"model": "gpt-4o", **({"tools": tools} if tools else {})}
    chain = Chain.parse("mask(keep=1,epoch=0,min_gain=0)", registry)
    replayed = compact(FORMS["messages"], proxy, chain, agent_loop(6, 3000), request)
    assert replayed.originals is not None, "the tool is offered"
    ref = next(stub_refs(replayed.result.messages))
    rounds = round_messages([("expand_1", ExpandCall(ref).arguments())], replayed.originals, replayer.max_chars)
    return replayed, rounds, proxy.counter.count_tools([*(tools or []), TOOL], "gpt-4o")


def test_a_messages_round_reads_up_to_the_clients_breakpoint_and_writes_nothing() -> None:
    replayed, rounds, head = masked(TOOLS)
    pricing = BreakpointPricing(Encodings().get("o200k_base"), 0)
    first = pricing.request(replayed.result.messages, head, lambda: replayed.sent)
    assert first.cached == 0 and first.anthropic > first.prompt  # written: 1.25x
    after = pricing.request([], head, lambda: round_body(replayed, rounds, True))
    # The round's blocks follow the client's last breakpoint: read what the request wrote, the round at 1x.
    assert after.cached > 0.9 * first.prompt and after.prompt > first.prompt
    assert after.anthropic == ANTHROPIC_READ_PRICE * after.cached + (after.prompt - after.cached)


def test_the_round_sent_without_the_expand_tool_reads_nothing() -> None:
    replayed, rounds, head = masked(TOOLS)
    pricing = BreakpointPricing(Encodings().get("o200k_base"), 0)
    pricing.request(replayed.result.messages, head, lambda: replayed.sent)
    capped = pricing.request([], head, lambda: round_body(replayed, rounds, False))
    assert capped.cached == 0 and capped.anthropic > capped.prompt  # other tools: the whole prefix written again
    # A client without tools: the tools stay (the API needs the tool for the rounds' blocks), and tool_choice none
    # misses every message's entry (the system prompt here is too short to be cached on its own).
    replayed, rounds, head = masked(None)
    pricing = BreakpointPricing(Encodings().get("o200k_base"), 0)
    pricing.request(replayed.result.messages, head, lambda: replayed.sent)
    assert b'"tool_choice"' in round_body(replayed, rounds, False)
    assert pricing.request([], head, lambda: round_body(replayed, rounds, False)).cached == 0
    assert pricing.request([], head, lambda: round_body(replayed, rounds, True)).cached > 0


def test_a_one_off_request_is_not_what_the_next_one_is_compared_with() -> None:
    cache = ConversationCache(MessageTokens(Encodings().get("o200k_base")), tools_tokens=100)
    messages = [user("x" * 20_000), assistant("a")]
    cache.request(messages)
    assert cache.request([*messages, user("b")], tools_tokens=180, remember=False).cached == 0
    assert cache.request([*messages, user("b")]).cached > 0


def test_the_chat_forms_anthropic_price_reads_the_shared_prefix_exactly() -> None:
    # OpenAI caches in 128-token steps; Anthropic reads up to the last request's breakpoint, every token of it. With
    # the steps, a request a few tokens shorter (minify's) could lose a step and bill above the longer one.
    pricing = PrefixPricing(MessageTokens(Encodings().get("o200k_base")), tools_tokens=0)
    messages = [user("word " * 3000), assistant("a")]
    first = pricing.request(messages, 0, bytes)
    assert first.cached == 0 and first.anthropic == ANTHROPIC_WRITE_PRICE * first.prompt
    after = pricing.request([*messages, user("b")], 0, bytes)
    shared = first.prompt - REPLY_PRIMING  # the previous request's messages, all of them
    assert after.cached < shared and (shared - after.cached) < 128  # OpenAI: a whole step short
    assert after.anthropic == ANTHROPIC_READ_PRICE * shared + ANTHROPIC_WRITE_PRICE * (after.prompt - shared)
