"""renyi-girgis: Girgis et al., CCS 2021, Theorem 3.1 (eq. 5), converted and composed in RDP.

Theorem 3.1 has no condition beyond n >= 1, eps0 >= 0 and an integer order >= 2, so it holds at
every oracle-feasible size: the exhaustive oracle applies directly (delta and, more sharply, the
exact Renyi divergence of every dataset). At n <= 7 the bound is loose (its last term
exp(eps0 lambda - (n-1)/(8 e^eps0)) is of order 1), so these checks are valid but not tight.
"""

from __future__ import annotations

import itertools
import json
import math
import re

import mpmath
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

from shuffledp.accountant import (
    OutsideConditionsError,
    RenyiGirgis,
    ShuffledKRR,
    compose_rdp,
    eps_for_delta,
    make_bound,
    rdp_epsilon,
)
from shuffledp.accountant.bounds.renyi_girgis import ORDERS, rdp_curve
from shuffledp.cli import main
from tests.reference import oracle

# ----------------------------------------------------------------------------------------------
# (1) Known answers: eq. 5 evaluated independently at 50 digits


def eq5_mpmath(n: int, eps0: str, lam: int) -> mpmath.mpf:
    """Theorem 3.1, eq. 5, term by term in 50-digit arithmetic (no logs, no shared code)."""
    with mpmath.workdps(50):
        e = mpmath.exp(mpmath.mpf(eps0))
        nb = mpmath.floor((n - 1) / (2 * e)) + 1
        total = 1 + mpmath.binomial(lam, 2) * (e - 1) ** 2 / (nb * e)
        base = (e**2 - 1) ** 2 / (2 * e**2 * nb)
        for i in range(3, lam + 1):
            total += (
                mpmath.binomial(lam, i)
                * i
                * mpmath.gamma(mpmath.mpf(i) / 2)
                * base ** (mpmath.mpf(i) / 2)
            )
        total += mpmath.exp(mpmath.mpf(eps0) * lam - (n - 1) / (8 * e))
        return mpmath.log(total) / (lam - 1)


KNOWN = [
    (1000, "1.0", 2),
    (1000, "1.0", 10),
    (50, "3.0", 5),
    (10**5, "0.5", 32),
    (10**6, "2.0", 200),
    (10**9, "0.1", 3),  # tiny value: needs log1p, not log(1 + x)
    (10**7, "1.0", 1024),
]


@pytest.mark.parametrize(("n", "eps0", "lam"), KNOWN)
def test_rdp_matches_50_digit_evaluation(n: int, eps0: str, lam: int) -> None:
    exact = eq5_mpmath(n, eps0, lam)
    value = rdp_epsilon(n, float(eps0), lam)
    assert value == pytest.approx(float(exact), rel=1e-9)
    assert value >= exact  # rounded to the safe side


def test_nbar_is_the_floor() -> None:
    # n = 2 e^eps0 m + 1 lands nbar exactly on a step at eps0 = 0: (n-1)/2 = 3, nbar = 4.
    assert rdp_epsilon(7, 0.0, 2) == pytest.approx(float(eq5_mpmath(7, "0", 2)), rel=1e-12)


# ----------------------------------------------------------------------------------------------
# (2) The exhaustive oracle (delta itself: TestRenyiGirgis and test_every_bound_against_the_80_digit_worst_case in tests/reference/test_accountant_exhaustive.py)


def exact_worst_rdp(n: int, k: int, eps0: float, lam: int) -> mpmath.mpf:
    """max over every dataset of the other n-1 users and both directions of D_lam(P || Q)."""
    worst = mpmath.mpf(0)
    with mpmath.workdps(oracle.DPS):
        for others in itertools.combinations_with_replacement(range(k), n - 1):
            dist_p, dist_q = oracle._pair_for_others(others, k, mpmath.mpf(eps0))
            for a, b in ((dist_p, dist_q), (dist_q, dist_p)):
                s = sum(pa**lam * b[o] ** (1 - lam) for o, pa in a.items())
                worst = max(worst, mpmath.log(s) / (lam - 1))
    return worst


@pytest.mark.slow
@pytest.mark.parametrize(("n", "k"), [(3, 3), (5, 2), (7, 4)])
@pytest.mark.parametrize("eps0", [0.1, 0.5, 1.5])
def test_rdp_never_below_the_exact_worst_case(n: int, k: int, eps0: float) -> None:
    for lam in (2, 3, 5, 10):
        truth = exact_worst_rdp(n, k, eps0, lam)
        assert rdp_epsilon(n, eps0, lam) >= truth, (n, k, eps0, lam)


# ----------------------------------------------------------------------------------------------
# (3) Composition in RDP


@pytest.mark.parametrize("rounds", [1, 3, 50])
def test_rounds_equal_one_round_with_rounds_times_the_rdp(rounds: int) -> None:
    mech = ShuffledKRR(n=10_000, k=10, eps0=1.0)
    orders, rdp = rdp_curve(mech.n, mech.eps0)
    # dp-accounting's own conversion of rounds * eps(lambda) (Lemma 2.2 then Lemma 2.1).
    ref_delta, ref_order = rdp_lib.compute_delta(orders, rounds * rdp, 0.5)
    ref_eps, _ = rdp_lib.compute_epsilon(orders, rounds * rdp, 1e-6)
    by_delta = compose_rdp(mech, rounds, eps=0.5)
    by_eps = compose_rdp(mech, rounds, delta=1e-6)
    assert by_delta.delta == pytest.approx(ref_delta, rel=1e-9)
    assert by_delta.delta >= ref_delta
    assert by_delta.order == ref_order
    assert by_eps.eps == pytest.approx(ref_eps, rel=1e-9)
    assert by_eps.eps >= ref_eps
    if rounds == 1:
        assert by_delta.delta == RenyiGirgis().delta(mech, 0.5).delta
        assert by_eps.eps == eps_for_delta(RenyiGirgis(), mech, 1e-6).eps


def test_rdp_accountant_adds_rdp_per_order() -> None:
    # dp-accounting's RdpAccountant composes by adding RDP per order (a zCDP event has
    # eps(lambda) = rho lambda): R rounds of it equal one event with R * rho. That is the rule
    # compose_rdp applies to Theorem 3.1's curve (RdpAccountant has no event for an arbitrary
    # RDP curve, so the curve itself is checked against compute_delta/compute_epsilon above).
    from dp_accounting import dp_event

    orders = list(map(float, ORDERS))
    several = rdp_lib.RdpAccountant(orders)
    several.compose(dp_event.ZCDpEvent(0.01), count=7)
    once = rdp_lib.RdpAccountant(orders)
    once.compose(dp_event.ZCDpEvent(0.07))
    assert several.get_delta(1.0) == pytest.approx(once.get_delta(1.0), rel=1e-12)
    rho_curve = 0.07 * np.array(orders)
    assert once.get_delta(1.0) == pytest.approx(
        rdp_lib.compute_delta(orders, rho_curve, 1.0)[0], rel=1e-12
    )


def test_cli_rounds_compose_in_rdp(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["account", "--n", "10000", "--k", "10", "--eps0", "1", "--delta", "1e-6"]
    assert main([*args, "--bound", "renyi-girgis", "--rounds", "10", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["results"]
    assert row["composition"] == "rdp"
    assert "composed in RDP" in row["guarantee"]
    mech = ShuffledKRR(n=10_000, k=10, eps0=1.0)
    assert row["eps"] == compose_rdp(mech, 10, delta=1e-6).eps
    assert main([*args, "--bound", "renyi-girgis", "--rounds", "10"]) == 0
    assert "composed in RDP" in capsys.readouterr().out


# ----------------------------------------------------------------------------------------------
# (4) Refusal outside the theorem's conditions


@pytest.mark.parametrize(
    ("n", "eps0", "order", "needle"),
    [
        (100, 1.0, 1, "integer order lambda >= 2, got 1"),
        (100, 1.0, 2.5, "integer order lambda >= 2, got 2.5"),
        (100, -0.5, 2, "eps0 >= 0, got -0.5"),
        (0, 1.0, 2, "integer n >= 1, got 0"),
    ],
)
def test_refuses_outside_conditions(n: int, eps0: float, order: int, needle: str) -> None:
    with pytest.raises(OutsideConditionsError, match=re.escape(needle)):
        rdp_epsilon(n, eps0, order)


# ----------------------------------------------------------------------------------------------
# Registry, CLI and behaviour


def test_registered_after_blanket_analytic() -> None:
    from shuffledp.accountant import BOUND_NAMES

    names = list(BOUND_NAMES)
    assert names.index("renyi-girgis") == names.index("blanket-analytic") + 1
    assert isinstance(make_bound("renyi-girgis"), RenyiGirgis)


def test_monotone_in_n_and_never_zero() -> None:
    values = [
        RenyiGirgis().delta(ShuffledKRR(n=n, k=5, eps0=1.0), 0.3).delta for n in (10**3, 10**4)
    ]
    assert values[0] >= values[1] > 0.0
    tiny = RenyiGirgis().delta(ShuffledKRR(n=10**6, k=5, eps0=1.0), 0.9).delta
    assert tiny > 0.0  # an underflow reports the smallest double, not 0


@pytest.mark.slow
def test_never_below_the_tight_lower_end_at_larger_n() -> None:
    # At n = 1e4 the bound is informative; it must stay above every exact dataset delta.
    from shuffledp.accountant import Tight

    mech = ShuffledKRR(n=10_000, k=10, eps0=1.0)
    assert (
        eps_for_delta(RenyiGirgis(), mech, 1e-6).eps >= eps_for_delta(Tight(), mech, 1e-6).eps_lower
    )
    assert math.isfinite(eps_for_delta(RenyiGirgis(), mech, 1e-6).eps)
