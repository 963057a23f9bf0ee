"""The exact engine (accountant/engines/gsum.py), the optimal-blanket bound and its dominating pair.

Independent references: brute-force mpmath enumeration of the multinomial counts (40 digits),
the exhaustive oracle (tests/reference/oracle.py), and the checked values of the bound's derivation (Su,
Cheng, Wang, IEEE S&P 2026; our k-RR form in docs/accounting.md).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shuffledp.accountant import (
    BlanketPair,
    OptimalBlanket,
    ShuffledKRR,
    hockey_stick_both,
)
from shuffledp.accountant.composition.pair_pld import BlanketFamily, compose, compose_rounds
from shuffledp.accountant.engines.gsum import Atom, mean_positive_part
from shuffledp.accountant.worst_case.family import family_delta
from tests.reference import oracle


def brute_force(n: int, probs: Sequence[Any], values: Sequence[Any]) -> Any:
    """(1/n) E[(sum G)_+] by enumerating every vector of counts (mpmath, 40 digits)."""
    with mpmath.workdps(40):
        total = mpmath.mpf(0)
        for counts in itertools.product(range(n + 1), repeat=len(probs) - 1):
            if sum(counts) > n:
                continue
            full = [*counts, n - sum(counts)]
            s = sum(c * v for c, v in zip(full, values, strict=True))
            if s <= 0:
                continue
            weight = mpmath.factorial(n)
            for c, p in zip(full, probs, strict=True):
                weight *= mpmath.mpf(p) ** c / mpmath.factorial(c)
            total += weight * s
        return total / n


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 12),
    positive=st.floats(0.01, 5.0),
    negatives=st.lists(st.floats(-5.0, 0.0), min_size=3, max_size=3),
    weights=st.lists(st.floats(0.01, 1.0), min_size=4, max_size=4),
)
def test_engine_brackets_the_brute_force_value(
    n: int, positive: float, negatives: list[float], weights: list[float]
) -> None:
    """Any four atoms (one positive): the bracket contains the exact enumeration and is narrow
    (1e-9 relative); it could be false if any error term or the tilted windows were wrong."""
    total = sum(weights)
    probs = [w / total for w in weights]
    values = [positive, *negatives]
    bracket = mean_positive_part(n, [Atom(v, p) for v, p in zip(values, probs, strict=True)])
    exact = brute_force(n, probs, values)
    assert bracket.lower <= exact <= bracket.upper
    assert bracket.upper - bracket.lower <= 1e-9 * float(exact) + 1e-300


def _blanket_brute(n: int, k: int, eps0: str, eps: str) -> Any:
    with mpmath.workdps(40):
        e0, ee = mpmath.exp(mpmath.mpf(eps0)), mpmath.exp(mpmath.mpf(eps))
        d = e0 + k - 1
        return brute_force(
            n, [1 / d, 1 / d, (k - 2) / d, (e0 - 1) / d], [e0 - ee, 1 - ee * e0, 1 - ee, 0]
        )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("n", "k", "eps0", "eps"),
    [
        (4, 3, "0.5", "0.3"),
        (30, 10, "2", "1"),
        (25, 2, "1", "0.1"),
        (40, 100, "0.5", "0.05"),
        (20, 4, "8", "7.9"),
    ],
)
def test_optimal_blanket_equals_its_iid_form(n: int, k: int, eps0: str, eps: str) -> None:
    """The bound's bracket contains the G-form computed by enumeration."""
    b = OptimalBlanket().bracket(ShuffledKRR(n=n, k=k, eps0=float(eps0)), float(eps))
    exact = _blanket_brute(n, k, eps0, eps)
    assert b.lower <= exact <= b.upper
    # Near eps0 at large eps0 the positive atom is tiny next to the others, the tilt theta is
    # large, and the atoms' own 32-ulp precision moves the value by about theta * n * 1e-14.
    tol = 1e-6 if float(eps0) - float(eps) < 0.5 else 1e-9
    assert b.upper - b.lower <= tol * float(exact)


def test_checked_reference_values() -> None:
    """Exact 40-digit enumerations of the multinomial counts (the bound's derivation): n = 4,
    k = 3, eps0 = 0.5, eps = 0.3 gives 1.33633478e-2 (true worst case 1.24612e-2);
    n = 100, k = 10, eps0 = 2, eps = 1 gives 4.797720777e-8, and the dataset 'all others hold
    x2' (F(0)) 3.5602189e-8."""
    small = OptimalBlanket().bracket(ShuffledKRR(n=4, k=3, eps0=0.5), 0.3)
    assert small.lower <= 0.0133633478046161884 <= small.upper
    mech = ShuffledKRR(n=100, k=10, eps0=2.0)
    assert OptimalBlanket().bracket(mech, 1.0).upper == pytest.approx(4.797720777e-8, rel=1e-9)
    assert family_delta(mech, 0, 1.0).lower == pytest.approx(3.5602189e-8, rel=1e-7)


def test_issue_case_lies_in_the_published_interval() -> None:
    """n = 1e4, k = 15, eps0 = 4, eps = 0.5: the truth is in [8.142e-10, 8.148e-10] (independent
    exact computations quoted in the issue, to 4 digits); both ends of tight's bracket must lie
    there (up to that rounding)."""
    mech = ShuffledKRR(n=10_000, k=15, eps0=4.0)
    upper = OptimalBlanket().bracket(mech, 0.5).upper
    lower = family_delta(mech, 0, 0.5).lower
    assert 8.1415e-10 <= lower <= upper <= 8.1485e-10


@pytest.mark.parametrize(("n", "k", "eps0"), [(3, 3, 0.5), (4, 4, 1.0), (5, 3, 2.0), (4, 2, 0.7)])
def test_optimal_blanket_is_above_the_exhaustive_truth(n: int, k: int, eps0: float) -> None:
    """Upper bound: at least the worst dataset's exact delta (exhaustive oracle, 80 digits)."""
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    for eps in (0.0, 0.1, eps0 / 2, 0.9 * eps0):
        truth, _ = oracle.worst_case_delta(n, k, eps0, eps)
        assert OptimalBlanket().bracket(mech, eps).upper >= truth


@pytest.mark.parametrize(
    ("n", "k", "eps0", "eps"),
    [
        (4, 3, 0.5, 0.3),
        (100, 10, 2.0, 1.0),
        (300, 2, 1.0, 0.2),
        (60, 100, 0.5, 0.05),
        (50, 4, 8.0, 6.0),
    ],
)
def test_dominating_pair_reproduces_the_bound(n: int, k: int, eps0: float, eps: float) -> None:
    """The listed pair (M, s, h0)'s hockey-stick divergence, summed directly, is the bound at
    that eps (to 1e-9): the pair composed over rounds has this single-round curve."""
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    log_p, log_q, dropped = BlanketPair(mech).outcome_log_pmfs()
    direct = hockey_stick_both(log_p, log_q, eps)
    b = OptimalBlanket().bracket(mech, eps)
    assert b.lower * (1 - 1e-9) - dropped <= direct <= b.upper * (1 + 1e-9)
    assert dropped < 1e-10


def test_one_round_composition_is_the_bound_on_the_grid() -> None:
    """compose(rounds=1) with the blanket pair (pessimistic 1e-4 grid) lies between the bound at
    eps and at eps - 1e-4 (losses rounded up by less than one grid step)."""
    mech = ShuffledKRR(n=200, k=10, eps0=2.0)
    result = compose(mech, 1, eps=0.5, bounds=[OptimalBlanket()])
    assert result.pair == "optimal-blanket"
    assert OptimalBlanket().bracket(mech, 0.5).lower * (1 - 1e-9) <= result.delta
    assert result.delta <= OptimalBlanket().bracket(mech, 0.5 - 1e-4).upper * (1 + 1e-9)


@pytest.mark.slow
def test_composition_uses_the_blanket_pair_and_beats_krr_clones() -> None:
    """By default the composed guarantee comes from the blanket pair (smallest at every eps)."""
    mech = ShuffledKRR(n=300, k=10, eps0=2.0)
    result = compose(mech, 5, eps=1.0)
    assert result.pair == "optimal-blanket"
    from shuffledp.accountant import KRRClones

    assert result.delta < compose(mech, 5, eps=1.0, bounds=[KRRClones()]).delta


@pytest.mark.slow
def test_rounds_too_large_to_list_fall_back_and_say_so() -> None:
    """A round whose blanket pair is too large to list uses the krr-clones pair, and the name of
    the composed result says so."""
    family = BlanketFamily()
    rounds = [ShuffledKRR(n=100, k=10, eps0=2.0), ShuffledKRR(n=200_000, k=10, eps0=2.0)]
    result = compose_rounds(rounds, eps=1.0, bounds=[family])
    assert family.fallback_rounds == 1
    assert "krr-clones pair in 1 round" in result.pair
    assert math.isfinite(result.delta)


@pytest.mark.slow
def test_stream_ledger_says_when_a_round_fell_back() -> None:
    """The stream's ledger names the fallback in the worst history's pair and in its notes
    (the report's composition.fallbacks), and a report with it round-trips through JSON; a
    ledger whose rounds all list their own pair has no note."""
    from shuffledp.simulations.pipeline.stream.ledger import UserLedger
    from shuffledp.simulations.pipeline.stream.records import CompositionInfo

    small = UserLedger(k=10, eps0=1.0)
    small.charge("a", 0, 1000)
    worst = small.worst(1e-6, None)
    assert worst is not None and worst.pair == "optimal-blanket"
    assert small.fallback_notes() == ()
    ledger = UserLedger(k=10, eps0=1.0)
    ledger.charge("a", 0, 20_000)  # optimal-blanket's pair: over MAX_PAIR_OUTCOMES
    worst = ledger.worst(1e-6, None)
    assert worst is not None
    assert ledger.fallback_notes() == (
        "optimal-blanket: krr-clones pair in 1 round sizes too large to list",
    )
    if worst.pair.startswith("optimal-blanket"):
        assert "krr-clones pair in 1 round" in worst.pair
    info = CompositionInfo(
        discretization=1e-3,
        families=("optimal-blanket",),
        compositions=0,
        stored_peak_mib=0.0,
        evictions=0,
        accountant_seconds=0.0,
        fallbacks=ledger.fallback_notes(),
    )
    assert CompositionInfo.from_json(info.to_json()) == info
    assert (
        "fallbacks" not in CompositionInfo.from_json({**info.to_json(), "fallbacks": []}).to_json()
    )


@pytest.mark.parametrize(
    ("n", "k", "eps0", "eps"), [(100, 10, 2.0, 1.0), (1000, 3, 1.0, 0.2), (50, 4, 8.0, 6.0)]
)
def test_all_others_x0_equals_its_iid_form(n: int, k: int, eps0: float, eps: float) -> None:
    """F(n - 1) two ways: the two-count pair (AllOthersX0, what family_delta uses) and the i.i.d.
    G-form of the leave-one-out identity (both directions) must overlap."""
    from shuffledp.accountant.worst_case.family import all_x0_g_form

    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    g_form = all_x0_g_form(mech, eps)
    two_count = family_delta(mech, n - 1, eps)
    assert g_form.lower <= two_count.upper and two_count.lower <= g_form.upper
    assert g_form.upper - g_form.lower <= 1e-9 * g_form.upper
