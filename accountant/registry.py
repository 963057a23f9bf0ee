"""Bounds by name, as the command line and other components ask for them."""

from __future__ import annotations

from collections.abc import Callable

from shuffledp.accountant.bounds.base import (
    AllOthersX0,
    BiswasLiteral,
    BlanketAnalytic,
    Bound,
    Clones,
    Erlingsson,
    KRRClones,
    SingleBin,
    StrongAdversary,
    WangKRR,
)
from shuffledp.accountant.bounds.blanket import OptimalBlanket
from shuffledp.accountant.bounds.largest_group import LargestGroup
from shuffledp.accountant.bounds.renyi_girgis import RenyiGirgis
from shuffledp.accountant.mechanism import InvalidParameterError
from shuffledp.accountant.tight import Tight
from shuffledp.accountant.worst_case.family import FamilyF

_NEEDS_NX0 = {"single-bin", "biswas-literal"}

_FACTORIES: dict[str, Callable[[int | None], Bound]] = {
    "tight": lambda _: Tight(),
    "optimal-blanket": lambda _: OptimalBlanket(),
    "largest-group": lambda _: LargestGroup(),
    "strong-adversary": lambda _: StrongAdversary(),
    "clones": lambda _: Clones(),
    "krr-clones": lambda _: KRRClones(),
    "family-f": lambda _: FamilyF(),
    "wang-krr": lambda _: WangKRR(),
    "all-others-x0": lambda _: AllOthersX0(),
    "erlingsson": lambda _: Erlingsson(),
    "blanket-analytic": lambda _: BlanketAnalytic(),
    "renyi-girgis": lambda _: RenyiGirgis(),
    "single-bin": lambda nx0: SingleBin(_nx0(nx0, "single-bin")),
    "biswas-literal": lambda nx0: BiswasLiteral(_nx0(nx0, "biswas-literal")),
}

#: Every bound name, in the order `--bound all` shows them.
BOUND_NAMES: tuple[str, ...] = tuple(_FACTORIES)


def _nx0(nx0: int | None, name: str) -> int:
    if nx0 is None:
        raise InvalidParameterError(f"bound {name} needs nx0 (--nx0 M)")
    return nx0


def needs_nx0(name: str) -> bool:
    return name in _NEEDS_NX0


def make_bound(name: str, nx0: int | None = None) -> Bound:
    """The bound called ``name``; ``nx0`` is required by single-bin and biswas-literal."""
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise InvalidParameterError(
            f"unknown bound {name!r}; choose one of {', '.join(BOUND_NAMES)}"
        ) from None
    return factory(nx0)
