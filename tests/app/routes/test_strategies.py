"""GET /strategies: what the X-Compaction-Strategies header accepts, from the registry itself."""

from __future__ import annotations

import httpx

from strategies import BUILTINS
from strategies.refs import EXPAND_TOOL
from tests.app.conftest import ProxyFactory
from tests.support.upstream import StandInUpstream


def test_every_strategy_is_listed_with_its_summary_and_parameters(
    start_proxy: ProxyFactory, upstream: StandInUpstream
) -> None:
    configured = {"strategies": {"trim_bulky": {"keep_last": 4}}, "default_strategies": "minify,trim_bulky"}
    with start_proxy(**configured) as proxy:
        answer = httpx.get(f"{proxy.url}/strategies").json()
    assert answer["default_chain"] == "minify,trim_bulky"
    listed = {s["name"]: s for s in answer["strategies"]}
    assert set(listed) == {cls.name for cls in BUILTINS}
    assert all(s["summary"] for s in listed.values())
    trim = {p["name"]: p for p in listed["trim_bulky"]["parameters"]}
    assert trim["keep_last"] == {
        "name": "keep_last",
        "type": "integer",
        "default": 4,  # the configured value, not the built-in 2
        "description": "Newest answered user turns whose assistant messages are never trimmed.",
        "config_only": False,
    }
    assert trim["patterns"]["type"] == "array of string" and trim["patterns"]["config_only"] is True
    assert {p["name"] for p in listed["notes"]["parameters"] if p["config_only"]} == {
        "model",
        "prompt",
        "role",
        "fallback",
    }


def test_it_needs_a_proxy_key_like_the_other_compaction_routes(
    start_proxy: ProxyFactory, upstream: StandInUpstream
) -> None:
    with start_proxy(api_keys=["k"]) as proxy:
        refused = httpx.get(f"{proxy.url}/strategies")
        allowed = httpx.get(f"{proxy.url}/strategies", headers={"Authorization": "Bearer k"})
    assert refused.status_code == 401 and allowed.status_code == 200


def test_the_expand_tool_is_shown_in_each_wire_formats_own_shape(
    start_proxy: ProxyFactory, upstream: StandInUpstream
) -> None:
    with start_proxy() as proxy:
        tools = httpx.get(f"{proxy.url}/strategies").json()["expand_tool"]
    assert set(tools) == {"chat.completions", "responses", "messages"}
    assert tools["chat.completions"]["function"]["name"] == EXPAND_TOOL  # {type: function, function: {...}}
    assert tools["responses"]["type"] == "function" and tools["responses"]["name"] == EXPAND_TOOL
    assert tools["responses"]["strict"] is False
    assert tools["messages"]["name"] == EXPAND_TOOL and "input_schema" in tools["messages"]
    with start_proxy(expand_max_rounds=0) as proxy:
        assert httpx.get(f"{proxy.url}/strategies").json()["expand_tool"] == {}
