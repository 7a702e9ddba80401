"""The judge mode of `python -m bench.compaction` against a deterministic stand-in model on loopback.

The stand-in has perfect recall and nothing else: it answers with every text of the request it was sent (contents
and call arguments, the final question left out). So it answers correctly exactly when compaction left the fact
in the request, which makes what a chain drops visible in the accuracy. Behaviour only, never timings.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bench.compaction import cli as compaction
from bench.compaction import judge
from tests.support.servers import LoopbackServer

KEY = "sk-stand-in-secret"
DROPPER = "window(budget=2000)"  # keeps only the last 2k tokens: old planted facts fall out of the request
CHAINS = ["none", "shorten_tools", DROPPER]


def _texts(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    parts = [content] if isinstance(content, str) else [p.get("text", "") for p in content or [] if isinstance(p, dict)]
    for call in message.get("tool_calls") or []:
        arguments = json.loads(call["function"]["arguments"])
        parts.append(json.dumps(arguments, ensure_ascii=False))
    return parts


def stand_in(received: list[dict[str, Any]]) -> Starlette:
    async def completions(request: Request) -> JSONResponse:
        if request.headers.get("authorization") != f"Bearer {KEY}":
            return JSONResponse({"error": {"message": "bad key"}}, status_code=401)
        body = await request.json()
        received.append(body)
        answer = "\n".join(text for m in body["messages"][:-1] for text in _texts(m))
        return JSONResponse({"choices": [{"index": 0, "message": {"role": "assistant", "content": answer}}]})

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


def rows(markdown: str) -> dict[tuple[str, str], dict[str, str]]:
    section = markdown.split("#### Judge: answer accuracy", 1)[1]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    found = {}
    for line in lines[2:]:
        row = dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")), strict=True))
        found[(row["corpus"], row["chain"].strip("`"))] = row
    return found


def test_judge_reports_accuracy_per_corpus_and_chain(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STAND_IN_KEY", KEY)
    received: list[dict[str, Any]] = []
    with LoopbackServer(stand_in(received)) as server:
        compaction.main(
            [
                "--smoke",
                "--corpora",
                "agent,chat",
                "--judge-base-url",
                f"{server.url}/v1",
                "--judge-model",
                "stand-in",
                "--judge-api-key-env",
                "STAND_IN_KEY",
                "--judge-chains",
                ";".join(CHAINS),
                "--judge-max-questions",
                "6",
            ]
        )
    out, err = capsys.readouterr()
    assert KEY not in out + err
    found = rows(out)
    corpora = ("synthetic coding agent", "synthetic planning chat")
    assert sorted(found) == sorted((c, chain) for c in corpora for chain in CHAINS)

    def accuracy(corpus: str, chain: str) -> int:
        return int(found[(corpus, chain)]["accuracy"].rstrip("%"))

    for (_, _), row in found.items():
        assert row["questions"] == "6" and row["errors"] == "0"
        assert 0 <= int(row["accuracy"].rstrip("%")) <= 100
    for corpus in corpora:
        assert accuracy(corpus, "none") == 100  # every planted fact is in the uncompacted request
        assert accuracy(corpus, "none") >= accuracy(corpus, DROPPER)
    assert any(accuracy(c, DROPPER) < 100 for c in corpora)  # the stand-in sees what the chain dropped

    # What was sent: the question last, temperature 0, no streaming, text answers only.
    assert received
    for body in received:
        assert body["model"] == "stand-in" and body["temperature"] == 0 and body["stream"] is False
        assert body["messages"][-1]["role"] == "user" and body["messages"][-1]["content"].endswith(judge.INSTRUCTION)
        assert body.get("tool_choice", "none") == "none"


def test_answers_are_normalised_for_case_whitespace_and_thousands_separators() -> None:
    assert judge.contains("The deposit was $4 215.35, paid.", "$4,215.35")
    assert judge.contains("it is  pay-1234-ab", "PAY-1234-AB")
    assert judge.contains("Tomás  OKAFOR", "Tomás Okafor")
    assert not judge.contains("$4,215.36", "$4,215.35")
