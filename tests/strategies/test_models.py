from __future__ import annotations

import pytest

from strategies import ModelLimits, ModelTable
from strategies.models import DEFAULT_LIMITS, normalise


@pytest.fixture(scope="module")
def table() -> ModelTable:
    return ModelTable.packaged()


@pytest.mark.parametrize(
    ("model", "window", "output"),
    [
        ("gpt-4o", 128_000, 16_384),
        ("gpt-4o-mini-2024-07-18", 128_000, 16_384),
        ("gpt-4", 8192, 8192),
        ("gpt-4-turbo-2024-04-09", 128_000, 4096),
        ("gpt-4.1-mini", 1_047_576, 32_768),
        ("o3-mini", 200_000, 100_000),
        ("claude-sonnet-4-20250514", 200_000, 64_000),
        ("gemini-2.5-pro", 1_048_576, 65_536),
        ("meta-llama/Llama-3.1-70B-Instruct", 131_072, 8192),
        ("mistral-large-latest", 131_072, 8192),
        ("deepseek-chat", 128_000, 8192),
        ("qwen3-coder-480b", 262_144, 65_536),
        ("openai/gpt-4o", 128_000, 16_384),
        ("ft:gpt-3.5-turbo-0125:acme::9XyZ", 16_385, 4096),
    ],
)
def test_common_models_by_longest_prefix(table: ModelTable, model: str, window: int, output: int) -> None:
    limits = table.lookup(model)
    assert (limits.context_window, limits.max_output) == (window, output)


@pytest.mark.parametrize(
    ("model", "window", "extended"),
    [
        ("claude-opus-4-8", 200_000, 1_000_000),
        ("claude-sonnet-4-5-20250929", 200_000, 1_000_000),
        ("claude-haiku-4-5-20251001", 200_000, 200_000),  # no longer window to opt into
        ("claude-opus-5-5", 1_000_000, 1_000_000),
    ],
)
def test_claude_models_and_the_window_a_request_opts_into(
    table: ModelTable, model: str, window: int, extended: int
) -> None:
    assert table.lookup(model).context_window == window
    assert table.lookup(model, extended=True).context_window == extended


def test_unknown_models_get_the_configured_default() -> None:
    default = ModelLimits(context_window=32_000, max_output=2000)
    assert ModelTable.packaged(default=default).lookup("my-local-model") == default
    assert ModelTable.packaged().lookup("my-local-model") == DEFAULT_LIMITS


def test_overrides_extend_and_replace_the_packaged_table() -> None:
    small = ModelLimits(context_window=8000, max_output=1000)
    table = ModelTable.packaged({"gpt-4o": small, "my-llama": small})
    assert table.lookup("gpt-4o-2024-08-06") == small
    assert table.lookup("My-Llama-3b") == small
    assert table.lookup("gpt-4o-mini") != small  # a longer built-in prefix still wins over the override


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError):
        ModelLimits(context_window=0, max_output=1)


@pytest.mark.parametrize(
    ("model", "name"),
    [("openrouter/anthropic/claude-3-opus", "claude-3-opus"), ("ft:gpt-4o:org:x:id", "gpt-4o"), ("GPT-4o", "gpt-4o")],
)
def test_normalise(model: str, name: str) -> None:
    assert normalise(model) == name


def test_find_says_which_entry_matched_or_that_none_did() -> None:
    table = ModelTable.packaged({"my-llama": ModelLimits(context_window=4096, max_output=512)})
    assert table.find("org/My-Llama-3b") == ("my-llama", ModelLimits(context_window=4096, max_output=512))
    found = table.find("gpt-4o-mini-2024")
    assert found is not None and found[0] == "gpt-4o-mini"
    assert table.find("smollm2") is None
