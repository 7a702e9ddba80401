"""Issue 16's targets, checked on one report: every figure comes from the same run, so a busy machine moves all of
them together. Each goal is a line saying what was asked, what was measured and whether it holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from .report import Report

DEFAULT = "compaction-proxy (default chain)"
WORKERS = "compaction-proxy (default chain, --workers 2)"
PEERS = ("LiteLLM proxy", "Headroom proxy")
BODIES = ("2 KB", "200 KB")
ADDED_P50_MS = {"2 KB": 1.0, "200 KB": 4.0}  # at one connection


@dataclass(frozen=True)
class Goal:
    what: str
    measured: str
    met: bool


def goals(report: Report) -> list[Goal]:
    """The goals whose rows the report has (a peer not run leaves its comparison out)."""
    rows = {(r.target, r.body, r.concurrency): r for r in report.load}
    out = []
    for body in BODIES:
        for concurrency in (1, 16):
            ours = rows.get((DEFAULT, body, concurrency))
            peers = [r for p in PEERS if (r := rows.get((p, body, concurrency))) is not None]
            if ours is None or not peers:
                continue
            best = max(peers, key=lambda r: r.rps)
            ratio = ours.rps / best.rps
            out.append(
                Goal(
                    f"{body}, {concurrency} conn.: default chain >= 2x the best peer's req/s",
                    f"{ours.rps:,.0f} vs {best.target} {best.rps:,.0f}: {ratio:.1f}x",
                    ratio >= 2,
                )
            )
    for body in BODIES:
        one, many = rows.get((DEFAULT, body, 1)), rows.get((DEFAULT, body, 16))
        if one is None or many is None:
            continue
        out.append(
            Goal(
                f"{body}: one process, req/s at 16 conn. >= at 1",
                f"{many.rps:,.0f} vs {one.rps:,.0f}",
                many.rps >= one.rps,
            )
        )
        out.append(
            Goal(
                f"{body}: one process, p99 < 3x p50 at 16 conn.",
                f"p99 {many.p99_ms:.1f} ms, p50 {many.p50_ms:.1f} ms: {many.p99_ms / many.p50_ms:.1f}x",
                many.p99_ms < 3 * many.p50_ms,
            )
        )
        if one.added_p50_ms is not None:
            limit = ADDED_P50_MS[body]
            out.append(
                Goal(
                    f"{body}: added p50 at 1 conn. <= {limit:g} ms",
                    f"{one.added_p50_ms:.2f} ms",
                    one.added_p50_ms <= limit,
                )
            )
        workers = rows.get((WORKERS, body, 16))
        if workers is not None:
            ratio = workers.rps / many.rps
            out.append(
                Goal(
                    f"{body}: --workers 2 >= 1.7x one worker at 16 conn.",
                    f"{workers.rps:,.0f} vs {many.rps:,.0f}: {ratio:.2f}x",
                    ratio >= 1.7,
                )
            )
    return out


def goals_markdown(report: Report) -> str:
    found = goals(report)
    if not found:
        return ""
    lines = ["", "Goals (issue 16), from this run:", "", "| goal | measured | met |", "| --- | --- | --- |"]
    lines += [f"| {g.what} | {g.measured} | {'yes' if g.met else '**no**'} |" for g in found]
    return "\n".join(lines) + "\n"
