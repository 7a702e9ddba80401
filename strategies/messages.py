"""The types every module of strategies/ shares, with nothing to import: a leaf."""

from __future__ import annotations

from typing import Any

# A chat message as the strategies see it: OpenAI's chat completions shape (role, content, tool_calls, ...).
# Other wire formats are mapped to it and back by the app (app.wire), so one set of strategies serves them all.
Message = dict[str, Any]

# A key of a message that only the wire format it came from reads (app.wire): where in the request body the message
# came from, and what rides with it that the strategies do not see (encrypted reasoning, say). No strategy reads or
# sets it; a changed copy of a message keeps it, so its wire format rebuilds the message from its original items.
# Token counts add its "tokens" (what an unseen opaque part, encrypted reasoning, costs the prompt) and count its
# "text" (unseen text the model reads, e.g. Anthropic's thinking) as they count a message's text.
WIRE_KEY = "_wire"

# Every reply is primed with <|start|>assistant<|message|> (OpenAI's cookbook).
REPLY_PRIMING = 3
