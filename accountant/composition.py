"""Composition over r rounds with dp-accounting's privacy-loss distributions (PLDs).

Each valid upper bound here is the exact divergence of a *dominating pair* (the mechanism's output
pair is a post-processing of it, for every eps at once), so the r-fold composition of the pair
dominates r rounds of the mechanism. The guarantee after r rounds is the minimum over the pairs of
their composed delta (each is valid, so the smallest is too).

The PLD is built pessimistically: losses rounded up to the discretization grid, everything left
out of the outcome list counted as infinite loss. Both directions are built explicitly and passed
with ``symmetric=False``: dp-accounting's default ``symmetric=True`` keeps one direction only,
which under-reports delta for asymmetric pairs (ACCOUNTING.md section 6).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from .bounds import UPPER_BOUNDS, CloneFormBound
from .mechanism import InvalidParameterError, ShuffledKRR, require_delta, require_eps
from .numerics import FloatArray

#: Default width of the privacy-loss grid (dp-accounting's default too).
DISCRETIZATION = 1e-4


@dataclass(frozen=True, slots=True, kw_only=True)
class ComposedResult:
    """After ``rounds`` rounds: delta at eps, or eps at delta; ``pair`` is the bound that won."""

    rounds: int
    eps: float
    delta: float
    pair: str


def pld_from_log_pmfs(
    log_p: FloatArray, log_q: FloatArray, dropped: float, discretization: float = DISCRETIZATION
) -> pld_lib.PrivacyLossDistribution:
    """A pessimistic PLD of the pair (P, Q), both directions, from log-pmfs over common outcomes.

    ``dropped`` bounds the mass (under either distribution) of outcomes not listed; it is added to
    the infinite-loss mass of both directions.
    """
    remove, inf_remove = _rounded_loss_pmf(log_p, log_q, discretization)
    add, inf_add = _rounded_loss_pmf(log_q, log_p, discretization)
    return pld_lib.PrivacyLossDistribution.create_from_rounded_probability(
        remove,
        min(1.0, inf_remove + dropped),
        discretization,
        pessimistic_estimate=True,
        rounded_probability_mass_function_add=add,
        infinity_mass_add=min(1.0, inf_add + dropped),
        symmetric=False,
    )


def _rounded_loss_pmf(
    log_upper: FloatArray, log_lower: FloatArray, discretization: float
) -> tuple[dict[int, float], float]:
    """{ceil(loss / discretization): mass} under the upper law, and the infinite-loss mass."""
    present = np.isfinite(log_upper)
    infinite = present & ~np.isfinite(log_lower)
    finite = present & np.isfinite(log_lower)
    loss = log_upper[finite] - log_lower[finite]
    index = np.ceil(loss / discretization).astype(np.int64)
    mass = np.exp(log_upper[finite])
    base = int(index.min()) if index.size else 0
    sums = np.bincount(index - base, weights=mass)
    nonzero = np.nonzero(sums)[0]
    pmf = {int(i) + base: float(sums[i]) for i in nonzero}
    return pmf, float(np.exp(log_upper[infinite]).sum())


def pair_pld(
    bound: CloneFormBound, mech: ShuffledKRR, discretization: float = DISCRETIZATION
) -> pld_lib.PrivacyLossDistribution:
    """The pessimistic PLD of one bound's dominating pair."""
    log_p, log_q, dropped = bound.pair(mech).outcome_log_pmfs()
    return pld_from_log_pmfs(log_p, log_q, dropped, discretization)


def compose(
    mech: ShuffledKRR,
    rounds: int,
    *,
    eps: float | None = None,
    delta: float | None = None,
    bounds: list[CloneFormBound] | None = None,
    discretization: float = DISCRETIZATION,
) -> ComposedResult:
    """The guarantee after ``rounds`` rounds: delta at ``eps`` or eps at ``delta`` (one of them).

    ``bounds`` defaults to every valid upper bound (the ``tight`` guarantee); the smallest
    composed value is returned.
    """
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise InvalidParameterError(f"rounds must be an integer >= 1, got {rounds!r}")
    if (eps is None) == (delta is None):
        raise InvalidParameterError("give exactly one of eps and delta")
    if not discretization > 0:
        raise InvalidParameterError(f"discretization must be > 0, got {discretization}")
    members = bounds if bounds is not None else [cls() for cls in UPPER_BOUNDS]
    best: ComposedResult | None = None
    for member in members:
        pld = pair_pld(member, mech, discretization)
        composed = pld.self_compose(rounds) if rounds > 1 else pld
        if eps is not None:
            eps_v = require_eps(eps)
            value = float(composed.get_delta_for_epsilon(eps_v))
            result = ComposedResult(
                rounds=rounds, eps=eps_v, delta=min(1.0, value), pair=member.name
            )
            better = best is None or result.delta < best.delta
        else:
            assert delta is not None
            delta_v = require_delta(delta)
            value = float(composed.get_epsilon_for_delta(delta_v))
            result = ComposedResult(rounds=rounds, eps=value, delta=delta_v, pair=member.name)
            better = best is None or result.eps < best.eps
        if better:
            best = result
    assert best is not None
    if math.isnan(best.delta) or math.isnan(best.eps):
        raise ArithmeticError(f"composition produced nan for {mech} over {rounds} rounds")
    return best
