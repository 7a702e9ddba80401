"""The markers that say what was removed (strategies.markers)."""

from __future__ import annotations

import hashlib

import pytest

from strategies.markers import short_hash, truncate_middle


def sha8(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def test_truncate_middle_keeps_head_and_tail_around_a_marker() -> None:
    text = "".join(f"{i:04d}" for i in range(250))  # 1000 characters
    assert truncate_middle(text, 100) == f"Truncated (1000): {text[:50]}<...1000 - {sha8(text)}...>{text[-50:]}"


def test_truncate_middle_odd_size_gives_the_extra_character_to_the_head() -> None:
    text = "x" * 500 + "y" * 500
    assert truncate_middle(text, 7) == f"Truncated (1000): xxxx<...1000 - {sha8(text)}...>yyy"


@pytest.mark.parametrize("length", [0, 100, 120])
def test_truncate_middle_leaves_text_the_marker_would_not_shorten(length: int) -> None:
    text = "z" * length
    assert truncate_middle(text, 100) is text


def test_short_hash_is_eight_hex_digits_of_sha256_even_for_lone_surrogates() -> None:
    assert short_hash("hello") == "2cf24dba"
    assert len(short_hash("a\ud800b")) == 8
