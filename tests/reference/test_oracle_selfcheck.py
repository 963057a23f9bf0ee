"""Self-checks of the test references tests/reference/oracle.py and tests/reference/mpmath_pairs.py.

All comparisons are made inside ``mpmath.workdps(80)``: mpmath arithmetic outside such a block runs
at the global default of 15 digits, which would silently destroy the 60-80 digit references.
"""

from __future__ import annotations

import itertools
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import mpmath
import pytest

from tests.paths import REPO_ROOT

# `pytest` (unlike `python -m pytest`) does not put the repository root on sys.path while
# tests/ has no __init__.py; the references are imported as tests.reference.oracle / tests.reference.mpmath_pairs.
_ROOT = str(REPO_ROOT)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from tests.reference import mpmath_pairs, oracle  # noqa: E402

Mpf = Any
Law = dict[Any, Mpf]

TIGHT = "1e-70"  # oracle vs oracle (both 80 digits)
CROSS = "1e-45"  # oracle (80 digits) vs mpmath_pairs (60 digits)


def close(a: Mpf, b: Mpf, tol: str) -> bool:
    with mpmath.workdps(80):
        return bool(abs(a - b) <= mpmath.mpf(tol))


def matches_printed(value: Mpf, printed: str) -> bool:
    """True iff ``value`` rounds to the decimal string ``printed`` (half a unit in its last
    printed digit, plus a relative 1e-30 of slack for the rounding of ``value`` itself)."""
    ulp = Decimal(1).scaleb(Decimal(printed).as_tuple().exponent)  # type: ignore[arg-type]
    with mpmath.workdps(80):
        ref = mpmath.mpf(printed)
        return bool(abs(value - ref) <= mpmath.mpf(str(ulp)) / 2 + abs(ref) * mpmath.mpf("1e-30"))


def law_from_latents(latents: Iterator[tuple[Mpf, Any]]) -> Law:
    """Accumulate (probability, outcome) pairs into a law."""
    out: defaultdict[Any, Mpf] = defaultdict(lambda: mpmath.mpf(0))
    with mpmath.workdps(80):
        for p, o in latents:
            out[o] += p
    return dict(out)


def total(law: Law) -> Mpf:
    with mpmath.workdps(80):
        return mpmath.fsum(law.values())


# ----------------------------------------------------------------------------------------------
# Histogram distributions
# ----------------------------------------------------------------------------------------------

DP_CASES = [
    ((), 0, 2, 0.5),
    ((1,), 0, 2, 1.0),
    ((0, 1, 1), 1, 2, 0.25),
    ((0, 1, 2), 1, 3, 0.7),
    ((2, 2, 0, 1), 0, 3, 2.0),
    ((3, 3, 0, 1), 2, 4, 1.3),
    ((0, 0, 0, 0), 3, 4, "0.1"),
]


@pytest.mark.parametrize(("others", "user_value", "k", "eps0"), DP_CASES)
def test_dp_equals_bruteforce(others: tuple[int, ...], user_value: int, k: int, eps0: Any) -> None:
    dp = oracle.histogram_distribution(others, user_value, k, eps0)
    bf = oracle.histogram_distribution_bruteforce(others, user_value, k, eps0)
    assert set(dp) == set(bf)
    assert all(sum(h) == len(others) + 1 and len(h) == k for h in dp)
    for h, p in dp.items():
        assert close(p, bf[h], TIGHT)


@pytest.mark.parametrize(("others", "user_value", "k", "eps0"), DP_CASES)
def test_distributions_sum_to_one(
    others: tuple[int, ...], user_value: int, k: int, eps0: Any
) -> None:
    assert close(total(oracle.histogram_distribution(others, user_value, k, eps0)), 1, TIGHT)
    assert close(
        total(oracle.histogram_distribution_bruteforce(others, user_value, k, eps0)), 1, TIGHT
    )


def test_krr_probs() -> None:
    pt, pb = oracle.krr_probs(4, 0)
    assert close(pt, mpmath.mpf(1) / 4, TIGHT) and close(pb, mpmath.mpf(1) / 4, TIGHT)
    with mpmath.workdps(80):
        eps0 = mpmath.log(13)
    pt, pb = oracle.krr_probs(4, eps0)
    with mpmath.workdps(80):
        assert close(pt, mpmath.mpf(13) / 16, TIGHT) and close(pb, mpmath.mpf(1) / 16, TIGHT)


def test_split_tables_are_the_multinomial_and_sum_to_one() -> None:
    """The (C, A) table behind mpmath_pairs equals the Multinomial(m; q/2, q/2) pmf."""
    m, q = 9, mpmath.mpf("0.3")
    with mpmath.workdps(mpmath_pairs.DPS):
        table = mpmath_pairs._split_table(m, q)
        assert close(mpmath.fsum(mpmath.fsum(row) for row in table), 1, CROSS)
        for c in range(m + 1):
            for a in range(c + 1):
                b = c - a
                direct = (
                    mpmath.factorial(m)
                    / (mpmath.factorial(a) * mpmath.factorial(b) * mpmath.factorial(m - c))
                    * (q / 2) ** c
                    * (1 - q) ** (m - c)
                )
                assert close(table[c][a + 1], direct, CROSS)


# ----------------------------------------------------------------------------------------------
# docs/accounting.md known answers
# ----------------------------------------------------------------------------------------------


def test_section3_all_others_hold_x0_beats_wang() -> None:
    """n=4, k=3, eps0=0.5, eps=0.3: the dataset (0,0,0) gives 0.0124612 (full histogram), which
    exceeds wang-krr's 0.0120398; it is also the worst dataset."""
    full = oracle.dataset_delta((0, 0, 0), 3, 0.5, 0.3)
    assert matches_printed(full, "0.0124612")
    wang = max(mpmath_pairs.wang_krr(4, 3, 0.5, 0.3))
    assert matches_printed(wang, "0.0120398")
    worst, witness = oracle.worst_case_delta(4, 3, 0.5, 0.3)
    assert witness == (0, 0, 0) and close(worst, full, TIGHT)
    # The 0.0124612 is the full-histogram value, not the single-bin one (which is smaller).
    single = max(oracle.single_bin_exact(4, 3, 0.5, 3, 0.3))
    assert matches_printed(single, "0.00755702")


@pytest.mark.parametrize(
    ("n", "eps0", "eps"), [(2, 0.5, 0.05), (4, 0.5, 0.3), (5, 1.0, 0.3), (6, 2.0, 0.7)]
)
def test_x2_family_equals_wang_for_k3(n: int, eps0: float, eps: float) -> None:
    x2 = oracle.x2_dataset_delta(n, 3, eps0, eps)
    a, b = mpmath_pairs.wang_krr(n, 3, eps0, eps)
    assert close(a, b, CROSS)  # the pair is symmetric
    assert close(x2, max(a, b), "1e-40")


@pytest.mark.parametrize(("n", "k", "eps0", "eps"), [(2, 4, 0.5, 0.3), (5, 4, 1.0, 0.3)])
def test_x2_family_exceeds_wang_for_k4(n: int, k: int, eps0: float, eps: float) -> None:
    """For k >= 4 the identity of docs/accounting.md ("Reference values") is only an inequality: the full
    histogram also splits u's 'rest' reports between x2 and the other values, so the x2 dataset
    leaks more than the wang-krr view (N1', N2'), which is a post-processing of it."""
    x2 = oracle.x2_dataset_delta(n, k, eps0, eps)
    wang = max(mpmath_pairs.wang_krr(n, k, eps0, eps))
    with mpmath.workdps(80):
        assert x2 > wang + mpmath.mpf("1e-6")


@pytest.mark.parametrize(
    ("eps", "printed"), [(0.1, "6.1467e-3"), (0.5, "2.6062e-8"), (1.0, "2.6981e-18")]
)
def test_section1_single_bin_table(eps: float, printed: str) -> None:
    exact = oracle.single_bin_exact(100, 10, 2, 80, eps)
    assert matches_printed(exact[0], printed)
    ref = mpmath_pairs.single_bin(100, 10, 2, 80, eps)
    with mpmath.workdps(80):
        assert close(ref[0] / exact[0], 1, CROSS) and close(ref[1], exact[1], CROSS)


@pytest.mark.slow
def test_section2_strong_adversary_n1000() -> None:
    """n=1000, k=4, eps0=ln 13 (pb = 1/16): about 6 s in total (the table is cached)."""
    with mpmath.workdps(80):
        eps0 = mpmath.log(13)
    for eps, printed in [(0.5, "2.2446543775e-4"), (1, "8.2924068726e-9")]:
        a, b = mpmath_pairs.strong_adversary(1000, 4, eps0, eps)
        assert matches_printed(a, printed) and matches_printed(b, printed)


# ----------------------------------------------------------------------------------------------
# Cross-checks between independent code paths
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "eps0"), [(2, 0.5), (4, 1.0), (6, 2.0)])
def test_single_bin_is_full_histogram_for_k2(n: int, eps0: float) -> None:
    """For k = 2 the histogram is the count of 0s: single-bin (convolution of binomials) must
    equal the full-histogram DP with nx0 zeros and n-1-nx0 ones among the others."""
    for nx0 in range(n):
        others = (0,) * nx0 + (1,) * (n - 1 - nx0)
        for eps in (0.05, 0.4):
            sb = oracle.single_bin_exact(n, 2, eps0, nx0, eps)
            full = oracle.dataset_delta_pair(others, 2, eps0, eps)
            assert close(sb[0], full[0], TIGHT) and close(sb[1], full[1], TIGHT)


def _latent_pair(
    n: int,
    q_c: Mpf,
    p_delta: Mpf,
    view: Callable[[int, int, int], tuple[int, int]],
) -> tuple[Law, Law]:
    """Laws of view(C, A, Delta) for C ~ Bin(n-1, q_c), A ~ Bin(C, 1/2), Delta ~ Bern(p_delta)
    (P) and Delta ~ Bern(1-p_delta) (Q), by enumerating the latent variables."""

    def latents(pd: Mpf) -> Iterator[tuple[Mpf, tuple[int, int]]]:
        m = n - 1
        for c in range(m + 1):
            pc = mpmath.binomial(m, c) * q_c**c * (1 - q_c) ** (m - c)
            for a in range(c + 1):
                pa = mpmath.binomial(c, a) / mpmath.mpf(2) ** c
                for d, pdv in ((1, pd), (0, 1 - pd)):
                    yield pc * pa * pdv, view(c, a, d)

    with mpmath.workdps(80):
        return law_from_latents(latents(p_delta)), law_from_latents(latents(1 - p_delta))


@pytest.mark.parametrize(("n", "k", "eps0"), [(2, 3, 0.5), (5, 3, 1.0), (7, 4, 2.0)])
def test_pairs_against_latent_enumeration(n: int, k: int, eps0: float) -> None:
    """mpmath_pairs (table + index arithmetic) vs enumerating the pairs' latent variables."""
    with mpmath.workdps(80):
        e0 = mpmath.exp(mpmath.mpf(eps0))
        pt, pb = oracle.krr_probs(k, eps0)

        def fmt_view(c: int, a: int, d: int) -> tuple[int, int]:
            return a + d, c - a + 1 - d

        clones_p, clones_q = _latent_pair(n, 1 / e0, e0 / (e0 + 1), fmt_view)
        krr_p, krr_q = _latent_pair(n, 2 * pb, pt / (pt + pb), fmt_view)

        # strong adversary and wang: enumerate (N1, N2, rest) ~ Mult(n-1; pb, pb, 1-2pb) directly
        m = n - 1
        others = [
            (
                mpmath.factorial(m)
                / (mpmath.factorial(a) * mpmath.factorial(b) * mpmath.factorial(m - a - b))
                * pb ** (a + b)
                * (1 - 2 * pb) ** (m - a - b),
                a,
                b,
            )
            for a in range(m + 1)
            for b in range(m + 1 - a)
        ]
        sa_p = law_from_latents((w, (a + 1, b)) for w, a, b in others)
        sa_q = law_from_latents((w, (a, b + 1)) for w, a, b in others)
        rest = 1 - pt - pb
        wang_p = law_from_latents(
            (w * pu, (a + da, b + db))
            for w, a, b in others
            for pu, da, db in ((pt, 1, 0), (pb, 0, 1), (rest, 0, 0))
        )
        wang_q = law_from_latents(
            (w * pu, (a + da, b + db))
            for w, a, b in others
            for pu, da, db in ((pb, 1, 0), (pt, 0, 1), (rest, 0, 0))
        )
        for law in (clones_p, clones_q, krr_p, krr_q, sa_p, sa_q, wang_p, wang_q):
            assert close(total(law), 1, TIGHT)

        s = pt + pb
        for eps in (0.0, 0.1, 0.6, 1.5):
            hs = oracle.hockey_stick
            cases = [
                (mpmath_pairs.clones(n, eps0, eps), hs(clones_p, clones_q, eps), 1),
                (mpmath_pairs.krr_clones(n, k, eps0, eps), hs(krr_p, krr_q, eps), s),
                (mpmath_pairs.strong_adversary(n, k, eps0, eps), hs(sa_p, sa_q, eps), 1),
                (mpmath_pairs.wang_krr(n, k, eps0, eps), hs(wang_p, wang_q, eps), 1),
            ]
            for (got_pq, got_qp), want, scale in cases:
                # all four pairs are symmetric under swapping the two coordinates
                assert close(got_pq, scale * want, CROSS) and close(got_qp, scale * want, CROSS)


# ----------------------------------------------------------------------------------------------
# Ranges, and the bracket of docs/accounting.md ("The exhaustive oracle") on tiny instances
# ----------------------------------------------------------------------------------------------

GRID = list(itertools.product((0.5, 2.0), (0.0, 0.05, 0.7)))


@pytest.mark.parametrize(("n", "k"), [(2, 2), (4, 3), (6, 4), (40, 5)])
def test_every_pair_is_in_unit_interval(n: int, k: int) -> None:
    values: list[Mpf] = []
    for eps0, eps in GRID:
        values += mpmath_pairs.strong_adversary(n, k, eps0, eps)
        values += mpmath_pairs.clones(n, eps0, eps)
        values += mpmath_pairs.krr_clones(n, k, eps0, eps)
        values += mpmath_pairs.wang_krr(n, k, eps0, eps)
        values += mpmath_pairs.single_bin(n, k, eps0, n // 2, eps)
        values += oracle.single_bin_exact(n, k, eps0, n // 2, eps)
        if n <= 6:
            values += oracle.dataset_delta_pair((0,) * (n - 1), k, eps0, eps)
            values.append(oracle.worst_case_delta(n, k, eps0, eps)[0])
    assert all(0 <= v <= 1 for v in values)


@pytest.mark.parametrize(("n", "k"), [(3, 2), (5, 3), (7, 3), (5, 4), (7, 4)])
def test_bounds_bracket_the_exhaustive_worst_case(n: int, k: int) -> None:
    """Upper bounds (strong-adversary, clones, krr-clones) >= tight delta >= lower bounds
    (single-bin maximised over nx0, wang-krr for k >= 3)."""
    for eps0, eps in [(0.5, 0.05), (1.0, 0.3), (2.0, 0.7)]:
        worst, _ = oracle.worst_case_delta(n, k, eps0, eps)
        uppers = [
            max(mpmath_pairs.strong_adversary(n, k, eps0, eps)),
            max(mpmath_pairs.clones(n, eps0, eps)),
            max(mpmath_pairs.krr_clones(n, k, eps0, eps)),
        ]
        lowers = [max(oracle.single_bin_exact(n, k, eps0, x, eps)) for x in range(n)]
        if k >= 3:
            lowers.append(max(mpmath_pairs.wang_krr(n, k, eps0, eps)))
        with mpmath.workdps(80):
            tol = mpmath.mpf(CROSS)
            assert all(u >= worst - tol for u in uppers)
            assert all(lo <= worst + tol for lo in lowers)
