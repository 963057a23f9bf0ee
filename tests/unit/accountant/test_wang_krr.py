"""``wang-krr`` (Wang et al., "Shuffle Differential Private Data Aggregation for Random
Population", VLDB 2024, k-RR case of the variation-ratio bound) for k = 2: the published value,
computed, and labelled as neither a guarantee nor a lower bound.

The independent computation enumerates the pair as the paper states it: the others' counts
(N1, N2) ~ Mult(n-1; pb, pb), u adds to N1 w.p. pt (P) or pb (Q), to N2 w.p. pb (P) or pt (Q),
else to neither (probability 0 for k = 2); 50-digit mpmath, both directions.
"""

from __future__ import annotations

import json
from math import comb

import mpmath
import pytest

from shuffledp.accountant import BoundKind, KRRClones, ShuffledKRR, WangKRR
from shuffledp.cli import main

K2_LABEL = (
    "published value; for k = 2 its pair is the krr-clones pair: a valid upper bound, "
    "not a lower bound"
)


def enumerated_wang(n: int, k: int, eps0: float, eps: float) -> mpmath.mpf:
    """max(H_eps(P || Q), H_eps(Q || P)) of the wang-krr pair, by enumerating (N1', N2')."""
    with mpmath.workdps(50):
        big_e = mpmath.e ** mpmath.mpf(eps0)
        pb = 1 / (big_e + k - 1)
        pt = big_e * pb
        rest_others, rest_u = 1 - 2 * pb, 1 - pt - pb
        others: dict[tuple[int, int], mpmath.mpf] = {}
        for a in range(n):
            for b in range(n - a):
                weight = comb(n - 1, a) * comb(n - 1 - a, b)
                others[(a, b)] = weight * pb ** (a + b) * rest_others ** (n - 1 - a - b)
        p: dict[tuple[int, int], mpmath.mpf] = {}
        q: dict[tuple[int, int], mpmath.mpf] = {}
        for (a, b), mass in others.items():
            for out, p_u, q_u in (
                ((a + 1, b), pt, pb),
                ((a, b + 1), pb, pt),
                ((a, b), rest_u, rest_u),
            ):
                p[out] = p.get(out, mpmath.mpf(0)) + mass * p_u
                q[out] = q.get(out, mpmath.mpf(0)) + mass * q_u
        factor = mpmath.e ** mpmath.mpf(eps)
        forward = sum((max(p[o] - factor * q[o], 0) for o in p), mpmath.mpf(0))
        backward = sum((max(q[o] - factor * p[o], 0) for o in p), mpmath.mpf(0))
        return max(forward, backward)


@pytest.mark.parametrize(
    ("n", "eps0", "eps"),
    [(5, 1.0, 0.1), (5, 2.0, 0.5), (8, 1.0, 0.3), (8, 3.0, 1.0), (8, 0.5, 0.0)],
)
def test_k2_value_matches_enumeration(n: int, eps0: float, eps: float) -> None:
    """The computed k = 2 value against the enumeration above (relative 1e-9)."""
    result = WangKRR().delta(ShuffledKRR(n=n, k=2, eps0=eps0), eps)
    exact = float(enumerated_wang(n, 2, eps0, eps))
    assert exact > 0
    assert result.delta_lower <= exact * (1 + 1e-12)
    assert result.delta_upper >= exact * (1 - 1e-12)
    assert result.delta == pytest.approx(exact, rel=1e-9)


def test_k3_still_a_lower_bound_and_matches_enumeration() -> None:
    """k >= 3 keeps its kind (lower bound); the same enumeration at n = 5, k = 3 agrees."""
    result = WangKRR().delta(ShuffledKRR(n=5, k=3, eps0=1.0), 0.2)
    assert result.kind is BoundKind.LOWER
    assert result.delta == pytest.approx(float(enumerated_wang(5, 3, 1.0, 0.2)), rel=1e-9)


def test_k2_is_labelled_an_upper_bound() -> None:
    """k = 2: the krr-clones pair, so kind upper, with the k = 2 label; k = 3: a lower bound."""
    mech = ShuffledKRR(n=8, k=2, eps0=1.0)
    bound = WangKRR()
    result = bound.delta(mech, 0.3)
    assert result.kind is BoundKind.UPPER
    assert result.extra["guarantee"] == K2_LABEL
    assert bound.kind_for(mech) is BoundKind.UPPER
    assert bound.guarantee_for(mech) == K2_LABEL
    assert bound.kind_for(ShuffledKRR(n=8, k=3, eps0=1.0)) is BoundKind.LOWER


@pytest.mark.parametrize("target", [["--eps", "0.1"], ["--delta", "0.01"]])
def test_cli_row_for_k2(capsys: pytest.CaptureFixture[str], target: list[str]) -> None:
    """`shuffledp account --bound wang-krr` at k = 2 prints the value with the k = 2 label."""
    argv = ["account", "--n", "10", "--k", "2", "--eps0", "1", *target, "--bound", "wang-krr"]
    assert main([*argv, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["results"]
    assert row["kind"] == "upper" and row["guarantee"] == K2_LABEL
    assert main(argv) == 0
    assert K2_LABEL in capsys.readouterr().out


@pytest.mark.parametrize(("n", "eps0", "eps"), [(10, 1.0, 0.1), (1000, 2.0, 0.3)])
def test_k2_pair_is_the_krr_clones_pair(n: int, eps0: float, eps: float) -> None:
    """For k = 2 the wang-krr pair and the krr-clones pair are the same law (others: C ~ Bin(n-1,
    2 pb) clones split evenly; u: x0 w.p. pt under P, pb under Q; scale pt + pb = 1), so the
    numbers agree (docs/accounting.md, "Why wang-krr is a lower bound")."""
    mech = ShuffledKRR(n=n, k=2, eps0=eps0)
    assert WangKRR().delta(mech, eps).delta == pytest.approx(
        KRRClones().delta(mech, eps).delta, rel=1e-9
    )


@pytest.mark.parametrize(("n", "eps0", "delta"), [(1000, 2.0, 1e-6), (200, 1.0, 1e-3)])
def test_eps_at_k2_is_the_upper_end(n: int, eps0: float, delta: float) -> None:
    # At k = 2 wang-krr is an upper bound: its eps(delta) must be the safe (upper) end of the
    # search, not the lower one (it was the lower end, 5e-10 below, until the kind was asked
    # per mechanism).
    result = WangKRR().eps_bracket(ShuffledKRR(n=n, k=2, eps0=eps0), delta)
    assert result.kind is BoundKind.UPPER
    assert result.eps == result.eps_upper >= result.eps_lower
