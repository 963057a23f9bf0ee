"""Every bound with a kind, and the F(a) family, against the exhaustive worst case.

The truth is tests/reference/oracle_float.py: every dataset of the other n - 1 users, the full histogram,
both directions, float64 with a rigorous bracket [lower, upper] for its own rounding; that oracle
is itself checked here against the 80-digit mpmath oracle tests/reference/oracle.py at small n. A valid
upper bound must be >= the truth and a lower bound <= it, allowing the oracle's error on the
safe side only: upper >= truth.lower, lower <= truth.upper (docs/accounting.md sections 2-4).

One shared contract for the interface "a bound with a kind", checked per exhaustive case for
every name in BOUND_NAMES whose bound is of kind upper or lower (one test per case, looping over
the names), so a bound added to the registry is tested here without editing this file. Names that need a
parameter (--nx0) are left out; evaluations that raise OutsideConditionsError (the analytic
bounds, outside the conditions under which they were proved) are not compared but counted: a case
with none left fails with the count (list the bound in LARGE_N_ONLY), a case with some left
warns the count.

Two bounds refuse every exhaustive case by their own conditions (LARGE_N_ONLY: erlingsson needs
n >= 1000, blanket-analytic eps >= 27 / ((n - 1) pb) > 1 at n <= 30): they are checked instead
against the exact deltas of the datasets F(0) and F(n - 1) (so below the worst case) at n from
1e3 to 1e5 where they apply.
"""

from __future__ import annotations

import functools
import itertools
import math
import warnings
from typing import Any

import mpmath
import pytest

from shuffledp.accountant import (
    BOUND_NAMES,
    AllOthersX0,
    Bound,
    BoundKind,
    Clones,
    FamilyF,
    InvalidParameterError,
    KRRClones,
    OutsideConditionsError,
    ShuffledKRR,
    SingleBin,
    StrongAdversary,
    Tight,
    WangKRR,
    make_bound,
    needs_nx0,
)
from shuffledp.accountant.engines.pairs import Bracket
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

#: Bounds whose conditions exclude every exhaustive case (see the module docstring).
LARGE_N_ONLY = ("erlingsson", "blanket-analytic")


def _on_its_side(name: str, n: int, k: int, eps0: float) -> None:
    """A bound of kind upper is >= the worst case (and reports its upper end as delta), a bound
    of kind lower is <= it, at every eps of the case where it applies."""
    bound = make_bound(name)
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    kind = bound.kind_for(mech)
    assert kind in (BoundKind.UPPER, BoundKind.LOWER), f"{name} is {kind} at k={k}"
    done = 0
    for case in truth(n, k, eps0):
        try:
            result = bound.delta(mech, case.eps)
        except OutsideConditionsError:
            continue
        done += 1
        where = f"{name} at n={n}, k={k}, eps0={eps0}, eps={case.eps}: {result}, {case}"
        if kind is BoundKind.UPPER:
            assert result.delta >= case.lower, where
            assert result.delta_upper >= case.lower, where
            assert result.delta == result.delta_upper, where
        else:
            assert result.delta <= case.upper, where
            assert result.delta_lower <= case.upper, where
    outside = len(truth(n, k, eps0)) - done
    # A case where the bound applies at no eps checks nothing: list the bound in LARGE_N_ONLY.
    assert done, f"{name}: outside its conditions at all {outside} eps of this case"
    if outside:
        warnings.warn(
            f"{name}: {outside} of {outside + done} eps outside its conditions "
            f"at n={n}, k={k}, eps0={eps0}",
            stacklevel=1,
        )


@pytest.mark.parametrize(("n", "k", "eps0"), CASES)
def test_every_bound_with_a_kind_is_on_its_side_of_the_worst_case(
    n: int, k: int, eps0: float
) -> None:
    """The contract "a bound with a kind" for every registry name of kind upper or lower
    (CONTRACT_NAMES, less LARGE_N_ONLY), so a bound added to the registry is tested here without
    editing this file. Expected values: tests/reference/oracle_float.py (exhaustive,
    bracketed). (Each bound was one class of a shared contract, 96 tests each: one test per
    case now, naming the bound that fails.)"""
    for name in CONTRACT_NAMES:
        if name not in LARGE_N_ONLY:
            _on_its_side(name, n, k, eps0)


@pytest.mark.parametrize("name", LARGE_N_ONLY)
@pytest.mark.parametrize(
    ("n", "k", "eps0", "epss"),
    [
        (1000, 3, 0.5, (0.125, 0.25, 0.375, 0.45)),
        (100_000, 2, 0.5, (0.025, 0.05)),
        (100_000, 3, 0.5, (0.025, 0.05)),
    ],
)
def test_large_n_only_bounds_are_above_a_datasets_exact_delta(
    name: str, n: int, k: int, eps0: float, epss: tuple[float, ...]
) -> None:
    """Expected: max(F(0), F(n - 1)) (the exact deltas of two concrete datasets, every other user
    on a third value or on x0), a lower bound on the worst case, positive at these eps. An upper
    bound must not be below it at any eps where it applies; and it applies at some eps of each
    case (erlingsson needs eps0 <= 1/2, n >= 1000 and delta <= 0.01; blanket-analytic
    27 / ((n - 1) pb) <= eps <= 1)."""
    assert make_bound(name).kind is BoundKind.UPPER
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    done = 0
    for eps in epss:
        lower = max(FamilyF(a).bracket(mech, eps).lower for a in (0, n - 1))
        assert lower > 0.0, (n, k, eps0, eps)
        try:
            upper = make_bound(name).delta(mech, eps).delta_upper
        except OutsideConditionsError:
            continue
        done += 1
        assert upper >= lower, (name, n, k, eps0, eps, upper, lower)
    assert done, f"{name} applies at no eps of n={n}, k={k}, eps0={eps0}"


def test_contract_covers_the_upper_and_lower_bounds() -> None:
    """Expected: the registry (shuffledp.accountant.BOUND_NAMES) itself; every name left out of the
    contract is one that needs --nx0 or is of another kind (bracket, dataset-specific,
    not-a-guarantee)."""
    assert set(LARGE_N_ONLY) <= set(CONTRACT_NAMES)
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


@pytest.mark.parametrize(("n", "k", "eps0"), CASES)
def test_production_family_f_max_is_the_worst_case(n: int, k: int, eps0: float) -> None:
    """Expected values: tests/reference/oracle_float.py (exhaustive). Every FamilyF(a) is a concrete
    dataset's delta (<= the worst case) and the maximum over a reaches the worst case."""
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    for case in truth(n, k, eps0):
        brackets = [FamilyF(a).bracket(mech, case.eps) for a in range(n)]
        where = f"n={n}, k={k}, eps0={eps0}, eps={case.eps}: {case}"
        assert max(b.lower for b in brackets) <= case.upper, where
        assert max(b.upper for b in brackets) >= case.lower, where


def test_production_family_f_rejects_a_outside_range() -> None:
    """Expected: the brief's interface, InvalidParameterError for a outside [0, n-1]."""
    mech = ShuffledKRR(n=5, k=3, eps0=1.0)
    for a in (-1, 5, 100):
        with pytest.raises(InvalidParameterError):
            FamilyF(a).bracket(mech, 0.5)


# ---------------------------------------------------------------------------------------------
# The optimal-blanket upper bound (its reference and the production class) at small n


@pytest.mark.parametrize(("n", "k", "eps0"), CASES)
def test_optimal_blanket_reference_is_an_upper_bound(n: int, k: int, eps0: float) -> None:
    """Expected values: tests/reference/oracle_float.py (exhaustive). The reference G-form of Su, Cheng,
    Wang (docs/accounting.md, "optimal-blanket", tests/reference/references.py) is >= the worst case."""
    for case in truth(n, k, eps0):
        value = references.optimal_blanket_reference(n, k, eps0, case.eps)
        assert value >= case.lower, (case, value)


# ---------------------------------------------------------------------------------------------
# The 80-digit oracle's own cases (tests/reference/oracle.py; this was test_bounds_oracle.py, one
# contract class per bound, merged here: the bounds are the registry's, as above)

ORACLE_SIZES = [(2, 2), (3, 3), (4, 3), (5, 2), (5, 4), (7, 3), (7, 4)]
ORACLE_EPS0S = (0.5, 1.5, 3.0)
ORACLE_EPSS = (0.0, 0.1, 0.3, 1.0, 2.0)
#: Slack for comparing a rigorous float bracket with the 80-digit truth rounded to a float.
REL = 1e-12


@functools.cache
def exact_truth(n: int, k: int, eps0: float, eps: float) -> float:
    """The exact worst-case delta (every dataset, 80 digits) rounded to the nearest float."""
    with mpmath.workdps(oracle.DPS):
        value, _ = oracle.worst_case_delta(n, k, mpmath.mpf(eps0), mpmath.mpf(eps))
        return float(value)


class _MaxSingleBin(Bound):
    """max over every nx0 of the exact single-bin delta: a lower bound by post-processing."""

    name = "max-single-bin"

    def bracket(self, mech: ShuffledKRR, eps: float) -> Bracket:
        brackets = [SingleBin(m).bracket(mech, eps) for m in range(mech.n)]
        return Bracket(max(b.lower for b in brackets), max(b.upper for b in brackets))


@pytest.mark.parametrize(
    ("n", "k", "eps0"), [(n, k, e0) for (n, k) in ORACLE_SIZES for e0 in ORACLE_EPS0S]
)
def test_every_bound_against_the_80_digit_worst_case(n: int, k: int, eps0: float) -> None:
    """Expected values: tests/reference/oracle.py (every dataset, 80 digits) at each eps of
    ORACLE_EPSS (eps = 0 included). Every registry bound of kind upper is >= it (and reports its
    upper end as delta), every one of kind lower <= it, where it applies; tight's bracket contains
    it; the maximum over nx0 of single-bin is <= it."""
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    for eps in ORACLE_EPSS:
        truth = exact_truth(n, k, eps0, eps)
        for name in CONTRACT_NAMES:
            bound = make_bound(name)
            kind = bound.kind_for(mech)
            try:
                result = bound.delta(mech, eps)
            except OutsideConditionsError:
                continue
            where = f"{name} at eps={eps}: {result}, truth {truth}"
            if kind is BoundKind.UPPER:
                assert result.delta_upper >= truth * (1 - REL), where
                assert result.delta == result.delta_upper, where
            else:
                assert result.delta_lower <= truth * (1 + REL) + 1e-300, where
        tight = Tight().delta(mech, eps)
        assert tight.delta_lower <= truth * (1 + REL) + 1e-300, (eps, tight, truth)
        assert truth * (1 - REL) <= tight.delta_upper, (eps, tight, truth)
        assert tight.delta == tight.delta_upper
        assert _MaxSingleBin().bracket(mech, eps).lower <= truth * (1 + REL) + 1e-300


@pytest.mark.parametrize(
    "name", ["strong-adversary", "clones", "krr-clones", "renyi-girgis", "tight"]
)
@pytest.mark.parametrize(("n", "k", "eps0"), [(4, 3, 0.5), (7, 4, 1.5), (60, 5, 2.0)])
def test_upper_bounds_non_increasing_in_eps(name: str, n: int, k: int, eps0: float) -> None:
    """Expected: a valid upper bound on delta(eps) never increases with eps (the worst case does
    not), checked on each bound's own values."""
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    bound = make_bound(name)
    values = [bound.delta(mech, e).delta_upper for e in [0.0, 0.05, 0.2, 0.5, 1.0, 1.9]]
    assert all(a >= b for a, b in itertools.pairwise(values)), values


def test_wang_krr_fails_as_an_upper_bound() -> None:
    """docs/accounting.md, "Reference values": n=4, k=3, eps0=0.5, eps=0.3. The dataset 'all other users hold x0'
    has delta 0.0124612 (exhaustive enumeration) and wang-krr gives only 0.0120398."""
    mech = ShuffledKRR(n=4, k=3, eps0=0.5)
    wang = WangKRR().bracket(mech, 0.3)
    assert wang.lower == pytest.approx(0.0120398, rel=1e-5)
    truth = exact_truth(4, 3, 0.5, 0.3)
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
    assert result.delta_lower == pytest.approx(exact_truth(4, 3, 0.5, 0.3), rel=1e-9)
    assert result.extra["lower_from"] == "family-f(a=3)"  # F(n - 1): all others hold x0
