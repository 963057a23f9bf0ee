"""Every bound with a kind, and the F(a) family, against the exhaustive worst case.

The truth is tests/reference/oracle_float.py: every dataset of the other n - 1 users, the full histogram,
both directions, float64 with a rigorous bracket [lower, upper] for its own rounding; that oracle
is itself checked here against the 80-digit mpmath oracle tests/reference/oracle.py at small n. A valid
upper bound must be >= the truth and a lower bound <= it, allowing the oracle's error on the
safe side only: upper >= truth.lower, lower <= truth.upper (docs/accounting.md sections 2-4).

One shared contract class for the interface "a bound with a kind" (as dp_accounting's shared
test classes), instantiated for every name in BOUND_NAMES whose bound is of kind upper or lower,
so a bound added to the registry is tested here without editing this file. Names that need a
parameter (--nx0) are left out; evaluations that raise OutsideConditionsError (the analytic
bounds, outside the conditions under which they were proved) are not compared but counted: a case
with none left is skipped with the count in its reason, a case with some left warns the count.

The production classes FamilyF(a) and OptimalBlanket are looked up at run time: where they do not
exist yet the tests that need them skip (with the reason).
"""

from __future__ import annotations

import functools
import importlib
import itertools
import warnings
from typing import Any

import mpmath
import pytest

from shuffledp.accountant import (
    BOUND_NAMES,
    Bound,
    BoundKind,
    InvalidParameterError,
    OutsideConditionsError,
    ShuffledKRR,
    make_bound,
    needs_nx0,
)
from tests.reference import oracle, oracle_float, references

# ---------------------------------------------------------------------------------------------
# The exhaustive cases

EPS0S = (0.2, 0.5, 1.0, 2.0, 4.0, 8.0)
EPS_FRACTIONS = (0.1, 0.25, 0.5, 0.75, 0.9, 0.99)
FAST_SIZES = [
    (2, 2),
    (5, 2),
    (9, 2),
    (12, 2),
    (3, 3),
    (6, 3),
    (9, 3),
    (12, 3),
    (4, 4),
    (7, 4),
    (10, 4),
    (12, 4),
]
SLOW_SIZES = [(30, 2), (30, 3), (20, 4), (30, 4)]


def eps_grid(eps0: float) -> tuple[float, ...]:
    """0.01 and fractions of eps0 from 0.1 to 0.99 (just below eps0)."""
    values = {0.01} | {round(f * eps0, 12) for f in EPS_FRACTIONS}
    return tuple(sorted(e for e in values if 0.01 <= e < eps0))


def _cases(sizes: list[tuple[int, int]], *marks: Any) -> list[Any]:
    return [
        pytest.param(n, k, e0, marks=marks, id=f"n{n}-k{k}-eps0_{e0}")
        for (n, k), e0 in itertools.product(sizes, EPS0S)
    ]


CASES = _cases(FAST_SIZES) + _cases(SLOW_SIZES, pytest.mark.slow)


@functools.cache
def truth(n: int, k: int, eps0: float) -> tuple[oracle_float.CaseResult, ...]:
    """The exhaustive worst case at every eps of eps_grid(eps0)."""
    return oracle_float.worst_case(n, k, eps0, eps_grid(eps0))


def production(name: str) -> Any:
    """shuffledp.accountant.<name>, or skip the test while it does not exist."""
    cls = getattr(importlib.import_module("shuffledp.accountant"), name, None)
    if cls is None:
        pytest.skip(f"shuffledp.accountant.{name} does not exist yet")
    return cls


# ---------------------------------------------------------------------------------------------
# The float oracle against the 80-digit mpmath oracle

ORACLE_CHECKS = [(4, 3, 0.5), (5, 2, 2.0), (5, 4, 1.0), (6, 3, 8.0), (4, 4, 4.0), (6, 2, 0.2)]


@pytest.mark.parametrize(("n", "k", "eps0"), ORACLE_CHECKS)
def test_float_oracle_brackets_the_mpmath_oracle(n: int, k: int, eps0: float) -> None:
    """Expected values: tests/reference/oracle.py (every dataset, DP over users, 80 digits). The 80-digit
    worst case lies in the float oracle's bracket, within 1e-9 relative of its estimate, and
    every single dataset's 80-digit delta lies in that dataset's float bracket."""
    epss = (0.01, round(0.5 * eps0, 12), round(0.99 * eps0, 12))
    for case in oracle_float.worst_case(n, k, eps0, epss):
        with mpmath.workdps(oracle.DPS):
            exact, _ = oracle.worst_case_delta(n, k, eps0, case.eps)
            assert case.lower <= exact <= case.upper, (case, exact)
            assert abs(case.delta - exact) <= mpmath.mpf("1e-9") * exact
            witness = oracle.dataset_delta(oracle_float.others_of(case.witness), k, eps0, case.eps)
            assert abs(witness - exact) <= mpmath.mpf("1e-9") * exact
    for counts, values in oracle_float.evaluate_datasets(n, k, eps0, epss):
        for e, (est, lo, hi) in zip(epss, values, strict=True):
            with mpmath.workdps(oracle.DPS):
                exact = oracle.dataset_delta(oracle_float.others_of(counts), k, eps0, e)
                assert lo <= exact <= hi, (counts, e, lo, exact, hi)
                assert abs(est - exact) <= mpmath.mpf("1e-9") * exact


def test_float_oracle_rounding_error_is_small() -> None:
    """The oracle's own stated error (its bracket's relative half-width) over the fast grid: at
    most 1e-9, so the comparisons below are decided by the bounds, not by the oracle."""
    widths = [c.rel_error for n, k in FAST_SIZES for e0 in EPS0S for c in truth(n, k, e0)]
    assert max(widths) <= 1e-9, max(widths)


# ---------------------------------------------------------------------------------------------
# The shared contract: a bound with a kind


class BoundWithKindContract:
    """A bound of kind upper is >= the worst case, a bound of kind lower is <= it, at every eps of
    every exhaustive case. Expected values: tests/reference/oracle_float.py (exhaustive, bracketed)."""

    name: str

    def bound(self) -> Bound:
        return make_bound(self.name)

    @pytest.mark.parametrize(("n", "k", "eps0"), CASES)
    def test_on_the_right_side_of_the_worst_case(self, n: int, k: int, eps0: float) -> None:
        bound = self.bound()
        mech = ShuffledKRR(n=n, k=k, eps0=eps0)
        kind = bound.kind_for(mech)
        if kind not in (BoundKind.UPPER, BoundKind.LOWER):
            pytest.skip(f"{self.name} is {kind} at k={k}: no side to check")
        done = 0
        for case in truth(n, k, eps0):
            try:
                result = bound.delta(mech, case.eps)
            except OutsideConditionsError:
                continue
            done += 1
            where = f"{self.name} at n={n}, k={k}, eps0={eps0}, eps={case.eps}: {result}, {case}"
            if kind is BoundKind.UPPER:
                assert result.delta >= case.lower, where
                assert result.delta_upper >= case.lower, where
            else:
                assert result.delta <= case.upper, where
                assert result.delta_lower <= case.upper, where
        outside = len(truth(n, k, eps0)) - done
        if not done:
            pytest.skip(f"{self.name}: outside its conditions at all {outside} eps of this case")
        if outside:
            warnings.warn(
                f"{self.name}: {outside} of {outside + done} eps outside its conditions "
                f"at n={n}, k={k}, eps0={eps0}",
                stacklevel=1,
            )


def _kind(name: str) -> BoundKind | None:
    try:
        return make_bound(name).kind
    except InvalidParameterError:  # needs a parameter this module cannot choose
        return None


CONTRACT_NAMES = [
    name
    for name in BOUND_NAMES
    if not needs_nx0(name) and _kind(name) in (BoundKind.UPPER, BoundKind.LOWER)
]

for _name in CONTRACT_NAMES:
    _cls = "Test" + "".join(part.title() for part in _name.split("-"))
    globals()[_cls] = type(_cls, (BoundWithKindContract,), {"name": _name})


def test_contract_covers_the_upper_and_lower_bounds() -> None:
    """Expected: the registry (shuffledp.accountant.BOUND_NAMES) itself; every name left out of the
    contract is one that needs --nx0 or is of another kind (bracket, dataset-specific,
    not-a-guarantee)."""
    left_out = [name for name in BOUND_NAMES if name not in CONTRACT_NAMES]
    for name in left_out:
        assert needs_nx0(name) or _kind(name) not in (BoundKind.UPPER, BoundKind.LOWER), name
    assert {"strong-adversary", "clones", "krr-clones", "wang-krr"} <= set(CONTRACT_NAMES)


# ---------------------------------------------------------------------------------------------
# Where the worst case lives: the F(a) family


@pytest.mark.parametrize(("n", "k", "eps0"), CASES)
def test_the_worst_dataset_is_an_f_dataset(n: int, k: int, eps0: float) -> None:
    """Expected values: the oracle's own worst case over all datasets and over the F(a) datasets
    (tests/reference/oracle_float.py), and tests/reference/references.py's family_f_directions at the best a (mpmath,
    sufficient counts). The best F(a) reaches the worst case (brackets overlap: a dataset
    outside the family may tie, as all 'rest-only' datasets do at small eps), and the oracle's
    value of that F(a) agrees with the independent reference to 1e-9."""
    cases = truth(n, k, eps0)
    for case in cases:
        assert case.family_upper >= case.lower, f"F(a) below the worst case: {case}"
    for a in sorted({c.family_a for c in cases}):
        at_a = [c for c in cases if c.family_a == a]
        refs = references.family_f_directions_many(n, k, eps0, [c.eps for c in at_a], a)
        for case, (pq, qp) in zip(at_a, refs, strict=True):
            with mpmath.workdps(references.DPS):
                ref = max(pq, qp)
                assert ref <= case.family_upper
                assert abs(case.family_delta - ref) <= mpmath.mpf("1e-9") * ref, (case, ref)


@pytest.mark.parametrize(
    ("n", "k", "eps0"), [(n, k, e0) for n, k in FAST_SIZES[:10] for e0 in EPS0S]
)
def test_max_over_a_of_the_f_reference_is_the_worst_case(n: int, k: int, eps0: float) -> None:
    """Expected values: tests/reference/oracle_float.py (exhaustive). max over every a of the mpmath F(a)
    reference (tests/reference/references.py) lies in the oracle's bracket of the worst case."""
    cases = truth(n, k, eps0)
    per_a = [
        references.family_f_directions_many(n, k, eps0, [c.eps for c in cases], a) for a in range(n)
    ]
    for i, case in enumerate(cases):
        best = max(max(per_a[a][i]) for a in range(n))
        assert case.lower <= best <= case.upper, (case, best)


@pytest.mark.parametrize(("n", "k", "eps0"), CASES)
def test_production_family_f_max_is_the_worst_case(n: int, k: int, eps0: float) -> None:
    """Expected values: tests/reference/oracle_float.py (exhaustive). Every FamilyF(a) is a concrete
    dataset's delta (<= the worst case) and the maximum over a reaches the worst case."""
    family_f = production("FamilyF")
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    for case in truth(n, k, eps0):
        brackets = [family_f(a).bracket(mech, case.eps) for a in range(n)]
        where = f"n={n}, k={k}, eps0={eps0}, eps={case.eps}: {case}"
        assert max(b.lower for b in brackets) <= case.upper, where
        assert max(b.upper for b in brackets) >= case.lower, where


def test_production_family_f_rejects_a_outside_range() -> None:
    """Expected: the brief's interface, InvalidParameterError for a outside [0, n-1]."""
    family_f = production("FamilyF")
    mech = ShuffledKRR(n=5, k=3, eps0=1.0)
    for a in (-1, 5, 100):
        with pytest.raises(InvalidParameterError):
            family_f(a).bracket(mech, 0.5)


# ---------------------------------------------------------------------------------------------
# The optimal-blanket upper bound (its reference and the production class) at small n


@pytest.mark.parametrize(("n", "k", "eps0"), CASES)
def test_optimal_blanket_reference_is_an_upper_bound(n: int, k: int, eps0: float) -> None:
    """Expected values: tests/reference/oracle_float.py (exhaustive). The reference G-form of Su, Cheng,
    Wang (docs/accounting.md, "optimal-blanket", tests/reference/references.py) is >= the worst case."""
    for case in truth(n, k, eps0):
        value = references.optimal_blanket_reference(n, k, eps0, case.eps)
        assert value >= case.lower, (case, value)


@pytest.mark.parametrize(("n", "k", "eps0"), CASES)
def test_production_optimal_blanket_is_an_upper_bound(n: int, k: int, eps0: float) -> None:
    """Expected values: tests/reference/oracle_float.py (exhaustive). OptimalBlanket's upper end is >= the
    worst case (also covered by the contract once it is registered as "optimal-blanket")."""
    optimal_blanket = production("OptimalBlanket")
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    for case in truth(n, k, eps0):
        assert optimal_blanket().bracket(mech, case.eps).upper >= case.lower, case
