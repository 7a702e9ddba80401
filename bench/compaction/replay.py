"""Replay every request of a corpus through one chain and measure it.

Every prefix of a conversation that ends where the model answered is a request the client sent. Each goes
through the proxy's own path (wire_forms.compact: the body parsed, then Compactor.compact_sync: the chain, token
counts before and after, settle, render; all of it in the time), with one Compactor per corpus and chain, built as
create_app builds it from the shipped settings, so its caches (token counts, the strategy memo) are as warm as in
a proxy that has seen the conversation grow, and no warmer. Then: the invariants (strategies.invariants, plus no
mutation and byte-for-byte determinism, checked once per conversation), the prompt-cache model, and what the
model can still see and reach: where a value it needs is behind a stub, the simulated agent's expand rounds
(bench.compaction.agent), billed, remembered and shown again in later requests as the proxy does. The proxy's
expand tool counts in the tool definitions of every request it is offered on (a change of tools caches nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from app.compaction.compactor import Compactor, model_table
from app.expansion.rounds import Round, round_messages, with_rounds
from app.wire.chat.expand import TOOL as EXPAND_TOOL
from strategies import Chain, Encodings, Message, Registry, encoding_for_model
from strategies.digests import message_bytes, message_digest, prefix_digests
from strategies.epochs import answered_at
from strategies.invariants import compaction_problems
from strategies.refs import Originals

from ..compactor import compactor, shipped_settings
from .agent import expand_limits, read_behind_refs
from .chains import ChainCase, build
from .corpora import Conversation, Corpus
from .prompt_cache import (
    BreakpointCache,
    BreakpointHit,
    CacheHit,
    ConversationCache,
    MessageTokens,
    billed_anthropic,
    billed_openai,
)
from .visibility import Needs, Seen, conversation_needs
from .wire_forms import FORMS, MUTATED, WireForm, compact

MAX_PROBLEMS_KEPT = 5
NOTHING = Needs((), ())
# Per corpus and chain, every message's count is remembered: the figures must not depend on a cache's size.
TOKEN_CACHE_SIZE = 1_000_000


@dataclass
class ChainRun:
    """One chain over one corpus: sums over every request."""

    corpus: str
    chain: str
    requests: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    peak_before: int = 0
    peak_after: int = 0
    over_window_before: int = 0
    over_window_after: int = 0
    violations: int = 0
    problems: list[str] = field(default_factory=list)
    seen: Seen = field(default_factory=Seen)
    cached: int = 0
    billed_openai: float = 0.0
    billed_anthropic: float = 0.0
    ms: list[float] = field(default_factory=list)
    # Per request of the one conversation drawn in the charts: prompt tokens after, cached tokens.
    series_tokens: list[int] = field(default_factory=list)
    series_cached: list[int] = field(default_factory=list)
    # The simulated agent's expand rounds (bench.compaction.agent), billed above with the requests.
    rounds: int = 0
    re_expansions: int = 0  # rounds expanding a ref the conversation had expanded before
    tool_changes: int = 0  # requests whose tools differ from the request before's (the expand tool came or went)

    def add(self, before: int, after: int, hit: CacheHit, window: int, anthropic: BreakpointHit | None = None) -> None:
        """anthropic: the request priced by Anthropic's breakpoint rules (the Messages form); else by the chat
        form's model of them.
        """
        self.requests += 1
        self.tokens_before += before
        self.tokens_after += after
        self.peak_before = max(self.peak_before, before)
        self.peak_after = max(self.peak_after, after)
        self.over_window_before += before > window
        self.over_window_after += after > window
        self.cached += hit.cached
        self.billed_openai += billed_openai(hit.prompt, hit.cached)
        self.billed_anthropic += anthropic.billed() if anthropic else billed_anthropic(hit.prompt, hit.cached)

    def add_round(self, hit: CacheHit) -> None:
        self.rounds += 1
        self.billed_openai += billed_openai(hit.prompt, hit.cached)
        self.billed_anthropic += billed_anthropic(hit.prompt, hit.cached)

    def problem(self, where: str, what: str) -> None:
        self.violations += 1
        if len(self.problems) < MAX_PROBLEMS_KEPT:
            self.problems.append(f"{where}: {what}")


class Replayer:
    """Per process: the encodings and the cache model's token sequences, shared by every chain it replays."""

    def __init__(self, model: str, registry: Registry, form: WireForm = FORMS["chat"]) -> None:
        """form: the wire format each request is sent in (wire_forms.FORMS), and priced as its provider caches it."""
        self.form = form
        self.model = model
        self.registry = registry
        # The proxy as it ships; a strategy's error stops the run instead of forwarding the request uncompacted.
        self.settings = shipped_settings(token_cache_size=TOKEN_CACHE_SIZE, on_strategy_error="fail")
        self.limits = model_table(self.settings).lookup(model)  # what the Compactor compacts this model's requests to
        self.max_rounds, self.max_chars = expand_limits()
        self.encodings = Encodings()
        self.encoding = self.encodings.get(encoding_for_model(model))
        self.tokens = MessageTokens(self.encoding)
        # What each request needs to see depends on the conversation only: found once, used by every chain.
        self._needs: dict[tuple[str, str], dict[int, Needs]] = {}

    def compactor(self) -> Compactor:
        """A fresh Compactor: each chain starts cold (token counts, the strategy memo: minify's results, epochs' jump
        points), like a proxy meeting the conversation for the first time.
        """
        return compactor(self.settings, self.encodings, self.registry)

    def run(self, corpus: Corpus, case: ChainCase, charted: str | None = None) -> ChainRun:
        chain = build(case, self.registry)
        proxy = self.compactor()
        out = ChainRun(corpus.key, case.spec)
        for conversation in corpus.conversations:
            key = (corpus.key, conversation.id)
            if key not in self._needs:
                self._needs[key] = conversation_needs(conversation, answered_at(conversation.messages))
            self._conversation(conversation, self._needs[key], chain, proxy, out, charted)
        return out

    def _conversation(
        self,
        conversation: Conversation,
        needs: dict[int, Needs],
        chain: Chain,
        proxy: Compactor,
        out: ChainRun,
        charted: str | None,
    ) -> None:
        messages = conversation.messages
        request = {"model": self.model, **({"tools": conversation.tools} if conversation.tools else {})}
        counter = proxy.counter
        snapshot = [message_bytes(m) for m in messages]
        tools = conversation.tools or []
        plain_head = counter.count_tools(tools, self.model)
        offered_head = counter.count_tools([*tools, EXPAND_TOOL], self.model)
        cache = ConversationCache(self.tokens, plain_head)
        breakpoints = BreakpointCache(self.encoding, cache.head_tokens) if self.form.breakpoints else None
        prefixes = prefix_digests(message_digest(m) for m in messages) if chain.reversible else []
        remembered: list[Round] = []  # the expand rounds, as the proxy remembers them (app.expansion.memory)
        expanded: set[str] = set()
        ends = answered_at(messages)
        last = b""
        last_sent: list[Message] = []
        head = plain_head
        for end in ends:
            prefix = messages[:end]
            originals = Originals(prefix)
            sent = with_rounds(prefix, prefixes, remembered, originals, self.max_chars) if remembered else prefix
            replayed = compact(self.form, proxy, chain, sent, request)
            result = replayed.result
            out.ms.append(replayed.ms)
            where = f"{conversation.id} request {end}"
            for problem in [*compaction_problems(replayed.seen, result.messages), *replayed.problems]:
                out.problem(where, problem)
            # The proxy offers the expand tool while a stub's ref resolves (app.compaction), and answers its calls
            # from the request as it received it, remembered rounds included.
            offered = replayed.originals
            new_head = offered_head if offered is not None else plain_head
            out.tool_changes += new_head != head and end != ends[0]
            head = new_head
            hit = cache.request(result.messages, head)
            priced = breakpoints.request(orjson.loads(replayed.sent)) if breakpoints is not None else None
            if priced is not None:
                hit = CacheHit(priced.prompt, priced.read, priced.read)  # OpenAI's column: the same reads
            elif hit.prompt != result.tokens_after:  # the expand tool's definition counted where it is offered
                raise AssertionError(
                    f"{where}: cache model renders {hit.prompt} tokens, TokenCounter counts {result.tokens_after}"
                )
            out.add(result.tokens_before, result.tokens_after, hit, self.limits.context_window, priced)
            need = needs.get(end, NOTHING)
            missing = out.seen.check(need, result.messages)
            if offered is not None:
                calls = self._read(need, missing, result.messages, offered, cache, head, out, expanded)
                remembered += [Round(end, prefixes[end - 1].hex(), (call,)) for call in calls]
            if conversation.id == charted:
                out.series_tokens.append(result.tokens_after)
                out.series_cached.append(hit.cached)
            if end == ends[-1]:
                last, last_sent = replayed.sent, sent
        if ends:
            again = compact(self.form, proxy, chain, last_sent, request, check_input=True)
            if again.sent != last:
                out.problem(conversation.id, "not deterministic: the last request compacted twice differs")
            if MUTATED in again.problems:
                out.problem(conversation.id, f"{MUTATED} (the last request's, as parsed)")
        if [message_bytes(m) for m in messages] != snapshot:
            out.problem(conversation.id, MUTATED)

    def _read(
        self,
        needs: Needs,
        missing: list[str],
        compacted: list[Message],
        originals: Originals,
        cache: ConversationCache,
        head: int,
        out: ChainRun,
        expanded: set[str],
    ) -> list[tuple[str, str]]:
        """The simulated agent's rounds at this request, each billed as the request it is; returns their calls."""
        reading = read_behind_refs(missing, compacted, originals, self.max_rounds, self.max_chars, out.rounds)
        sent = list(compacted)
        for call, ref in zip(reading.calls, reading.refs, strict=True):
            sent += round_messages([call], originals, self.max_chars)
            out.add_round(cache.request(sent, head))
            out.re_expansions += ref in expanded
            expanded.add(ref)
        out.seen.reached(needs, reading.found)
        return reading.calls
