"""accountant/engines/k2_exact.py: F(a) for k = 2 in extended precision agrees with the float64
single-bin code (bounds.SingleBin, an independent computation with its own rigorous bracket)."""

from __future__ import annotations

import pytest

from shuffledp.accountant import ShuffledKRR
from shuffledp.accountant.bounds.base import SingleBin
from shuffledp.accountant.engines.k2_exact import EXTENDED, k2_family_value

pytestmark = pytest.mark.skipif(not EXTENDED, reason="needs an extended long double (x86)")


@pytest.mark.parametrize(("n", "eps0", "eps"), [(60, 0.5, 0.2), (80, 2.0, 1.0), (40, 8.0, 4.0)])
def test_every_a_agrees_with_single_bin(n: int, eps0: float, eps: float) -> None:
    """Both are rigorous brackets of the same number, so they must intersect; ours is narrow."""
    mech = ShuffledKRR(n=n, k=2, eps0=eps0)
    for a in range(n):
        ours = k2_family_value(mech, a, eps)
        theirs = SingleBin(a).bracket(mech, eps)
        assert ours is not None
        assert ours.lower <= theirs.upper and theirs.lower <= ours.upper, (a, ours, theirs)
        if theirs.lower >= 1e-300:
            assert ours.upper - ours.lower <= 1e-12 * ours.upper, (a, ours)


def test_mirror_symmetry_and_zero_above_eps0() -> None:
    """F(a) = F(n - 1 - a) (swap the labels x0, x1); nothing for k != 2 or eps >= eps0."""
    mech = ShuffledKRR(n=101, k=2, eps0=1.0)
    assert k2_family_value(mech, 3, 0.3) == k2_family_value(mech, 97, 0.3)
    assert k2_family_value(mech, 3, 1.0) is None
    assert k2_family_value(ShuffledKRR(n=101, k=3, eps0=1.0), 3, 0.3) is None


def test_large_n_is_narrow_and_inside_single_bin() -> None:
    """At n = 1e6 and delta ~ 1e-6 (H is a millionth of the tail mass it is the difference of)
    the bracket is still within 1e-12 relative, and inside single-bin's wider one."""
    mech = ShuffledKRR(n=1_000_000, k=2, eps0=0.5)
    for a in (0, 1, 2, 50):
        ours = k2_family_value(mech, a, 0.0013)
        theirs = SingleBin(a).bracket(mech, 0.0013)
        assert ours is not None
        assert theirs.lower <= ours.lower <= ours.upper <= theirs.upper
        assert ours.upper - ours.lower <= 1e-12 * ours.upper
