"""A real-trace run end to end: a mini-swe-agent trajectory converted by scripts/convert_swe_traj.py, replayed in two
wire forms with the quote rule's expand rounds, and bench.compaction.real_traces's table of it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.compaction.corpora import swe
from bench.compaction.report.real_traces import BEGIN, END
from tests.bench.test_compaction_smoke import bench, table

ROOT = Path(__file__).resolve().parents[2]
STEPS = 12
QUOTED = "    def separability_matrix(transform):  # the line the model quotes later"


def listing(step: int) -> str:
    """A file view the model reads once: numbered lines, unique to the step."""
    lines = [f"{n:6}\tvalue_{step}_{n} = compute_something_long({step}, {n})  # line {n}" for n in range(1, 60)]
    if step == 0:
        lines.insert(3, QUOTED)
    return "\n".join(lines)


def trajectory() -> dict[str, Any]:
    """mini-swe-agent 1.x: text actions, a THOUGHT and one bash block, the output in the next user message; at the
    end the model quotes a line of the first output, which a small keep has masked by then.
    """
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a helpful assistant that can interact with a computer shell."},
        {"role": "user", "content": "<pr_description>Fix separability_matrix.</pr_description>"},
    ]
    for step in range(STEPS):
        said = f"As the first view showed:\n{QUOTED}\nso I fix it." if step == STEPS - 1 else f"Step {step}."
        messages.append({"role": "assistant", "content": f"THOUGHT: {said}\n\n```bash\nnl -ba file_{step}.py\n```"})
        output = f"<returncode>0</returncode>\n<output>\n{listing(step)}\n</output>"
        messages.append({"role": "user", "content": output})
    messages.append({"role": "assistant", "content": "THOUGHT: Done.\n\n```bash\necho COMPLETE_TASK\n```"})
    messages.append({"role": "user", "content": "diff --git a/file_0.py b/file_0.py"})
    info = {"mini_version": "1.15.0", "config": {"model": {"model_name": "google/gemini-3-pro-preview"}}}
    return {"trajectory_format": "mini-swe-agent-1", "instance_id": "astropy-1", "info": info, "messages": messages}


def converted(tmp_path: Path, data: dict[str, Any] | None = None) -> Path:
    runs = tmp_path / "trajs" / "astropy-1"
    runs.mkdir(parents=True)
    (runs / "astropy-1.traj.json").write_text(json.dumps(data or trajectory()))
    out = tmp_path / "mini.json.gz"
    ran = subprocess.run(
        [sys.executable, "scripts/convert_swe_traj.py", "--repo", "o/n", "--out", str(out), str(tmp_path / "trajs")],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    return out


def test_a_mini_swe_agent_trajectory_converts_to_bash_calls(tmp_path: Path) -> None:
    corpus = swe.load(path=converted(tmp_path))
    [conversation] = corpus.conversations
    assert corpus.title == "mini-swe-agent 1.15.0 runs (real)"
    assert "mini-swe-agent 1.15.0" in corpus.description and "gemini-3-pro-preview 1" in corpus.description
    assert conversation.id == "swe-0-astropy-1"
    calls = [m for m in conversation.messages if m.get("tool_calls")]
    assert len(calls) == STEPS + 1
    assert json.loads(calls[0]["tool_calls"][0]["function"]["arguments"]) == {"command": "nl -ba file_0.py"}
    assert calls[0]["content"] == "THOUGHT: Step 0."
    assert conversation.messages[3]["role"] == "tool" and QUOTED in conversation.messages[3]["content"]


def test_a_trajectory_without_its_run_info_still_converts(tmp_path: Path) -> None:
    data = trajectory()
    del data["info"]  # the version and model come from the run's config, which a trimmed file may lack
    [conversation] = swe.load(path=converted(tmp_path, data)).conversations
    assert len([m for m in conversation.messages if m.get("tool_calls")]) == STEPS + 1


def test_the_real_trace_table_bills_the_rounds_apart_in_each_form(tmp_path: Path) -> None:
    data = converted(tmp_path)
    chain = "mask(keep=1,epoch=1,min_gain=0)"
    summaries = []
    for wire in ("chat", "messages"):
        summary = tmp_path / f"{wire}.json"
        ran = bench(
            "bench.compaction", "--corpora", "swe", "--swe-data", str(data), "--wire", wire, "--chains", chain,
            "--summary", str(summary),
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        summaries.append(str(summary))
    doc = tmp_path / "benchmarks.md"
    doc.write_text(f"before\n{BEGIN}\nold\n{END}\nafter\n")
    joined = bench("bench.compaction.real_traces", *summaries, "--update-docs", str(doc))
    assert joined.returncode == 0, joined.stderr
    rows = {(row["form"], row["chain"]): row for row in table(joined.stdout)}
    assert {form for form, _ in rows} == {"chat", "messages"} and ("chat", "`none`") not in rows, joined.stdout
    for form in ("chat", "messages"):
        row = rows[(form, f"`{chain}`")]
        assert float(row["prompt tokens"]) < 1.0, row
        # The model quotes a masked line once: one needed stub, brought back by a round, billed on top.
        assert float(row["needed stubs per 100 requests"]) > 0 and row["needed, unreachable"] == "0", row
        assert float(row["rounds per 100 requests"]) > 0, row
        for price in ("OpenAI", "Anthropic"):
            alone, with_rounds = map(float, row[f"billed {price}: requests / with rounds"].split(" / "))
            assert alone < with_rounds, row
        assert row["invalid requests"] == "0", row
    written = doc.read_text()
    assert written.startswith("before\n") and written.endswith("after\n") and "old" not in written


def test_a_summary_without_the_corpus_is_a_clear_error(tmp_path: Path) -> None:
    summary = tmp_path / "empty.json"
    summary.write_text(json.dumps({"wire": "chat", "command": "x", "commit": "c", "corpora": []}))
    ran = bench("bench.compaction.real_traces", str(summary))
    assert ran.returncode == 2 and "no swe corpus" in ran.stderr, ran.stderr
