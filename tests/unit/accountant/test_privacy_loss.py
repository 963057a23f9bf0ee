"""The exported privacy-loss distributions compose in dp-accounting to what compose() reports.

Tolerance: compose() builds the same pessimistic PLD and composes it with dp-accounting's
``self_compose``; here the user's route is ``pld.compose(pld)``. Both are dp-accounting's exact
arithmetic on the same grid, so eps and delta agree to 1e-8 (observed: < 1e-10) once the bound
on the FFT's rounding that compose() and compose_rounds() add on the safe side (fft_error,
convolution_error: delta plus it, eps at delta minus it) is applied to the user's route too.
"""

from __future__ import annotations

import re

import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from shuffledp.accountant import (
    PLD_BOUND_NAMES,
    InvalidParameterError,
    ShuffledKRR,
    Tight,
    compose,
    compose_rounds,
    eps_for_delta,
    privacy_loss_distribution,
    privacy_loss_distributions,
)
from shuffledp.accountant.composition.pair_pld import (
    BlanketFamily,
    PairSource,
    fft_error,
    pld_convolution_error,
)
from shuffledp.accountant.registry import make_bound

TOLERANCE = 1e-8
DELTA = 1e-6
MECH = ShuffledKRR(n=200, k=3, eps0=1.0)


@pytest.fixture(scope="module")
def plds() -> dict[str, pld_lib.PrivacyLossDistribution]:
    return privacy_loss_distributions(MECH)


def _family(name: str) -> PairSource:
    return BlanketFamily() if name == BlanketFamily.name else make_bound(name)  # type: ignore[return-value]


def test_every_family_is_exported(plds: dict[str, pld_lib.PrivacyLossDistribution]) -> None:
    assert tuple(plds) == PLD_BOUND_NAMES
    assert all(isinstance(p, pld_lib.PrivacyLossDistribution) for p in plds.values())


@pytest.mark.parametrize("name", PLD_BOUND_NAMES)
def test_two_rounds_in_dp_accounting_match_compose_per_family(
    name: str, plds: dict[str, pld_lib.PrivacyLossDistribution]
) -> None:
    two = plds[name].compose(plds[name])
    err = fft_error(2, plds[name])
    ours = compose(MECH, 2, delta=DELTA, bounds=[_family(name)])
    assert abs(float(two.get_epsilon_for_delta(DELTA - err)) - ours.eps) <= TOLERANCE
    at_eps = compose(MECH, 2, eps=0.5, bounds=[_family(name)])
    assert abs(float(two.get_delta_for_epsilon(0.5)) + err - at_eps.delta) <= TOLERANCE


def test_the_smallest_family_is_compose_and_compose_rounds(
    plds: dict[str, pld_lib.PrivacyLossDistribution],
) -> None:
    def eps(p: pld_lib.PrivacyLossDistribution, err: float) -> float:
        return float(p.compose(p).get_epsilon_for_delta(DELTA - err))

    best = min(eps(p, fft_error(2, p)) for p in plds.values())
    assert abs(best - compose(MECH, 2, delta=DELTA).eps) <= TOLERANCE
    best_rounds = min(eps(p, pld_convolution_error(p, p)) for p in plds.values())
    assert abs(best_rounds - compose_rounds([MECH, MECH], delta=DELTA).eps) <= TOLERANCE
    # And the default PLD is the one that wins here (optimal-blanket's pair).
    default = privacy_loss_distribution(MECH)
    assert abs(eps(default, fft_error(2, default)) - best) <= TOLERANCE


def test_one_round_dominates_the_mechanism(
    plds: dict[str, pld_lib.PrivacyLossDistribution],
) -> None:
    """Each PLD is an upper bound: never below the accountant's lower bound of the truth."""
    lower = eps_for_delta(Tight(), MECH, DELTA).eps_lower
    for name, pld in plds.items():
        assert float(pld.get_epsilon_for_delta(DELTA)) >= lower, name
        for eps in (0.05, 0.2, 0.4):
            bracket = Tight().delta(MECH, eps)
            assert float(pld.get_delta_for_epsilon(eps)) >= bracket.delta_lower, (name, eps)


def test_it_composes_with_a_dp_accounting_gaussian(
    plds: dict[str, pld_lib.PrivacyLossDistribution],
) -> None:
    gaussian = pld_lib.from_gaussian_mechanism(2.0, value_discretization_interval=1e-4)
    ours = plds[BlanketFamily.name]
    both = ours.compose(gaussian)
    eps_both = float(both.get_epsilon_for_delta(DELTA))
    assert eps_both > float(ours.get_epsilon_for_delta(DELTA))
    assert eps_both > float(gaussian.get_epsilon_for_delta(DELTA))
    # Basic composition caps it: eps adds up when the deltas are split in two.
    cap = float(ours.get_epsilon_for_delta(DELTA / 2)) + float(
        gaussian.get_epsilon_for_delta(DELTA / 2)
    )
    assert eps_both <= cap


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"bound": "wang-krr"},
            "bound must be one of optimal-blanket, strong-adversary, clones, "
            "krr-clones (a bound with a dominating pair), got 'wang-krr'",
        ),
        ({"discretization": 0.0}, "discretization must be > 0, got 0.0"),
        (
            {"bound": 3},
            "bound must be a bound name or an object with .name and .dominating_pair(mech)",
        ),
    ],
)
def test_refusals_name_the_rule(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidParameterError, match=re.escape(message)):
        privacy_loss_distribution(MECH, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="mech must be a ShuffledKRR, got tuple"):
        privacy_loss_distribution((200, 3, 1.0))  # type: ignore[arg-type]
