"""The long-chat recipe's stub for bulky old assistant output: search results, option lists, quotes."""

from __future__ import annotations

import time
from typing import Any

import regex
from pydantic import Field, field_validator

from . import patterns as pattern_limits
from .base import CONFIG_ONLY, Applied, Params, Strategy
from .context import Context
from .conversation import is_assistant, is_text_reply, is_user, message_text, with_message_text
from .markers import shown_to_the_user
from .messages import Message

DEFAULT_PATTERNS = ("^Search results:", "^Train options", "^Quotes for")
# A pattern that slipped past the shape checks (strategies.patterns) must not hold a worker thread: a search
# that takes longer than this counts as no match, and once the searches of one request have taken
# REQUEST_TIMEOUT_SECONDS in all, the rest of the request is left as it is.
SEARCH_TIMEOUT_SECONDS = 0.05
REQUEST_TIMEOUT_SECONDS = 0.25


class TrimBulkyParams(Params):
    patterns: tuple[str, ...] = Field(
        DEFAULT_PATTERNS,
        max_length=pattern_limits.MAX_PATTERNS,
        description="Regular expressions searched (re.search) in the first line of an assistant message; "
        "a match marks the message as bulky. Set by configuration only unless request_parameters allows "
        f"trim_bulky.patterns; at most {pattern_limits.MAX_PATTERNS} of at most {pattern_limits.MAX_LENGTH} "
        "characters, without nested unbounded repeats or large counted ones.",
        json_schema_extra=CONFIG_ONLY,
    )
    keep_last: int = Field(
        2, ge=0, description="Newest answered user turns whose assistant messages are never trimmed."
    )

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            try:
                pattern_limits.check(pattern)
            except pattern_limits.PatternError as exc:
                raise ValueError(f"pattern {pattern[:80]!r}: {exc}") from None
        return patterns


def protected_from(messages: list[Message], keep_last: int) -> int:
    """Index of the first message of the last `keep_last` user/assistant pairs.

    A pair starts at a user message that an assistant message answers (before the next user message), so
    a trailing question with no answer yet is no pair. With fewer pairs than keep_last, everything is
    protected (0); with keep_last 0, nothing is (len(messages)).
    """
    if keep_last == 0:
        return len(messages)
    answered: list[int] = []
    asking: int | None = None
    for index, message in enumerate(messages):
        if is_user(message):
            asking = index
        elif is_assistant(message) and asking is not None:
            answered.append(asking)
            asking = None
    return answered[-keep_last] if len(answered) >= keep_last else 0


def stub(text: str, patterns: list[regex.Pattern[str]], timeout: float = SEARCH_TIMEOUT_SECONDS) -> str | None:
    """The one-line stub for a bulky text, or None when no pattern matches or nothing follows the first line.
    Raises TimeoutError when a search takes longer than `timeout` seconds.

    N counts the non-blank lines after the first, so blank separators and a trailing newline are not options.
    The stub is used even when longer than a tiny original: the recipe's format is what the model expects.
    """
    first, _, rest = text.partition("\n")
    first = first.removesuffix("\r")
    if not any(pattern.search(first, timeout=timeout) for pattern in patterns):
        return None
    label = first.strip().removesuffix(":").rstrip()
    options = sum(1 for line in rest.split("\n") if line.strip())
    return shown_to_the_user(label, options) if options else None


class TrimBulky(Strategy[TrimBulkyParams]):
    """An assistant text reply (no tool calls) whose first line matches a pattern, older than the last
    keep_last user/assistant pairs, becomes `[<first line without its colon> (N options) shown to the user;
    omitted]`. Everything else is forwarded byte-identical.
    """

    name = "trim_bulky"
    params_model = TrimBulkyParams
    summary = "Replace bulky old assistant output (search results, option lists, quotes) by a one-line stub."

    def __init__(self, params: TrimBulkyParams) -> None:
        super().__init__(params)
        self._patterns = [pattern_limits.compile_pattern(pattern) for pattern in params.patterns]

    def apply(self, messages: list[Message], ctx: Context) -> Applied:
        out = list(messages)
        trimmed = saved = timeouts = 0
        details: dict[str, Any] = {}
        deadline = time.monotonic() + REQUEST_TIMEOUT_SECONDS
        for index in range(protected_from(messages, self.params.keep_last)):
            ctx.checkpoint()
            message = messages[index]
            if not is_text_reply(message):
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                details["search_time_exhausted"] = True
                break
            try:
                short = stub(message_text(message), self._patterns, min(SEARCH_TIMEOUT_SECONDS, left))
            except TimeoutError:
                timeouts += 1
                continue
            if short is None:
                continue
            out[index] = with_message_text(message, short)
            trimmed += 1
            saved += ctx.count_message(message) - ctx.count_message(out[index])
        details.update(trimmed_messages=trimmed, trimmed_tokens=saved, pattern_timeouts=timeouts)
        return Applied(out, details)
