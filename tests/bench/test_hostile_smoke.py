"""`python -m bench.hostile --smoke` runs end to end, and a model flooding the expand tool costs what the settings
allow: every round upstream within the bounds of one request's expansions, however many calls the model made.

Behaviour only: latency, CPU, /healthz and memory figures are printed for people, never asserted.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from app.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = {name: field.default for name, field in Settings.model_fields.items()}
# What a round's assistant message adds for one call, and a short result (a pointer, an error), at most.
PER_CALL = 1024


def test_a_flood_of_expand_calls_costs_what_the_settings_allow() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bench.hostile", "--smoke"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert re.search(r"^errors: 0$", out, re.MULTILINE), out
    assert "ERROR" not in out, out
    cases = re.findall(
        r"^(no flood|flood of ([\d,]+) calls)[^\n]*\n"
        r"  (\d+) round\(s\) upstream(?: \((\d+) answered with the flood\))?, bytes per round: ([\d,/ ]+)\n"
        r"(?:.*\n)*?  expand calls by result, all requests: ([^\n]*)$",
        out,
        re.MULTILINE,
    )
    assert [calls for _, calls, *_ in cases] == ["", "200", "800", "200", "800"], out
    rounds = DEFAULTS["expand_max_rounds"]
    max_calls = DEFAULTS["expand_max_calls"]
    # A result's characters, escaped in JSON, are at most 2 bytes each in these ASCII histories.
    growth = 2 * DEFAULTS["expand_max_request_chars"] + rounds * max_calls * PER_CALL
    (_, _, baseline_rounds, _, baseline_bytes, _), *floods = cases
    assert baseline_rounds == "1"
    first = int(baseline_bytes.replace(",", ""))
    for _, calls, count, flooded, per_round, outcomes in floods:
        sent = [int(n.replace(",", "")) for n in per_round.split(" / ")]
        assert int(count) == len(sent) == rounds + 1, out  # the rounds answered, then one without the tool
        assert int(flooded) == rounds, out
        assert sent[0] == first, out  # what went before the model flooded is the request without a flood
        assert all(n <= first + growth for n in sent), (sent, first + growth)
        by_result = {k: int(v.replace(",", "")) for k, v in re.findall(r"(\w+) ([\d,]+)", outcomes)}
        answered = sum(n for k, n in by_result.items() if k != "left_out")
        assert answered <= rounds * max_calls, outcomes  # one flooded request
        assert answered + by_result["left_out"] == rounds * int(calls), outcomes
    assert re.search(r"^splitter: .* until EventTooLarge", out, re.MULTILINE), out
