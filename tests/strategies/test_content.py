from __future__ import annotations

import hashlib

import pytest

from strategies.content import short_hash, text_of, truncate_middle, with_text
from tests.factories import parts

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}


def sha8(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


@pytest.mark.parametrize(
    ("content", "text"),
    [
        ("plain", "plain"),
        ([{"type": "text", "text": "a"}, IMAGE, {"type": "text", "text": "b"}], "ab"),
        ([{"type": "text", "text": None}, "stray", {"type": "text"}], ""),
        (None, ""),
    ],
)
def test_text_of_reads_strings_and_text_parts(content: object, text: str) -> None:
    assert text_of(content) == text


def test_with_text_keeps_the_shape_and_the_non_text_parts() -> None:
    assert with_text("old", "new") == "new"
    assert with_text(parts("old"), "new") == parts("new")
    content = [{"type": "text", "text": "a"}, IMAGE, {"type": "text", "text": "b"}]
    assert with_text(content, "new") == [{"type": "text", "text": "new"}, IMAGE]
    assert content[0] == {"type": "text", "text": "a"}  # not mutated


def test_with_text_keeps_the_first_text_parts_other_keys_and_place() -> None:
    cached = {"type": "text", "text": "old", "cache_control": {"type": "ephemeral"}}
    assert with_text([IMAGE, cached, parts("more")[0]], "new") == [IMAGE, {**cached, "text": "new"}]
    assert with_text([IMAGE], "new") == [{"type": "text", "text": "new"}, IMAGE]


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
