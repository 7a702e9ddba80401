"""tests/conftest.py's memory section, and its bound under CI, in a pytest run of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.conftest as memory

pytest_plugins = ["pytester"]


def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, bound: int, ci: str | None) -> pytest.RunResult:
    source = Path(memory.__file__).read_text()
    assert f"MEMORY_BOUND = {memory.MEMORY_BOUND:_}" in source
    pytester.makeconftest(source.replace(f"MEMORY_BOUND = {memory.MEMORY_BOUND:_}", f"MEMORY_BOUND = {bound}"))
    pytester.makepyfile("def test_nothing():\n    pass\n")
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider")


def test_the_peak_of_the_pytest_process_and_its_children_are_shown(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(pytester, monkeypatch, memory.MEMORY_BOUND, "true")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.re_match_lines(
        [
            r"=+ memory =+",
            r"peak resident memory of the pytest process \(VmHWM\): [\d,]+ MB",
            r"largest child process waited for \(ru_maxrss\): ([\d,]+ MB.*|none)",
        ]
    )
    result.stdout.no_fnmatch_line("*over the bound*")


def test_over_the_bound_under_ci_the_run_fails_and_says_so(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(pytester, monkeypatch, 1_000_000, "true")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["the pytest process's peak is over the bound of 1 MB: the run fails (CI=true)"])


def test_over_the_bound_outside_ci_the_run_only_says_so(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(pytester, monkeypatch, 1_000_000, None)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["the pytest process's peak is over the bound of 1 MB: under CI=true the run would*"])
