"""simulate's final check (simulations/pipeline/simulate.py): every report sent is counted, or
the round fails with the loss's one line and exit status 5; --accept-loss lets the smaller
round through."""

from __future__ import annotations

import numpy as np
import pytest

from shuffledp.analyzer.records import AnalyzerTimings, Delivery, DeliveryLeg, PublishedReport
from shuffledp.analyzer.report import build_report
from shuffledp.cli.main import exit_status
from shuffledp.protocol.delivery import EXIT_LOST, ReportsLostError, loss_line
from shuffledp.simulations.pipeline.simulate import (
    RoundLossError,
    RoundRefusedError,
    SimulationOptions,
    _check_delivery,
)

LINE = "lost 1,613 of 20,000 reports between clients and hop-0"


def published(counted: int, *, lost: int, error: str | None, accepted: bool) -> PublishedReport:
    histogram = np.zeros(4, dtype=np.int64)
    histogram[0] = 0 if error else counted
    report = build_report(
        round_id=1,
        k=4,
        eps0=4.0,
        histogram=histogram,
        n_expected=20_000,
        rejected={},
        randomness_name="test",
    )
    legs = (DeliveryLeg(source="clients", sink="hop-0", sent=20_000, counted=20_000 - lost),)
    delivery = Delivery(
        expected=20_000,
        counted=20_000 - lost,
        lost=lost,
        legs=legs,
        loss_accepted=accepted,
        message=LINE if lost else None,
    )
    return PublishedReport(
        report=report,
        stages={},
        timings=AnalyzerTimings(analyzer_collect_seconds=1.0),
        error=error,
        warning=f"{LINE}; published with --accept-loss" if accepted else None,
        delivery=delivery,
    )


def test_a_refused_loss_is_a_round_loss_error_with_its_one_line_and_exit_5() -> None:
    refused = published(0, lost=1_613, error=f"the round was refused: {LINE}", accepted=False)
    with pytest.raises(RoundLossError) as caught:
        _check_delivery(refused, 20_000, accept_loss=False)
    assert str(caught.value) == f"the round was refused: {LINE}"
    assert exit_status(caught.value) == EXIT_LOST == 5
    assert isinstance(caught.value, RoundRefusedError)  # still a refused round for callers


def test_an_accepted_loss_passes_and_a_complete_round_passes() -> None:
    _check_delivery(published(18_387, lost=1_613, error=None, accepted=True), 20_000, True)
    _check_delivery(published(20_000, lost=0, error=None, accepted=False), 20_000, False)


def test_another_refusal_stays_a_refusal_and_a_silent_shortfall_is_caught() -> None:
    other = published(0, lost=0, error="the round was refused: min_batch", accepted=False)
    with pytest.raises(RoundRefusedError) as caught:
        _check_delivery(other, 20_000, accept_loss=False)
    assert not isinstance(caught.value, RoundLossError)
    # A report smaller than the round whose stages said nothing: still refused, by count.
    silent = published(19_000, lost=0, error=None, accepted=False)
    with pytest.raises(RoundLossError, match="lost 1,000 of 20,000 reports"):
        _check_delivery(silent, 20_000, accept_loss=False)


def test_the_loss_line_and_the_option() -> None:
    assert loss_line(1_613, 20_000, "between clients and hop-0") == LINE
    assert exit_status(ReportsLostError(LINE)) == EXIT_LOST
    assert SimulationOptions(n=100, accept_loss=True).accept_loss is True
    with pytest.raises(ValueError, match="--accept-loss must be True or False"):
        SimulationOptions(n=100, accept_loss="yes")  # type: ignore[arg-type]
