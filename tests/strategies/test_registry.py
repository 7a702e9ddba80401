from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from strategies import BUILTINS, Chain, Context, Registry, StepSpec, StrategyError
from strategies.shorten_tools import ShortenTools, ShortenToolsParams
from tests.factories import assistant, user

SHORTEN_TOOLS_PARAMS = list(ShortenToolsParams.model_fields)

SHOUT = """
from strategies import Applied, Params, Strategy


class ShoutParams(Params):
    marks: int = 1


class Shout(Strategy[ShoutParams]):
    name = "shout"
    params_model = ShoutParams
    summary = "Upper-case the assistant's text."

    def apply(self, messages, ctx):
        return Applied([
            {**m, "content": m["content"].upper() + "!" * self.params.marks} if m["role"] == "assistant" else m
            for m in messages
        ])
"""


@pytest.fixture
def registry() -> Registry:
    return Registry(BUILTINS)


@pytest.fixture
def install_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Put a third-party distribution on sys.path, found through the real importlib.metadata machinery."""

    def install(entry_point: str) -> None:
        (tmp_path / "shout_plugin.py").write_text(SHOUT)
        dist_info = tmp_path / "shout_plugin-0.1.dist-info"
        dist_info.mkdir()
        (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: shout-plugin\nVersion: 0.1\n")
        (dist_info / "entry_points.txt").write_text(f"[compaction_proxy.strategies]\n{entry_point}\n")
        monkeypatch.syspath_prepend(str(tmp_path))

    yield install
    sys.modules.pop("shout_plugin", None)


def test_the_builtins_are_registered(registry: Registry) -> None:
    assert registry.names() == [
        "clear_tool_uses",
        "dedupe",
        "fit",
        "mask",
        "middle_out",
        "minify",
        "none",
        "notes",
        "prune_tool_outputs",
        "shorten_tools",
        "trim_bulky",
        "window",
    ]


def test_an_unknown_strategy_lists_the_valid_names(registry: Registry) -> None:
    with pytest.raises(StrategyError) as excinfo:
        registry.build(StepSpec("shorten"))
    assert excinfo.value.code == "unknown_strategy"
    assert str(excinfo.value) == f"unknown strategy 'shorten'; valid strategies: {', '.join(registry.names())}"
    assert "shorten_tools" in str(excinfo.value)


def test_an_unknown_parameter_lists_the_valid_parameters(registry: Registry) -> None:
    with pytest.raises(StrategyError) as excinfo:
        registry.build(StepSpec("shorten_tools", {"full_outputs": 3}))
    assert excinfo.value.code == "unknown_parameter"
    assert "'full_outputs'" in str(excinfo.value)
    assert all(name in str(excinfo.value) for name in SHORTEN_TOOLS_PARAMS)


def test_a_strategy_without_parameters_says_so(registry: Registry) -> None:
    with pytest.raises(StrategyError, match=r"valid parameters: \(none\)") as excinfo:
        registry.build(StepSpec("none", {"x": 1}))
    assert excinfo.value.code == "unknown_parameter"


@pytest.mark.parametrize(
    ("name", "key", "value"),
    [
        ("shorten_tools", "full_tool_outputs", -1),
        ("shorten_tools", "full_tool_outputs", "abc"),
        ("shorten_tools", "short_string_length", 0),
        ("shorten_tools", "max_tool_outputs", 2.5),
        ("prune_tool_outputs", "max_chars", [1]),
    ],
)
def test_a_bad_value_names_the_parameter(registry: Registry, name: str, key: str, value: object) -> None:
    with pytest.raises(StrategyError) as excinfo:
        registry.build(StepSpec(name, {key: value}))
    assert excinfo.value.code == "invalid_parameter"
    assert f"{key}:" in str(excinfo.value) and repr(value) in str(excinfo.value)


def test_request_parameters_override_configured_ones(registry: Registry) -> None:
    step = registry.build(
        StepSpec("shorten_tools", {"full_tool_outputs": 3}), {"full_tool_outputs": 5, "max_tool_chars": 0}
    )
    assert isinstance(step, ShortenTools)
    assert step.params == ShortenToolsParams(full_tool_outputs=3, max_tool_chars=0)


def test_configured_parameters_are_validated_too(registry: Registry) -> None:
    with pytest.raises(StrategyError) as excinfo:
        registry.build(StepSpec("shorten_tools"), {"max_tool_chars": -5})
    assert excinfo.value.code == "invalid_parameter"


def test_registering_a_name_twice_or_a_non_strategy_is_refused(registry: Registry) -> None:
    with pytest.raises(ValueError, match="'shorten_tools' is already registered"):
        registry.register(ShortenTools)
    with pytest.raises(TypeError):
        registry.register(dict)  # type: ignore[arg-type]


def test_a_plugin_is_found_through_its_entry_point_and_runs_in_a_chain(
    install_plugin: Callable[[str], None], ctx: Context
) -> None:
    install_plugin("shout = shout_plugin:Shout")
    registry = Registry.with_plugins()
    assert registry.names() == sorted([*(s.name for s in BUILTINS), "shout"])
    chain = Chain.parse("shout(marks=3),none", registry)
    assert chain.run([user("hi"), assistant("hello")], ctx).messages == [user("hi"), assistant("HELLO!!!")]


def test_a_plugin_whose_entry_point_name_differs_from_its_strategy_name_is_refused(
    install_plugin: Callable[[str], None],
) -> None:
    install_plugin("yell = shout_plugin:Shout")
    with pytest.raises(ValueError, match="entry point 'yell'"):
        Registry.with_plugins()


def test_without_plugins_installed_only_the_builtins_are_found() -> None:
    assert Registry.with_plugins().names() == sorted(s.name for s in BUILTINS)


@pytest.mark.parametrize(
    ("name", "old", "new"),
    [
        ("middle_out", "budget", "total"),
        ("fit", "epoch", "room"),
        ("middle_out", "epoch", "room"),
        ("notes", "keep_ratio", "low_water"),
    ],
)
def test_a_renamed_parameter_is_refused_with_its_new_name(registry: Registry, name: str, old: str, new: str) -> None:
    with pytest.raises(StrategyError, match=f"parameter '{old}' is now called '{new}'"):
        registry.params_for(name, {old: 1})
