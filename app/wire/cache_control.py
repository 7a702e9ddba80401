"""Anthropic's cache breakpoints (`cache_control`) after compaction.

A breakpoint caches the request's prefix up to and including its block; a request may hold at most 4 (tool
definitions, `system`, message blocks and the request's own automatic one together), and one with a 1-hour TTL
must come before any with 5 minutes. Compaction moves none of them by choice. The rule:
- a breakpoint whose block is kept keeps its place (a rewritten block keeps its cache_control);
- one whose block went (dropped with its tool use, merged into the text before it, or a marker inside a tool
  result that the rewrite lost) moves to the nearest kept block at or before its place that can carry one (not a
  thinking block, not an empty text), so the prefix up to there is still written for the next request;
- two landing on one block are one, with the longer TTL; moving only backwards, they keep their order, so 1-hour
  ones stay ahead of 5-minute ones;
- a request that came with more than 4 loses the earliest message breakpoints past 4 (it would be refused).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_BREAKPOINTS = 4
CACHE_CONTROL = "cache_control"
# Block types the API takes a cache_control on; a breakpoint is never moved onto any other.
CACHEABLE = frozenset({"text", "image", "document", "search_result", "tool_use", "tool_result"})
Position = tuple[int, int]  # (message index, block index) in the request as it came; message -1: system


@dataclass
class Placed:
    """One message of the request to send (None: the system's blocks), with its blocks' original positions."""

    message: dict[str, Any] | None
    positions: list[Position | None]  # per block; None: a block no original stands for
    blocks: list[Any]
    untouched: bool = False  # blocks is the original list: copied before any change

    def set_block(self, j: int, block: Any) -> None:
        if self.untouched:
            self.blocks = list(self.blocks)
            self.untouched = False
        self.blocks[j] = block
        if self.message is not None:
            self.message = {**self.message, "content": self.blocks}


def marker(block: Any) -> Any:
    """The block's breakpoint: its cache_control, or that of a block inside a tool result's content."""
    if not isinstance(block, dict):
        return None
    if CACHE_CONTROL in block:
        return block[CACHE_CONTROL]
    content = block.get("content") if block.get("type") == "tool_result" else None
    if isinstance(content, list):
        return next((p[CACHE_CONTROL] for p in content if isinstance(p, dict) and CACHE_CONTROL in p), None)
    return None


def _markers(block: Any) -> int:
    if not isinstance(block, dict):
        return 0
    count = int(CACHE_CONTROL in block)
    content = block.get("content") if block.get("type") == "tool_result" else None
    if isinstance(content, list):
        count += sum(1 for p in content if isinstance(p, dict) and CACHE_CONTROL in p)
    return count


def _without_markers(block: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in block.items() if k != CACHE_CONTROL}
    if isinstance(out.get("content"), list) and block.get("type") == "tool_result":
        out["content"] = [
            {k: v for k, v in p.items() if k != CACHE_CONTROL} if isinstance(p, dict) else p for p in out["content"]
        ]
    return out


def _takes_marker(block: Any) -> bool:
    return (
        isinstance(block, dict)
        and block.get("type") in CACHEABLE
        and not (block.get("type") == "text" and not block.get("text"))
    )


def _rank(control: Any) -> int:
    return 1 if isinstance(control, dict) and control.get("ttl") == "1h" else 0


def breakpoints(system: Any, messages: list[Any]) -> list[tuple[Position, Any]]:
    """The breakpoints of a request as it came, in request order."""
    found: list[tuple[Position, Any]] = []
    for index, blocks in [(-1, system), *enumerate(m.get("content") for m in messages)]:
        if isinstance(blocks, list):
            found.extend(((index, k), marker(b)) for k, b in enumerate(blocks) if marker(b) is not None)
    return found


def settle_breakpoints(placed: list[Placed], original: list[tuple[Position, Any]], fixed: int) -> None:
    """Moves the breakpoints of `original` that lost their block (the rule above) and caps them at 4 with the
    `fixed` ones (tools, automatic). Changes `placed` in place; never an original object.
    """
    kept = [(pos, n, j) for n, item in enumerate(placed) for j, pos in enumerate(item.positions) if pos is not None]
    targets: dict[tuple[int, int], Any] = {}
    next_kept = 0
    last: tuple[int, int] | None = None  # the nearest kept block so far that can take a breakpoint
    for pos, control in original:
        at_pos = None
        while next_kept < len(kept) and kept[next_kept][0] <= pos:
            where, n, j = kept[next_kept]
            if _takes_marker(placed[n].blocks[j]):
                last = (n, j)
            if where == pos:
                at_pos = (n, j)
            next_kept += 1
        if at_pos is not None and marker(placed[at_pos[0]].blocks[at_pos[1]]) is not None:
            continue  # still where the client put it
        if last is not None and _rank(control) >= _rank(targets.get(last)):
            targets[last] = control
    for (n, j), control in targets.items():
        block = placed[n].blocks[j]
        current = marker(block)
        if current is None or (CACHE_CONTROL in block and _rank(control) > _rank(current)):
            placed[n].set_block(j, {**block, CACHE_CONTROL: control})
    total = fixed + sum(_markers(b) for item in placed for b in item.blocks)
    for item in placed:
        if total <= MAX_BREAKPOINTS:
            break
        if item.message is None:
            continue  # the system's: the longest-lived prefix
        for j, block in enumerate(item.blocks):
            if total > MAX_BREAKPOINTS and _markers(block):
                total -= _markers(block)
                item.set_block(j, _without_markers(block))
