"""The largest-group bound (accountant/bounds/largest_group.py) against the brute-force mpmath reference
tests/reference/largest_group_reference.py, and that reference against its defining facts.

The reference is checked first: Delta_w(0) is the optimal-blanket view (OptimalBlanket's
bracket), Delta_w(m) does not increase with m, Delta_w(n - 1) is the exact delta of the dataset
"all n - 1 others hold w" (tests/reference/oracle.py), the x1 and other third-value groups give
the same values as x0 and 2 (why two types suffice), and the bound is >= the exhaustive worst
case. Then the production group_view_delta, minimum_group_size and LargestGroup must bracket the
reference (at most 1e-9 relative wide).
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any

import mpmath
import pytest

from shuffledp.accountant import OptimalBlanket, ShuffledKRR
from tests.reference import largest_group_reference as ref
from tests.reference import oracle

pytestmark = pytest.mark.slow

#: the production bracket must be at most this wide (upper / lower - 1)
WIDTH = 1e-9
#: relative slack of the reference against OptimalBlanket and the float reference values
REL = 1e-9
#: relative slack of 80-digit comparisons that may hold with equality (rounding only)
with mpmath.workdps(oracle.DPS):
    SLACK = mpmath.mpf("1e-60")
    TIGHT = mpmath.mpf("1e-70")

SIZES = [(n, k) for n in (3, 5, 7) for k in (2, 3, 4)]
EPS0S = (0.5, 2.0)
SMALL = [
    (n, k, eps0, eps)
    for (n, k), eps0 in itertools.product(SIZES, EPS0S)
    for eps in (0.1, 0.4 * eps0, 0.9 * eps0)
]
#: (n, k, eps0, eps) where only m_min is compared (a Delta at k = 4, n = 33 takes about 2 s)
LARGER = [(30, 3, 2.0, 0.8), (40, 3, 0.5, 0.2), (33, 4, 1.0, 0.4)]


def _id(case: tuple[Any, ...]) -> str:
    n, k, eps0, eps = case
    return f"n{n}-k{k}-eps0_{eps0:g}-eps_{eps:g}"


def holders(k: int) -> tuple[str, ...]:
    return ("x0", "other") if k >= 3 else ("x0",)


@functools.cache
def reference(n: int, k: int, eps0: float, eps: float, holder: str, m: int) -> Any:
    """Delta_w(m) of the mpmath reference (cached: several tests use each value)."""
    return ref.group_view_delta(n, k, eps0, eps, holder, m)


def production() -> Any:
    """The production module (imported here, not skipped: a broken import must fail)."""
    from shuffledp.accountant.bounds import largest_group

    return largest_group


def assert_brackets(bracket: Any, value: Any) -> None:
    """``bracket`` contains the 80-digit ``value`` and is at most WIDTH relative wide."""
    with mpmath.workdps(oracle.DPS):
        assert mpmath.mpf(bracket.lower) <= value <= mpmath.mpf(bracket.upper), (bracket, value)
    assert bracket.lower > 0 and bracket.upper / bracket.lower - 1 <= WIDTH, bracket


def assert_near(bracket: Any, value: Any) -> None:
    """``value`` lies in ``bracket`` widened by REL relative on each side."""
    with mpmath.workdps(oracle.DPS):
        assert mpmath.mpf(bracket.lower) * (1 - mpmath.mpf(REL)) <= value, (bracket, value)
        assert value <= mpmath.mpf(bracket.upper) * (1 + mpmath.mpf(REL)), (bracket, value)


# ---------------------------------------------------------------------------------------------
# The reference against its defining facts


@pytest.mark.parametrize("case", SMALL, ids=_id)
def test_reference_at_m_zero_is_optimal_blanket(case: tuple[int, int, float, float]) -> None:
    """Expected: Delta_w(0) (no holders, every other user a blanket draw w.p. beta) equals the
    optimal-blanket bound, for both types (fact 1)."""
    n, k, eps0, eps = case
    blanket = OptimalBlanket().bracket(ShuffledKRR(n=n, k=k, eps0=eps0), eps)
    for holder in holders(k):
        assert_near(blanket, reference(n, k, eps0, eps, holder, 0))


@pytest.mark.parametrize("case", SMALL, ids=_id)
def test_reference_does_not_increase_with_m(case: tuple[int, int, float, float]) -> None:
    """Expected: Delta_w(m + 1) <= Delta_w(m) for every m (fact 2), up to 80-digit rounding."""
    n, k, eps0, eps = case
    for holder in holders(k):
        values = [reference(n, k, eps0, eps, holder, m) for m in range(n)]
        with mpmath.workdps(oracle.DPS):
            for m in range(n - 1):
                assert values[m + 1] <= values[m] * (1 + SLACK), (holder, m, values)


@pytest.mark.parametrize("case", SMALL, ids=_id)
def test_reference_at_m_max_is_the_dataset(case: tuple[int, int, float, float]) -> None:
    """Expected: Delta_w(n - 1) (r = 0, no uniform users) is the exact delta of the dataset where
    all n - 1 others hold w, from oracle.dataset_delta (fact 3)."""
    n, k, eps0, eps = case
    for holder in holders(k):
        others = (ref.HOLDER_VALUES[holder],) * (n - 1)
        exact = oracle.dataset_delta(others, k, eps0, eps)
        value = reference(n, k, eps0, eps, holder, n - 1)
        with mpmath.workdps(oracle.DPS):
            assert abs(value - exact) <= TIGHT * exact, (holder, value, exact)


@pytest.mark.parametrize("case", [c for c in SMALL if c[1] >= 3], ids=_id)
def test_reference_two_types_suffice(case: tuple[int, int, float, float]) -> None:
    """Expected: a group holding x1 gives Delta_x0 (swapping x0 and x1 swaps P and Q) and one
    holding any value >= 2 gives Delta_other (relabelling the third values), at m = 1 and m_min."""
    n, k, eps0, eps = case
    for m in sorted({1, ref.minimum_group_size(n, k)}):
        x0 = reference(n, k, eps0, eps, "x0", m)
        other = reference(n, k, eps0, eps, "other", m)
        same = [(1, x0)] + [(v, other) for v in range(3, k)]
        with mpmath.workdps(oracle.DPS):
            for value, expected in same:
                got = ref.value_view_delta(n, k, eps0, eps, value, m)
                assert abs(got - expected) <= TIGHT * expected, (value, m)


@pytest.mark.parametrize("case", SMALL, ids=_id)
def test_reference_bound_is_above_the_worst_case(case: tuple[int, int, float, float]) -> None:
    """Expected: the largest-group bound is a valid upper bound: >= the exhaustive worst case
    over every dataset of the other n - 1 users (oracle.worst_case_delta)."""
    n, k, eps0, eps = case
    m = ref.minimum_group_size(n, k)
    bound = max(reference(n, k, eps0, eps, holder, m) for holder in holders(k))
    worst, witness = oracle.worst_case_delta(n, k, eps0, eps)
    with mpmath.workdps(oracle.DPS):
        assert bound >= worst * (1 - SLACK), (bound, worst, witness)


def test_reference_minimum_group_size() -> None:
    for n, k in itertools.product(range(1, 40), range(2, 16)):
        assert ref.minimum_group_size(n, k) == math.ceil((n - 1) / k)


# ---------------------------------------------------------------------------------------------
# Production against the reference


@pytest.mark.parametrize("case", SMALL, ids=_id)
def test_production_group_view_delta_small(case: tuple[int, int, float, float]) -> None:
    """Expected: the mpmath Delta_w(m) for every type and every m in [0, n - 1]."""
    lg = production()
    n, k, eps0, eps = case
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    for holder in holders(k):
        for m in range(n):
            assert_brackets(
                lg.group_view_delta(mech, eps, holder, m), reference(n, k, eps0, eps, holder, m)
            )


@pytest.mark.parametrize("case", LARGER, ids=_id)
def test_production_group_view_delta_larger(case: tuple[int, int, float, float]) -> None:
    """Expected: the mpmath Delta_w(m_min) for both types, at n = 30..40."""
    lg = production()
    n, k, eps0, eps = case
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    m = ref.minimum_group_size(n, k)
    for holder in holders(k):
        assert_brackets(
            lg.group_view_delta(mech, eps, holder, m), reference(n, k, eps0, eps, holder, m)
        )


def test_production_minimum_group_size() -> None:
    lg = production()
    for n, k in itertools.product(range(2, 60), range(2, 20)):
        assert lg.minimum_group_size(n, k) == math.ceil((n - 1) / k), (n, k)


@pytest.mark.parametrize("case", SMALL + LARGER, ids=_id)
def test_production_largest_group(case: tuple[int, int, float, float]) -> None:
    """Expected: max over the types (other only for k >= 3) of the mpmath Delta_w(m_min)."""
    lg = production()
    n, k, eps0, eps = case
    m = ref.minimum_group_size(n, k)
    expected = max(reference(n, k, eps0, eps, holder, m) for holder in holders(k))
    assert_brackets(lg.LargestGroup().bracket(ShuffledKRR(n=n, k=k, eps0=eps0), eps), expected)


def test_production_rejects_bad_arguments() -> None:
    """Expected: ValueError for an unknown type, "other" at k = 2, and m outside [0, n - 1]."""
    lg = production()
    with pytest.raises(ValueError):
        lg.group_view_delta(ShuffledKRR(n=5, k=3, eps0=1.0), 0.5, "x1", 1)
    with pytest.raises(ValueError):
        lg.group_view_delta(ShuffledKRR(n=5, k=2, eps0=1.0), 0.5, "other", 1)
    for m in (-1, 5):
        with pytest.raises(ValueError):
            lg.group_view_delta(ShuffledKRR(n=5, k=3, eps0=1.0), 0.5, "x0", m)


def test_production_reference_values_n100_k15() -> None:
    """Expected values (an independent numpy computation), n = 100, k = 15, eps0 = 2, eps = 1:
    m_min = 7, Delta_other(7) = 1.1000298065e-10, Delta_x0(7) = 3.5239363461e-11, so
    largest-group = Delta_other(7); optimal-blanket 1.2274235219e-10 is above it and the
    dataset "all others hold 2" (F(0), 8.10625108754638e-11) below it."""
    lg = production()
    mech = ShuffledKRR(n=100, k=15, eps0=2.0)
    assert lg.minimum_group_size(100, 15) == 7
    with mpmath.workdps(oracle.DPS):
        other, x0 = mpmath.mpf("1.1000298065e-10"), mpmath.mpf("3.5239363461e-11")
        blanket, family = mpmath.mpf("1.2274235219e-10"), mpmath.mpf("8.10625108754638e-11")
    for holder, value in (("other", other), ("x0", x0)):
        bracket = lg.group_view_delta(mech, 1.0, holder, 7)
        assert_near(bracket, value)
        assert bracket.lower > 0 and bracket.upper / bracket.lower - 1 <= WIDTH, bracket
    bound = lg.LargestGroup().bracket(mech, 1.0)
    assert_near(bound, other)
    optimal = OptimalBlanket().bracket(mech, 1.0)
    assert_near(optimal, blanket)
    assert family < bound.lower and bound.upper < optimal.lower, (bound, optimal)
