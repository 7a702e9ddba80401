"""The types every module of strategies/ shares, with nothing to import: a leaf."""

from __future__ import annotations

from typing import Any

# A chat message as the strategies see it: OpenAI's chat completions shape (role, content, tool_calls, ...).
# Other wire formats are mapped to it and back by the app (app.wire), so one set of strategies serves them all.
Message = dict[str, Any]

# Every reply is primed with <|start|>assistant<|message|> (OpenAI's cookbook).
REPLY_PRIMING = 3
