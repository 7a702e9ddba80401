"""(b) BFCL v4 multi-turn long-context entries, executed against bfcl-eval's simulated tools.

bfcl-eval ships the questions, the ground-truth calls per turn and the Python classes that simulate the
tools (a file system, a trading bot, a travel API ...) with the long-context scenario data. Each ground-truth
call is executed by bfcl-eval's own executor, so every tool result is what the tool really returns. The model
side is the ground truth: one assistant message per call, in order, as an agent loop would make them, and a
short synthetic text reply ending each turn (the data has no final answers).
"""

from __future__ import annotations

import ast
import importlib
import json
import uuid
from importlib.metadata import version
from importlib.resources import files
from typing import Any

from strategies import Message

from . import Conversation, Corpus

CATEGORY = "BFCL_v4_multi_turn_long_context"
INSTALL = "pip install --no-deps bfcl-eval==2026.3.23 && pip install mpmath==1.3.0"


def load(limit: int | None = None) -> Corpus:
    key, title = "bfcl", "BFCL v4 multi-turn long-context (executed)"
    try:
        utils = importlib.import_module("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils")
        backend = importlib.import_module("bfcl_eval.constants.executable_backend_config")
        types = importlib.import_module("bfcl_eval.constants.type_mappings")
    except ImportError as exc:
        return Corpus(key, title, "", skipped=f"bfcl-eval is not installed ({exc}); install it with: {INSTALL}")
    data = files("bfcl_eval").joinpath("data")
    questions = _jsonl(data.joinpath(f"{CATEGORY}.json").read_text())
    answers = {
        a["id"]: a["ground_truth"] for a in _jsonl(data.joinpath(f"possible_answer/{CATEGORY}.json").read_text())
    }
    docs = {
        cls: _jsonl(data.joinpath(f"multi_turn_func_doc/{name}").read_text())
        for cls, name in backend.MULTI_TURN_FUNC_DOC_FILE_MAPPING.items()
    }
    # bfcl-eval keeps each simulated tool instance in a module global named after the model and the entry, so a
    # second build in one process would continue from the first one's state: every build gets its own name.
    model = f"compaction_bench_{uuid.uuid4().hex}"
    picked = questions if limit is None else questions[:limit]
    conversations = [
        _conversation(entry, answers[entry["id"]], docs, types.GORILLA_TO_OPENAPI, utils, model) for entry in picked
    ]
    sampled = "all" if len(picked) == len(questions) else f"the first {len(picked)} of"
    package = version("bfcl-eval")
    description = (
        f"{sampled} {len(questions)} entries of {CATEGORY} (bfcl-eval {package}), ground-truth calls executed "
        "against its simulated tools with the long-context scenarios; one assistant message per call, a synthetic "
        "one-line reply ending each turn"
    )
    return Corpus(key, title, description, conversations)


def _jsonl(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _conversation(
    entry: dict[str, Any],
    turns: list[list[str]],
    docs: dict[str, list[dict[str, Any]]],
    type_map: dict[str, str],
    utils: Any,
    model: str,
) -> Conversation:
    excluded = set(entry.get("excluded_function", []))
    functions = [f for cls in entry["involved_classes"] for f in docs[cls] if f["name"] not in excluded]
    by_name = {f["name"]: f for f in functions}
    messages: list[Message] = []
    calls = 0
    for asked, expected in zip(entry["question"], turns, strict=True):
        messages.extend(asked)
        names: list[str] = []
        for text in expected:
            name, arguments = _parse_call(text, by_name)
            call_id = f"call_{calls}"
            calls += 1
            results, _ = utils.execute_multi_turn_func_call(
                [text], entry["initial_config"], entry["involved_classes"], model, entry["id"], long_context=True
            )
            function = {"name": name, "arguments": json.dumps(arguments)}
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": call_id, "type": "function", "function": function}],
                }
            )
            messages.append({"role": "tool", "tool_call_id": call_id, "content": results[0]})
            names.append(name)
        messages.append({"role": "assistant", "content": f"Done: {', '.join(names)}." if names else "Nothing to do."})
    return Conversation(entry["id"], messages, [_tool(f, type_map) for f in functions])


def _parse_call(text: str, functions: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """`mv(source='a', destination='b')` -> ("mv", {...}); positional arguments take the documented names in order."""
    node = ast.parse(text, mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain function call: {text!r}")
    name = node.func.id
    order = list(functions[name]["parameters"].get("properties", {}))
    arguments = {order[i]: ast.literal_eval(arg) for i, arg in enumerate(node.args)}
    arguments.update({kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg is not None})
    return name, arguments


def _tool(function: dict[str, Any], type_map: dict[str, str]) -> dict[str, Any]:
    """A BFCL function doc as an OpenAI tool: Gorilla's type names mapped as bfcl-eval maps them for OpenAI."""

    def schema(value: Any) -> Any:
        if isinstance(value, dict):
            out = {k: schema(v) for k, v in value.items() if k != "response"}
            if isinstance(out.get("type"), str):
                out["type"] = type_map.get(out["type"], out["type"])
            return out
        if isinstance(value, list):
            return [schema(v) for v in value]
        return value

    body = {k: function[k] for k in ("name", "description", "parameters") if k in function}
    return {"type": "function", "function": schema(body)}
