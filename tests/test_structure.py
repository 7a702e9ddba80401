"""The structure rules as tests: no import cycle, counting every import wherever it is; no import across a layer
(strategies/ nothing from app/, bench/ nothing from tests/, ...); test modules mirror the modules they test.

The mirroring rule: tests/app/... and tests/strategies/... hold test_<name>[_<aspect>].py for the product module
<name>.py (or the package <name>/) at the same path; a product module with behaviour of its own has one, unless
TESTED_THROUGH names the test module that covers it through its caller. Whole-system tests (real agent CLIs, the
image, compose, packaging) live in tests/system/, benchmark smoke runs in tests/bench/.
"""

from __future__ import annotations

import ast
import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
MIRRORED = ("app", "strategies")
# Product modules whose behaviour is tested through the module that uses it, and where.
TESTED_THROUGH = {
    "app/cache/memory.py": "tests/app/test_cache.py",  # every backend against one contract
    "app/cache/redis.py": "tests/app/test_cache.py",
    "app/cache/sqlite.py": "tests/app/test_cache.py",
    "app/edge/errors.py": "tests/app/edge/test_error_handlers.py",
    "app/edge/headers.py": "tests/app/routes/test_passthrough.py",  # which headers cross, on a real server
    "app/expansion/__init__.py": "tests/app/expansion/test_loop.py",
    "app/expansion/rounds.py": "tests/app/expansion/test_loop.py",
    "app/forwarding/refusals.py": "tests/app/forwarding/test_forwarding.py",
    "app/main.py": "tests/app/test_settings.py",  # create_app's configuration errors
    "app/notes/background.py": "tests/app/notes/test_runtime.py",
    "app/notes/summariser.py": "tests/app/notes/test_runtime.py",
    "app/server/cli.py": "tests/app/server/test_serve.py",  # the CLI's process, signals and drain
    "app/server/httptools.py": "tests/app/server/test_connections.py",  # both protocol classes
    "app/savings/redis.py": "tests/app/savings/test_store.py",  # every store against one contract
    "app/savings/sqlite.py": "tests/app/savings/test_store.py",
    "app/savings/tally.py": "tests/app/savings/test_ledger.py",
    "app/server/readiness.py": "tests/app/server/test_serve.py",
    "app/services.py": "tests/app/policy/test_keys.py",  # authenticate
    "app/upstream/websocket.py": "tests/app/routes/test_websocket.py",
    "app/wire/__init__.py": "tests/app/edge/test_error_handlers.py",  # error_body by route
    "app/wire/cache_control.py": "tests/app/wire/test_anthropic.py",
    "app/wire/chat/__init__.py": "tests/app/routes/test_compacted_chat.py",
    "app/wire/json_body.py": "tests/app/routes/test_compacted_properties.py",
    "app/wire/openai.py": "tests/app/routes/test_compacted_chat.py",
    "app/wire/responses/items.py": "tests/app/wire/test_responses.py",
    "app/wrap/agents/base.py": "tests/app/wrap/agents/test_claude.py",  # what every agent shares
    "strategies/base.py": "tests/strategies/test_registry.py",
    "strategies/budget.py": "tests/strategies/test_window.py",
    "strategies/digests.py": "tests/app/compaction/test_prefix_unit.py",
    "strategies/encodings.py": "tests/strategies/test_tokens.py",
    "strategies/none.py": "tests/strategies/test_chain.py",
    "strategies/notes_fold.py": "tests/strategies/test_notes.py",
    "strategies/replay.py": "tests/strategies/test_epochs.py",
    "strategies/unavailable.py": "tests/strategies/test_notes.py",
}


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_cycles", ROOT / "scripts" / "import_cycles.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def checker() -> ModuleType:
    return _checker()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the checkout's sources, to plant an import in."""
    for package in ("app", "strategies", "bench", "tests"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _plant(path: Path, statement: str) -> None:
    """The import inside a function, where only a reader of every import sees it."""
    path.write_text(path.read_text() + f"\n\ndef _planted() -> None:\n    {statement}\n")


def test_no_import_cycle_counting_every_import(checker: ModuleType) -> None:
    assert checker.cycles(checker.imports(ROOT)) == []


def test_no_import_crosses_a_layer(checker: ModuleType) -> None:
    assert checker.crossings(checker.imports(ROOT)) == []


def test_a_cycle_planted_inside_a_function_is_found(checker: ModuleType, tree: Path) -> None:
    _plant(tree / "app/server/connections.py", "from app.server import httptools")
    assert ["app.server.connections", "app.server.httptools"] in checker.cycles(checker.imports(tree))


@pytest.mark.parametrize(
    ("where", "statement", "crossing"),
    [
        ("strategies/chain.py", "from app.settings import Settings", ("strategies.chain", "app.settings")),
        ("strategies/window.py", "import app.wire", ("strategies.window", "app.wire")),
        ("bench/speed.py", "from tests.factories import user", ("bench.speed", "tests.factories")),
        ("app/wire/chat/expand.py", "from bench import canned", ("app.wire.chat.expand", "bench.canned")),
    ],
)
def test_an_import_planted_across_a_layer_is_found(
    checker: ModuleType, tree: Path, where: str, statement: str, crossing: tuple[str, str]
) -> None:
    _plant(tree / where, statement)
    assert crossing in checker.crossings(checker.imports(tree))


def _product_for(test: Path) -> Path | None:
    """The product module a test module is named after: the longest prefix of its name at the mirrored path."""
    directory = ROOT / test.relative_to(ROOT / "tests").parent
    parts = test.stem.removeprefix("test_").split("_")
    for k in range(len(parts), 0, -1):
        name = "_".join(parts[:k])
        for candidate in (directory / f"{name}.py", directory / name / "__init__.py"):
            if candidate.exists():
                return candidate
    return None


def _test_modules() -> list[Path]:
    return sorted(p for package in MIRRORED for p in (ROOT / "tests" / package).rglob("test_*.py"))


def _has_behaviour(path: Path) -> bool:
    """A function or method that does something (not a protocol's `...`, nor only a docstring)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            if any(not isinstance(s, ast.Pass) for s in body):
                return True
    return False


@pytest.mark.parametrize("test", _test_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_each_test_module_is_named_after_the_module_it_tests(test: Path) -> None:
    assert _product_for(test) is not None, f"{test.relative_to(ROOT)} mirrors no module of {MIRRORED}"


def test_each_module_with_behaviour_has_its_test_module() -> None:
    tested = {_product_for(t) for t in _test_modules()}
    missing = [
        str(p.relative_to(ROOT))
        for package in MIRRORED
        for p in sorted((ROOT / package).rglob("*.py"))
        if p not in tested and _has_behaviour(p) and str(p.relative_to(ROOT)) not in TESTED_THROUGH
    ]
    assert missing == []


def test_each_module_tested_through_another_names_a_test_module_that_exists_and_has_none_of_its_own() -> None:
    tested = {_product_for(t) for t in _test_modules()}
    stale = {
        m: t
        for m, t in TESTED_THROUGH.items()
        if not (ROOT / m).exists() or not (ROOT / t).exists() or ROOT / m in tested
    }
    assert stale == {}


def test_the_rule_reads_an_aspect_suffix_and_finds_no_module_for_a_stray_name() -> None:
    assert _product_for(ROOT / "tests/app/wire/test_anthropic_properties.py") == ROOT / "app/wire/anthropic/__init__.py"
    assert _product_for(ROOT / "tests/app/test_cache_processes.py") == ROOT / "app/cache/__init__.py"
    assert _product_for(ROOT / "tests/app/wire/test_nothing_here.py") is None
