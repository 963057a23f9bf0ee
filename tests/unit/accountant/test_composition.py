"""Composition over rounds (shuffledp.accountant.composition.pair_pld) against dp-accounting and mpmath.

References:
* dp-accounting's own constructor ``from_two_probability_mass_functions(log_pmf_lower,
  log_pmf_upper, ..., symmetric=False)`` on the same outcome dictionaries. In dp-accounting the
  REMOVE direction is H(upper || lower) (privacy loss log upper/lower under ``upper``), so for
  H(P || Q) the pair is passed as lower = Q, upper = P; with symmetric=False it also builds the
  ADD direction H(Q || P) and reports the max.
* the exact divergences of tests/reference/mpmath_pairs.py (60 digits, plain enumeration).
* the pessimistic-rounding sandwich: losses rounded UP to the grid d = 1e-4 (L <= L' < L + d) give
  H_eps(P||Q) <= PLD delta(eps) <= H_(eps - d)(P||Q), in each direction, because
  (1 - e^(eps - L'))_+ lies between (1 - e^(eps - L))_+ and (1 - e^(eps - d - L))_+.
"""

from __future__ import annotations

import functools
import itertools
import math
import sys
from collections.abc import Callable
from typing import Any

import mpmath
import numpy as np
import numpy.typing as npt
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from tests.paths import REPO_ROOT

_ROOT = str(REPO_ROOT)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from shuffledp.accountant import (  # noqa: E402
    Clones,
    InvalidParameterError,
    KRRClones,
    ShuffledKRR,
    StrongAdversary,
    Tight,
    compose,
)
from shuffledp.accountant.bounds.base import CloneFormBound  # noqa: E402
from shuffledp.accountant.composition.pair_pld import pld_from_log_pmfs  # noqa: E402
from tests.reference import mpmath_pairs, references  # noqa: E402

Mpf = Any
FloatArray = npt.NDArray[np.float64]
GRID = 1e-4  # dp-accounting's default value_discretization_interval, and ours

CLONE_BOUNDS: dict[str, Callable[[], CloneFormBound]] = {
    "strong-adversary": StrongAdversary,
    "clones": Clones,
    "krr-clones": KRRClones,
}

# Pair parameters: a clone-form pair at n = 40 (eps0 = 2, k = 4) for each bound, and the seed
# paper's single-bin pair at n = 50 with the two directions far apart. In the single-bin pairs
# nx0 = 40 makes H(P0||P1) the larger direction, nx0 = 0 makes H(P1||P0) the larger one.
N_CLONE, K_CLONE, EPS0_CLONE = 40, 4, 2.0
SINGLE_BIN = {"single-bin-nx0=40": (50, 4, 2.0, 40), "single-bin-nx0=0": (40, 3, 1.0, 0)}


def _log(value: Mpf) -> float:
    return float(mpmath.log(value)) if value > 0 else -math.inf


def clone_form_log_pmfs(bound: CloneFormBound) -> tuple[list[Any], FloatArray, FloatArray]:
    """Every outcome of the bound's pair and (log P, log Q) there, from the definition, at 40
    digits: C ~ Bin(m, q), A ~ Bin(C, 1/2), D ~ Bern(p); P = (A + D, C - A + 1 - D),
    Q = (A + 1 - D, C - A + D); with probability 1 - scale both emit a common outcome."""
    mech = ShuffledKRR(n=N_CLONE, k=K_CLONE, eps0=EPS0_CLONE)
    pair = bound.pair(mech)
    with mpmath.workdps(40):
        m = pair.n_others
        q, p, scale = mpmath.mpf(pair.clone_prob), mpmath.mpf(pair.p), mpmath.mpf(pair.scale)
        half_pow = [mpmath.mpf(2) ** -c for c in range(m + 1)]

        def joint(c: int, a: int) -> Mpf:  # Pr[C = c, A = a]
            if a < 0 or a > c:
                return mpmath.mpf(0)
            return (
                mpmath.binomial(m, c)
                * q**c
                * (1 - q) ** (m - c)
                * mpmath.binomial(c, a)
                * half_pow[c]
            )

        outcomes: list[Any] = []
        lp: list[float] = []
        lq: list[float] = []
        for c in range(m + 1):
            for x in range(c + 2):  # first coordinate x, second c + 1 - x
                below, here = joint(c, x - 1), joint(c, x)
                outcomes.append((x, c + 1 - x))
                lp.append(_log(scale * (p * below + (1 - p) * here)))
                lq.append(_log(scale * ((1 - p) * below + p * here)))
        if pair.scale < 1.0:
            outcomes.append("common")
            lp.append(_log(1 - scale))
            lq.append(_log(1 - scale))
    return outcomes, np.array(lp), np.array(lq)


def single_bin_log_pmfs(
    n: int, k: int, eps0: float, nx0: int
) -> tuple[list[Any], FloatArray, FloatArray]:
    """The seed paper's single-bin pair from its definition (40 digits): B = Bin(nx0, pt) +
    Bin(n-1-nx0, pb), P0 = B + Bern(pt), P1 = B + Bern(pb); outcomes s = 0..n."""
    with mpmath.workdps(40):
        e = mpmath.exp(mpmath.mpf(eps0))
        pt, pb = e / (e + k - 1), 1 / (e + k - 1)
        m = n - 1 - nx0
        f = [mpmath.binomial(nx0, i) * pt**i * (1 - pt) ** (nx0 - i) for i in range(nx0 + 1)]
        g = [mpmath.binomial(m, j) * pb**j * (1 - pb) ** (m - j) for j in range(m + 1)]
        law = [mpmath.mpf(0)] * (n + 1)
        for i, x in enumerate(f):
            for j, y in enumerate(g):
                law[i + j] += x * y
        lp0 = [_log(pt * (law[s - 1] if s else 0) + (1 - pt) * law[s]) for s in range(n + 1)]
        lp1 = [_log(pb * (law[s - 1] if s else 0) + (1 - pb) * law[s]) for s in range(n + 1)]
    return list(range(n + 1)), np.array(lp0), np.array(lp1)


PAIR_NAMES = [*CLONE_BOUNDS, *SINGLE_BIN]


@functools.cache
def pair_log_pmfs(name: str) -> tuple[list[Any], FloatArray, FloatArray]:
    """(outcomes, log P, log Q) of a named pair (cached: the 40-digit build is the slow part;
    callers must not modify the arrays)."""
    if name in CLONE_BOUNDS:
        return clone_form_log_pmfs(CLONE_BOUNDS[name]())
    return single_bin_log_pmfs(*SINGLE_BIN[name])


def exact_directions(name: str, eps: float) -> tuple[Mpf, Mpf]:
    """(H(P||Q), H(Q||P)) of a named pair from tests/reference/mpmath_pairs.py."""
    n, k, eps0 = N_CLONE, K_CLONE, EPS0_CLONE
    if name == "strong-adversary":
        return mpmath_pairs.strong_adversary(n, k, eps0, eps)
    if name == "clones":
        return mpmath_pairs.clones(n, eps0, eps)
    if name == "krr-clones":
        return mpmath_pairs.krr_clones(n, k, eps0, eps)
    return mpmath_pairs.single_bin(*SINGLE_BIN[name], eps)


def dp_accounting_pld(
    outcomes: list[Any], lp: FloatArray, lq: FloatArray, *, symmetric: bool
) -> pld_lib.PrivacyLossDistribution:
    """dp-accounting's direct construction; lower = Q, upper = P (REMOVE = H(P || Q))."""
    return pld_lib.from_two_probability_mass_functions(
        dict(zip(outcomes, lq.tolist(), strict=True)),
        dict(zip(outcomes, lp.tolist(), strict=True)),
        pessimistic_estimate=True,
        value_discretization_interval=GRID,
        symmetric=symmetric,
    )


def composed(pld: pld_lib.PrivacyLossDistribution, rounds: int) -> pld_lib.PrivacyLossDistribution:
    return pld.self_compose(rounds) if rounds > 1 else pld


# ----------------------------------------------------------------------------------------------
# pld_from_log_pmfs against dp-accounting's own constructor
# ----------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", PAIR_NAMES)
def test_pld_matches_dp_accounting(name: str) -> None:
    outcomes, lp, lq = pair_log_pmfs(name)
    ours = pld_from_log_pmfs(lp, lq, 0.0, GRID)
    theirs = dp_accounting_pld(outcomes, lp, lq, symmetric=False)
    for rounds in (1, 2, 5):
        a, b = composed(ours, rounds), composed(theirs, rounds)
        for eps in (0.05, 0.3, 0.7, 1.2):
            da, db = float(a.get_delta_for_epsilon(eps)), float(b.get_delta_for_epsilon(eps))
            assert da == pytest.approx(db, rel=1e-6, abs=1e-15), (rounds, eps)
        for delta in (1e-2, 1e-4):
            ea, eb = float(a.get_epsilon_for_delta(delta)), float(b.get_epsilon_for_delta(delta))
            assert ea == pytest.approx(eb, rel=1e-6, abs=1e-12), (rounds, delta)


@pytest.mark.parametrize("name", PAIR_NAMES)
def test_one_round_pld_sandwich_against_exact(name: str) -> None:
    """r = 1: exact(eps) <= composed delta <= exact(eps - grid), both directions taken as max,
    and within 1e-3 relative of exact at eps where delta is not tiny."""
    _, lp, lq = pair_log_pmfs(name)
    pld = pld_from_log_pmfs(lp, lq, 0.0, GRID)
    for eps in (0.05, 0.1, 0.3, 0.5):
        got = float(pld.get_delta_for_epsilon(eps))
        with mpmath.workdps(60):
            exact = max(exact_directions(name, eps))
            exact_shifted = max(exact_directions(name, eps - GRID))
            assert exact > mpmath.mpf("1e-8")  # these eps are well inside the interesting range
            assert got >= exact * (1 - mpmath.mpf("1e-12")), eps
            assert got <= exact_shifted * (1 + mpmath.mpf("1e-12")), eps
            assert abs(got - exact) <= exact * mpmath.mpf("1e-3"), eps


def test_dropped_mass_counts_as_infinite_loss() -> None:
    """One round: the mass listed as dropped is infinite loss in both directions, so it adds to
    delta exactly (at every eps)."""
    _, lp, lq = pair_log_pmfs("single-bin-nx0=40")
    base = pld_from_log_pmfs(lp, lq, 0.0, GRID)
    padded = pld_from_log_pmfs(lp, lq, 1e-6, GRID)
    for eps in (0.0, 0.3, 1.0, 5.0):
        diff = float(padded.get_delta_for_epsilon(eps)) - float(base.get_delta_for_epsilon(eps))
        assert diff == pytest.approx(1e-6, rel=1e-6), eps


# ----------------------------------------------------------------------------------------------
# The symmetric=True pitfall (docs/accounting.md, "Composition")
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "order"),
    [
        # nx0 = 40: H(P0||P1) dominates; passing P0 as 'lower' makes dp-accounting's default
        # keep H(P1||P0) only.
        ("single-bin-nx0=40", "P-as-lower"),
        # nx0 = 0: H(P1||P0) dominates; passing P0 as 'upper' keeps H(P0||P1) only.
        ("single-bin-nx0=0", "P-as-upper"),
    ],
)
def test_symmetric_default_under_reports_asymmetric_pair(name: str, order: str) -> None:
    outcomes, lp, lq = pair_log_pmfs(name)
    if order == "P-as-lower":
        lp, lq = lq, lp  # dp_accounting_pld passes lq as lower
    default = dp_accounting_pld(outcomes, lp, lq, symmetric=True)
    ours = pld_from_log_pmfs(lp, lq, 0.0, GRID)
    eps = 0.5
    with mpmath.workdps(60):
        truth = max(exact_directions(name, eps))
        one_direction = float(default.get_delta_for_epsilon(eps))
        # The default reports one direction only: more than 90 % below the two-sided delta.
        assert one_direction < 0.1 * truth
        # Ours builds both directions: never below the truth.
        assert float(ours.get_delta_for_epsilon(eps)) >= truth * (1 - mpmath.mpf("1e-12"))
        # ... and the same holds after composition (the r-fold truth is at least the 1-round one).
        assert float(composed(ours, 3).get_delta_for_epsilon(eps)) >= truth


# ----------------------------------------------------------------------------------------------
# compose()
# ----------------------------------------------------------------------------------------------

COMPOSE_MECH = (50, 4, 2.0)


def _min_exact_pair_delta(n: int, k: int, eps0: float, eps: float) -> Mpf:
    """min over the four dominating pairs of their exact one-round delta (mpmath; the blanket
    pair's by its G-form, tests/reference/references.py)."""
    with mpmath.workdps(60):
        return min(
            references.optimal_blanket_reference(n, k, eps0, eps),
            max(mpmath_pairs.strong_adversary(n, k, eps0, eps)),
            max(mpmath_pairs.clones(n, eps0, eps)),
            max(mpmath_pairs.krr_clones(n, k, eps0, eps)),
        )


@pytest.mark.slow
@pytest.mark.parametrize("eps", [0.3, 1.5])
def test_compose_delta_monotone_and_above_one_round_truth(eps: float) -> None:
    """Invariants that hold exactly:
    * the r-round delta of a pair is non-decreasing in r (r rounds are a post-processing of
      r + 1), for each pair, hence for the minimum over pairs that compose() returns;
    * every composed value is >= the exact 1-round delta of its pair, so compose(r) >= min over
      pairs of their exact 1-round delta >= the tight delta_lower (a true lower bound);
    * at r = 1 the pessimistic grid costs at most one grid step: compose(1) <= min exact at
      eps - 1e-4, plus the listed-outcome truncation (< 1e-12 here).
    (compose(1) >= Tight().delta_upper is not asserted: delta_upper is the top of a float
    bracket around the same exact minimum, not a quantity the PLD is proved to exceed.)
    """
    n, k, eps0 = COMPOSE_MECH
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    deltas = [compose(mech, r, eps=eps).delta for r in (1, 2, 3, 5)]
    assert all(a <= b for a, b in itertools.pairwise(deltas)), deltas
    assert deltas[-1] <= 1.0
    with mpmath.workdps(60):
        truth = _min_exact_pair_delta(n, k, eps0, eps)
        assert deltas[0] >= truth * (1 - mpmath.mpf("1e-12"))
        assert deltas[0] <= _min_exact_pair_delta(n, k, eps0, eps - GRID) + mpmath.mpf("1e-12")
    assert deltas[0] >= Tight().delta(mech, eps).delta_lower


@pytest.mark.slow
def test_compose_eps_monotone_in_rounds() -> None:
    n, k, eps0 = COMPOSE_MECH
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    results = [compose(mech, r, delta=1e-3) for r in (1, 2, 4)]
    eps_values = [r.eps for r in results]
    assert all(a <= b for a, b in itertools.pairwise(eps_values)), eps_values
    assert all(r.delta == 1e-3 for r in results)
    # One round: the composed eps is a guarantee, so the exact delta of the winning pair meets
    # the target there.
    best = results[0]
    with mpmath.workdps(60):
        exact_at_eps = _min_exact_pair_delta(n, k, eps0, best.eps)
        assert exact_at_eps <= 1e-3


def test_compose_single_pair_matches_dp_accounting_on_its_outcomes() -> None:
    """compose() with one bound = dp-accounting's constructor on that pair's full outcome list,
    up to the mass compose() leaves out of its outcome window (counted as infinite loss, so
    compose() is the larger, by at most that mass times the number of rounds)."""
    mech = ShuffledKRR(n=N_CLONE, k=K_CLONE, eps0=EPS0_CLONE)
    outcomes, lp, lq = clone_form_log_pmfs(Clones())
    reference = dp_accounting_pld(outcomes, lp, lq, symmetric=False)
    for rounds in (1, 3):
        ref = composed(reference, rounds)
        for eps in (0.2, 0.6):
            got = compose(mech, rounds, eps=eps, bounds=[Clones()])
            assert got.pair == "clones"
            expected = float(ref.get_delta_for_epsilon(eps))
            assert got.delta >= expected * (1 - 1e-9)
            assert got.delta == pytest.approx(expected, rel=1e-4)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rounds": 0, "eps": 0.5}, "rounds must be an integer >= 1"),
        ({"rounds": 2}, "exactly one of eps and delta"),
        ({"rounds": 2, "eps": 0.5, "delta": 1e-6}, "exactly one of eps and delta"),
        ({"rounds": 2, "eps": -0.5}, "eps must be >= 0"),
        ({"rounds": 2, "delta": 2.0}, r"delta must be in \(0, 1\)"),
    ],
)
def test_compose_rejects_bad_parameters(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        compose(ShuffledKRR(n=50, k=4, eps0=2.0), **kwargs)
