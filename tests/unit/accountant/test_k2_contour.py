"""accountant/engines/k2_contour.py: F(a) for k = 2 by a saddle-point contour integral, against 60-digit
mpmath enumeration (tests/reference/mpmath_pairs.single_bin, independent of the production code)
and against k2_exact at n up to 1e8; its rounding model against the error actually made."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from shuffledp.accountant import ShuffledKRR
from shuffledp.accountant.engines import k2_contour
from shuffledp.accountant.engines.k2_contour import Coefs, direction_one, k2_contour_value
from shuffledp.accountant.engines.k2_exact import EXTENDED, k2_family_value
from tests.reference import mpmath_pairs

pytestmark = pytest.mark.skipif(not EXTENDED, reason="needs an extended long double (x86)")

# (n, eps0, eps, a): ends and interior, eps near eps0 (deep tails), tiny n.
SMALL = [
    (120, 1.0, 0.3, 7),
    (120, 0.5, 0.05, 0),
    (120, 0.5, 0.45, 60),
    (90, 2.0, 1.0, 89),
    (90, 4.0, 3.9, 3),
    (90, 8.0, 1.0, 0),
    (90, 8.0, 7.5, 45),
    (20, 1.0, 0.5, 4),
    (16, 8.0, 1.0, 15),
    (16, 8.0, 7.9, 0),
]


def _mpmath_value(n: int, eps0: float, eps: float, a: int) -> mpmath.mpf:
    with mpmath.workdps(60):
        return max(mpmath_pairs.single_bin(n, 2, eps0, a, eps))


@pytest.mark.parametrize(("n", "eps0", "eps", "a"), SMALL)
def test_bracket_contains_the_mpmath_value_and_is_narrow(
    n: int, eps0: float, eps: float, a: int
) -> None:
    """The bracket contains the 60-digit value and is at most 1e-9 wide (relative)."""
    got = k2_contour_value(ShuffledKRR(n=n, k=2, eps0=eps0), a, eps)
    assert got is not None
    with mpmath.workdps(60):
        exact = _mpmath_value(n, eps0, eps, a)
        assert mpmath.mpf(got.lower) <= exact <= mpmath.mpf(got.upper), (got, exact)
        if exact > 1e-300:
            assert mpmath.mpf(got.upper) - mpmath.mpf(got.lower) <= 1e-9 * exact


@pytest.mark.parametrize(("n", "eps0", "eps", "a"), SMALL[:7])
def test_rounding_model_holds_without_its_padding(
    monkeypatch: pytest.MonkeyPatch, n: int, eps0: float, eps: float, a: int
) -> None:
    """With CONTOUR_PAD = 1 (the bare operation count) the bracket still contains the 60-digit
    value: the padding of 32 is a margin, not what makes the bracket hold."""
    monkeypatch.setattr(k2_contour, "CONTOUR_PAD", 1.0)
    got = k2_contour_value(ShuffledKRR(n=n, k=2, eps0=eps0), a, eps)
    assert got is not None
    with mpmath.workdps(60):
        exact = _mpmath_value(n, eps0, eps, a)
        assert mpmath.mpf(got.lower) <= exact <= mpmath.mpf(got.upper), (got, exact)


def test_phi_of_every_c_against_mpmath() -> None:
    """Phi(c) = alpha B(c-1) - E T(c) on the contour, for every c of a window around c* and
    far from it (where the values are negative and the window logic is not involved)."""
    n, eps0, eps, a = 80, 1.0, 0.4, 9
    co = Coefs.of(eps0, eps)
    with mpmath.workdps(60):
        pt = 1 / (1 + mpmath.exp(-eps0))
        pb = 1 - pt
        x = [mpmath.binomial(a, j) * pt**j * pb ** (a - j) for j in range(a + 1)]
        m = n - 1 - a
        y = [mpmath.binomial(m, j) * pb**j * pt ** (m - j) for j in range(m + 1)]
        b = [mpmath.mpf(0)] * n
        for i, xi in enumerate(x):
            for j, yj in enumerate(y):
                b[i + j] += xi * yj
        alpha = pt - mpmath.exp(eps) * pb
        big_e = mpmath.expm1(eps)
        for c in (5, 20, 40, 41, 42, 60, 75):
            circle = k2_contour.make_circle(k2_contour._plan(a, m, float(c), co), co)
            assert circle is not None
            rows = k2_contour._phi_rows(
                circle, np.array([a]), np.array([m]), np.array([c]), 5
            )  # Phi(c .. c + 4), in units of exp(units)
            for j in range(5):
                exact = alpha * b[c + j - 1] - big_e * sum(b[c + j :])
                scale = mpmath.exp(rows.units[0])
                low = mpmath.mpf(float(rows.values[0, j] - rows.errs[0, j])) * scale
                high = mpmath.mpf(float(rows.values[0, j] + rows.errs[0, j])) * scale
                slack = abs(exact) * 1e-15
                assert low - slack <= exact <= high + slack, (c + j, exact)


@pytest.mark.parametrize(
    ("n", "eps0", "eps", "a"),
    [
        (10**6, 0.5, 0.0012657977434720122, 19),
        (10**6, 0.5, 0.0012657977434720122, 5_000),
        (10**6, 4.0, 0.1, 3),
        (10**6, 8.0, 1.0, 0),
        (10**5, 2.0, 0.01, 10),
        (10**4, 8.0, 1.0, 0),
        (10**8, 0.5, 0.0004, 100),
    ],
)
def test_brackets_meet_k2_exact_at_large_n(n: int, eps0: float, eps: float, a: int) -> None:
    """At n up to 1e8 the two brackets overlap, and the contour's is at most 1e-9 wide (3e-10
    at n = 1e6, eps0 = 8, eps = 1, where delta is 9e-43)."""
    mech = ShuffledKRR(n=n, k=2, eps0=eps0)
    got = k2_contour_value(mech, a, eps)
    ref = k2_family_value(mech, a, eps)
    assert got is not None and ref is not None
    assert got.lower <= ref.upper and ref.lower <= got.upper, (got, ref)
    assert got.upper - got.lower <= 1e-9 * got.upper


def test_deep_tail_underflows_to_the_smallest_float_not_to_zero() -> None:
    """n = 1e6, eps0 = 0.5, eps = 0.25: F(0) is about e^-150000, far below floats: the upper
    end is the smallest positive float (a valid bound), never 0."""
    got = k2_contour_value(ShuffledKRR(n=10**6, k=2, eps0=0.5), 0, 0.25)
    assert got is not None
    assert got.lower == 0.0 and got.upper == 5e-324


def test_directions_are_label_swaps() -> None:
    """H(P1||P0) at a is H(P0||P1) at n - 1 - a: the two directions by mpmath, one each."""
    n, eps0, eps, a = 70, 2.0, 0.7, 12
    co = Coefs.of(eps0, eps)
    with mpmath.workdps(60):
        forward, backward = mpmath_pairs.single_bin(n, 2, eps0, a, eps)
        for value, at in ((forward, a), (backward, n - 1 - a)):
            got = direction_one(n, at, co)
            assert got is not None
            assert mpmath.mpf(got.lower) <= value <= mpmath.mpf(got.upper)


def test_outside_its_conditions_it_declines() -> None:
    mech = ShuffledKRR(n=100, k=2, eps0=1.0)
    assert k2_contour_value(mech, 3, 1.0) is None  # eps >= eps0: delta is 0, not its business
    assert k2_contour_value(ShuffledKRR(n=100, k=3, eps0=1.0), 3, 0.5) is None
    assert k2_contour_value(ShuffledKRR(n=15, k=2, eps0=1.0), 3, 0.5) is None  # MIN_N


@pytest.mark.parametrize(
    ("n", "eps0", "eps"),
    [(311_762, 14.3717240690501, 14.363728845105047), (60_310, 18.576349102875707, 18.5694830)],
)
def test_it_declines_rather_than_answer_wide(n: int, eps0: float, eps: float) -> None:
    """eps0 above 10 with eps near it: the rounding bound reaches 1 % on the contour's own
    circle there, so it declines (k2_exact answers) instead of returning a wide bracket;
    wherever it answers, the bracket is at most SHARED_WIDTH wide (or below 1e-300)."""
    mech = ShuffledKRR(n=n, k=2, eps0=eps0)
    for a in (0, 1, n // 2):
        got = k2_contour_value(mech, a, eps)
        assert (
            got is None
            or got.upper <= got.lower * (1 + k2_contour.SHARED_WIDTH)
            or got.upper < 1e-300  # (below floats' precision: [0, tiny] is all there is)
        )
    assert k2_contour_value(mech, 0, eps) is None
