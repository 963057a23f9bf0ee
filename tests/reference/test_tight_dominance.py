"""``tight`` skips members that another member provably dominates (tight.dominated, covered).

The skips rest on two orderings of true values: optimal-blanket <= strong-adversary, clones,
krr-clones (Su, Cheng, Wang: the blanket decomposition is optimal among decompositions), and
wang-krr, single-bin(a) <= F(a) (post-processings of F(a)'s histogram). Each test below could fail:
it compares computed brackets, never the code's own decision.
"""

from __future__ import annotations

import itertools

import pytest

from shuffledp.accountant import ShuffledKRR, Tight, eps_for_delta
from shuffledp.accountant.bounds.base import Clones, KRRClones, SingleBin, StrongAdversary, WangKRR
from shuffledp.accountant.bounds.blanket import OptimalBlanket
from shuffledp.accountant.tight import DOMINATED_WIDTH
from shuffledp.accountant.worst_case.family import family_delta

GRID = list(
    itertools.product(
        [3, 30, 300, 3000, 30_000],  # n
        [2, 3, 10, 100],  # k
        [0.5, 1.0, 2.0, 4.0, 8.0],  # eps0
        [0.05, 0.3, 1.0],  # eps
    )
)


#: The grid points where optimal-blanket's lower end underflows to 0 (delta far below 1e-300):
#: tight never skips a member there (tight.narrow needs a positive lower end), so there is no
#: ordering to check. Measured; a point left in the grid that underflows fails the test below.
UNDERFLOWS = {
    (3000, 10, 0.5, 0.3),
    (3000, 100, 0.5, 0.3),
    (3000, 100, 1.0, 0.3),
    (3000, 100, 2.0, 1.0),
    *(
        (30_000, k, e0, e)
        for k in (2, 3, 10, 100)
        for e0, e in ((0.5, 0.3), (1.0, 0.3), (2.0, 1.0))
    ),
    (30_000, 100, 0.5, 0.05),
    (30_000, 100, 2.0, 0.3),
}


#: One test per n, looping over k, eps0 and eps (372 tests of a few milliseconds before).
NS = sorted({g[0] for g in GRID})


@pytest.mark.parametrize("n", NS)
def test_optimal_blanket_is_at_most_every_clone_form_member(n: int) -> None:
    """Where optimal-blanket's bracket is narrow (the condition for skipping), no clone-form
    member's upper end is below its lower end: skipping them loses less than the bracket width."""
    for _, k, eps0, eps in [g for g in GRID if g[0] == n and g[3] < g[2] and g not in UNDERFLOWS]:
        mech = ShuffledKRR(n=n, k=k, eps0=eps0)
        blanket = OptimalBlanket().bracket(mech, eps)
        where = (n, k, eps0, eps)
        assert blanket.lower > 0.0, f"{where} underflows: move the point to UNDERFLOWS"
        for member in (StrongAdversary(), Clones(), KRRClones()):
            assert member.bracket(mech, eps).upper >= blanket.lower, (member.name, where)


@pytest.mark.parametrize("n", NS)
def test_wang_krr_and_single_bin_are_at_most_their_family_dataset(n: int) -> None:
    for _, k, eps0, eps in [g for g in GRID if g[0] == n and g[3] < g[2] and g[1] >= 4]:
        mech = ShuffledKRR(n=n, k=k, eps0=eps0)
        f0 = family_delta(mech, 0, eps)
        fn = family_delta(mech, n - 1, eps)
        where = (n, k, eps0, eps)
        assert WangKRR().bracket(mech, eps).lower <= f0.upper, where
        assert SingleBin(0).bracket(mech, eps).lower <= f0.upper, where
        assert SingleBin(n - 1).bracket(mech, eps).lower <= fn.upper, where


@pytest.mark.parametrize(
    "n,k,eps0,eps",
    [(1000, 10, 1.0, 0.3), (30_000, 15, 2.0, 0.1), (200_000, 3, 0.5, 0.02), (10**6, 15, 4.0, 0.05)],
)
def test_tight_with_skips_is_the_minimum_over_every_member(
    n: int, k: int, eps0: float, eps: float
) -> None:
    """tight's upper end is within DOMINATED_WIDTH of the minimum over all its upper members
    evaluated (and never below it: it is one of them)."""
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    tight = Tight()
    everything = min(b.bracket(mech, eps).upper for b in tight.upper_bounds(mech))
    upper = tight.delta(mech, eps).delta_upper
    assert everything <= upper <= everything * (1.0 + DOMINATED_WIDTH)


def test_eps_with_skips_matches_optimal_blanket_alone() -> None:
    """tight's eps(1e-6) upper end is optimal-blanket's crossing (n = 1e5, k = 10, eps0 = 2):
    the skipped members could not have lowered it."""
    mech = ShuffledKRR(n=100_000, k=10, eps0=2.0)
    tight = eps_for_delta(Tight(), mech, 1e-6)
    alone = eps_for_delta(OptimalBlanket(), mech, 1e-6)
    assert tight.eps_upper == pytest.approx(alone.eps_upper, rel=1e-12)
    for member in (StrongAdversary(), Clones(), KRRClones()):
        assert eps_for_delta(member, mech, 1e-6).eps_upper >= tight.eps_upper
