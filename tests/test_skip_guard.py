"""CI's skip guard (tests/skip_guard.py): an unexpected skip fails the session, an allowed one does not."""

import pytest

pytest_plugins = ["pytester"]

SUITE = """
import pytest

def test_runs():
    assert 1 + 1 == 2

@pytest.mark.skipif(True, reason="binary missing")
def test_needs_binary():
    pass

def test_skips_inside():
    pytest.skip("no data here")

@pytest.mark.xfail(reason="known bug", strict=True)
def test_known_bug():
    assert False
"""


@pytest.fixture
def suite(pytester):
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def run(pytester, monkeypatch, strict: str | None, allowed: str = ""):
    for name, value in (("VERITAS_STRICT_SKIPS", strict), ("VERITAS_ALLOWED_SKIPS", allowed)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    return pytester.runpytest("-p", "tests.skip_guard")


def test_without_the_flag_skips_pass(suite, monkeypatch):
    result = run(suite, monkeypatch, strict=None)
    result.assert_outcomes(passed=1, skipped=2, xfailed=1)
    assert result.ret == pytest.ExitCode.OK


def test_strict_run_fails_on_each_unexpected_skip_and_names_it(suite, monkeypatch):
    result = run(suite, monkeypatch, strict="1")
    result.assert_outcomes(passed=1, skipped=2, xfailed=1)  # the tests' own outcomes are unchanged
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*unexpected skips (VERITAS_STRICT_SKIPS=1)*",
        "SKIPPED test_suite.py::test_needs_binary: binary missing",
        "SKIPPED test_suite.py::test_skips_inside: no data here",
        "2 test(s) skipped that CI must run*",
    ])


def test_strict_run_passes_when_every_skip_is_allowed(suite, monkeypatch):
    result = run(suite, monkeypatch, strict="1",
                 allowed="test_suite.py::test_needs_binary, test_suite.py::test_skips_inside")
    assert result.ret == pytest.ExitCode.OK
    assert "unexpected skips" not in result.stdout.str()


def test_strict_run_fails_when_only_one_skip_is_allowed(suite, monkeypatch):
    result = run(suite, monkeypatch, strict="1", allowed="test_suite.py::test_needs_binary")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    lines = [line for line in result.stdout.lines if line.startswith("SKIPPED test_suite.py")]
    assert lines == ["SKIPPED test_suite.py::test_skips_inside: no data here"]


def test_a_failing_run_keeps_its_own_exit_code(pytester, monkeypatch):
    pytester.makepyfile(test_bad="import pytest\n\ndef test_bad():\n    assert False\n\n"
                                 "def test_skip():\n    pytest.skip('x')\n")
    result = run(pytester, monkeypatch, strict="1")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=1, skipped=1)
