"""accountant/engines/k2_exact.py (F(a) for k = 2 in extended precision) against 60-digit mpmath
enumeration (tests/reference/mpmath_pairs.single_bin) at n in the hundreds.

Requirement: for every a on a range covering both ends (a = 0 .. 6, n - 7 .. n - 1) and a few
interior values, eps0 up to 8, the bracket contains the mpmath value and is at most 1e-9 wide
(relative) where the value is >= 1e-300.
"""

from __future__ import annotations

import mpmath
import pytest

from shuffledp.accountant import ShuffledKRR
from shuffledp.accountant.engines.k2_exact import EXTENDED, k2_family_value
from tests.reference import mpmath_pairs

pytestmark = pytest.mark.skipif(not EXTENDED, reason="needs an extended long double (x86)")

# (n, eps0, eps): small and large eps0, eps near eps0 (deep tails), tiny n.
CASES = [
    (300, 0.5, 0.1),
    (300, 1.0, 0.5),
    (250, 1.0, 0.9),
    (300, 2.0, 1.0),
    (300, 4.0, 0.5),
    (200, 4.0, 3.9),
    (300, 8.0, 1.0),
    (300, 8.0, 7.9),
    (5, 1.0, 0.5),
    (2, 8.0, 1.0),
]


def _a_values(n: int) -> list[int]:
    return sorted({*range(min(7, n)), *range(max(n - 7, 0), n), n // 3, n // 2})


@pytest.mark.parametrize(("n", "eps0", "eps"), CASES)
def test_bracket_contains_mpmath_and_is_narrow(n: int, eps0: float, eps: float) -> None:
    mech = ShuffledKRR(n=n, k=2, eps0=eps0)
    for a in _a_values(n):
        got = k2_family_value(mech, a, eps)
        assert got is not None
        with mpmath.workdps(60):
            exact = max(mpmath_pairs.single_bin(n, 2, eps0, a, eps))
            assert mpmath.mpf(got.lower) <= exact <= mpmath.mpf(got.upper), (a, got, exact)
            if exact >= mpmath.mpf("1e-300"):
                assert mpmath.mpf(got.upper) - mpmath.mpf(got.lower) <= 1e-9 * exact, (a, got)


@pytest.mark.parametrize(("n", "eps0", "eps"), CASES)
def test_fft_bracket_contains_mpmath(n: int, eps0: float, eps: float) -> None:
    """accountant/engines/k2_fft.py (absolute FFT errors, Chernoff tails): where it answers, its
    bracket contains the 60-digit value too (it may decline, or be wide in deep tails)."""
    from shuffledp.accountant.engines.k2_fft import k2_fft_value

    mech = ShuffledKRR(n=n, k=2, eps0=eps0)
    for a in _a_values(n):
        got = k2_fft_value(mech, a, eps)
        if got is None:
            continue
        with mpmath.workdps(60):
            exact = max(mpmath_pairs.single_bin(n, 2, eps0, a, eps))
            assert mpmath.mpf(got.lower) <= exact <= mpmath.mpf(got.upper), (a, got, exact)


# The k = 2 certificate (family.k2_worst_case): max_a F(a) is the exact worst case.
CERT_CASES = [
    (6, 1.0, 0.3),
    (9, 2.0, 0.5),
    (9, 0.5, 0.1),
    (9, 8.0, 1.0),
]


@pytest.mark.parametrize(("n", "eps0", "eps"), CERT_CASES)
def test_certificate_contains_the_exhaustive_worst_case(n: int, eps0: float, eps: float) -> None:
    """Every dataset of the other n - 1 users enumerated (tests/reference/oracle.py, 50 digits):
    the certified bracket contains the worst case and is exact to 1e-9."""
    from shuffledp.accountant.worst_case.family import k2_worst_case
    from tests.reference import oracle

    got, _ = k2_worst_case(ShuffledKRR(n=n, k=2, eps0=eps0), eps)
    with mpmath.workdps(50):
        truth, _ = oracle.worst_case_delta(n, 2, eps0, eps)
        assert mpmath.mpf(got.lower) <= truth <= mpmath.mpf(got.upper), (got, truth)
        assert got.upper <= got.lower * (1.0 + 1e-9)


@pytest.mark.parametrize(
    ("n", "eps0", "eps"), [(120, 0.5, 0.1), (150, 2.0, 0.5), (150, 8.0, 1.0), (150, 8.0, 7.0)]
)
def test_certificate_contains_the_mpmath_maximum_over_every_a(
    n: int, eps0: float, eps: float
) -> None:
    """max over every a of the 60-digit single-bin value (mpmath_pairs) inside the bracket, and
    the bracket exact to 1e-9 (the maximum may sit in the interior: eps0 = 8)."""
    from shuffledp.accountant.worst_case.family import k2_worst_case

    got, best_a = k2_worst_case(ShuffledKRR(n=n, k=2, eps0=eps0), eps)
    with mpmath.workdps(60):
        values = [max(mpmath_pairs.single_bin(n, 2, eps0, a, eps)) for a in range(n)]
        truth = max(values)
        assert mpmath.mpf(got.lower) <= truth <= mpmath.mpf(got.upper), (got, truth)
        assert abs(values[best_a] - truth) <= 1e-9 * truth
    assert got.upper <= got.lower * (1.0 + 1e-9)


def test_certificate_at_n_1e4_is_exact_where_the_maximum_is_interior() -> None:
    """n = 1e4, eps0 = 8, eps = 0.1: F(a) oscillates with a (the noise variance is 3.4, so the
    lattice shift a (pt - pb) matters) and its maximum is near a = 2680, not at the ends. The
    certificate finds it, and every a evaluated directly stays below the upper end."""
    from shuffledp.accountant.worst_case.family import k2_worst_case

    mech = ShuffledKRR(n=10_000, k=2, eps0=8.0)
    got, best_a = k2_worst_case(mech, 0.1)
    assert got.upper <= got.lower * (1.0 + 1e-9)
    assert 1000 < best_a < 9000
    for a in range(0, 10_000, 37):
        value = k2_family_value(mech, a, 0.1)
        assert value is not None and value.lower <= got.upper, a
