"""F(a) for every a at once (accountant/engines/family_counts.py) and the lower end as the best member.

Expected values: tests/reference/references.py (60-digit mpmath, the sufficient counts of F(a),
both directions) at small n, and tests/reference/family_dp.py (the previous production code: a
log-space dynamic programme over users for one a, with its own rounding bound) at n = 26 to 45.
"""

from __future__ import annotations

import mpmath
import pytest

from shuffledp.accountant import ShuffledKRR, Tight
from shuffledp.accountant.engines.family_counts import family_all
from shuffledp.accountant.tight import DOMINATED_WIDTH
from shuffledp.accountant.worst_case.family import FamilyF, candidates, family_delta
from tests.reference import references
from tests.reference.family_dp import dp_delta

#: The production bracket must contain the reference up to this relative slack, and be at most
#: WIDTH wide (relative), where the value is in the normal range.
SLACK = 1e-12
WIDTH = 1e-9

SMALL = [
    (n, k, e0)
    for n, k in [(3, 3), (6, 3), (9, 4), (12, 4), (8, 7), (11, 15)]
    for e0 in (0.5, 2.0, 8.0)
] + [(9, 4, 0.01), (12, 5, 0.05), (10, 3, 30.0)]  # near-cancelling coefficients, tiny pb


@pytest.mark.parametrize(("n", "k", "eps0"), SMALL)
def test_every_a_brackets_the_mpmath_reference(n: int, k: int, eps0: float) -> None:
    """Every a at eps = 0.01, 0.3 eps0 and 0.95 eps0: the 60-digit value is inside the bracket,
    which is at most 1e-9 wide."""
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    epss = [0.01, 0.3 * eps0, 0.95 * eps0]
    for a in range(n):
        refs = references.family_f_directions_many(n, k, eps0, epss, a)
        for eps, (pq, qp) in zip(epss, refs, strict=True):
            b = family_all(mech, eps)[a]
            with mpmath.workdps(references.DPS):
                ref = max(pq, qp)
                assert mpmath.mpf(b.lower) * (1 - SLACK) <= ref <= mpmath.mpf(b.upper) * (1 + SLACK)
            if ref > 1e-300:
                assert b.lower > 0 and b.upper / b.lower - 1 <= WIDTH, (a, eps, b)


@pytest.mark.parametrize(
    ("n", "k", "eps0", "eps"),
    [(26, 5, 2.0, 1.9), (30, 4, 0.5, 0.4), (40, 3, 4.0, 3.2), (45, 10, 1.0, 0.5)],
)
def test_every_a_agrees_with_the_dynamic_programme(n: int, k: int, eps0: float, eps: float) -> None:
    """The brackets of every a overlap those of the per-a dynamic programme, and their midpoints
    agree to 1e-9."""
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    every = family_all(mech, eps)
    for a in range(n):
        ref, b = dp_delta(mech, a, eps), every[a]
        assert b.lower <= ref.upper and ref.lower <= b.upper, (a, b, ref)
        mid, ref_mid = (b.lower + b.upper) / 2, (ref.lower + ref.upper) / 2
        assert abs(mid / ref_mid - 1) <= 1e-9, (a, b, ref)


@pytest.mark.parametrize(
    ("n", "k", "eps0", "epss"),
    [
        (30, 4, 0.5, (0.1, 0.25, 0.4)),
        (26, 5, 2.0, (0.5, 1.5, 1.9)),
        (40, 3, 4.0, (1.0, 3.2, 3.9)),
        (33, 10, 1.0, (0.2, 0.9)),
    ],
)
def test_lower_end_is_the_best_member_of_the_family(
    n: int, k: int, eps0: float, epss: tuple[float, ...]
) -> None:
    """Property: tight's lower end and FamilyF's best reach max over every a of the per-a dynamic
    programme (tests/reference/family_dp.py) to its bracket; tight's only where its bracket is not
    already narrow (then within DOMINATED_WIDTH). Here n > 24, where tight used to try
    a in {0, 1, 2, n - 3, n - 2, n - 1} only."""
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    assert sorted(candidates(mech)) == list(range(n))
    for eps in epss:
        per_a = [dp_delta(mech, a, eps) for a in range(n)]
        best = max(per_a, key=lambda b: b.lower)
        family, a = FamilyF().best(mech, eps)
        assert family.lower >= best.lower * (1 - 1e-9), (eps, a, family, best)
        assert family.lower <= max(b.upper for b in per_a)
        assert family_delta(mech, a, eps) == family
        result = Tight().delta(mech, eps)
        slack = DOMINATED_WIDTH if result.delta_upper <= result.delta_lower * 1.001 else 1e-9
        assert result.delta_lower >= best.lower * (1 - slack), (eps, result, best)
