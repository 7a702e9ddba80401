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

Every upstream request is priced by one Pricing per conversation (prompt_cache), by the form's provider's rules:
the client's requests and each expand round, which is the request the proxy sends after it (wire_forms.round_body:
the forwarded messages and the rounds so far, with the tool while rounds are left, without it after the last).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from app.compaction.compactor import Compactor, model_table
from app.expansion.rounds import Round, round_messages, with_rounds
from app.wire.chat.expand import TOOL as EXPAND_TOOL
from strategies import Chain, Encodings, Message, Registry, encoding_for_model
from strategies.digests import message_bytes, message_digest, prefix_digests
from strategies.epochs import answered_at
from strategies.invariants import compaction_problems
from strategies.refs import Originals, stub_refs

from ..compactor import compactor, shipped_settings
from .agent import expand_limits, read_behind_refs
from .chains import ChainCase, build
from .corpora import Conversation, Corpus
from .prompt_cache import BreakpointPricing, MessageTokens, PrefixPricing, Priced, Pricing
from .visibility import Needs, Seen, conversation_needs
from .wire_forms import FORMS, MUTATED, Replayed, WireForm, compact, round_body

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
    rounds_openai: float = 0.0  # of the billed input above, what the rounds cost
    rounds_anthropic: float = 0.0
    re_expansions: int = 0  # rounds expanding a ref the conversation had expanded before
    tool_changes: int = 0  # requests whose tools differ from the request before's (the expand tool came or went)
    capped_rounds: int = 0  # rounds after which the proxy asked without the tool (expand_max_rounds reached)
    # The expand tool: requests it was offered on, and requests whose compacted messages hold a stub with a ref that
    # resolves in the request, offered or not (counted for reversible chains; offered where stubs are: equal).
    offered: int = 0
    stubbed: int = 0
    fallbacks: dict[str, int] = field(default_factory=dict)  # requests a step's fallback chain ran on, by reason
    # Billed per conversation (OpenAI, Anthropic), expand rounds included, in the corpus's order (ids may repeat): a
    # saving on the corpus can hide a session that costs more than without the proxy (report.sessions). Summed per
    # session, not taken as a difference of running totals, so a session billed as `none` bills exactly as much.
    sessions: list[tuple[float, float]] = field(default_factory=list)

    def add(self, before: int, after: int, priced: Priced, window: int) -> None:
        self.requests += 1
        self.tokens_before += before
        self.tokens_after += after
        self.peak_before = max(self.peak_before, before)
        self.peak_after = max(self.peak_after, after)
        self.over_window_before += before > window
        self.over_window_after += after > window
        self.cached += priced.cached
        self._bill(priced)

    def add_round(self, priced: Priced) -> None:
        self.rounds += 1
        self.rounds_openai += priced.openai
        self.rounds_anthropic += priced.anthropic
        self._bill(priced)

    def _bill(self, priced: Priced) -> None:
        self.billed_openai += priced.openai
        self.billed_anthropic += priced.anthropic
        if self.sessions:
            openai, anthropic = self.sessions[-1]
            self.sessions[-1] = (openai + priced.openai, anthropic + priced.anthropic)

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
            out.sessions.append((0.0, 0.0))
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
        # Every format's expand tool counts as the chat one (its definition in the counter's shape is the same).
        heads = (counter.count_tools([*tools, EXPAND_TOOL], self.model), plain_head)
        pricing: Pricing = (
            BreakpointPricing(self.encoding, plain_head)
            if self.form.breakpoints
            else PrefixPricing(self.tokens, plain_head)
        )
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
            if replayed.fallback is not None:
                out.fallbacks[replayed.fallback] = out.fallbacks.get(replayed.fallback, 0) + 1
            # The proxy offers the expand tool while a stub's ref resolves (app.compaction), and answers its calls
            # from the request as it received it, remembered rounds included.
            offered = replayed.originals
            if chain.reversible:
                out.offered += offered is not None
                out.stubbed += offered is not None or _resolving_stub(result.messages, Originals(replayed.seen))
            new_head = heads[0] if offered is not None else plain_head
            out.tool_changes += new_head != head and end != ends[0]
            head = new_head
            priced = pricing.request(result.messages, head, partial(_sent, replayed))
            # The proxy's count holds the expand tool's definition where it is offered, as the cache model's does.
            if not self.form.breakpoints and priced.prompt != result.tokens_after:
                raise AssertionError(
                    f"{where}: cache model renders {priced.prompt} tokens, TokenCounter counts {result.tokens_after}"
                )
            out.add(result.tokens_before, result.tokens_after, priced, self.limits.context_window)
            need = needs.get(end, NOTHING)
            missing = out.seen.check(need, result.messages)
            if offered is not None:
                calls = self._read(need, missing, replayed, offered, pricing, heads, out, expanded)
                remembered += [Round(end, prefixes[end - 1].hex(), (call,)) for call in calls]
            if conversation.id == charted:
                out.series_tokens.append(result.tokens_after)
                out.series_cached.append(priced.cached)
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
        replayed: Replayed,
        originals: Originals,
        pricing: Pricing,
        heads: tuple[int, int],
        out: ChainRun,
        expanded: set[str],
    ) -> list[tuple[str, str]]:
        """The simulated agent's rounds at this request, each billed as the request the proxy sends after it (heads:
        the tools' tokens with the expand tool and without); returns their calls.
        """
        compacted = replayed.result.messages
        reading = read_behind_refs(missing, compacted, originals, self.max_rounds, self.max_chars, out.rounds)
        rounds: list[Message] = []
        for n, (call, ref) in enumerate(zip(reading.calls, reading.refs, strict=True), start=1):
            rounds += round_messages([call], originals, self.max_chars)
            # After the last round expand_max_rounds allows, the proxy asks once more without the tool: other tools,
            # a one-off request (the next one shares its prefix with the round before it).
            tool = n < self.max_rounds
            out.capped_rounds += not tool
            body = partial(round_body, replayed, list(rounds), tool)
            out.add_round(pricing.request([*compacted, *rounds], heads[0 if tool else 1], body, remember=tool))
            out.re_expansions += ref in expanded
            expanded.add(ref)
        out.seen.reached(needs, reading.found)
        return reading.calls


def _sent(replayed: Replayed) -> bytes:
    return replayed.sent


def _resolving_stub(messages: list[Message], originals: Originals) -> bool:
    """Whether a stub in these messages has a ref the request resolves (where the proxy offers the expand tool)."""
    return any(originals.resolve(ref) is not None for ref in stub_refs(messages))
