"""Wire formats: between a request body and the conversation the strategies see, and back.

The strategies work on chat messages (strategies.messages, strategies.conversation). A wire format parses a body
into those messages plus what else a strategy may read (the model, tools, max_tokens), and renders the
compacted messages back into a body of its own shape; what a strategy did not change goes out as it came.
OpenAI's chat completions (wire.chat) is the format the messages already are; the Responses API (wire.responses) and
Anthropic's Messages API map their items to messages and back, so one set of strategies serves all three.
JSON itself, in and out, is wire.json_body.
"""

from .base import Parsed, WireFormat
from .chat import ChatCompletions
from .json_body import dump_body, dump_json, parse_object
from .messages import AnthropicMessages
from .responses import Responses

# Every format's name (WireFormat.name): the one value that names it wherever one must, e.g. a metric's label.
WIRE_NAMES = (ChatCompletions.name, Responses.name, AnthropicMessages.name)

__all__ = [
    "WIRE_NAMES",
    "AnthropicMessages",
    "ChatCompletions",
    "Parsed",
    "Responses",
    "WireFormat",
    "dump_body",
    "dump_json",
    "parse_object",
]
