"""The two cases of issue 25 where tight's lower end missed the best F(a), against 60-digit
mpmath (tests/reference/references.py, the sufficient counts of F(a), both directions).

Before, above n = 24 tight tried a in {0, 1, 2, n - 3, n - 2, n - 1} (to n = 60) or {0, n - 1}:
at n = 30, k = 4, eps0 = 0.5, eps = 0.4 it reported F(27) = 4.2931e-11 where F(26) = 4.3182e-11,
and at n = 150, k = 3, eps0 = 4, eps = 3.2 F(0) where F(20) is 1.7 % higher.
"""

from __future__ import annotations

import mpmath

from shuffledp.accountant import ShuffledKRR, Tight
from tests.reference import references


def reference(n: int, k: int, eps0: float, eps: float, a: int) -> mpmath.mpf:
    (pq, qp) = references.family_f_directions_many(n, k, eps0, [eps], a)[0]
    return max(pq, qp)


def close(value: float, ref: mpmath.mpf) -> bool:
    with mpmath.workdps(references.DPS):
        return bool(abs(mpmath.mpf(value) / ref - 1) <= mpmath.mpf("1e-9"))


def test_n30_lower_end_is_f26_the_best_of_every_a() -> None:
    """mpmath over every a: F(26) = 4.3182e-11 is the largest (F(27) = 4.2931e-11), and tight's
    lower end is F(26) to 1e-9."""
    n, k, eps0, eps = 30, 4, 0.5, 0.4
    refs = [reference(n, k, eps0, eps, a) for a in range(n)]
    best = max(range(n), key=lambda a: refs[a])
    assert best == 26
    assert abs(refs[26] - mpmath.mpf("4.3182e-11")) < mpmath.mpf("1e-15")
    assert abs(refs[27] - mpmath.mpf("4.2931e-11")) < mpmath.mpf("1e-15")
    result = Tight().delta(ShuffledKRR(n=n, k=k, eps0=eps0), eps)
    assert result.extra["lower_from"] == "family-f(a=26)"
    assert close(result.delta_lower, refs[26])


def test_n150_k3_lower_end_is_f20_not_an_end() -> None:
    """mpmath at the ends and at a = 20 (1.8 s each): F(20) is 1.67 % above max(F(0), F(149));
    tight's lower end is F(20) to 1e-9 (it reported F(0) before). That the lower end is the best
    of every a is checked against an independent evaluation of every a at n = 26 to 45
    (tests/unit/accountant/test_family_counts.py)."""
    n, k, eps0, eps = 150, 3, 4.0, 3.2
    refs = {a: reference(n, k, eps0, eps, a) for a in (0, 20, 149)}
    gain = refs[20] / max(refs[0], refs[149])
    assert 1.016 < gain < 1.018, gain
    result = Tight().delta(ShuffledKRR(n=n, k=k, eps0=eps0), eps)
    assert result.extra["lower_from"] == "family-f(a=20)"
    assert close(result.delta_lower, refs[20])
