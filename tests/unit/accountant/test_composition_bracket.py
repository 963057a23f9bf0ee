"""compose_bracket: what the answer must say, and its one-line refusals."""

from __future__ import annotations

import pytest

from shuffledp.accountant import (
    InvalidParameterError,
    LargestGroup,
    OutsideConditionsError,
    ShuffledKRR,
)
from shuffledp.accountant.composition import composition_bracket as cb
from shuffledp.accountant.composition.pair_pld import fft_error


def test_profile_not_reached_is_said_and_stays_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no time for tight's profile, optimal-blanket's values stand in, and the note says so
    (no silent fallback); the bracket is still ordered and the same as optimal-blanket's own."""
    mech = ShuffledKRR(n=10**6, k=10, eps0=1.0)
    monkeypatch.setattr(cb, "PROFILE_BUDGET", 0.0)
    result = cb.compose_bracket(mech, 2, delta=1e-6)
    assert result.notes is not None
    assert "optimal-blanket's value at the others" in result.notes
    assert 0.0 < result.lower <= result.upper <= 1.05 * result.lower


@pytest.mark.parametrize("rounds", [0, cb.MAX_ROUNDS + 1, 2.5, True])
def test_rounds_out_of_range_refused_in_one_line(rounds: object) -> None:
    with pytest.raises(
        InvalidParameterError, match=r"--rounds must be an integer in \[1, 100000\]"
    ):
        cb.compose_bracket(ShuffledKRR(n=10, k=3, eps0=1.0), rounds, delta=1e-6)  # type: ignore[arg-type]


def test_spread_order_visits_every_point_once_eps_zero_last() -> None:
    for size in (1, 2, 33, 200):
        order = cb.spread_order(size)
        assert sorted(order) == list(range(size))
        assert order[-1] == 0


def test_profile_refusing_everywhere_refused_in_one_line() -> None:
    """largest-group refuses above n = 300 at every eps: one line naming its limit (this was a
    math domain error inside dp-accounting)."""
    mech = ShuffledKRR(n=301, k=5, eps0=2.0)
    with pytest.raises(
        OutsideConditionsError, match=r"largest-group refused at every eps.*n <= 300"
    ):
        cb.compose_bracket(mech, 10, delta=1e-6, bound=LargestGroup())


def _direct_delta(probs: dict[int, float], step: float, rounds: int, eps: float) -> float:
    """delta at eps of a PMF on losses i * step composed ``rounds`` times by direct (nonnegative,
    FFT-free) convolution: sum over losses l > eps of (1 - e^(eps - l)) p(l)."""
    import numpy as np

    low = min(probs)
    x = np.zeros(max(probs) - low + 1)
    for i, p in probs.items():
        x[i - low] = p
    y = x
    for _ in range(rounds - 1):
        y = np.convolve(y, x)
    losses = (np.arange(y.size) + rounds * low) * step
    return float(np.sum(np.where(losses > eps, -np.expm1(eps - losses) * y, 0.0)))


@pytest.mark.parametrize("rounds", [2, 5, 40])
def test_fft_error_bounds_the_composition_rounding(rounds: int) -> None:
    # fft_error must cover dp-accounting's FFT composition against a direct one (errors of the
    # direct sums are relative, ~1e-16 of each term): a random PMF on 400 loss points.
    import numpy as np
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    rng = np.random.default_rng(rounds)
    weights = rng.random(400) ** 8
    probs = {i - 120: float(w) for i, w in enumerate(weights / weights.sum())}
    pld = pld_lib.PrivacyLossDistribution.create_from_rounded_probability(probs, 0.0, 1e-2)
    err = fft_error(rounds, pld)
    composed = pld.self_compose(rounds, tail_mass_truncation=0.0)
    for eps in (0.0, 1.0, 3.0):
        gap = abs(
            float(composed.get_delta_for_epsilon(eps)) - _direct_delta(probs, 1e-2, rounds, eps)
        )
        assert gap <= err
    assert fft_error(1, pld) == 0.0


def test_a_composed_delta_below_the_rounding_error_keeps_the_bracket_ordered() -> None:
    # Lower 3.8e-17 > upper 2.8e-17 came out here before fft_error: both were rounding noise.
    result = cb.compose_bracket(ShuffledKRR(n=1000, k=10, eps0=2.0), 3, eps=1.0)
    assert 0.0 <= result.lower <= result.upper


@pytest.mark.parametrize(("n", "k", "eps0"), [(100, 3, 1.0), (50, 4, 2.0)])
def test_all_x0_listed_pair_has_the_exact_delta_of_f_n_minus_1(n: int, k: int, eps0: float) -> None:
    """F(n - 1)'s listed pair (the k >= 3 lower end's other witness) has the exact delta of
    that dataset (family_delta: the two-count pair's bracket) where its window holds it."""
    from shuffledp.accountant.composition.composition_bracket import all_x0_log_pmfs
    from shuffledp.accountant.engines.pairs import hockey_stick_both
    from shuffledp.accountant.worst_case.family import family_delta

    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    listed = all_x0_log_pmfs(mech)
    assert listed is not None
    for eps in (0.1 * eps0, 0.5 * eps0):
        exact = family_delta(mech, n - 1, eps)
        value = hockey_stick_both(*listed, eps)
        assert exact.lower * (1 - 1e-9) <= value <= exact.upper * (1 + 1e-9)


def test_close_hull_vertices_merge_below_the_curve() -> None:
    """_merge_close: vertices 1e-13 apart in x merge into one vertex; the merged piecewise-linear
    curve is nowhere above the original (a lower end stays a lower end) and stays convex."""
    import numpy as np

    from shuffledp.accountant.composition.profile_pld import _merge_close

    hx = np.array([1.0, 1.5, 1.5 * (1 + 1e-13), 2.0, 3.0])
    hy = np.array([0.5, 0.3, 0.29, 0.1, 0.0])
    mx, my = _merge_close(hx, hy)
    assert mx.tolist() == [1.0, 1.5, 2.0, 3.0] and my.tolist() == [0.5, 0.29, 0.1, 0.0]
    grid = np.linspace(1.0, 3.0, 2001)
    assert np.all(np.interp(grid, mx, my) <= np.interp(grid, hx, hy) + 1e-15)
    slopes = np.diff(my) / np.diff(mx)
    assert np.all(np.diff(slopes) >= 0.0)


def test_k3_bracket_where_roof_vertices_nearly_coincide() -> None:
    """n = 1,000, k = 3, eps0 = 4: a valley 7e-15 from a peak made the lower end's masses divide
    by zero (lower end 0 at R = 1, -inf at R = 10); now a bracket within 1 %."""
    result = cb.compose_bracket(ShuffledKRR(n=1000, k=3, eps0=4.0), 1, delta=1e-6)
    assert 0.0 < result.lower <= result.upper <= 1.01 * result.lower
