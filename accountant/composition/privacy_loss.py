"""The accountant's privacy-loss distributions (PLDs), exported for dp-accounting composition.

Every valid upper bound that :func:`~shuffledp.accountant.composition.pair_pld` composes is the
exact divergence of a *dominating pair* (P, Q): one round of shuffled k-RR is a post-processing
of it, for every eps at once. The pessimistic PLD of that pair (losses rounded up to the grid,
whatever the outcome list leaves out counted as infinite loss, both directions kept) is therefore
a valid PLD for one round, and composing it with anything else in dp-accounting (more rounds, a
Gaussian or Laplace mechanism, another PLD) gives a valid guarantee for the composition.

:func:`privacy_loss_distribution` gives one family's PLD (by default optimal-blanket's pair,
krr-clones' where optimal-blanket's is too large to list); :func:`privacy_loss_distributions`
gives every family's, keyed by name. Each is valid alone; the smallest delta over the families of
a composition is valid too, and is what ``compose`` / ``compose_rounds`` return, less the bound
on the FFT's rounding they add on the safe side (``composition.fft_error``,
``composition.convolution_error``)::

    from shuffledp.accountant import ShuffledKRR, privacy_loss_distribution
    pld = privacy_loss_distribution(ShuffledKRR(n=1000, k=5, eps0=2.0))
    pld.compose(pld).get_epsilon_for_delta(1e-6)   # two rounds, dp-accounting's own composition

To compose with another dp-accounting PLD, build both on the same grid: pass
``value_discretization_interval=discretization`` to dp-accounting's constructors (default
:data:`~shuffledp.accountant.composition.DISCRETIZATION`, 1e-4).
"""

from __future__ import annotations

from dp_accounting.pld import privacy_loss_distribution as pld_lib

from shuffledp.accountant.bounds.base import UPPER_BOUNDS
from shuffledp.accountant.composition.pair_pld import (
    DISCRETIZATION,
    BlanketFamily,
    BoundFamily,
    PairFamily,
    PairSource,
    default_families,
    family_of,
    pair_pld,
)
from shuffledp.accountant.mechanism import InvalidParameterError, ShuffledKRR

__all__ = ["PLD_BOUND_NAMES", "privacy_loss_distribution", "privacy_loss_distributions"]

#: The bounds whose dominating pair has a PLD here ("optimal-blanket" falls back to krr-clones'
#: pair where its own is too large to list).
PLD_BOUND_NAMES: tuple[str, ...] = (BlanketFamily.name, *(cls.name for cls in UPPER_BOUNDS))


def privacy_loss_distribution(
    mech: ShuffledKRR,
    *,
    bound: str | PairSource | PairFamily = BlanketFamily.name,
    discretization: float = DISCRETIZATION,
) -> pld_lib.PrivacyLossDistribution:
    """dp-accounting's pessimistic ``PrivacyLossDistribution`` of one round of ``mech``, from the
    dominating pair of ``bound`` (a name of :data:`PLD_BOUND_NAMES`, a PairSource or a
    PairFamily; a family's fallback, if it uses one, is counted in its ``fallback_rounds``).

    ``discretization``: the width of the loss grid (> 0); compose only PLDs on the same grid.
    The PLD overstates each loss by less than one grid step, so its delta at eps lies between the
    pair's exact delta at eps and at eps - discretization. InvalidParameterError for a mech that
    is not a ShuffledKRR, an unknown bound or a bad discretization.
    """
    if not isinstance(mech, ShuffledKRR):
        raise InvalidParameterError(f"mech must be a ShuffledKRR, got {type(mech).__name__}")
    if isinstance(discretization, bool) or not isinstance(discretization, int | float):
        raise InvalidParameterError(f"discretization must be a number > 0, got {discretization!r}")
    if not discretization > 0:
        raise InvalidParameterError(f"discretization must be > 0, got {discretization}")
    # optimal-blanket's family falls back to krr-clones' pair where its own is too large to
    # list (counted in its fallback_rounds), as compose_rounds does.
    return pair_pld(_pair_source(bound), mech, float(discretization))


def privacy_loss_distributions(
    mech: ShuffledKRR, *, discretization: float = DISCRETIZATION
) -> dict[str, pld_lib.PrivacyLossDistribution]:
    """Every family's PLD of one round of ``mech`` (the families ``compose`` takes the minimum
    over), keyed by bound name. Compose each the same way and keep the smallest delta (or eps):
    each is valid, so the smallest is."""
    return {
        source.name: privacy_loss_distribution(mech, bound=source, discretization=discretization)
        for source in default_families()
    }


def _pair_source(bound: str | PairSource | PairFamily) -> PairFamily:
    if isinstance(bound, str):
        if bound == BlanketFamily.name:
            return BlanketFamily()
        for cls in UPPER_BOUNDS:
            if cls.name == bound:
                return BoundFamily(cls())
        raise InvalidParameterError(
            f"bound must be one of {', '.join(PLD_BOUND_NAMES)} (a bound with a dominating "
            f"pair), got {bound!r}"
        )
    if not callable(getattr(bound, "dominating_pair", None)) or not isinstance(
        getattr(bound, "name", None), str
    ):
        raise InvalidParameterError(
            "bound must be a bound name or an object with .name and .dominating_pair(mech), "
            f"got {bound!r}"
        )
    return family_of(bound)
