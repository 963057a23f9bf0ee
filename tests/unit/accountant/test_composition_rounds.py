"""Composition of rounds with different n (shuffledp.accountant.composition.compose_rounds) and
the stream's fast composition (FastPLD, UserLedger) against dp-accounting.

References:
* dp-accounting's own constructor ``from_two_probability_mass_functions(log_pmf_lower,
  log_pmf_upper, pessimistic_estimate=True, symmetric=False)`` on each round's pair outcomes
  (lower = Q, upper = P: REMOVE is H(P || Q), ADD is H(Q || P)), composed with dp-accounting's
  ``PrivacyLossDistribution.compose``: built here without any project code but the pairs'
  outcome lists. compose_rounds adds the pair's left-out mass (<= ~1e-15 per round) as infinite
  loss, so the two agree to ~1e-12 (absolute, with deltas of order 1e-3..1e-1), once the bound on
  the FFTs' rounding compose_rounds adds (delta plus it, eps at delta minus it) is added to the
  reference too.
* compose(mech, r) (dp-accounting's ``self_compose``, a different algorithm) for r equal rounds.
* Invariants that hold exactly for these pessimistic PLDs:
  - adding a round never decreases delta: for a PLD whose every loss is >= the true loss of a
    pair (Q-mass E_P[e^-L] <= 1), Jensen on the convex, non-increasing y -> (1 - a y)_+ with
    y = e^-L2 gives E[(1 - e^(eps - l1 - L2))_+] >= (1 - e^(eps - l1))_+ for every l1;
  - one round's PLD delta is >= the exact delta of its pair, hence >= the true worst case and
    >= Tight's delta_lower; Tight's delta_upper is the same exact minimum plus its float
    bracket's slack, so the PLD value is >= delta_upper up to that slack (1e-9 relative).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from shuffledp.accountant import (
    Clones,
    InvalidParameterError,
    KRRClones,
    OptimalBlanket,
    OutsideConditionsError,
    ShuffledKRR,
    StrongAdversary,
    Tight,
    compose,
)
from shuffledp.accountant.bounds.base import CloneFormBound
from shuffledp.accountant.composition.pair_pld import (
    DISCRETIZATION,
    BlanketFamily,
    FastPLD,
    PairSource,
    _compose_family_rounds,
    compose_rounds,
    family_of,
    fft_error,
    local_krr_pld,
    pair_fast_pld,
    pair_pld,
)
from shuffledp.simulations.pipeline.stream import UserLedger

FAMILIES: list[PairSource] = [BlanketFamily(), StrongAdversary(), Clones(), KRRClones()]
# Heterogeneous rounds of one stream: same k and eps0, different n.
K, EPS0 = 4, 2.0
SIZES = (40, 25, 60, 33)
# The coarser grid of the stream, where a test's point does not depend on the grid (speed).
GRID = 1e-3


def _mechs(sizes: tuple[int, ...] = SIZES) -> list[ShuffledKRR]:
    return [ShuffledKRR(n=n, k=K, eps0=EPS0) for n in sizes]


def _direct_pld(
    bound: PairSource, mech: ShuffledKRR, grid: float
) -> pld_lib.PrivacyLossDistribution:
    """dp-accounting's PLD of the bound's pair for one round, from the outcome list alone."""
    log_p, log_q, _ = family_of(bound).dominating_pair(mech).outcome_log_pmfs()
    outcomes = range(log_p.size)
    return pld_lib.from_two_probability_mass_functions(
        dict(zip(outcomes, log_q.tolist(), strict=True)),
        dict(zip(outcomes, log_p.tolist(), strict=True)),
        pessimistic_estimate=True,
        value_discretization_interval=grid,
        symmetric=False,
    )


def _direct_composition(
    bound: PairSource, mechs: list[ShuffledKRR], grid: float
) -> pld_lib.PrivacyLossDistribution:
    composed = _direct_pld(bound, mechs[0], grid)
    for mech in mechs[1:]:
        composed = composed.compose(_direct_pld(bound, mech, grid))
    return composed


def _rounding(bound: PairSource, mechs: list[ShuffledKRR], grid: float) -> float:
    """The FFT rounding bound compose_rounds adds for this family."""
    return _compose_family_rounds(family_of(bound), mechs, grid)[1]


# ----------------------------------------------------------------------------------------------
# compose_rounds against dp-accounting's direct computation


def _tolerance(bound: PairSource) -> float:
    """How far two compositions of the same pair may differ: the blanket pair's listed outcomes
    leave out up to about 1e-12 of mass per round (counted as infinite loss, PAIR_DEPTH), the
    clone-form pairs far less."""
    return 1e-11 if isinstance(bound, BlanketFamily) else 1e-12


@pytest.mark.slow
@pytest.mark.parametrize("bound", FAMILIES, ids=lambda b: b.name)
@pytest.mark.parametrize("grid", [DISCRETIZATION, 1e-3])
def test_compose_rounds_equals_dp_accounting_direct(bound: CloneFormBound, grid: float) -> None:
    mechs = _mechs()
    direct = _direct_composition(bound, mechs, grid)
    err = _rounding(bound, mechs, grid)
    assert 0 < err < 1e-10
    for eps in (0.0, 0.2, 0.5, 1.0, 2.0):
        ours = compose_rounds(mechs, eps=eps, bounds=[bound], discretization=grid)
        assert ours.pair == bound.name and ours.rounds == len(mechs)
        expected = min(1.0, float(direct.get_delta_for_epsilon(eps)) + err)
        assert ours.delta == pytest.approx(expected, rel=0, abs=_tolerance(bound)), eps
        assert ours.delta >= expected - 1e-15  # the left-out mass only adds
    for delta in (1e-2, 1e-4, 1e-6):
        ours = compose_rounds(mechs, delta=delta, bounds=[bound], discretization=grid)
        expected_eps = float(direct.get_epsilon_for_delta(delta - err))
        rel = 1e-6 if isinstance(bound, BlanketFamily) else 1e-9  # see _tolerance
        assert ours.eps == pytest.approx(expected_eps, rel=rel, abs=1e-12), delta


@pytest.mark.slow
def test_compose_rounds_is_the_minimum_over_families() -> None:
    mechs = _mechs()
    for eps in (0.3, 1.0):
        per_family = {b.name: compose_rounds(mechs, eps=eps, bounds=[b]).delta for b in FAMILIES}
        best = compose_rounds(mechs, eps=eps)
        assert best.delta == min(per_family.values())
        assert per_family[best.pair] == best.delta


@pytest.mark.slow
@pytest.mark.parametrize("rounds", [1, 2, 5])
def test_identical_rounds_equal_compose(rounds: int) -> None:
    """compose_rounds (R - 1 pairwise FFTs) and compose (one ifft(fft(x)^R)) each add their own
    rounding bound (convolution_error summed, fft_error), and each raw value is within its own
    bound of the exact composition of the same PLD: so the two agree within the sum of the two
    bounds (s below; the largest over the families bounds the winner's), not to 1e-15."""
    mech = ShuffledKRR(n=50, k=K, eps0=EPS0)
    s = max(_rounding(b, [mech] * rounds, GRID) for b in FAMILIES) + max(
        fft_error(rounds, pair_pld(b, mech, GRID)) for b in [*FAMILIES[1:], OptimalBlanket()]
    )
    assert (s == 0.0) == (rounds == 1)
    for eps in (0.3, 1.0):
        got = compose_rounds([mech] * rounds, eps=eps, discretization=GRID)
        want = compose(mech, rounds, eps=eps, discretization=GRID)
        assert got.delta == pytest.approx(want.delta, rel=1e-9, abs=s + 1e-15)
        assert got.pair == want.pair
    delta = 1e-5
    got_eps = compose_rounds([mech] * rounds, delta=delta, discretization=GRID).eps
    # eps at delta falls as delta grows: within s of each other's raw delta, got's eps lies
    # between compose's at delta + 2 s and at delta - 2 s.
    lo = compose(mech, rounds, delta=delta + 2 * s, discretization=GRID).eps
    hi = compose(mech, rounds, delta=delta - 2 * s, discretization=GRID).eps
    assert lo * (1 - 1e-9) <= got_eps <= hi * (1 + 1e-9)


@pytest.mark.slow
def test_adding_a_round_never_decreases_delta() -> None:
    sizes = (40, 25, 60, 33, 80, 12)
    for eps in (0.1, 0.5, 1.5, 3.0):
        deltas = [
            compose_rounds(_mechs(sizes[:r]), eps=eps, discretization=GRID).delta
            for r in range(1, 7)
        ]
        assert all(b >= a * (1 - 1e-12) for a, b in itertools.pairwise(deltas)), (eps, deltas)
    eps_values = [
        compose_rounds(_mechs(sizes[:r]), delta=1e-6, discretization=GRID).eps for r in range(1, 7)
    ]
    assert all(b >= a - 1e-12 for a, b in itertools.pairwise(eps_values)), eps_values
    # ... and a smaller round costs more: replacing n = 60 by n = 12 never helps.
    for eps in (0.3, 1.0):
        larger = compose_rounds(_mechs((40, 60)), eps=eps, discretization=GRID).delta
        smaller = compose_rounds(_mechs((40, 12)), eps=eps, discretization=GRID).delta
        assert smaller >= larger


@pytest.mark.slow
@pytest.mark.parametrize(
    ("n", "k", "eps0"), [(40, 4, 2.0), (200, 10, 1.0), (60, 192, 4.0), (1000, 15, 3.0)]
)
def test_one_round_is_at_least_the_tight_guarantee(n: int, k: int, eps0: float) -> None:
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    for eps in (0.1, 0.5, 1.0, 2.0):
        bracket = Tight().delta(mech, eps)
        got = compose_rounds([mech], eps=eps).delta
        assert got >= bracket.delta_lower
        assert got >= bracket.delta_upper * (1 - 1e-9), (eps, got, bracket.delta_upper)


def test_order_of_rounds_does_not_matter() -> None:
    mechs = _mechs()
    for eps in (0.2, 1.0):
        forward = compose_rounds(mechs, eps=eps, discretization=GRID).delta
        backward = compose_rounds(mechs[::-1], eps=eps, discretization=GRID).delta
        assert forward == pytest.approx(backward, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mechs": [], "eps": 0.5}, "at least 1 round"),
        ({"mechs": ShuffledKRR(n=5, k=3, eps0=1.0), "eps": 0.5}, "must be a sequence"),
        ({"mechs": [ShuffledKRR(n=5, k=3, eps0=1.0), 7], "eps": 0.5}, r"mechs\[1\]"),
        ({"mechs": [ShuffledKRR(n=5, k=3, eps0=1.0)]}, "exactly one of eps and delta"),
        ({"mechs": [ShuffledKRR(n=5, k=3, eps0=1.0)], "eps": -1.0}, "eps must be >= 0"),
        ({"mechs": [ShuffledKRR(n=5, k=3, eps0=1.0)], "delta": 1.0}, r"delta must be in"),
        (
            {"mechs": [ShuffledKRR(n=5, k=3, eps0=1.0)], "eps": 1.0, "discretization": 0.0},
            "discretization must be > 0",
        ),
    ],
)
def test_compose_rounds_rejects_bad_parameters(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        compose_rounds(**kwargs)


def test_saturated_family_is_delta_one_not_a_crash() -> None:
    """The strong-adversary pair at k = 192, eps0 = 4, n = 5 is mostly infinite loss; after ~10
    rounds its finite part vanishes, where dp-accounting's compose raises IndexError. It is
    carried as delta = 1 and the other families still give the guarantee."""
    mechs = [ShuffledKRR(n=5, k=192, eps0=4.0)] * 20
    strong = [StrongAdversary()]
    alone = compose_rounds(mechs, eps=1.0, bounds=strong, discretization=GRID)
    assert alone.delta == 1.0
    assert math.isinf(compose_rounds(mechs, delta=1e-6, bounds=strong, discretization=GRID).eps)
    best = compose_rounds(mechs, eps=1.0, discretization=GRID)
    assert best.pair != "strong-adversary" and best.delta < 1.0


# ----------------------------------------------------------------------------------------------
# FastPLD and the stream's ledger against dp-accounting's compose


@pytest.mark.parametrize("bound", FAMILIES, ids=lambda b: b.name)
def test_fast_composition_equals_dp_accounting_compose(bound: CloneFormBound) -> None:
    grid = GRID
    mechs = _mechs()
    fast: FastPLD | None = None
    for mech in mechs:
        step = pair_fast_pld(bound, mech, grid)
        fast = step if fast is None else fast.compose(step)
        assert fast is not None
    assert fast is not None
    reference = compose_rounds(mechs, eps=0.5, bounds=[bound], discretization=grid)
    # The same rounding bound as compose_rounds' (the same arrays' norms, to ~1e-12 relative).
    assert fast.rounding == pytest.approx(_rounding(bound, mechs, grid), rel=1e-9)
    assert fast.delta(0.5) == pytest.approx(reference.delta, rel=1e-12, abs=1e-15)
    direct = _direct_composition(bound, mechs, grid)
    for eps in (0.1, 0.7, 1.5):
        assert fast.delta(eps) == pytest.approx(
            min(1.0, float(direct.get_delta_for_epsilon(eps)) + fast.rounding),
            rel=0,
            abs=_tolerance(bound),
        )
    # eps at 1e-6 moves by about (mass left out) / (d delta / d eps): 1e-6 relative for the
    # blanket pair, 1e-9 for the clone-form pairs.
    rel = 1e-6 if isinstance(bound, BlanketFamily) else 1e-9
    want = float(direct.get_epsilon_for_delta(1e-6 - fast.rounding))
    assert fast.eps(1e-6) == pytest.approx(want, rel=rel)


def test_ledger_history_equals_compose_rounds() -> None:
    """Users charged with rounds of different n: each one's composed guarantee (memoised by
    the multiset of sizes) equals compose_rounds over the same rounds."""
    grid = 1e-3
    ledger = UserLedger(k=K, eps0=EPS0, discretization=grid)
    schedule = {"a": (40, 25, 60), "b": (40, 25), "c": (25, 40, 12), "d": (60,)}
    for epoch in range(3):
        for user, sizes in schedule.items():
            if epoch < len(sizes):
                ledger.charge(user, epoch, sizes[epoch])
        ledger.prune()
    for user, sizes in schedule.items():
        for eps in (0.2, 1.0):
            want = compose_rounds(_mechs(sizes), eps=eps, discretization=grid).delta
            assert ledger.user_delta(user, eps) == pytest.approx(want, rel=1e-9, abs=1e-15)
    # a and c share no multiset; b's (25, 40) is the same as c's first two rounds: one entry.
    assert ledger.keys["b"] == (25, 40)
    worst = ledger.worst(1e-6, None)
    assert worst is not None
    want_eps = max(
        compose_rounds(_mechs(sizes), delta=1e-6, discretization=grid).eps
        for sizes in schedule.values()
    )
    assert worst.eps == pytest.approx(want_eps, rel=1e-9)
    assert worst.sizes in ((40, 25, 60), (25, 40, 12))


def test_ledger_rebuilds_what_it_evicted() -> None:
    """With no memory allowed, every stored composition is evicted and rebuilt on demand: the
    guarantee is the same."""
    grid = 1e-3
    small = UserLedger(k=K, eps0=EPS0, discretization=grid, max_bytes=0)
    roomy = UserLedger(k=K, eps0=EPS0, discretization=grid)
    for ledger in (small, roomy):
        for epoch, n in enumerate((40, 25, 60)):
            ledger.charge("u", epoch, n)
            ledger.prune()
    assert small.evictions > 0 and roomy.evictions == 0
    assert small.user_delta("u", 0.5) == pytest.approx(roomy.user_delta("u", 0.5), rel=1e-9)


def test_local_krr_round_is_eps0_pure() -> None:
    """A round that ended with one report is k-RR alone: delta = 0 from eps0 on (the largest
    loss is log(pt / pb) = eps0, rounded up by less than one grid step), and below eps0 it is
    the exact k-RR hockey-stick divergence pt - e^eps pb (up to the grid)."""
    k, eps0, grid = 5, 1.5, 1e-4
    pld = local_krr_pld(k, eps0, grid)
    assert pld.delta(eps0 + grid) == 0.0
    e0 = math.exp(eps0)
    pt, pb = e0 / (e0 + k - 1), 1 / (e0 + k - 1)
    for eps in (0.0, 0.5, 1.0):
        exact = pt - math.exp(eps) * pb
        assert exact * (1 - 1e-12) <= pld.delta(eps) <= pt - math.exp(eps - grid) * pb + 1e-15
    assert np.isclose(pld.eps(1e-9), eps0, atol=grid)


def _direct_delta(probs: np.ndarray, lower: int, grid: float, eps: float) -> float:
    """delta at eps of mass probs[i] at loss (lower + i) * grid, summed directly."""
    losses = (np.arange(probs.size) + lower) * grid
    return float(np.sum(np.where(losses > eps, -np.expm1(eps - losses) * probs, 0.0)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_summed_convolution_bound_covers_the_rounding(seed: int) -> None:
    """FastPLD.compose's accumulated rounding bound (and compose_rounds', the same
    convolution_error summed) covers the rounding actually made: five different random PMFs
    (200-900 loss points, heavy-tailed weights) composed by FFT, without tail truncation,
    against np.convolve (a direct sum, FFT-free: errors relative, ~1e-16 of each term)."""
    from shuffledp.accountant.composition.pair_pld import _Direction, pld_convolution_error

    rng = np.random.default_rng(seed)
    grid = 1e-2
    fast: FastPLD | None = None
    plds: list[pld_lib.PrivacyLossDistribution] = []
    direct, lower = np.ones(1), 0
    for _ in range(5):
        weights = rng.random(int(rng.integers(200, 900))) ** 8
        probs = weights / weights.sum()
        low = int(rng.integers(-300, 0))
        step = FastPLD(grid, _Direction(low, probs, 0.0), _Direction(low, probs, 0.0))
        plds.append(step.to_pld())
        fast = step if fast is None else fast.compose(step, tail_mass_truncation=0.0)
        assert fast is not None
        direct, lower = np.convolve(direct, probs), lower + low
    assert fast is not None and 0 < fast.rounding < 1e-11
    # compose_rounds' path: dp-accounting's compose, the bounds summed the same way.
    composed, summed = plds[0], 0.0
    for pld in plds[1:]:
        summed += pld_convolution_error(composed, pld)
        composed = composed.compose(pld, tail_mass_truncation=0.0)
    assert summed == pytest.approx(fast.rounding, rel=1e-9)
    gaps = []
    for eps in (0.0, 1.0, 3.0):
        want = _direct_delta(direct, lower, grid, eps)
        gaps.append(abs(float(fast.to_pld().get_delta_for_epsilon(eps)) - want))
        gaps.append(abs(float(composed.get_delta_for_epsilon(eps)) - want))
        assert fast.delta(eps) >= want
    assert 0 < max(gaps) <= fast.rounding


def test_a_delta_at_or_below_the_rounding_bound_is_refused_in_one_line() -> None:
    """eps at a delta the FFTs' rounding could swamp cannot be answered: compose, compose_rounds
    and FastPLD.eps refuse it, naming --delta and the accuracy."""
    mechs = _mechs((40, 25, 60))
    fast = pair_fast_pld(KRRClones(), mechs[0], GRID)
    for mech in mechs[1:]:
        composed = fast.compose(pair_fast_pld(KRRClones(), mech, GRID))
        assert composed is not None
        fast = composed
    assert fast.rounding > 0
    message = r"^--delta 1e-16: at or below the composition's numerical accuracy \(\d\.\de-\d\d,"
    with pytest.raises(OutsideConditionsError, match=message):
        fast.eps(1e-16)
    with pytest.raises(OutsideConditionsError, match=message):
        compose_rounds(mechs, delta=1e-16, discretization=GRID)
    with pytest.raises(OutsideConditionsError, match=message):
        compose(mechs[0], 3, delta=1e-16, discretization=GRID)
    # One round: no transform, nothing to refuse.
    assert compose_rounds(mechs[:1], delta=1e-16, discretization=GRID).eps > 0
