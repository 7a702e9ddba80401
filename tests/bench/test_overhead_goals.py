"""bench.overhead.goals: issue 16's targets read off one report's rows (made up here, as a run would write them)."""

from __future__ import annotations

from bench.overhead.goals import DEFAULT, WORKERS, goals, goals_markdown
from bench.overhead.report import LoadRow, Report


def row(target: str, body: str, concurrency: int, rps: float, p50: float = 1.0, p99: float = 2.0) -> LoadRow:
    return LoadRow(target, body, concurrency, 1000, 0, rps, p50, p99, added_p50_ms=p50 - 0.1)


def report(rows: list[LoadRow]) -> Report:
    return Report(command="python -m bench.overhead", machine={}, settings={}, load=rows)


def by_what(rows: list[LoadRow]) -> dict[str, tuple[str, bool]]:
    return {g.what: (g.measured, g.met) for g in goals(report(rows))}


def test_against_the_best_peer_of_each_cell() -> None:
    rows = [
        row(DEFAULT, "2 KB", 1, 500),
        row("LiteLLM proxy", "2 KB", 1, 100),
        row("Headroom proxy", "2 KB", 1, 260),  # the best peer here: 500 is under 2x its 260
        row(DEFAULT, "2 KB", 16, 600),
        row("LiteLLM proxy", "2 KB", 16, 300),  # exactly 2x: met
    ]
    found = by_what(rows)
    assert found["2 KB, 1 conn.: default chain >= 2x the best peer's req/s"] == (
        "500 vs Headroom proxy 260: 1.9x",
        False,
    )
    assert found["2 KB, 16 conn.: default chain >= 2x the best peer's req/s"][1] is True
    assert not any("200 KB" in what for what in found)  # no rows, no goal


def test_one_process_and_workers() -> None:
    rows = [
        row(DEFAULT, "200 KB", 1, 300, p50=3.0),
        row(DEFAULT, "200 KB", 16, 290, p50=40.0, p99=130.0),
        row(WORKERS, "200 KB", 16, 500),
    ]
    found = by_what(rows)
    assert found["200 KB: one process, req/s at 16 conn. >= at 1"] == ("290 vs 300", False)
    assert found["200 KB: one process, p99 < 3x p50 at 16 conn."][1] is False  # 130 >= 3 x 40
    assert found["200 KB: added p50 at 1 conn. <= 4 ms"] == ("2.90 ms", True)
    assert found["200 KB: --workers 2 >= 1.7x one worker at 16 conn."] == ("500 vs 290: 1.72x", True)


def test_the_markdown_marks_what_is_not_met_and_is_empty_without_rows() -> None:
    text = goals_markdown(report([row(DEFAULT, "2 KB", 1, 500, p50=1.5), row(DEFAULT, "2 KB", 16, 400)]))
    assert "| 2 KB: added p50 at 1 conn. <= 1 ms | 1.40 ms | **no** |" in text
    assert "| 2 KB: one process, req/s at 16 conn. >= at 1 | 400 vs 500 | **no** |" in text
    assert goals_markdown(report([])) == ""
