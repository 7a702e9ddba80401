"""bench.complexity runs at a tiny size, so it cannot rot; its numbers are read by people, so only its shape is checked.

In process and without the memory readings, which compile patterns worth 2 GB on purpose.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.complexity.cli import document
from bench.complexity.grid import CASES, SHAPES, parallel, run_grid
from strategies.conversation import tool_calls_of
from strategies.invariants import pairing_problems

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CHAIN = "minify,mask,window"
CLEAR_INPUTS = "clear_tool_uses(trigger=0,keep=1,clear_tool_inputs=true)"


def test_the_parallel_shape_is_one_message_of_n_calls_each_answered() -> None:
    messages = parallel(50)
    assert len(messages) == 52
    assert len(tool_calls_of(messages[1])) == 50
    assert pairing_problems(messages) == []


def test_every_case_runs_on_each_of_its_shapes_and_is_documented() -> None:
    rows = run_grid([20, 40], repeat=1, quick=False)
    assert [(case.chain, shape) for case, shape, _ in rows] == [(c.chain, s) for c in CASES for s in c.shapes]
    assert all(len(times) == 2 and min(times) > 0 for _, _, times in rows)
    assert {shape for _, shape, _ in rows} == set(SHAPES)
    assert {case.chain for case, shape, _ in rows if shape == "parallel"} >= {DEFAULT_CHAIN, CLEAR_INPUTS}
    table = document([20, 40], rows, [("start", 100.0)])
    assert f"| `{DEFAULT_CHAIN}` | parallel | " in table
    assert f"| `{CLEAR_INPUTS}` | parallel | " in table


def test_the_command_runs_the_rows_asked_for() -> None:
    args = ["--sizes", "20,40", "--repeat", "1", "--shape", "parallel", "--chain", DEFAULT_CHAIN, "--chain", "none"]
    result = subprocess.run(
        [sys.executable, "-m", "bench.complexity", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    rows = [line.split()[:2] for line in result.stdout.splitlines()[1:]]
    assert rows == [["none", "parallel"], [DEFAULT_CHAIN, "parallel"]]


def test_function_calls_are_counted_instead_of_time() -> None:
    rows = run_grid([20, 40], repeat=1, quick=False, shapes={"parallel"}, chains={DEFAULT_CHAIN}, function_calls=True)
    [(case, shape, cells)] = rows
    assert (case.chain, shape) == (DEFAULT_CHAIN, "parallel")
    assert all(cell == int(cell) for cell in cells) and 0 < cells[0] < cells[1]
