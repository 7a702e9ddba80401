from __future__ import annotations

from pathlib import Path

from app.wrap.agents import Command, Upstreams


def test_any_command_gets_both_base_urls_each_as_its_clients_write_it(tmp_path: Path) -> None:
    env = {"PATH": "/bin", "OPENAI_BASE_URL": "https://a.example/v1/", "ANTHROPIC_BASE_URL": "https://b.example"}
    assert Command().upstreams(env, tmp_path) == Upstreams("https://a.example/v1", "https://b.example")
    launch = Command().launch(["python", "-c", "pass"], "http://127.0.0.1:9", Upstreams(), env, tmp_path)
    assert launch.argv == ["python", "-c", "pass"]
    assert launch.env == {
        "PATH": "/bin",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
    }
