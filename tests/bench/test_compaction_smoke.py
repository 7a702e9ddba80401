"""`python -m bench.compaction --smoke` runs and reports every chain on every corpus, with no invariant broken.

Behaviour, and the facts: savings and timings are read by people, never asserted, but planted facts are counted
exactly (uncompacted and lossless chains keep them all, no chain loses every one).
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.compaction.chains import cases, epoch_pairs, shipped_default
from bench.compaction.cli import SMOKE
from bench.compaction.corpora import swe
from bench.compaction.report.default_chain import TITLE as DEFAULT_TITLE
from bench.compaction.report.epochs import TITLE as EPOCHS_TITLE
from bench.compaction.report.forms import TITLE as FORM_TITLE
from bench.compaction.wire_forms import FORMS
from strategies import Registry

ROOT = Path(__file__).resolve().parents[2]
TITLES = (
    "tau-bench airline (real)",
    "BFCL v4 multi-turn long-context (executed)",
    "SWE-agent runs (real)",
    "synthetic coding agent",
    "synthetic planning chat",
)


def sections(markdown: str) -> dict[str, str]:
    """Each `#### title` section of the report, by title."""
    parts = re.split(r"^#### ", markdown, flags=re.MULTILINE)[1:]
    return {part.split("\n", 1)[0].strip(): part for part in parts}


def facts(cell: str) -> tuple[int, int]:
    """A `facts visible` or `reachable` cell, "5/8 (62%)": the facts counted and the facts planted."""
    found = re.fullmatch(r"(\d+)/([1-9]\d*) \(\d+%\)", cell)
    assert found is not None, cell
    return int(found.group(1)), int(found.group(2))


def table(section: str) -> list[dict[str, str]]:
    rows = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    return [dict(zip(header, (cell.strip() for cell in row.strip("|").split("|")), strict=True)) for row in rows[2:]]


@pytest.mark.parametrize("wire", sorted(FORMS))
def test_smoke_run_reports_every_chain_on_every_corpus_without_violations(wire: str) -> None:
    # Every wire form: responses, each request as a Responses body through app.wire.Responses; messages, in Claude
    # Code's Messages shape through app.wire.AnthropicMessages, its invariants (wire_forms.messages_problems) counted
    # as violations.
    result = subprocess.run(
        [sys.executable, "-m", "bench.compaction", "--smoke", "--wire", wire],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    found = sections(result.stdout)
    chains = [f"`{case.spec}`" for case in cases(SMOKE.budget, Registry.with_plugins())]
    for title in TITLES:
        section = found[title]
        if title.startswith("BFCL") and importlib.util.find_spec("bfcl_eval") is None:
            # bfcl-eval is an optional bench dependency: without it the corpus says why it is left out.
            assert "Skipped: bfcl-eval is not installed" in section
            continue
        if title.startswith("SWE-agent") and not swe.DATA.exists():
            # No sample shipped yet (corpora/swe.py): the corpus says where it looked.
            assert f"Skipped: {swe.DATA} not found" in section
            continue
        rows = table(section)
        assert [row["chain"] for row in rows] == chains, title
        assert all(row["violations"] == "0" for row in rows), section
        if title.startswith("synthetic"):  # planted facts were checked at the requests that need them
            shown = {row["chain"]: (facts(row["facts visible"]), facts(row["reachable"])) for row in rows}
            planted = shown["`none`"][0][1]
            # Uncompacted, and through the lossless chains, every planted fact is in view.
            for chain in ("`none`", "`minify`", "`dedupe`"):
                assert shown[chain] == ((planted, planted), (planted, planted)), (chain, section)
            for chain, ((visible, of), (reachable, of_reachable)) in shown.items():
                # Every chain keeps some in view; what the expand tool brings back comes on top.
                assert of == of_reachable == planted and 0 < visible <= reachable <= planted, (chain, section)
    assert "Invariant violations" not in result.stdout
    # The epochs table pairs every boundary-moving strategy's rule alone with its epochs, on every corpus run.
    epochs = found[EPOCHS_TITLE]
    pairs = [spec for pair in epoch_pairs(SMOKE.budget) for spec in (pair.rule, pair.epochs)]
    tables = epochs.split("\n##### ")[1:]
    assert len(tables) >= 3, epochs  # tau, the agent and the chat at least; BFCL when bfcl-eval is installed
    for part in tables:
        assert [row["chain"] for row in table(part)] == [f"`{spec}`" for spec in pairs], part
    assert "Chosen by measurement: `" in found[DEFAULT_TITLE]
    # The expand tool in this form: the default chain masks without the not_expandable fallback (no chain falls
    # back), and the tool is offered on every request whose compacted messages hold a stub with a ref that resolves.
    form = found[f"{FORM_TITLE}: {wire}"]
    assert f"default `{shipped_default()}`" in form
    assert "Fallbacks over every chain run: none." in form, form
    offered = {row["corpus"]: row for row in table(form)}
    for row in offered.values():
        assert row["fallbacks"] == "0" and row["offered the expand tool"] == row["with a stub"], form
    agent = offered["synthetic coding agent"]
    assert int(agent["offered the expand tool"]) > 0 and not agent["expand rounds"].startswith("0 "), form


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )


def test_forms_put_runs_of_a_chain_subset_side_by_side(tmp_path: Path) -> None:
    # --chains runs none, the shipped default and the chains named; bench.compaction.forms lines the runs up per
    # corpus, each cell one figure per form in the order the summaries were given.
    summaries = []
    for wire in ("chat", "messages"):
        summary = tmp_path / f"{wire}.json"
        ran = bench(
            "bench.compaction", "--smoke", "--corpora", "agent,chat", "--wire", wire, "--chains", "mask(keep=5)",
            "--summary", str(summary),
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        assert f"#### {FORM_TITLE}: {wire}" in ran.stdout and "'mask(keep=5)'" in ran.stdout, ran.stdout
        chains = {c["key"]: sorted(c["chains"]) for c in json.loads(summary.read_text())["corpora"]}
        assert chains == {key: sorted(["none", shipped_default(), "mask(keep=5)"]) for key in ("agent", "chat")}
        summaries.append(str(summary))
    doc = tmp_path / "benchmarks.md"
    from bench.compaction.report.forms import BEGIN, END

    doc.write_text(f"before\n{BEGIN}\nold\n{END}\nafter\n")
    joined = bench("bench.compaction.forms", *summaries, "--update-docs", str(doc))
    assert joined.returncode == 0, joined.stderr
    rows = {row["corpus"]: row for row in table(joined.stdout)}
    assert sorted(rows) == ["synthetic coding agent", "synthetic planning chat"], joined.stdout
    agent = rows["synthetic coding agent"]
    per_form = [float(n) for n in agent["expand rounds per request"].split(" / ")]
    assert len(per_form) == 2 and all(n > 0 for n in per_form), agent
    assert agent["fallbacks"] == "0 / 0", agent
    written = doc.read_text()
    assert written.startswith("before\n") and written.endswith("after\n") and "old" not in written
    assert agent["prompt tokens"] in written


def test_a_chain_subset_cannot_rewrite_the_full_tables(tmp_path: Path) -> None:
    ran = bench("bench.compaction", "--smoke", "--chains", "mask", "--update-docs", str(tmp_path / "x.md"))
    assert ran.returncode == 2 and "--chains runs a subset" in ran.stderr
    bad = bench("bench.compaction", "--smoke", "--chains", "mask(nope=1)")
    assert bad.returncode == 2 and "--chains:" in bad.stderr
