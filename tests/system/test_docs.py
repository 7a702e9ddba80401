"""Checks of the documentation that ships with the code: README.md, CHANGELOG.md and docs/*.md.

Every relative link resolves, anchors included (GitHub's heading slugs); every path and module the pages name
exists; docs/configuration.md names every setting and docs/strategies.md every strategy; the README keeps the two
commands CI and a fresh clone run, and the markers bench.compaction rewrites its table between.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from app.settings import Settings
from bench.compaction.report.default_chain import README_BEGIN, README_END
from strategies import BUILTINS

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").glob("*.md")])
PATHS_CHECKED = PAGES

FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
# A path into the source tree, as the pages write it: `app/wire/anthropic.py`, tests/system/test_codex.py, docs/profile
# (not a pattern such as tests/app/<package>/test_<module>.py).
SOURCE_PATH = re.compile(r"(?<![\w./-])((?:app|strategies|bench|tests|scripts|docs)/[\w./-]*[\w/])(?![\w./<-])")
# A dotted module path in backticks, with an optional attribute: `app.upstream.transport`, `app.wire.Responses`.
MODULE = re.compile(r"`((?:app|strategies)(?:\.\w+)+)`")


def prose(text: str) -> list[str]:
    """The page's lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def anchors(page: Path) -> set[str]:
    """GitHub's anchor for each heading: lower case, punctuation but - and _ dropped, spaces to -, repeats -1, -2."""
    found: set[str] = set()
    for line in prose(page.read_text()):
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
        candidate, n = slug, 0
        while candidate in found:
            n += 1
            candidate = f"{slug}-{n}"
        found.add(candidate)
    return found


def rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for line in prose(page.read_text()):
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{target}: no {path}")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{target}: no heading #{anchor} in {file.name}")
    assert not broken, broken


@pytest.mark.parametrize("page", PATHS_CHECKED, ids=rel)
def test_every_source_path_a_page_names_exists(page: Path) -> None:
    text = page.read_text()
    missing = sorted({p for p in SOURCE_PATH.findall(text) if not (ROOT / p).exists()})
    assert not missing, missing


@pytest.mark.parametrize("page", PATHS_CHECKED, ids=rel)
def test_every_module_a_page_names_exists(page: Path) -> None:
    missing = []
    for dotted in sorted(set(MODULE.findall(page.read_text()))):
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                found: object = importlib.import_module(".".join(parts[:cut]))
            except ModuleNotFoundError:
                continue
            try:
                for name in parts[cut:]:
                    found = getattr(found, name)
            except AttributeError:
                missing.append(dotted)
            break
        else:
            missing.append(dotted)
    assert not missing, missing


def test_the_configuration_page_names_every_setting() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    missing = [name for name in Settings.model_fields if name != "config" and f"`{name}`" not in text]
    assert not missing, missing


def test_the_strategies_page_has_a_section_for_every_strategy() -> None:
    headings = [line for line in prose((ROOT / "docs" / "strategies.md").read_text()) if line.startswith("#")]
    missing = [s.name for s in BUILTINS if not any(f"`{s.name}`" in h for h in headings)]
    assert not missing, missing


def test_the_readme_keeps_the_two_commands_and_the_generated_table() -> None:
    text = (ROOT / "README.md").read_text()
    assert "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/compaction-proxy\n" in text
    assert "\nbash scripts/test\n" in text
    assert "bash scripts/test" in (ROOT / ".ci" / "run").read_text()
    assert text.index(README_BEGIN) < text.index(README_END)
