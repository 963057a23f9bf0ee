"""The report's guarantee withstands the manifest's C colluders: it is computed for the counted
reports minus C (their reports are known to the adversary), and it says both numbers."""

from __future__ import annotations

import numpy as np
import pytest

from shuffledp.accountant.inversion import eps_for_delta
from shuffledp.accountant.mechanism import ShuffledKRR
from shuffledp.accountant.tight import Tight
from shuffledp.analyzer.records import PrivacyBlock
from shuffledp.analyzer.report import build_report
from shuffledp.errors import InvalidParameterError

HISTOGRAM = np.array([300, 250, 250, 200])


def _report(colluders: int) -> PrivacyBlock:
    report = build_report(
        round_id=1,
        k=4,
        eps0=3.0,
        histogram=HISTOGRAM,
        n_expected=1000,
        rejected={},
        randomness_name="os-csprng",
        colluders=colluders,
    )
    return report.privacy


def test_guarantee_is_for_the_counted_reports_minus_the_colluders() -> None:
    honest, colluding = _report(0), _report(40)
    assert (honest.n, honest.n_counted, honest.colluders) == (1000, 1000, 0)
    assert (colluding.n, colluding.n_counted, colluding.colluders) == (960, 1000, 40)
    direct = eps_for_delta(Tight(), ShuffledKRR(n=960, k=4, eps0=3.0), 1e-6)
    assert colluding.eps == pytest.approx(float(direct.eps), rel=0, abs=0)
    # Fewer hidden reports: a larger eps (the amplification is weaker).
    assert colluding.eps is not None and honest.eps is not None and colluding.eps > honest.eps
    assert colluding.guarantee is not None
    assert "n = 1000 counted minus 40 colluding clients" in colluding.guarantee


def test_no_guarantee_when_colluders_leave_fewer_than_two() -> None:
    block = _report(999)
    assert block.n == 1 and block.eps is None and block.delta is None
    assert block.error is not None and "beyond the colluders" in block.error


def test_privacy_block_checks_n_against_counted_minus_colluders() -> None:
    with pytest.raises(InvalidParameterError, match="n_counted - colluders = 1000 - 40, got 1000"):
        PrivacyBlock.from_json({**_report(40).to_json(), "n": 1000})
