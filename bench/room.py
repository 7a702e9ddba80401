"""How much room mask should leave below its limit, by window: `python -m bench.room`.

A request past mask's limit is degraded (strategies.degrade) to the limit less the room; then the requests after it
extend it byte for byte until it passes the limit again. Little room uses more of the window but degrades again
sooner, and every degradation changes the prompt near its start (the left-out stub, the newest stubs), so an
upstream with a prefix cache (OpenAI, Anthropic; llama.cpp and vLLM per slot) reads it again. Much room costs the
model context it could have had. This replays an agent session request by request through the default chain at
each window and room share and prints, per request on average:

- used: prompt tokens forwarded, as a share of the limit;
- visible: tool results still in the prompt (whole or as a stub), as a share of all so far;
- prefill: tokens past the prefix the request shares with the one before (what a prefix cache must compute anew),
  as a multiple of the tokens the conversation grew by (1.0: only the new messages);
- degraded: the share of requests that changed their prefix.

docs/strategies.md#room-for-growth gives the figures and the rule chosen from them (strategies.budget.growth_room).
"""

from __future__ import annotations

import argparse
import sys

from strategies import Chain, Context, Encodings, Message, ModelLimits, Registry, TokenCounter
from strategies.budget import window_total
from strategies.memo import Memo
from strategies.replay import request_ends

from .agent_history import agent_history

WINDOWS = (2048, 4096, 8192, 16384, 32768, 131072)
SHARES = (0.5, 0.25, 0.125, 0.0625)
MODEL = "gpt-4o"


def reserve(window: int) -> int:
    """The answer's share of a window: an eighth, at most 4,096 tokens (max_tokens as agents set it)."""
    return min(window // 8, 4096)


def common_tokens(before: list[Message], after: list[Message], ctx: Context) -> int:
    """Tokens of the messages two prompts start with, identical."""
    tokens = 0
    for old, new in zip(before, after, strict=False):
        if old is not new and ctx.digest(old) != ctx.digest(new):
            break
        tokens += ctx.count_message(old)
    return tokens


def replay(messages: list[Message], window: int, share: float | None, counter: TokenCounter) -> dict[str, float]:
    """The session sent request by request at `window` with mask's room `share` of its limit (None: the default)."""
    limits = ModelLimits(context_window=window, max_output=reserve(window))
    request = {"max_tokens": reserve(window)}
    probe = Context(model=MODEL, tokens=counter, request=request, limits=limits)
    limit = window_total(probe)
    spec = "minify,mask,window" if share is None else f"minify,mask(room={int(limit * share)}),window"
    chain = Chain.parse(spec, Registry.with_plugins())
    memo = Memo(50_000_000)
    previous: list[Message] = []
    grew = prefill = used = visible = changed = 0.0
    ends = [end for end in request_ends(messages) if end > 2]
    total_so_far = 0
    for end in ends:
        ctx = Context(model=MODEL, tokens=counter, request=request, limits=limits, memo=memo)
        out = chain.run(messages[:end], ctx).messages
        tokens = ctx.count_request(out)
        shared = common_tokens(previous, out, ctx)
        new_tokens = ctx.count_request(messages[:end]) - total_so_far
        total_so_far += new_tokens
        if previous and shared < ctx.count_request(previous) - ctx.count_request([]):
            changed += 1
        grew += new_tokens
        prefill += tokens - shared
        used += tokens / limit
        results = sum(1 for m in messages[:end] if m.get("role") == "tool")
        visible += sum(1 for m in out if m.get("role") == "tool") / max(1, results)
        previous = out
    n = len(ends)
    return {"used": used / n, "visible": visible / n, "prefill": prefill / grew, "degraded": changed / n}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=150, help="tool calls in the session")
    parser.add_argument("--output-chars", type=int, default=1200, help="characters of each tool result")
    args = parser.parse_args(argv)
    counter = TokenCounter(Encodings())
    messages = agent_history(2 + 2 * args.rounds, args.rounds * args.output_chars)
    print(f"agent_history: {args.rounds} tool calls of {args.output_chars:,} chars, the default chain, per request")
    print()
    print("| window | room (share of the limit) | used | visible | prefill / growth | degraded |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for window in WINDOWS:
        for share in (*SHARES, None):
            row = replay(messages, window, share, counter)
            label = "default" if share is None else f"{share:g}"
            print(
                f"| {window:,} | {label} | {row['used']:.0%} | {row['visible']:.0%} | {row['prefill']:.1f} | "
                f"{row['degraded']:.0%} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
