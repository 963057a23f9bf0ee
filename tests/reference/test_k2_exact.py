"""accountant/k2_exact.py (F(a) for k = 2 in extended precision) against 60-digit mpmath
enumeration (tests/reference/mpmath_pairs.single_bin) at n in the hundreds.

Requirement: for every a on a range covering both ends (a = 0 .. 6, n - 7 .. n - 1) and a few
interior values, eps0 up to 8, the bracket contains the mpmath value and is at most 1e-9 wide
(relative) where the value is >= 1e-300.
"""

from __future__ import annotations

import mpmath
import pytest

from shuffledp.accountant import ShuffledKRR
from shuffledp.accountant.k2_exact import EXTENDED, k2_family_value
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
