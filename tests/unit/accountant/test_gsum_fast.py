"""The Fourier bracket of gsum_fast against the exact engine of gsum.

Containment: wherever both run, the fast bracket must contain the exact engine's bracket midpoint
(and overlap its whole bracket): an upper end below the truth or a lower end above it fails here.
Width: at n >= 1e4 the fast bracket's relative width is at most WIDTH_CLAIM (docs/accounting.md
reports about 3e-5 to 1.4e-4), wherever the value is a normal double. Speed is measured by
bench/accountant.py, never here.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from shuffledp.accountant.bounds.blanket import blanket_atoms
from shuffledp.accountant.engines.gsum import (
    EXACT_CELLS,
    Atom,
    exact_mean_positive_part,
    mean_positive_part,
)
from shuffledp.accountant.engines.gsum_fast import fast_mean_positive_part
from shuffledp.accountant.engines.pairs import Bracket
from shuffledp.accountant.mechanism import ShuffledKRR
from shuffledp.accountant.worst_case.family import _atoms_all_x0, _atoms_all_x2

#: The relative width (upper / lower - 1) claimed at n >= 1e4 (measured at most 1.4e-4).
WIDTH_CLAIM = 5e-4
#: At n = 1e3 the sum is still lattice-like (eps0 = 8: one atom carries almost all the mass) and
#: the smoothing costs more: measured at most 4.3e-3.
WIDTH_CLAIM_SMALL_N = 1e-2

KS = [2, 3, 10, 15, 100]
EPS0S = [0.5, 1.0, 2.0, 4.0, 8.0]
EPSS = [0.01, 0.1, 0.5, 1.0]


def _atom_sets(mech: ShuffledKRR, eps: float) -> list[tuple[str, list[Atom]]]:
    sets = [("blanket", blanket_atoms(mech, eps))]
    if mech.k >= 3:
        forward, reverse = _atoms_all_x0(mech, eps)
        sets += [("F(0)", _atoms_all_x2(mech, eps)), ("F(n-1)", forward), ("F(n-1)'", reverse)]
    return sets


def _check(n: int, atoms: list[Atom], small_n_claim: bool, label: str) -> None:
    exact = exact_mean_positive_part(n, atoms)
    fast = fast_mean_positive_part(n, atoms)
    assert fast is not None, label
    mid = 0.5 * (exact.lower + exact.upper)
    assert fast.lower <= mid <= fast.upper, (label, fast, exact)
    assert fast.lower <= exact.upper and exact.lower <= fast.upper, (label, fast, exact)
    if exact.lower > 1e-290:
        claim = WIDTH_CLAIM_SMALL_N if small_n_claim else WIDTH_CLAIM
        assert fast.upper <= fast.lower * (1.0 + claim), (label, fast, exact)


@pytest.mark.parametrize("n", [1_000, pytest.param(10_000, marks=pytest.mark.slow)])
@pytest.mark.parametrize(
    "k", [k if k in (KS[0], KS[-1]) else pytest.param(k, marks=pytest.mark.slow) for k in KS]
)
def test_fast_contains_exact_grid(n: int, k: int) -> None:
    """Every eps0, eps (eps < eps0) and atom set of k-RR's G-forms at n = 1e3 and 1e4."""
    for eps0, eps in itertools.product(EPS0S, EPSS):
        if eps >= eps0:
            continue
        mech = ShuffledKRR(n=n, k=k, eps0=eps0)
        for name, atoms in _atom_sets(mech, eps):
            _check(n, atoms, n < 10_000, f"n={n} k={k} eps0={eps0} eps={eps} {name}")


@pytest.mark.slow
@pytest.mark.parametrize("n", [30_000, 100_000])
@pytest.mark.parametrize("k", KS)
def test_fast_contains_exact_large(n: int, k: int) -> None:
    """The blanket and F(0) atoms at n = 3e4 and 1e5 (exact engine 0.05-1.5 s each)."""
    for eps0, eps in [(0.5, 0.01), (1.0, 0.1), (2.0, 0.1), (4.0, 0.05), (4.0, 1.0), (8.0, 0.5)]:
        mech = ShuffledKRR(n=n, k=k, eps0=eps0)
        for name, atoms in _atom_sets(mech, eps)[:2]:
            _check(n, atoms, False, f"n={n} k={k} eps0={eps0} eps={eps} {name}")


@pytest.mark.slow
def test_fast_contains_exact_random_atoms() -> None:
    """Random laws (one positive atom, up to three non-positive ones), not only k-RR's."""
    rng = np.random.default_rng(20261124)
    for case in range(40):
        size = int(rng.integers(2, 5))
        values = [float(rng.uniform(0.05, 2.0))]
        values += [-float(rng.uniform(0.0, 2.0)) for _ in range(size - 1)]
        probs = rng.dirichlet(np.ones(size))
        atoms = [Atom(v, float(p)) for v, p in zip(values, probs, strict=True)]
        n = int(rng.choice([2_000, 5_000, 20_000]))
        if fast_mean_positive_part(n, atoms) is None:
            continue  # a degenerate tilted law: the method declines (the exact engine runs)
        _check(n, atoms, True, f"case {case}: n={n} {atoms}")


@pytest.mark.parametrize("n", [10**7, 10**8, 10**9])
@pytest.mark.parametrize(("k", "eps0", "c"), [(15, 4.0, 30.0), (3, 1.0, 10.0), (100, 8.0, 300.0)])
def test_fast_at_large_n(n: int, k: int, eps0: float, c: float) -> None:
    """Beyond the exact engine's reach the bracket still exists and stays narrow (eps = c /
    sqrt(n) keeps delta between 1e-25 and 1e-8)."""
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    fast = fast_mean_positive_part(n, blanket_atoms(mech, c / math.sqrt(n)))
    assert fast is not None
    assert 1e-290 < fast.lower <= fast.upper <= fast.lower * (1.0 + WIDTH_CLAIM)


def test_dispatch_uses_exact_where_cheap_and_fast_beyond() -> None:
    """mean_positive_part is the exact engine below EXACT_CELLS and the Fourier bracket above."""
    small = ShuffledKRR(n=1_000, k=15, eps0=4.0)
    atoms = blanket_atoms(small, 0.1)
    assert mean_positive_part(1_000, atoms) == exact_mean_positive_part(1_000, atoms)
    big = ShuffledKRR(n=10**6, k=15, eps0=4.0)
    atoms = blanket_atoms(big, 0.05)
    got = mean_positive_part(10**6, atoms)
    assert got == fast_mean_positive_part(10**6, atoms)
    assert EXACT_CELLS < 1e8  # n = 1e6 is above it for these parameters
    exact = exact_mean_positive_part(10**6, atoms)
    assert got.lower <= exact.upper and exact.lower <= got.upper


def test_no_positive_atom_is_zero() -> None:
    assert mean_positive_part(10**9, [Atom(-1.0, 0.5), Atom(0.0, 0.5)]) == Bracket.exact_zero()


def test_width_near_smoothing_term() -> None:
    """The smoothing's share of the width is about 2 (tau theta)^2 = 2 TAU_FRACTION^2."""
    from shuffledp.accountant.engines import gsum_fast

    mech = ShuffledKRR(n=10**6, k=15, eps0=4.0)
    fast = fast_mean_positive_part(10**6, blanket_atoms(mech, 0.05))
    assert fast is not None
    width = fast.upper / fast.lower - 1.0
    assert width <= 4.0 * gsum_fast.TAU_FRACTION**2 + 1e-6
    assert math.isfinite(width)


@pytest.mark.parametrize("n", [1_000, 10_000])
@pytest.mark.parametrize(
    "atoms",
    [
        [Atom(1.0, 0.2), Atom(-1.0, 0.3), Atom(-2.0, 0.1), Atom(0.0, 0.4)],
        [Atom(3.0, 0.1), Atom(-1.0, 0.5), Atom(0.0, 0.4)],
        [Atom(1.0, 0.45), Atom(-1.0, 0.55)],
    ],
)
def test_fast_contains_exact_lattice(n: int, atoms: list[Atom]) -> None:
    """Integer atoms: |phi| returns to exactly 1 at t = 2 pi m, so those cells must be evaluated,
    never skipped, and S = 0 has positive probability (the smoothing's worst case)."""
    _check(n, atoms, False, f"n={n} {atoms}")
