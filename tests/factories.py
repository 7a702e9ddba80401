"""Tiny message factories, so a test reads like the conversation it builds."""

from __future__ import annotations

import json
from typing import Any

from strategies.messages import Message


def system(text: str) -> Message:
    return {"role": "system", "content": text}


def user(content: Any) -> Message:
    return {"role": "user", "content": content}


def assistant(text: str) -> Message:
    return {"role": "assistant", "content": text}


def tool_call(id: str, name: str = "read", args: Any = None) -> dict[str, Any]:
    """One entry of `tool_calls`. args: a dict (dumped as JSON), a raw string (kept as is) or None."""
    arguments = args if isinstance(args, str) else json.dumps(args if args is not None else {"path": f"{id}.py"})
    return {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}


def call(id: str, name: str = "read", args: Any = None) -> Message:
    return {"role": "assistant", "content": None, "tool_calls": [tool_call(id, name, args)]}


def calls(*ids: str) -> Message:
    """One assistant message with parallel calls."""
    return {"role": "assistant", "content": None, "tool_calls": [tool_call(i) for i in ids]}


def result(id: str, text: Any) -> Message:
    return {"role": "tool", "tool_call_id": id, "content": text}


def parts(text: str) -> list[dict[str, Any]]:
    """Content as a list of text parts, the other shape the API accepts."""
    return [{"type": "text", "text": text}]


def legacy_call(name: str, args: Any) -> Message:
    """An assistant message with the pre-tools `function_call`. args: a dict (dumped as JSON) or a raw string."""
    arguments = args if isinstance(args, str) else json.dumps(args)
    return {"role": "assistant", "content": None, "function_call": {"name": name, "arguments": arguments}}


def legacy_result(name: str, text: str) -> Message:
    return {"role": "function", "name": name, "content": text}


def output(i: int, chars: int) -> str:
    """A distinct, deterministic tool output of exactly `chars` characters."""
    return (f"<out {i}> " + "".join(f"line {n} of output {i}\n" for n in range(chars // 10 + 1)))[:chars]


def agent_loop(n: int, output_chars: int) -> list[Message]:
    """System prompt, the task, then n tool interactions call_0..call_{n-1}, oldest first."""
    messages = [system("You are a coding agent."), user("Fix the failing test.")]
    for i in range(n):
        messages += [call(f"call_{i}"), result(f"call_{i}", output(i, output_chars))]
    return messages


def coding_session(rounds: int, output_chars: int = 900) -> list[Message]:
    """System prompt, the task, then `rounds` rounds of an agent at work: every third round writes a whole file (the
    model's own long arguments), every fourth reads two files at once (parallel calls), the others read one; each
    result `output_chars` long and distinct. Calls are call_0, call_1, ... in order.
    """
    messages = [system("You are a coding agent."), user("Implement the feature and make the tests pass.")]
    n = 0
    for r in range(rounds):
        made = []
        for j in range(2 if r % 4 == 1 else 1):
            if r % 3 == 2 and j == 0:
                source = "".join(f"def f_{r}_{i}(x):\n    return x * {(r * 37 + i) % 999}\n" for i in range(40))
                made.append(tool_call(f"call_{n}", "write_file", {"path": f"src/m{r}.py", "content": source}))
            else:
                made.append(tool_call(f"call_{n}", "read_file", {"path": f"src/m{(r * 7 + j) % 99}.py"}))
            n += 1
        messages.append({"role": "assistant", "content": None, "tool_calls": made})
        messages += [result(c["id"], output(int(c["id"][5:]), output_chars)) for c in made]
    return messages


def parallel_round(n: int, output_chars: int) -> list[Message]:
    """System prompt, the task, then one assistant message with n parallel calls call_0..call_{n-1}, each answered
    (an agent that reads n files at once), and the next question.
    """
    messages = [
        system("You are a coding agent."),
        user("Fix the failing test."),
        calls(*(f"call_{i}" for i in range(n))),
    ]
    messages += [result(f"call_{i}", output(i, output_chars)) for i in range(n)]
    return [*messages, user("Now the other one.")]


def qa_chat(pairs: int, answer: str = "item {i:03} is fine.") -> list[Message]:
    """A system prompt, `pairs` question/answer pairs (28 tokens each with the default answer), and the last
    question. `answer` is formatted with the pair's number i.
    """
    messages = [system("Be brief.")]
    for i in range(pairs):
        messages += [
            user(f"Question {i:03}: what about item {i:03}?"),
            assistant(f"Answer {i:03}: " + answer.format(i=i)),
        ]
    return [*messages, user(f"Question {pairs:03}: what about item {pairs:03}?")]


def client_requests(conversation: list[Message]) -> list[list[Message]]:
    """The requests a client sends while the conversation grows: each prefix that ends where the model answers."""
    ends = [k for k in range(1, len(conversation)) if conversation[k]["role"] == "assistant"]
    return [conversation[:k] for k in ends if any(m["role"] == "user" for m in conversation[:k])] + [conversation]


# What a strategy's own tests pass to test its rule without epochs (tests/strategies/test_epochs.py tests those):
# shorten_tools' epochs, and fit's and middle_out's room.
RULE_ALONE: dict[str, Any] = {"epoch": 0, "min_gain": 0}
CUT_ALONE: dict[str, Any] = {"room": 0}


# --- The Responses API's input items -------------------------------------------------------------------------


def item_message(role: str, text: str) -> dict[str, Any]:
    text_type = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": text_type, "text": text}]}


def reasoning(i: int) -> dict[str, Any]:
    """A reasoning item as a store=false client gets it back: opaque, encrypted."""
    return {"type": "reasoning", "id": f"rs_{i}", "summary": [], "encrypted_content": f"gAAAA{i:04d}" + "Zk9v" * 40}


def function_call(i: int, name: str = "read_file") -> dict[str, Any]:
    arguments = json.dumps({"path": f"src/module_{i}.py"})
    return {"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}", "name": name, "arguments": arguments}


def function_output(i: int, chars: int) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": f"call_{i}", "output": output(i, chars)}


def custom_call(i: int) -> dict[str, Any]:
    """Codex's shell: a custom tool whose input is code, not JSON."""
    code = f'const r = await tools.exec_command({{cmd: "cat notes_{i}.txt"}});\ntext(r.output);\n'
    return {"type": "custom_tool_call", "id": f"ctc_{i}", "call_id": f"call_{i}", "name": "exec", "input": code}


def custom_output(i: int, chars: int) -> dict[str, Any]:
    parts = [{"type": "input_text", "text": "Script completed\n"}, {"type": "input_text", "text": output(i, chars)}]
    return {"type": "custom_tool_call_output", "call_id": f"call_{i}", "output": parts}


def responses_agent_loop(n: int, output_chars: int) -> list[dict[str, Any]]:
    """Instructions as a developer message, the task, a compaction item from an earlier window, then n rounds of a
    reasoning item and a call (function calls and custom tool calls alternating) with its output.
    """
    items = [
        item_message("developer", "You are a coding agent."),
        item_message("user", "Fix the failing test."),
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAcompacted" + "Q2s" * 60},
    ]
    for i in range(n):
        call, result = (function_call, function_output) if i % 2 else (custom_call, custom_output)
        items += [reasoning(i), call(i), result(i, output_chars)]
    return items
