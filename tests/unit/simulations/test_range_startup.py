"""Privacy parameters outside the accountant's range are refused at start-up, not after a round.

The analyzer service, `shuffledp simulate` and the report's last line of defence: each is checked
at the function that validates (no broker is started).
"""

from __future__ import annotations

import pytest

from shuffledp.analyzer.report import _privacy
from shuffledp.analyzer.service import AnalyzerSettings
from shuffledp.cli import main
from shuffledp.errors import InvalidParameterError
from shuffledp.simulations.pipeline.simulate import SimulationOptions
from tests.binding import analyzer_binding


def _analyzer(eps0: float, n_expected: int = 100) -> AnalyzerSettings:
    return AnalyzerSettings(
        prefix="t",
        round_id=1,
        k=10,
        eps0=eps0,
        n_hops=1,
        n_expected=n_expected,
        deadline=1.0,
        **analyzer_binding(1),
    )


def test_analyzer_settings_refuse_eps0_beyond_range() -> None:
    """False if the analyzer accepts eps0 = 800 (its round would run, then the accountant fail)
    or refuses without naming --eps0, its limit and the value."""
    assert _analyzer(700.0).eps0 == 700.0
    with pytest.raises(InvalidParameterError, match=r"--eps0 must be <= 700 .*got 800"):
        _analyzer(800.0)


def test_analyzer_settings_refuse_n_beyond_range() -> None:
    """False if an analyzer expecting more than 1e9 clients starts (no guarantee is computable)."""
    with pytest.raises(InvalidParameterError, match=r"--n must be <= 1_000_000_000"):
        _analyzer(1.0, n_expected=10**9 + 1)


def test_simulation_options_refuse_eps0_beyond_range() -> None:
    """False if `shuffledp simulate` would launch a pipeline at eps0 = 800."""
    with pytest.raises(InvalidParameterError, match=r"--eps0 must be <= 700"):
        SimulationOptions(n=100, k=10, eps0=800.0)


def test_simulate_cli_refuses_before_launching(capsys: pytest.CaptureFixture[str]) -> None:
    """False if `shuffledp simulate --eps0 800` starts anything (a broker, processes) or reports
    the error in more than one line on stderr."""
    code = main(["simulate", "--n", "100", "--k", "10", "--eps0", "800"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and "--eps0 must be <= 700" in err, err


def test_report_privacy_section_does_not_raise_outside_range() -> None:
    """False if building the report raises when the accountant refuses (the round's report
    must carry the error instead of the analyzer crashing at the end)."""
    section = _privacy(n=10, k=3, eps0=800.0, target_delta=1e-6, eps=None)
    assert section.error is not None and "--eps0 must be <= 700" in section.error
    assert section.delta is None
