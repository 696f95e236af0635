"""A pytest plugin for CI: with ``VERITAS_STRICT_SKIPS=1`` the session fails when a test was skipped that is not
on the allow-list, so a missing binary (redis-server, chromium, WordNet) cannot hide a test behind a green run.

``VERITAS_ALLOWED_SKIPS`` names the tests that may skip, comma-separated node ids (``tests/test_x.py::test_y``).
"""

import os

import pytest

STRICT_ENV, ALLOWED_ENV = "VERITAS_STRICT_SKIPS", "VERITAS_ALLOWED_SKIPS"


def allowed_skips() -> set[str]:
    return {n.strip() for n in os.environ.get(ALLOWED_ENV, "").split(",") if n.strip()}


class SkipGuard:
    def __init__(self, allowed: set[str]):
        self.allowed = allowed
        self.unexpected: list[tuple[str, str]] = []  # (node id, reason)

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped and not hasattr(report, "wasxfail") and report.nodeid not in self.allowed:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            self.unexpected.append((report.nodeid, reason.removeprefix("Skipped: ")))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.unexpected and exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.unexpected:
            return
        terminalreporter.section(f"unexpected skips ({STRICT_ENV}=1)", red=True)
        for nodeid, reason in self.unexpected:
            terminalreporter.line(f"SKIPPED {nodeid}: {reason}")
        terminalreporter.line(f"{len(self.unexpected)} test(s) skipped that CI must run: install what they need "
                              f"(.ci/run does, as root), or add them to {ALLOWED_ENV} with a reason in .ci/run.")


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get(STRICT_ENV, "") not in ("", "0"):
        config.pluginmanager.register(SkipGuard(allowed_skips()), "veritas-skip-guard")
