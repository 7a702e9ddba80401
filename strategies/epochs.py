"""Epochs: a strategy's boundary moves in jumps, and a jump is taken only when it pays for the cache it breaks.

Providers bill a prompt's cached prefix at a fraction of the input price, and caches match exact prefixes. A
strategy whose boundary moves with every request rewrites everything after it on every request. Here the rule
of a strategy (its `compact`) is applied only at jump points; between two jumps the compacted request is the
compacted request of the last jump point plus the messages that came since, untouched, so each request
extends the one before byte for byte.

Stateless: the jump points of a conversation are found by replaying it, request end by request end (every
position where the next message is the model's), so each request of a conversation finds the same ones. At a
request end the replay (strategies.replay) considers a jump when the part past the last jump point has grown by
`epoch` tool calls, or must jump when the request without one would pass the strategy's limit (by default the
model's context window less the output reserve).

The break-even rule (`min_gain`). Let the request without the jump have S tokens after the first message the
jump changes, and let the jump remove R tokens. Prices relative to uncached input: w for a token written to
the cache (or not cached), r for a cached read. The jump writes S - R tokens that would have been read (cost
about S(w - r) - Rw on this request) and saves R cached reads on each of the k requests still to come
(kRr). It pays when R(w + kr) >= S(w - r), i.e. when R >= S(w - r) / (w + kr):

    Anthropic (w 1.25, r 0.1):  k = 5: 0.66   k = 10: 0.51   k = 20: 0.35   k = 40: 0.22
    OpenAI, GPT-5 (w 1.0, r 0.1):            k = 10: 0.45   k = 20: 0.30
    OpenAI, GPT-4o (w 1.0, r 0.5):           k = 10: 0.08   k = 20: 0.05

A reversible strategy's first stub counts the whole request as rewritten (S is all of it): from that stub on the
proxy offers the expand tool, and the tools, which come before every message, change, so the provider caches
nothing of that request. On real sessions that first jump is where the money goes: at Anthropic's prices it
was 97% of what mask's jumps cost on 60 mini-swe-agent sessions (docs/benchmarks.md).

min_gain is that ratio. The default 0.5 is break-even at Anthropic's prices with 10 requests to go, the dearest of
the common price lists, so it pays under the others too. 10 is measured, not guessed: in 500 real SWE-bench
sessions of mini-swe-agent (median 36 requests) one that has run 20 requests runs a median 17 more, and the ones
where mask's first jump came ran a median 9 more after it (a jump is taken once it pays, which is late in a
session). At 0.35 (k = 20, the first stub's whole rewrite not counted) the default billed 1.006x `none` on them at
Anthropic's breakpoint prices, 139 of the 500 sessions above it; at 0.5, 0.992x and 6. A jump that changes nothing
(the rule leaves the new messages as they are) is always taken: it breaks nothing, and starts the next epoch.

Pace (`pace`, opt-in). A fixed k is a guess about every session; a session that ends a few requests after a jump
pays the rewrite and never gets it back. With pace, an optional jump must also pay within the requests this
session is expected to still run, k = the requests it has sent so far, this one included (Lindy: a session that
has run N requests is about as likely to run N more as not; the count comes from the conversation itself, so
every replica and every request of it decide the same): R(w + kr) >= S(w - r) at Anthropic's prices (w 1.25,
r 0.1: at every k their ratio is above OpenAI's, so what pays there pays at OpenAI's; an hour-long cache, written
at 2x, would need more). min_gain still applies (0 leaves pace alone). Forced jumps stay forced. Pace lowers the
risk early in a session; it cannot remove it: no rule that sees only the past knows that the session ends at the
next request.

Limits. fit and middle_out exist to keep a request under a limit, so no jump of theirs is optional: they jump
only when the request would pass it (and have no epoch or min_gain), and their cut then leaves `room` tokens
free below the limit, so the next jump comes that much growth later at the earliest. mask, when the request would
pass its limit, jumps there whatever its epoch, and its rule degrades in order to the limit less its room
(strategies.degrade: more stubs, shortened arguments, then the oldest units left out behind one stub with a ref).
shorten_tools, when the request would pass its limit between two of its epochs, cuts like fit: the oldest whole
units of what it sends go until half the limit is free. So a request is never forwarded over the limit while its
pinned messages fit.

The other strategies that could move a boundary already move it in steps of their own, which the benchmark
shows pay for the cache: window and notes cut to `low_water` of their budget, clear_tool_uses clears all it
may at once past its trigger, prune_tool_outputs cuts each result once, on arrival. They have no epochs.

Work per request (a request is untrusted input). A cut is priced on a layout of the request built once
(strategies.layout), in time proportional to what it keeps; cuts leave room, so there are at most about
2 T / limit of them for T tokens. The rule itself costs the whole prefix, so it is evaluated again only once
the conversation has grown by 1/GEOMETRIC of its messages since the last evaluation (and by an epoch): at most
about GEOMETRIC * ln(n) evaluations for n messages, whatever the parameters. In a short conversation that is
every epoch; in one of 1,000 messages, a jump waits at least 125 messages.

With a Memo on the Context (the proxy has one), the replay remembers its state at the end of each request it
has seen, under the digest of the conversation so far, so the next request of the conversation costs the rule
once to rebuild its base and once more at most for a jump; without one it replays from the start.

The vocabulary, the same for every strategy: a *jump* is a request end where the compacted prefix changes;
`epoch` (tool calls) and `min_gain` decide the optional ones, the *limit* forces one, and `room` is what a
forced cut leaves free below the limit.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar, TypeVar

from pydantic import Field

from .base import Applied, Params, Strategy
from .budget import default_total
from .context import Context
from .layout import Cut, Prefix, fit_cut
from .messages import Message
from .replay import GEOMETRIC, Replay, answered_at, request_ends

__all__ = ["GEOMETRIC", "EpochStrategy", "answered_at", "request_ends"]

# Break-even at Anthropic's prices with 10 requests to go (0.51; see the module docstring).
DEFAULT_MIN_GAIN = 0.5
DEFAULT_EPOCH_CALLS = 20


def epoch_field(default: int = DEFAULT_EPOCH_CALLS) -> Any:
    return Field(
        default,
        ge=0,
        description="Tool calls by which the conversation past the boundary must grow before the boundary is "
        "recomputed (0: on every request).",
    )


def min_gain_field(default: float = DEFAULT_MIN_GAIN) -> Any:
    return Field(
        default,
        ge=0,
        description="A jump is taken only if the tokens it removes are at least min_gain times the tokens after "
        "the first message it changes, which the provider must cache again (0.5: break-even at Anthropic's "
        "prices over the 10 requests a real session runs after such a jump; 0: every jump; see strategies/epochs.py "
        "for the arithmetic).",
    )


def pace_field() -> Any:
    return Field(
        False,
        description="An optional jump must also pay back within the requests the session is expected to still run, "
        "as many as it has run so far, at Anthropic's cache prices (writes 1.25x, reads 0.1x, the worst case): a short "
        "session declines jumps a long one takes (see strategies/epochs.py).",
    )


def room_field(limit: str) -> Any:
    return Field(
        None,
        ge=0,
        description=f"Tokens a cut leaves free below {limit} (at most half of it; default: half): the cut is "
        f"recomputed only when the request would pass {limit}, so at most once per this many tokens of growth "
        f"(0: on every request over {limit}).",
    )


P = TypeVar("P", bound=Params)


class EpochStrategy(Strategy[P]):
    """A strategy whose boundary moves in jumps. Subclasses implement `compact`, the rule without epochs, and
    say when jumps may come (epoch_calls, min_gain) or, for those that only keep a request under a limit
    (jumps_at_limit_only), implement `cut` and give the room it leaves.
    """

    jumps_at_limit_only: ClassVar[bool] = False
    # The rule itself brings a request under the limit less the room (mask degrades: strategies.degrade): a request
    # over the limit evaluates the rule there, whatever the epoch, and no whole unit is cut after it.
    rule_fits_limit: ClassVar[bool] = False

    @abstractmethod
    def compact(self, messages: list[Message], ctx: Context) -> Applied:
        """The strategy's rule applied to these messages as if they were the whole request."""

    def cut(self, prefix: Prefix, floor: int, room: int, ctx: Context) -> Cut:
        """Bring the prefix under the limit less `room` by dropping whole units: by default as fit does, the
        oldest first, never the ones before `floor` (units an earlier cut dropped already).
        """
        return fit_cut(prefix, max(0, self.limit(ctx) - room), floor)

    def cut_details(self, prefix: Prefix, cut: Cut, ctx: Context) -> dict[str, Any]:
        """What a cut of this strategy's reports for the stats."""
        return {}

    def limit(self, ctx: Context) -> int:
        """Prompt tokens past which the request must jump whatever the epoch and min_gain say."""
        return default_total(ctx)

    def room(self, ctx: Context) -> int:
        """Tokens a cut leaves free below the limit, for the growth until the next one."""
        return self.limit(ctx) // 2

    def epoch_calls(self) -> int:
        """Tool calls of growth after which an optional jump is considered (0: on every request)."""
        return 0

    def min_gain(self) -> float:
        """The break-even rule's ratio for optional jumps (0: every jump that changes something)."""
        return 0.0

    def pace(self) -> bool:
        """Whether an optional jump must also pay back within the session's expected remaining requests."""
        return False

    def over_limit(self, tokens: int, messages: int, ctx: Context) -> bool:
        return tokens > self.limit(ctx)

    def recomputed_every_request(self, ctx: Context) -> bool:
        """Whether the boundary moves with every request: the rule alone, no replay."""
        if self.jumps_at_limit_only:
            return self.room(ctx) == 0
        return self.epoch_calls() == 0 and self.min_gain() == 0

    def apply(self, messages: list[Message], ctx: Context) -> Applied:
        if self.recomputed_every_request(ctx):
            return self.compact(messages, ctx)
        return Replay(self, messages, ctx).run()
