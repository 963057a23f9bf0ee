"""Every bound against the exhaustive oracle (docs/accounting.md, "The exhaustive oracle").

For n <= 7 and k <= 4 the true worst-case delta of the released histogram is computed by
tests/reference/oracle.py: every dataset of the other n-1 users, the exact histogram law by dynamic
programming, 80-digit mpmath. Valid upper bounds must be >= it, lower bounds <= it, at every eps.

One contract class per interface (upper bound, lower bound), subclassed per implementation.
"""

from __future__ import annotations

import functools
import itertools
import math

import mpmath
import pytest

from shuffledp.accountant import (
    AllOthersX0,
    Bound,
    Clones,
    KRRClones,
    RenyiGirgis,
    ShuffledKRR,
    SingleBin,
    StrongAdversary,
    Tight,
    WangKRR,
)
from tests.reference import oracle

# (n, k) small enough to enumerate every dataset; eps0 and eps spread over the interesting range.
SIZES = [(2, 2), (3, 3), (4, 3), (5, 2), (5, 4), (7, 3), (7, 4)]
EPS0S = [0.5, 1.5, 3.0]
EPSS = [0.0, 0.1, 0.3, 1.0, 2.0]
CASES = [(n, k, e0, e) for (n, k) in SIZES for e0 in EPS0S for e in EPSS]


@functools.cache
def true_delta(n: int, k: int, eps0: float, eps: float) -> float:
    """The exact worst-case delta as a float rounded to nearest (80-digit computation)."""
    with mpmath.workdps(oracle.DPS):
        value, _ = oracle.worst_case_delta(n, k, mpmath.mpf(eps0), mpmath.mpf(eps))
        return float(value)


# Slack for comparing a rigorous float bracket with the 80-digit truth rounded to a float.
REL = 1e-12


class UpperBoundContract:
    """A valid upper bound: >= the true worst case everywhere, non-increasing in eps."""

    def make(self) -> Bound:
        raise NotImplementedError

    @pytest.mark.parametrize(("n", "k", "eps0", "eps"), CASES)
    def test_never_below_the_true_worst_case(self, n: int, k: int, eps0: float, eps: float) -> None:
        mech = ShuffledKRR(n=n, k=k, eps0=eps0)
        result = self.make().delta(mech, eps)
        truth = true_delta(n, k, eps0, eps)
        assert result.delta_upper >= truth * (1 - REL), (result, truth)
        assert result.delta == result.delta_upper

    @pytest.mark.parametrize(("n", "k", "eps0"), [(4, 3, 0.5), (7, 4, 1.5), (60, 5, 2.0)])
    def test_non_increasing_in_eps(self, n: int, k: int, eps0: float) -> None:
        mech = ShuffledKRR(n=n, k=k, eps0=eps0)
        values = [self.make().delta(mech, e).delta_upper for e in [0.0, 0.05, 0.2, 0.5, 1.0, 1.9]]
        assert all(a >= b for a, b in itertools.pairwise(values)), values


class LowerBoundContract:
    """A lower bound on the worst case: <= the true worst case everywhere."""

    def make(self) -> Bound:
        raise NotImplementedError

    def applies(self, k: int) -> bool:
        return True

    @pytest.mark.parametrize(("n", "k", "eps0", "eps"), CASES)
    def test_never_above_the_true_worst_case(self, n: int, k: int, eps0: float, eps: float) -> None:
        if not self.applies(k):
            pytest.skip("bound defined for k >= 3 only")
        mech = ShuffledKRR(n=n, k=k, eps0=eps0)
        lower = self.make().bracket(mech, eps).lower
        assert lower <= true_delta(n, k, eps0, eps) * (1 + REL) + 1e-300


class TestStrongAdversary(UpperBoundContract):
    def make(self) -> Bound:
        return StrongAdversary()


class TestClones(UpperBoundContract):
    def make(self) -> Bound:
        return Clones()


class TestKRRClones(UpperBoundContract):
    def make(self) -> Bound:
        return KRRClones()


class TestTightUpper(UpperBoundContract):
    def make(self) -> Bound:
        return Tight()


class TestRenyiGirgis(UpperBoundContract):
    """delta_upper >= the exact worst-case delta at every case (from
    tests/unit/accountant/test_renyi_girgis.py, whose other tests check the RDP curve itself)."""

    def make(self) -> Bound:
        return RenyiGirgis()


class TestWangKRRAsLowerBound(LowerBoundContract):
    def make(self) -> Bound:
        return WangKRR()

    def applies(self, k: int) -> bool:
        return k >= 3


class _MaxSingleBin(Bound):
    """max over every nx0 of the exact single-bin delta: a lower bound by post-processing."""

    name = "max-single-bin"

    def bracket(self, mech: ShuffledKRR, eps: float):  # type: ignore[no-untyped-def]
        brackets = [SingleBin(m).bracket(mech, eps) for m in range(mech.n)]
        return type(brackets[0])(max(b.lower for b in brackets), max(b.upper for b in brackets))


class TestSingleBinMaxAsLowerBound(LowerBoundContract):
    def make(self) -> Bound:
        return _MaxSingleBin()


class TestTightLower(LowerBoundContract):
    def make(self) -> Bound:
        return Tight()


@pytest.mark.parametrize(("n", "k", "eps0", "eps"), CASES)
def test_tight_bracket_contains_the_truth(n: int, k: int, eps0: float, eps: float) -> None:
    result = Tight().delta(ShuffledKRR(n=n, k=k, eps0=eps0), eps)
    truth = true_delta(n, k, eps0, eps)
    assert result.delta_lower <= truth * (1 + REL) + 1e-300
    assert truth * (1 - REL) <= result.delta_upper


def test_wang_krr_fails_as_an_upper_bound() -> None:
    """docs/accounting.md, "Reference values": n=4, k=3, eps0=0.5, eps=0.3. The dataset 'all other users hold x0'
    has delta 0.0124612 (exhaustive enumeration) and wang-krr gives only 0.0120398."""
    mech = ShuffledKRR(n=4, k=3, eps0=0.5)
    wang = WangKRR().bracket(mech, 0.3)
    assert wang.lower == pytest.approx(0.0120398, rel=1e-5)
    truth = true_delta(4, 3, 0.5, 0.3)
    assert truth == pytest.approx(0.0124612, rel=1e-5)
    assert wang.upper < truth
    # Tight never reports it as the guarantee: its upper side stays above the truth.
    assert Tight().delta(mech, 0.3).delta_upper >= truth


@pytest.mark.parametrize("bound", [Clones(), KRRClones(), WangKRR(), SingleBin(2)])
def test_exact_zero_at_and_above_eps0(bound: Bound) -> None:
    """k-RR is eps0-LDP, so every pair here has privacy loss <= eps0: delta is exactly 0."""
    mech = ShuffledKRR(n=5, k=3, eps0=1.25)
    for eps in [1.25, 1.3, 5.0]:
        b = bound.bracket(mech, eps)
        assert (b.lower, b.upper) == (0.0, 0.0)
    assert bound.bracket(mech, 1.2).upper > 0


def test_strong_adversary_is_never_zero() -> None:
    """P puts mass (1-pb)^(n-1)... on N2 = 0 after u's report, where Q has none: infinite loss."""
    mech = ShuffledKRR(n=5, k=3, eps0=1.0)
    assert StrongAdversary().bracket(mech, 30.0).lower > 0
    assert math.isinf(StrongAdversary().zero_from(mech))


class TestAllOthersX0AsLowerBound(LowerBoundContract):
    def make(self) -> Bound:
        return AllOthersX0()


@pytest.mark.parametrize(
    ("n", "k", "eps0", "eps"),
    [
        (n, k, e0, e)
        for (n, k) in [(2, 2), (3, 3), (4, 3), (5, 4), (6, 2), (7, 3)]
        for e0 in (0.5, 2.0)
        for e in (0.0, 0.3, 1.0)
    ],
)
def test_all_others_x0_is_that_datasets_exact_delta(
    n: int, k: int, eps0: float, eps: float
) -> None:
    """Against the oracle's full-histogram enumeration for others = (0, ..., 0): both directions."""
    with mpmath.workdps(oracle.DPS):
        d01, d10 = oracle.dataset_delta_pair((0,) * (n - 1), k, mpmath.mpf(eps0), mpmath.mpf(eps))
        truth = float(max(d01, d10))
    b = AllOthersX0().bracket(ShuffledKRR(n=n, k=k, eps0=eps0), eps)
    assert b.lower <= truth * (1 + REL) + 1e-300
    assert b.upper >= truth * (1 - REL)
    assert b.upper == pytest.approx(truth, rel=1e-9, abs=1e-300)


def test_tight_lower_reaches_the_worst_case_at_the_published_counterexample() -> None:
    """n=4, k=3, eps0=0.5, eps=0.3: the worst dataset is 'all others hold x0' (0.0124612, F(n - 1)), which
    the lower side now computes exactly, so the bracket's lower end is the truth."""
    result = Tight().delta(ShuffledKRR(n=4, k=3, eps0=0.5), 0.3)
    assert result.delta_lower == pytest.approx(true_delta(4, 3, 0.5, 0.3), rel=1e-9)
    assert result.extra["lower_from"] == "family-f(a=3)"  # F(n - 1): all others hold x0
