"""A run fails on a skip outside the allow-list (tests/conftest.py ALLOWED_SKIPS): a test that
always skips checks nothing. Checked on the hook itself with real pytest reports."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Literal

import pytest

from tests import conftest


class _Outcome:
    def __init__(self, report: pytest.TestReport) -> None:
        self.report = report

    def get_result(self) -> pytest.TestReport:
        return self.report


def _after_hook(
    reason: str, when: Literal["setup", "call", "teardown"] = "call"
) -> pytest.TestReport:
    report = pytest.TestReport(
        nodeid="tests/x.py::t",
        location=("tests/x.py", 1, "t"),
        keywords={},
        outcome="skipped",
        longrepr=("tests/x.py", 1, f"Skipped: {reason}"),
        when=when,
    )
    hook: Generator[None, Any, None] = conftest.pytest_runtest_makereport(None, None)  # type: ignore[arg-type]
    next(hook)
    with pytest.raises(StopIteration):
        hook.send(_Outcome(report))
    return report


def test_a_skip_for_a_parameter_combination_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    report = _after_hook("erlingsson: outside its conditions at all 7 eps of this case")
    assert report.outcome == "failed"
    assert "ALLOWED_SKIPS" in str(report.longrepr)
    assert _after_hook("shuffledp.accountant.FamilyF does not exist yet", "setup").failed


def test_machine_facts_stay_skips_and_ci_allows_fewer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert _after_hook("mosquitto is not installed (apt-get install mosquitto)").skipped
    assert _after_hook("root may write anywhere", "setup").skipped
    monkeypatch.setenv("CI", "true")
    assert _after_hook("mosquitto is not installed (apt-get install mosquitto)").failed
    assert _after_hook("root may write anywhere", "setup").skipped
    monkeypatch.setenv("CI", "false")
    assert _after_hook("the check-in slices are not at /x").skipped
