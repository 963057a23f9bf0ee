"""The evaluation's privacy settings (simulations/experiments/settings.py)."""

from __future__ import annotations

import pytest

from shuffledp.accountant import ShuffledKRR, Tight
from shuffledp.accountant.bounds.biswas_literal import biswas_literal_delta
from shuffledp.errors import InvalidParameterError
from shuffledp.simulations.experiments.settings import (
    HONEST_DELTA,
    PAPER_FALLBACK_DELTA,
    SettingPrivacy,
    honest_privacy,
    paper_privacy,
    printed_delta_hat,
)


@pytest.mark.parametrize(
    ("n", "k", "eps0"), [(5, 2, 0.5), (12, 3, 1.0), (30, 10, 2.0), (40, 5, 4.0)]
)
def test_printed_formula_is_zero_from_eps0_on(n: int, k: int, eps0: float) -> None:
    """The shortcut (delta_hat = 0 at eps >= eps0, proven in the docstring) agrees with the
    printed formula evaluated term by term, for every nx0; below eps0 it is evaluated. Where
    v_s = eps0 exactly (s - r = n - m), the 60-digit evaluation may see v_s a hair above eps0;
    biswas_literal documents that such terms weigh at most 1e-40."""
    for nx0 in range(n):
        assert biswas_literal_delta(n, k, eps0, nx0, eps0) <= 1e-40
        assert printed_delta_hat(n, k, eps0, eps0, [nx0]) == 0.0
    below = printed_delta_hat(n, k, eps0, eps0 / 4, list(range(n)))
    assert below == max(biswas_literal_delta(n, k, eps0, m, eps0 / 4) for m in range(n))


def test_printed_formula_reproduces_table_iv() -> None:
    """Table IV of the paper (n = 100, k = 10, eps0 = 2, n_x0 = 80): 3.25E-22 at eps = 0.5."""
    value = printed_delta_hat(100, 10, 2.0, 0.5, [80])
    assert value is not None and f"{value:.2e}" == "3.25e-22"


def test_paper_setting_falls_back_and_says_why() -> None:
    at_eps0 = paper_privacy(1000, 15, 4.0, [66])
    assert at_eps0.printed_delta == 0.0 and at_eps0.gaussian_delta == PAPER_FALLBACK_DELTA
    assert "gives delta = 0 here" in at_eps0.note and "we assume 1e-06" in at_eps0.note
    # k-RR alone is (eps0, 0)-DP: the valid bracket at eps = eps0 is exactly 0
    assert at_eps0.shuffle_delta_upper == 0.0 and at_eps0.eps0 == at_eps0.eps == 4.0
    too_big = printed_delta_hat(10_000, 15, 4.0, 1.0, [600])
    assert too_big is None


def test_honest_setting_meets_its_guarantee_and_is_the_largest_eps0() -> None:
    honest = honest_privacy(1000, 15, 1.0)
    assert honest.gaussian_delta == HONEST_DELTA and honest.eps == 1.0
    assert honest.shuffle_delta_lower <= honest.shuffle_delta_upper <= HONEST_DELTA
    above = Tight().delta(ShuffledKRR(n=1000, k=15, eps0=honest.eps0 * 1.001), 1.0)
    assert above.delta_upper > HONEST_DELTA


def test_setting_record_validates() -> None:
    with pytest.raises(InvalidParameterError, match="setting must be one of"):
        SettingPrivacy(
            setting="lax", n=10, k=2, eps0=1.0, eps=1.0, gaussian_delta=1e-6,
            shuffle_delta_upper=0.0, shuffle_delta_lower=0.0, printed_delta=None, note="",
        )  # fmt: skip
    with pytest.raises(InvalidParameterError, match=r"delta must be in \(0, 1\), got 0.0"):
        SettingPrivacy(
            setting="paper", n=10, k=2, eps0=1.0, eps=1.0, gaussian_delta=0.0,
            shuffle_delta_upper=0.0, shuffle_delta_lower=0.0, printed_delta=None, note="",
        )  # fmt: skip
