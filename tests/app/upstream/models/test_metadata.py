"""Windows as servers publish them."""

from __future__ import annotations

from app.upstream.models.metadata import Published, server_root, window_from_props, windows_from_listing


def test_each_listing_shape() -> None:
    listing = {
        "data": [
            {"id": "Qwen/Qwen3-8B", "object": "model", "max_model_len": 8192},  # vLLM
            {"id": "acme/m", "context_length": 131072, "top_provider": {"context_length": 65536}},  # OpenRouter
            {"id": "acme/only-top", "top_provider": {"context_length": 32768}},
            {"id": "llama-3.1-8b-instant", "context_window": 131072},  # Groq
            {"id": "lmstudio", "loaded_context_length": 4096, "max_context_length": 32768},  # LM Studio
            {"id": "gpt-4o", "object": "model"},  # OpenAI: none
            {"id": "bad", "max_model_len": "8192"},
            {"id": "tiny", "max_model_len": 3},
            {"max_model_len": 4096},
            "junk",
        ]
    }
    assert windows_from_listing(listing) == {
        "Qwen/Qwen3-8B": 8192,
        "acme/m": 131072,
        "acme/only-top": 32768,
        "llama-3.1-8b-instant": 131072,
        "lmstudio": 4096,
    }
    assert windows_from_listing({"data": "x"}) == windows_from_listing(None) == {}


def test_llama_cpp_props() -> None:
    assert window_from_props({"default_generation_settings": {"n_ctx": 2048}, "total_slots": 1}) == 2048
    assert window_from_props({"n_ctx": 4096}) == 4096
    assert window_from_props({"n_ctx": True}) is None
    assert window_from_props([]) is None


def test_the_server_window_serves_any_unlisted_model() -> None:
    published = Published({"a": 8192}, server_window=2048)
    assert (published.window("a"), published.window("b")) == (8192, 2048)
    assert server_root("http://h:8080/v1") == "http://h:8080"
