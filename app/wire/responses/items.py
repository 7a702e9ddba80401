"""The Responses API's item types as the proxy reads them: which items are calls the client answers, which are their
outputs, which the API made with a turn and which ride with it (app.wire.responses, app.wire.responses.expand).
"""

from __future__ import annotations

from typing import Any

ROLES = frozenset({"user", "assistant", "system", "developer"})
TEXT_PARTS = frozenset({"input_text", "output_text"})
# Calls answered by an output item, with the field a strategy may shorten (None: nothing).
CALLS: dict[str, str | None] = {
    "function_call": "arguments",
    "custom_tool_call": "input",
    "local_shell_call": None,
    "shell_call": None,
    "apply_patch_call": None,
    "computer_call": None,
    "mcp_approval_request": None,
}
# Their outputs, with the field whose text a strategy may rewrite (None: nothing).
OUTPUTS: dict[str, str | None] = {
    "function_call_output": "output",
    "custom_tool_call_output": "output",
    "local_shell_call_output": "output",
    "apply_patch_call_output": "output",
    "shell_call_output": None,
    "computer_call_output": None,
    "mcp_approval_response": None,
}
# Made by the API with a turn, complete in themselves: they ride with the turn.
RIDERS = frozenset(
    {
        "reasoning",
        "compaction",
        "web_search_call",
        "file_search_call",
        "image_generation_call",
        "code_interpreter_call",
        "mcp_call",
        "mcp_list_tools",
    }
)


def kind(item: Any) -> str | None:
    found = item.get("type") if isinstance(item, dict) else None
    return found if isinstance(found, str) else None
