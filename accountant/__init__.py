"""shuffledp.accountant: tight, labelled (eps, delta) for shuffled k-randomized response.

Typical use::

    from shuffledp.accountant import ShuffledKRR, Tight, eps_for_delta
    mech = ShuffledKRR(n=10_000, k=15, eps0=4.0)
    Tight().delta(mech, eps=1.0)          # DeltaResult with delta_lower <= truth <= delta_upper
    eps_for_delta(Tight(), mech, 1e-6)    # EpsResult; .eps is the valid (safe-side) value
    compose(mech, 2, delta=1e-6)          # ComposedResult after 2 rounds (dp-accounting PLDs)
    privacy_loss_distribution(mech)       # dp-accounting's PrivacyLossDistribution of one round

See docs/accounting.md for the bounds, what each guarantees, and the numerics.
"""

from typing import TYPE_CHECKING, Any

from shuffledp.accountant.bounds.base import (
    AllOthersX0,
    BiswasLiteral,
    BlanketAnalytic,
    Bound,
    BoundKind,
    Clones,
    DeltaResult,
    Erlingsson,
    KRRClones,
    OutsideConditionsError,
    SingleBin,
    StrongAdversary,
    WangKRR,
)
from shuffledp.accountant.bounds.blanket import BlanketPair, OptimalBlanket
from shuffledp.accountant.bounds.largest_group import LargestGroup
from shuffledp.accountant.bounds.renyi_girgis import RenyiGirgis, compose_rdp, rdp_epsilon
from shuffledp.accountant.engines.pairs import (
    Bracket,
    CloneFormPair,
    TwoCountPair,
    hockey_stick,
    hockey_stick_both,
)
from shuffledp.accountant.inversion import EpsResult, calibrate_eps0, eps_for_delta
from shuffledp.accountant.mechanism import InvalidParameterError, ShuffledKRR
from shuffledp.accountant.registry import BOUND_NAMES, make_bound, needs_nx0
from shuffledp.accountant.tight import Tight
from shuffledp.accountant.worst_case.family import FamilyF

if TYPE_CHECKING:
    from shuffledp.accountant.composition.pair_pld import ComposedResult, compose, compose_rounds
    from shuffledp.accountant.composition.privacy_loss import (
        PLD_BOUND_NAMES,
        privacy_loss_distribution,
        privacy_loss_distributions,
    )

_LAZY = {
    "ComposedResult": "composition.pair_pld",
    "compose": "composition.pair_pld",
    "compose_rounds": "composition.pair_pld",
    "PLD_BOUND_NAMES": "composition.privacy_loss",
    "privacy_loss_distribution": "composition.privacy_loss",
    "privacy_loss_distributions": "composition.privacy_loss",
}


def __getattr__(name: str) -> Any:
    # composition imports dp_accounting (about 0.9 s, mostly scipy.signal); only accounting over
    # rounds needs it, so hops, clients and the analyzer do not pay for it at start-up.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"shuffledp.accountant.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BOUND_NAMES",
    "PLD_BOUND_NAMES",
    "AllOthersX0",
    "BiswasLiteral",
    "BlanketAnalytic",
    "BlanketPair",
    "Bound",
    "BoundKind",
    "Bracket",
    "CloneFormPair",
    "Clones",
    "ComposedResult",
    "DeltaResult",
    "EpsResult",
    "Erlingsson",
    "FamilyF",
    "InvalidParameterError",
    "KRRClones",
    "LargestGroup",
    "OptimalBlanket",
    "OutsideConditionsError",
    "RenyiGirgis",
    "ShuffledKRR",
    "SingleBin",
    "StrongAdversary",
    "Tight",
    "TwoCountPair",
    "WangKRR",
    "calibrate_eps0",
    "compose",
    "compose_rdp",
    "compose_rounds",
    "eps_for_delta",
    "hockey_stick",
    "hockey_stick_both",
    "make_bound",
    "needs_nx0",
    "privacy_loss_distribution",
    "privacy_loss_distributions",
    "rdp_epsilon",
]
