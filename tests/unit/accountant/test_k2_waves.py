"""accountant/engines/k2_waves.py: the k = 2 certificate in waves of batched contour evaluations,
against the maximum of F(a) over every a (each by k2_exact, itself checked against 60-digit
mpmath in tests/reference/test_k2_exact.py) and against the one-by-one certificate."""

from __future__ import annotations

import itertools

import pytest

from shuffledp.accountant import ShuffledKRR
from shuffledp.accountant.engines.k2_exact import EXTENDED, k2_family_value
from shuffledp.accountant.engines.k2_waves import segments
from shuffledp.accountant.worst_case import family

pytestmark = pytest.mark.skipif(not EXTENDED, reason="needs an extended long double (x86)")


@pytest.mark.parametrize(("near", "half"), [(64, 65), (64, 1000), (3, 499_999), (10, 11)])
def test_segments_cover_the_range_once_per_direction(near: int, half: int) -> None:
    for forward in (True, False):
        spans = [(s.position, s.end) for s in segments(near, half) if s.forward is forward]
        assert spans[0][0] == near + 1 and spans[-1][1] == half
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start == end + 1


@pytest.mark.slow  # 3-7 s each: every a of n = 3000 by k2_exact
@pytest.mark.parametrize(("n", "eps0", "eps"), [(3000, 0.5, 0.05), (3000, 4.0, 0.3)])
def test_waves_contain_the_maximum_over_every_a(n: int, eps0: float, eps: float) -> None:
    """max over every a of F(a) (k2_exact, one by one) is inside the certificate's bracket,
    which is at most 1e-9 wide; the certificate ran in waves (the one-by-one blocks were
    never asked)."""
    mech = ShuffledKRR(n=n, k=2, eps0=eps0)
    values = [k2_family_value(mech, a, eps) for a in range((n - 1) // 2 + 1)]
    assert all(v is not None for v in values)
    truth_low = max(v.lower for v in values if v is not None)
    truth_high = max(v.upper for v in values if v is not None)
    got, _ = family._k2_worst_case(mech, eps)
    assert got.lower <= truth_high and truth_low <= got.upper
    assert got.upper <= got.lower * (1 + 1e-9)


@pytest.mark.slow  # 6 s
def test_waves_out_of_work_stay_valid() -> None:
    """With no work allowed after the exact a <= 64, each segment's rest is bounded as one
    block: wider, but still above the maximum over every a."""
    mech = ShuffledKRR(n=3000, k=2, eps0=0.5)
    eps = 0.05
    values = [k2_family_value(mech, a, eps) for a in range(1500)]
    truth = max(v.upper for v in values if v is not None)
    got, _ = family._k2_worst_case(mech, eps, work=0)
    assert got.upper >= truth
    assert got.lower <= truth


def test_waves_agree_with_the_one_by_one_certificate(monkeypatch: pytest.MonkeyPatch) -> None:
    """n = 20,000, eps0 = 0.5 near delta = 1e-6: the same best a, and brackets that overlap."""
    mech = ShuffledKRR(n=20_000, k=2, eps0=0.5)
    eps = 0.0097
    waves, a_waves = family._k2_worst_case(mech, eps)
    monkeypatch.setattr(family, "_k2_waves", lambda *args: None)
    blocks, a_blocks = family._k2_worst_case(mech, eps)
    assert a_waves == a_blocks
    assert waves.lower <= blocks.upper and blocks.lower <= waves.upper
