"""Codex CLI (the pinned version scripts/test installs) run for real through the proxy against a scripted model, in
a private network namespace (tests/support/codex.py): its agent loop completes through compaction, with the
custom-tool default model, a function-tool model and the WebSocket mode both refused and relayed; and a long resumed
session in which the model expands a ref through the proxy's expand tool, then finishes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from app.wire.responses.expand import TOOL
from strategies.refs import EXPAND_TOOL, refs_in
from tests.support.codex import FINAL, RESUMED_FINAL
from tests.support.netns import isolated_report
from tests.support.required import require
from tests.support.responses import pairing_problems, reasoning_problems

ROOT = Path(__file__).resolve().parents[2]
CODEX = ROOT / ".tools" / "npm" / "node_modules" / ".bin" / "codex"
ROUNDS = 12


def codex_binary() -> Path:
    require(CODEX.exists(), f"Codex CLI not installed at {CODEX.relative_to(ROOT)}: scripts/test installs it with npm")
    return CODEX


def in_namespace(*args: str) -> dict[str, Any]:
    """python -m tests.support.codex with these arguments, in a private network namespace: what it printed."""
    scenario = f"{sys.executable} -m tests.support.codex {codex_binary()} {' '.join(args)}"
    argv = ["sh", "-c", f"ip link set lo up && exec {scenario}"]
    return isolated_report(argv, cwd=ROOT, timeout=240, reaching="Codex reaches")


def run_codex(*args: str) -> dict[str, Any]:
    result = in_namespace("--rounds", str(ROUNDS), *args)
    assert result["exit"] == 0, result["stderr"]
    assert result["stdout"].strip().endswith(FINAL)  # the loop ran every round and gave the final answer
    assert len(result["inputs"]) == ROUNDS + 1
    return result


def outputs(items: list[dict[str, Any]]) -> int:
    return sum(1 for item in items if item.get("type", "").endswith("_call_output"))


def assert_compacted(result: dict[str, Any], call_type: str) -> None:
    """Over HTTP Codex sends the whole history every time: the model got it compacted, valid, its reasoning intact."""
    assert result["handshakes"] == 0 and result["posts"] == ROUNDS + 1
    emitted = {item["id"]: item for item in result["reasoning"]}
    for items in result["inputs"]:
        assert pairing_problems(items) == []
        for item in items:
            if item.get("type") == "reasoning":
                # What the model sent, encrypted_content included (Codex adds "content": null of its own).
                assert {key: item[key] for key in emitted[item["id"]]} == emitted[item["id"]]
    last = result["inputs"][-1]
    assert outputs(last) < ROUNDS  # old rounds were dropped: Codex itself sent all twelve
    assert any(item.get("type") == call_type for item in last)
    assert last[-1]["call_id"] == f"call_{ROUNDS - 1}"  # the newest round is there, whole


def test_codex_with_its_default_custom_tool_model() -> None:
    assert_compacted(run_codex(), "custom_tool_call")


def test_codex_with_a_function_tool_model() -> None:
    assert_compacted(run_codex("--model", "gpt-5.5"), "function_call")


def test_codex_falls_back_to_http_when_the_websocket_is_refused() -> None:
    result = run_codex("--websockets", "refuse")
    # Codex asked the proxy for a WebSocket first, was refused with a 426, and sent the session over HTTP.
    assert result["proxy_handshakes"] and set(result["proxy_handshakes"]) == {426}, result["proxy_handshakes"]
    assert_compacted(result, "custom_tool_call")


def test_codex_over_a_relayed_websocket() -> None:
    result = run_codex("--websockets", "relay")
    assert result["proxy_handshakes"] == [101]  # accepted, and relayed to the model's own socket
    assert result["handshakes"] == 1 and result["posts"] == 0
    # Over the socket Codex sends only what is new (previous_response_id): relayed as it came.
    assert [outputs(items) for items in result["inputs"][1:]] == [1] * ROUNDS


RESUMED = 300  # rounds of the session before it is resumed


def output_text(item: dict[str, Any]) -> str:
    output = item.get("output")
    return output if isinstance(output, str) else "".join(p.get("text", "") for p in output or [])


@pytest.mark.parametrize("model", [None, "gpt-5.5"], ids=["custom-tool-model", "function-tool-model"])
def test_codex_resumes_a_long_session_expands_a_ref_and_finishes(model: str | None) -> None:
    result = in_namespace("--resumed", str(RESUMED), *(["--model", model] if model else []))
    assert result["exit"] == [0, 0, 0], result["stderr"]
    first_log = "line 1 of build log 0, with enough words to make it long"
    assert result["stdout"][0].strip().endswith(f"Read it: {first_log}")  # the model read the masked original
    assert result["stdout"][1].strip().endswith(RESUMED_FINAL)
    # Every answer went with the default chain and the tool offered: never mask's fallback.
    assert [h["x-compaction-strategies"] for h in result["headers"]] == ["minify,mask,window"] * 2
    assert not any("x-compaction-fallback" in h for h in result["headers"])
    asked, expanded, next_turn = result["inputs"]
    assert all(TOOL in tools for tools in result["tools"])
    outputs = [i for i in asked if i.get("type", "").endswith("_call_output")]
    assert len(outputs) == RESUMED and len([i for i in outputs if refs_in(output_text(i))]) > 200  # masked
    # Valid for the API on every request: calls and outputs paired, every reasoning item as the model made it and
    # right before the item it came with; the session's own reasoning as Codex resent it.
    session = result["session_reasoning"]
    for items in result["inputs"]:
        assert pairing_problems(items) == [] and reasoning_problems(items, result["produced"]) == []
        for item in items:
            if item.get("id", "").startswith("rs_old_"):
                assert item["encrypted_content"] == session["encrypted_content"]
    # The round: the request again with the model's reasoning, its call and the original, whole.
    assert expanded[: len(asked)] == asked
    reasoning, call, answer = expanded[len(asked) :]
    assert reasoning["type"] == "reasoning" and call["name"] == EXPAND_TOOL and call["id"].startswith("fc_expand")
    assert first_log in answer["output"] and answer["call_id"] == call["call_id"]
    # The next turn: Codex kept the round's reasoning; the round is shown again right after it, with its call's id.
    at = next(i for i, item in enumerate(next_turn) if item.get("id") == reasoning["id"])
    assert next_turn[at + 1 : at + 3] == [call, answer]
    assert next_turn[:at] == asked  # and the history before it as it was
    assert [i.get("role") for i in next_turn[at + 3 :]] == ["assistant", "user"]
