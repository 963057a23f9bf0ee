"""Composition over r rounds with dp-accounting's privacy-loss distributions (PLDs).

Each valid upper bound here is the exact divergence of a *dominating pair* (the mechanism's output
pair is a post-processing of it, for every eps at once), so the r-fold composition of the pair
dominates r rounds of the mechanism. The guarantee after r rounds is the minimum over the pairs of
their composed delta (each is valid, so the smallest is too).

The PLD is built pessimistically: losses rounded up to the discretization grid, everything left
out of the outcome list counted as infinite loss. Both directions are built explicitly and passed
with ``symmetric=False``: dp-accounting's default ``symmetric=True`` keeps one direction only,
which under-reports delta for asymmetric pairs (docs/accounting.md, Composition).

Rounds with different n (a user's history in ``shuffledp stream``): :func:`compose_rounds`,
one PLD per round and family, composed with dp-accounting. :class:`FastPLD` is the same
composition with dp-accounting's tail search vectorised, for the stream's many histories.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
from dp_accounting.pld import pld_pmf
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import signal

from shuffledp.accountant.bounds.base import UPPER_BOUNDS, KRRClones, OutsideConditionsError
from shuffledp.accountant.bounds.blanket import MAX_PAIR_OUTCOMES, OptimalBlanket
from shuffledp.accountant.engines.numerics import FloatArray
from shuffledp.accountant.mechanism import (
    InvalidParameterError,
    ShuffledKRR,
    require_delta,
    require_eps,
)


class ListedPair(Protocol):
    """A dominating pair given as outcomes: (log P, log Q, mass left out)."""

    def outcome_log_pmfs(self) -> tuple[FloatArray, FloatArray, float]: ...


@runtime_checkable
class CoarseListedPair(Protocol):
    """A listed pair whose outcome list grows with n and that can list, instead, a pair that
    dominates it in about ``max_outcomes`` outcomes whatever n (the clone-form pairs:
    engines.pairs.CloneFormPair.coarse_outcome_chunks states why it dominates)."""

    def outcome_count(self) -> int: ...

    def coarse_outcome_chunks(
        self, max_outcomes: int
    ) -> Iterator[tuple[FloatArray, FloatArray]]: ...


class PairSource(Protocol):
    """A bound whose value is the divergence of a dominating pair (for every eps at once): every
    :class:`~shuffledp.accountant.bounds.base.Bound` is one (``dominating_pair`` is None where it
    has no pair to list)."""

    name: str

    def dominating_pair(self, mech: ShuffledKRR) -> ListedPair | None: ...


@runtime_checkable
class PairFamily(Protocol):
    """What composition asks of a family of dominating pairs, round by round (callers ask this,
    never a concrete class; :func:`family_of` makes one of any :class:`PairSource`).

    * ``dominating_pair(mech)``: the family's pair for a round of ``mech``: its own pair, or a
      looser valid one where its own cannot be listed (counted in ``fallback_rounds``);
    * ``own_pair(mech)``: its own pair only (OutsideConditionsError where it cannot be listed):
      for one round size, where the looser pair is another member of the families anyway;
    * ``fallback_note()``: what the output must say about the looser pairs used (None if none).
    """

    name: str
    fallback_rounds: int

    def dominating_pair(self, mech: ShuffledKRR) -> ListedPair: ...

    def own_pair(self, mech: ShuffledKRR) -> ListedPair: ...

    def fallback_note(self) -> str | None: ...


class BoundFamily:
    """A bound's own dominating pair in every round (no fallback)."""

    fallback_rounds = 0

    def __init__(self, bound: PairSource) -> None:
        self.bound = bound
        self.name = bound.name

    def own_pair(self, mech: ShuffledKRR) -> ListedPair:
        pair = self.bound.dominating_pair(mech)
        if pair is None:
            raise OutsideConditionsError(f"{self.name} has no dominating pair to compose")
        return pair

    def dominating_pair(self, mech: ShuffledKRR) -> ListedPair:
        return self.own_pair(mech)

    def fallback_note(self) -> str | None:
        return None


class BlanketFamily:
    """optimal-blanket's dominating pair where it can be listed (blanket.MAX_PAIR_OUTCOMES), the
    krr-clones pair for the other rounds: each round's pair dominates that round, so their
    composition dominates the rounds' composition. ``fallback_rounds`` counts the latter."""

    name = "optimal-blanket"

    def __init__(self) -> None:
        self.fallback_rounds = 0

    def own_pair(self, mech: ShuffledKRR) -> ListedPair:
        return OptimalBlanket().dominating_pair(mech)

    def dominating_pair(self, mech: ShuffledKRR) -> ListedPair:
        try:
            return self.own_pair(mech)
        except OutsideConditionsError:
            self.fallback_rounds += 1
            return KRRClones().dominating_pair(mech)

    def fallback_note(self) -> str | None:
        """Says in how many round sizes the krr-clones pair (up to about 3x looser) stood in for
        optimal-blanket's, over its outcome cap (blanket.MAX_PAIR_OUTCOMES)."""
        if not self.fallback_rounds:
            return None
        return f"krr-clones pair in {self.fallback_rounds} round sizes too large to list"


def family_of(source: PairSource | PairFamily) -> PairFamily:
    """``source`` itself if it is a family, else its own pair every round (:class:`BoundFamily`)."""
    return source if isinstance(source, PairFamily) else BoundFamily(source)


def family_label(family: PairFamily) -> str:
    """The family's name, with what it must say about the looser pairs it used."""
    note = family.fallback_note()
    return family.name if note is None else f"{family.name} ({note})"


def default_families() -> list[PairFamily]:
    """The dominating pairs composed by default: optimal-blanket's (krr-clones' where it is too
    large to list) and those of strong-adversary, clones and krr-clones."""
    return [BlanketFamily(), *(BoundFamily(cls()) for cls in UPPER_BOUNDS)]


#: Default width of the privacy-loss grid (dp-accounting's default too).
DISCRETIZATION = 1e-4

#: Most outcomes listed for one round's pair: above it a coarse pair that dominates it is
#: listed instead (:class:`CoarseListedPair`), so memory and time do not grow with n (the
#: clone-form pairs list about 180 E[C] outcomes: 1.8e11 at n = 1e9).
MAX_LISTED_OUTCOMES = 4_000_000
#: Largest n whose round composes through a listed pair (compose, compose_rounds, the stream):
#: beyond it the outcomes' log-pmfs (differences of log-gamma values of size n log n) lose more
#: than about 1e-8 to rounding; ``shuffledp account --rounds`` (composition_bracket) composes
#: at any n.
MAX_LISTED_N = 10_000_000
#: Covers the rounding of the listed mass summed in chunks (a few ulp per term, 4e6 terms).
CHUNKED_MASS_SLACK = 1e-12


@dataclass(frozen=True, slots=True, kw_only=True)
class ComposedResult:
    """After ``rounds`` rounds: delta at eps, or eps at delta; ``pair`` is the bound that won."""

    rounds: int
    eps: float
    delta: float
    pair: str


def pld_from_log_pmfs(
    log_p: FloatArray,
    log_q: FloatArray,
    dropped: float,
    discretization: float = DISCRETIZATION,
    *,
    dense: bool = False,
) -> pld_lib.PrivacyLossDistribution:
    """A pessimistic PLD of the pair (P, Q), both directions, from log-pmfs over common outcomes.

    ``dropped`` bounds the mass (under either distribution) of outcomes not listed; it is added to
    the infinite-loss mass of both directions. ``dense``: store both directions as dense arrays
    (same values); dp-accounting keeps a PMF of <= 1000 losses sparse and converts it to dense
    in every composition with a dense one (a Python loop over the loss range), which dominates
    the cost when one round is composed onto many different histories.
    """
    remove, inf_remove = _rounded_loss_pmf(log_p, log_q, discretization)
    add, inf_add = _rounded_loss_pmf(log_q, log_p, discretization)
    return _pld_from_pmfs(
        (remove, inf_remove + dropped), (add, inf_add + dropped), discretization, dense
    )


#: One direction's rounded loss pmf {loss index: mass} and its infinite-loss mass (the mass left
#: out of the listing included).
_Rounded = tuple[dict[int, float], float]


def _pld_from_pmfs(
    remove_side: _Rounded, add_side: _Rounded, discretization: float, dense: bool
) -> pld_lib.PrivacyLossDistribution:
    """dp-accounting's pessimistic PLD of two rounded directions (infinite masses capped at 1)."""
    remove, inf_remove = remove_side[0], min(1.0, remove_side[1])
    add, inf_add = add_side[0], min(1.0, add_side[1])
    if dense:
        return pld_lib.PrivacyLossDistribution(
            _dense_pmf(remove, inf_remove, discretization),
            _dense_pmf(add, inf_add, discretization),
        )
    return pld_lib.PrivacyLossDistribution.create_from_rounded_probability(
        remove,
        inf_remove,
        discretization,
        pessimistic_estimate=True,
        rounded_probability_mass_function_add=add,
        infinity_mass_add=inf_add,
        symmetric=False,
    )


def require_listable(mech: ShuffledKRR) -> None:
    """OutsideConditionsError, in one line naming the limit, for a round over MAX_LISTED_N."""
    if mech.n > MAX_LISTED_N:
        raise OutsideConditionsError(
            f"a round of n = {mech.n:,}: the composition of listed dominating pairs (stream, "
            f"compose, compose_rounds) takes n <= {MAX_LISTED_N:,} (beyond, the outcomes' "
            "log-pmfs lose precision); shuffledp account --rounds composes at any n"
        )


def rounded_pair(pair: ListedPair, discretization: float) -> tuple[_Rounded, _Rounded]:
    """Both directions of a listed pair rounded up to the grid, the mass left out of the list
    counted as infinite loss in each. A pair over :data:`MAX_LISTED_OUTCOMES` outcomes that can
    list a coarse pair dominating it (:class:`CoarseListedPair`) lists that one, in chunks: the
    memory is one chunk and the loss grid, whatever n."""
    if isinstance(pair, CoarseListedPair) and pair.outcome_count() > MAX_LISTED_OUTCOMES:
        return _rounded_chunks(pair.coarse_outcome_chunks(MAX_LISTED_OUTCOMES), discretization)
    log_p, log_q, dropped = pair.outcome_log_pmfs()
    remove, inf_remove = _rounded_loss_pmf(log_p, log_q, discretization)
    add, inf_add = _rounded_loss_pmf(log_q, log_p, discretization)
    return (remove, inf_remove + dropped), (add, inf_add + dropped)


def _rounded_chunks(
    chunks: Iterator[tuple[FloatArray, FloatArray]], discretization: float
) -> tuple[_Rounded, _Rounded]:
    """:func:`rounded_pair` over outcomes given in chunks. Safe side: each direction's listed
    mass is summed (math.fsum of the chunks' sums), and whatever the list leaves out, 1 minus
    the smaller of the two listed masses plus CHUNKED_MASS_SLACK for the rounding of those sums,
    is counted as infinite loss in both directions (a pessimistic PLD may move any mass to
    +inf loss: its delta at every eps can only rise)."""
    sides: list[tuple[dict[int, float], list[float], list[float]]] = [({}, [], []), ({}, [], [])]
    for log_p, log_q in chunks:
        for (pmf, infinite, listed), (upper, lower) in zip(
            sides, ((log_p, log_q), (log_q, log_p)), strict=True
        ):
            part, inf_part = _rounded_loss_pmf(upper, lower, discretization)
            for index, mass in part.items():
                pmf[index] = pmf.get(index, 0.0) + mass
            infinite.append(inf_part)
            listed.append(float(np.sum(np.exp(upper))))
    kept = min(math.fsum(side[2]) for side in sides)
    dropped = max(1.0 - kept, 0.0) + CHUNKED_MASS_SLACK
    remove, add = ((pmf, math.fsum(infinite) + dropped) for pmf, infinite, _ in sides)
    return remove, add


def _dense_arrays(pmf: dict[int, float]) -> tuple[int, FloatArray]:
    """{loss index: mass} as (lowest index, masses from there on, zeros where absent)."""
    if not pmf:
        return 0, np.zeros(1)
    lower = min(pmf)
    probs = np.zeros(max(pmf) - lower + 1)
    probs[np.fromiter(pmf.keys(), dtype=np.int64) - lower] = np.fromiter(pmf.values(), float)
    return lower, probs


def _dense_pmf(
    pmf: dict[int, float], infinity_mass: float, discretization: float
) -> pld_pmf.DensePLDPmf:
    """dp-accounting's dense PMF of {loss index: mass} (pessimistic)."""
    lower, probs = _dense_arrays(pmf)
    return pld_pmf.DensePLDPmf(discretization, lower, probs, infinity_mass, True)


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
    bound: PairSource | PairFamily,
    mech: ShuffledKRR,
    discretization: float = DISCRETIZATION,
    *,
    dense: bool = False,
) -> pld_lib.PrivacyLossDistribution:
    """The pessimistic PLD of one bound's (or family's) dominating pair for a round of ``mech``
    (``dense``: see pld_from_log_pmfs)."""
    require_listable(mech)
    pair = family_of(bound).dominating_pair(mech)
    return _pld_from_pmfs(*rounded_pair(pair, discretization), discretization, dense)


def fft_error(rounds: int, pld: pld_lib.PrivacyLossDistribution) -> float:
    """A bound on the absolute rounding error of a delta of ``pld`` composed ``rounds`` times
    (0 for one round: no transform).

    dp-accounting's self_compose computes ifft(fft(x)^R) (dp_accounting.pld.common.
    self_convolve). Per transform of length L, ||err||_2 <= c log2(L) u ||x||_2 (Higham,
    "Accuracy and Stability of Numerical Algorithms", 2nd ed., Sec. 24.1; u = 2^-53); the R-th
    power of coefficients of modulus <= 1 multiplies an absolute error by at most R, and a
    composed PMF's 2-norm is at most x's. So each composed entry's errors have 2-norm at most
    c log2(L) u (R + 1) ||x||_2, and a delta, a sum of at most L entries with weights in
    [0, 1], is off by at most sqrt(L) times that. Safe side: c = 32 (a radix-2 FFT's constant
    is below 6), L = 2 (R (m - 1) + 1) for m one-round points (the support, doubled for the
    transform's padding). Composed deltas below it are rounding noise: an inverted bracket
    (lower 3.8e-17 > upper 2.8e-17 at n = 1,000, k = 10, eps0 = 2, eps = 1, R = 3) was one.
    """
    if rounds == 1:
        return 0.0
    worst = 0.0
    for probs in _pmf_probs(pld):
        length = 2 * (rounds * (probs.size - 1) + 1)
        norm = float(np.sqrt(np.sum(probs * probs)))
        per_entry = 32.0 * math.log2(length) * 2.0**-53 * (rounds + 1) * norm
        worst = max(worst, math.sqrt(length) * per_entry)
    return worst


def _pmf_probs(pld: pld_lib.PrivacyLossDistribution) -> tuple[FloatArray, FloatArray]:
    """The finite-loss masses of a PLD's two directions as dense arrays."""
    # dp-accounting has no public accessor for a PLD's two PMFs; both are read (the same
    # object for a symmetric PLD).
    return (
        np.asarray(pld._pmf_remove.to_dense_pmf()._probs, dtype=float),
        np.asarray(pld._pmf_add.to_dense_pmf()._probs, dtype=float),
    )


def convolution_error(a: FloatArray, b: FloatArray) -> float:
    """A bound on the absolute rounding error of any delta read off y = a * b computed by FFT
    (scipy.signal.fftconvolve, as dp-accounting's ``compose`` and :meth:`FastPLD.compose` do),
    for nonnegative a, b of mass <= 1 (one direction of two PLDs).

    Per transform of length L, ||fl(F x) - F x||_2 <= c log2(L) u ||F x||_2 (Higham,
    "Accuracy and Stability of Numerical Algorithms", 2nd ed., Sec. 24.1; u = 2^-53), and
    ||F x||_2 = sqrt(L) ||x||_2 for the unnormalised DFT F. The pointwise product's error is at
    most |err_a| |F b| + |F a| |err_b| + u |F a F b| (plus second-order terms), and
    |F b| <= ||b||_1 <= 1, |F a| <= 1; the inverse (1/L) F* divides a 2-norm by sqrt(L) and adds
    its own c log2(L) u ||y||_2. So ||Δy||_2 <= c log2(L) u (||a||_2 + ||b||_2 + ||y||_2), with
    ||y||_2 <= min(||a||_1 ||b||_2, ||a||_2 ||b||_1) <= min(||a||_2, ||b||_2) (Young). A delta
    is a sum over y's m = len(a) + len(b) - 1 entries (and the tails dp-accounting truncates:
    moved to the first kept loss or to the infinite loss) with weights in [0, 1], so it is off
    by at most ||Δy||_1 <= sqrt(m) ||Δy||_2. Safe side: c = 32 (a radix-2 FFT's constant is
    below 6; it also absorbs the second-order terms, the u ||y||_2 of the product and the
    pairwise sums' rounding), L = 2 m (scipy pads to a fast length below 2 m).

    Over several steps the errors add: if a carries an error e (in 1-norm), the next step
    convolves it with b, a vector of mass <= 1, and ||e * b||_1 <= ||e||_1 ||b||_1 <= ||e||_1:
    convolving with a probability vector does not amplify it (nor does the infinity mass's
    update a + b - a b, whose derivative in a is 1 - b <= 1). So a composition's bound is the
    sum of its operands' bounds and this step's (:meth:`FastPLD.compose`, :func:`compose_rounds`).
    """
    m = a.size + b.size - 1
    norm_a = float(np.sqrt(np.sum(a * a)))
    norm_b = float(np.sqrt(np.sum(b * b)))
    per_entry = 32.0 * math.log2(2 * m) * 2.0**-53 * (norm_a + norm_b + min(norm_a, norm_b))
    return math.sqrt(m) * per_entry


def pld_convolution_error(
    a: pld_lib.PrivacyLossDistribution, b: pld_lib.PrivacyLossDistribution
) -> float:
    """:func:`convolution_error` of ``a.compose(b)``: the larger of its two directions'."""
    pairs = zip(_pmf_probs(a), _pmf_probs(b), strict=True)
    return max(convolution_error(x, y) for x, y in pairs)


def require_above_rounding(delta: float, err: float, rounds: int | None = None) -> None:
    """OutsideConditionsError when a --delta is at or below a composition's rounding bound
    (``rounds``, where given, is named in the message as --rounds)."""
    if delta <= err:
        where = f" with --rounds {rounds}" if rounds is not None else ""
        raise OutsideConditionsError(
            f"--delta {delta:g}{where}: at or below the composition's numerical accuracy "
            f"({err:.1e}, the FFT's rounding error on a composed delta); ask for a larger --delta"
        )


def compose(
    mech: ShuffledKRR,
    rounds: int,
    *,
    eps: float | None = None,
    delta: float | None = None,
    bounds: Sequence[PairSource | PairFamily] | None = None,
    discretization: float = DISCRETIZATION,
) -> ComposedResult:
    """The guarantee after ``rounds`` rounds: delta at ``eps`` or eps at ``delta`` (one of them).

    ``bounds`` defaults to every valid upper bound (the ``tight`` guarantee); the smallest
    composed value is returned. Each pair's value carries its FFT's rounding bound
    (:func:`fft_error`) on the safe side: delta at eps plus it, eps at (delta minus it); a
    ``delta`` at or below it is refused (OutsideConditionsError).
    """
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise InvalidParameterError(f"rounds must be an integer >= 1, got {rounds!r}")
    if (eps is None) == (delta is None):
        raise InvalidParameterError("give exactly one of eps and delta")
    eps_v = None if eps is None else require_eps(eps)
    delta_v = None if delta is None else require_delta(delta)
    if not discretization > 0:
        raise InvalidParameterError(f"discretization must be > 0, got {discretization}")
    require_listable(mech)
    members = [family_of(m) for m in bounds] if bounds is not None else default_families()
    best: ComposedResult | None = None
    for member in members:
        # One round size: each family's own pair only (optimal-blanket's fallback, krr-clones,
        # is a member of the default families itself).
        try:
            pair = member.own_pair(mech)
        except OutsideConditionsError:
            continue  # optimal-blanket's pair too large to list: the others remain valid
        pld = _pld_from_pmfs(*rounded_pair(pair, discretization), discretization, False)
        composed = pld.self_compose(rounds) if rounds > 1 else pld
        err = fft_error(rounds, pld)
        result = _composed_result(composed, member.name, rounds, eps_v, delta_v, err)
        if eps_v is not None:
            better = best is None or result.delta < best.delta
        else:
            better = best is None or result.eps < best.eps
        if better:
            best = result
    if best is None:
        # Every listed pair refused (optimal-blanket's over its outcome cap, asked alone): say
        # so in one line (composition_bracket.compose_bracket has no cap).
        raise OutsideConditionsError(
            f"no dominating pair could be listed at n={mech.n} (optimal-blanket's is over "
            f"{MAX_PAIR_OUTCOMES:.0e} outcomes); use composition_bracket.compose_bracket"
        )
    if math.isnan(best.delta) or math.isnan(best.eps):
        raise ArithmeticError(f"composition produced nan for {mech} over {rounds} rounds")
    return best


# ----------------------------------------------------------------------------------------------
# Heterogeneous rounds (streams): each round its own n


#: A composed PLD whose finite-loss mass (in either direction) falls below this is *saturated*:
#: its delta is >= 1 - SATURATION_MASS at every eps, so it is carried as "delta = 1" instead of
#: being composed further. dp-accounting cannot compose such a PLD: its tail truncation (1e-15
#: per composition) empties the finite part and ``compose`` raises IndexError.
SATURATION_MASS = 1e-12

#: Tail mass truncated per composition (dp-accounting's default), counted as infinite loss.
TAIL_MASS_TRUNCATION = 1e-15


def finite_mass(pld: pld_lib.PrivacyLossDistribution) -> float:
    """The smaller of the two directions' finite-loss masses: 1 - delta(eps = inf).

    ``get_delta_for_epsilon(inf)`` is the larger infinity mass of the two directions (the
    hockey-stick divergence at eps = inf keeps only infinite losses).
    """
    return max(0.0, 1.0 - float(pld.get_delta_for_epsilon(math.inf)))


def compose_or_saturate(
    a: pld_lib.PrivacyLossDistribution, b: pld_lib.PrivacyLossDistribution
) -> pld_lib.PrivacyLossDistribution | None:
    """dp-accounting's ``a.compose(b)`` (pessimistic; the truncated tails count as infinite
    loss), or None (saturated: delta = 1 at every eps) when the product of the two finite masses
    is below :data:`SATURATION_MASS`. The composition's finite mass in each direction is the
    product of the operands' finite masses in that direction, which is >= the product of their
    smaller directions: a product >= SATURATION_MASS leaves dp-accounting a non-empty finite
    part."""
    if finite_mass(a) * finite_mass(b) < SATURATION_MASS:
        return None
    return a.compose(b, tail_mass_truncation=TAIL_MASS_TRUNCATION)


@dataclass(frozen=True, slots=True)
class _Direction:
    """One direction of a dense pessimistic PLD: mass probs[i] at loss (lower + i) * grid."""

    lower: int
    probs: FloatArray
    infinity: float


def _first_over(probs: FloatArray, threshold: float) -> int:
    """dp-accounting's ``_find_prefix_to_truncate`` without its Python loop: the first index
    at which the running sum exceeds ``threshold`` (len(probs) if none). np.cumsum adds in the
    same sequential order as that loop, so the index is the same."""
    over = np.cumsum(probs) > threshold
    return int(np.argmax(over)) if over.any() else int(probs.size)


class FastPLD:
    """A dense pessimistic PLD (both directions) composed with dp-accounting's arithmetic.

    :meth:`compose` is dp-accounting's ``DensePLDPmf.compose`` step for step (scipy's
    ``fftconvolve``, infinity masses a + b - a b, pessimistic tail truncation: the left tail's
    mass moved up to the first kept loss, the right tail's added to the infinite loss) with the
    tail search vectorised: dp-accounting walks the tails in a Python loop, which took half of
    the time of a stream's accounting (tests/unit/accountant/test_composition_rounds.py checks the results
    against dp-accounting's own ``compose``). Queries go through dp-accounting's
    :class:`PrivacyLossDistribution` built on the same arrays (:meth:`to_pld`).

    ``rounding`` bounds the FFTs' rounding error on any delta of it (0 for one round; the sum
    of the steps' :func:`convolution_error`): :meth:`delta` adds it, :meth:`eps` reads eps at
    delta minus it.
    """

    __slots__ = ("_pld", "add", "discretization", "remove", "rounding")

    def __init__(
        self, discretization: float, remove: _Direction, add: _Direction, rounding: float = 0.0
    ) -> None:
        self.discretization = discretization
        self.remove = remove
        self.add = add
        self.rounding = rounding
        self._pld: pld_lib.PrivacyLossDistribution | None = None

    @classmethod
    def from_log_pmfs(
        cls, log_p: FloatArray, log_q: FloatArray, dropped: float, discretization: float
    ) -> FastPLD:
        """As :func:`pld_from_log_pmfs` (same rounding, same values)."""
        remove, inf_remove = _rounded_loss_pmf(log_p, log_q, discretization)
        add, inf_add = _rounded_loss_pmf(log_q, log_p, discretization)
        return cls.from_rounded(
            (remove, inf_remove + dropped), (add, inf_add + dropped), discretization
        )

    @classmethod
    def from_rounded(
        cls, remove_side: _Rounded, add_side: _Rounded, discretization: float
    ) -> FastPLD:
        """From both directions rounded to the grid (:func:`rounded_pair`)."""
        directions = []
        for pmf, infinity in (remove_side, add_side):
            lower, probs = _dense_arrays(pmf)
            directions.append(_Direction(lower, probs, min(1.0, infinity)))
        return cls(discretization, directions[0], directions[1])

    def finite_mass(self) -> float:
        """The smaller direction's finite-loss mass."""
        return max(0.0, 1.0 - max(self.remove.infinity, self.add.infinity))

    def compose(
        self, other: FastPLD, tail_mass_truncation: float = TAIL_MASS_TRUNCATION
    ) -> FastPLD | None:
        """self then other; None when saturated (see :func:`compose_or_saturate`)."""
        if other.discretization != self.discretization:
            raise InvalidParameterError(
                f"cannot compose PLDs on different grids: {self.discretization} and "
                f"{other.discretization}"
            )
        if self.finite_mass() * other.finite_mass() < SATURATION_MASS:
            return None
        step = max(
            convolution_error(self.remove.probs, other.remove.probs),
            convolution_error(self.add.probs, other.add.probs),
        )
        return FastPLD(
            self.discretization,
            _compose_direction(self.remove, other.remove, tail_mass_truncation),
            _compose_direction(self.add, other.add, tail_mass_truncation),
            self.rounding + other.rounding + step,
        )

    def to_pld(self) -> pld_lib.PrivacyLossDistribution:
        """dp-accounting's PLD over the same arrays (built once)."""
        if self._pld is None:
            grid = self.discretization
            self._pld = pld_lib.PrivacyLossDistribution(
                pld_pmf.DensePLDPmf(
                    grid, self.remove.lower, self.remove.probs, self.remove.infinity, True
                ),
                pld_pmf.DensePLDPmf(grid, self.add.lower, self.add.probs, self.add.infinity, True),
            )
        return self._pld

    def delta(self, eps: float) -> float:
        """delta at eps (the larger direction) plus :attr:`rounding`, at most 1."""
        return min(1.0, float(self.to_pld().get_delta_for_epsilon(eps)) + self.rounding)

    def eps(self, delta: float) -> float:
        """The smallest eps on the grid's terms with delta(eps) <= delta - :attr:`rounding`
        (inf if none; OutsideConditionsError if delta <= rounding)."""
        require_above_rounding(delta, self.rounding)
        return float(self.to_pld().get_epsilon_for_delta(delta - self.rounding))

    @property
    def nbytes(self) -> int:
        return int(self.remove.probs.nbytes + self.add.probs.nbytes)


def _compose_direction(a: _Direction, b: _Direction, tail_mass_truncation: float) -> _Direction:
    probs = signal.fftconvolve(a.probs, b.probs)
    infinity = a.infinity + b.infinity - a.infinity * b.infinity
    half = tail_mass_truncation / 2
    left = _first_over(probs, half)
    right = probs.size - _first_over(probs[::-1], half)
    right = max(right, left + 1)
    left_mass = np.sum(probs[:left])
    right_mass = np.sum(probs[right:])
    kept = probs[left:right].copy()
    kept[0] += left_mass
    return _Direction(a.lower + b.lower + left, kept, infinity + float(right_mass))


#: A family's composed PLD, or None once saturated (delta = 1 at every eps; still a valid bound).
FamilyPLD = FastPLD | None


def family_delta(pld: FamilyPLD, eps: float) -> float:
    """delta at eps of a family's composed PLD (1 when saturated), at most 1."""
    return 1.0 if pld is None else pld.delta(eps)


def family_eps(pld: FamilyPLD, delta: float) -> float:
    """eps at delta of a family's composed PLD (inf when saturated or out of reach)."""
    return math.inf if pld is None else pld.eps(delta)


def compose_family(a: FamilyPLD, b: FamilyPLD) -> FamilyPLD:
    """a then b; None (saturated) if either is."""
    if a is None or b is None:
        return None
    return a.compose(b)


def pair_fast_pld(
    bound: PairSource | PairFamily, mech: ShuffledKRR, discretization: float = DISCRETIZATION
) -> FastPLD:
    """:func:`pair_pld` as a :class:`FastPLD` (same values)."""
    require_listable(mech)
    pair = family_of(bound).dominating_pair(mech)
    return FastPLD.from_rounded(*rounded_pair(pair, discretization), discretization)


def local_krr_pld(k: int, eps0: float, discretization: float = DISCRETIZATION) -> FastPLD:
    """The exact pessimistic PLD of one k-RR(eps0) report released alone (a round that ended
    with a single report: no shuffle amplification). Outcomes for x -> x': the report is x
    (P = pt, Q = pb), x' (P = pb, Q = pt), or one of the k - 2 others (P = Q = (k - 2) pb)."""
    mech = ShuffledKRR(n=2, k=k, eps0=eps0)  # validates k and eps0; only pt, pb are used
    log_pt, log_pb = mech.log_pt, mech.log_pb
    log_p = [log_pt, log_pb]
    log_q = [log_pb, log_pt]
    if k > 2:
        log_rest = math.log(k - 2) + log_pb
        log_p.append(log_rest)
        log_q.append(log_rest)
    return FastPLD.from_log_pmfs(np.array(log_p), np.array(log_q), 0.0, discretization)


def compose_rounds(
    mechs: Sequence[ShuffledKRR],
    *,
    eps: float | None = None,
    delta: float | None = None,
    bounds: Sequence[PairSource | PairFamily] | None = None,
    discretization: float = DISCRETIZATION,
) -> ComposedResult:
    """The guarantee of a sequence of rounds with different n (a user's history in a stream):
    delta at ``eps`` or eps at ``delta`` (one of them).

    For each bound family (default: every valid upper bound, as :func:`compose`), one
    pessimistic PLD per round from that family's dominating pair for the round's mechanism
    (:func:`pair_pld`), composed with dp-accounting (``PrivacyLossDistribution.compose``, in the
    order given); the composition dominates the rounds' composition because each round's pair
    dominates that round. Each family's composition is a valid bound, so the smallest is
    returned. A family whose finite-loss mass vanishes is saturated (delta = 1,
    :func:`compose_or_saturate`).

    Precision: every round's losses are rounded up to the grid, so the r-round PLD's loss is
    overstated by less than r * discretization: its delta at eps is >= the exact composed delta
    of the pairs at eps and <= that at eps - r * discretization (plus 1e-15 per composition of
    truncated tails, counted as infinite loss). Each FFT convolution's rounding is bounded by
    :func:`convolution_error` and the bounds add over the rounds: delta at eps is returned plus
    their sum, eps at (delta minus it); a ``delta`` at or below it is refused
    (OutsideConditionsError).
    """
    _require_rounds(mechs)
    if (eps is None) == (delta is None):
        raise InvalidParameterError("give exactly one of eps and delta")
    eps_v = None if eps is None else require_eps(eps)
    delta_v = None if delta is None else require_delta(delta)
    if not discretization > 0:
        raise InvalidParameterError(f"discretization must be > 0, got {discretization}")
    members = [family_of(m) for m in bounds] if bounds is not None else default_families()
    if not members:
        raise InvalidParameterError("bounds must hold at least one bound")
    best: ComposedResult | None = None
    for member in members:
        composed, err = _compose_family_rounds(member, mechs, discretization)
        # The label after composing: a family counts its fallback rounds while listing.
        label = family_label(member)
        result = _composed_result(composed, label, len(mechs), eps_v, delta_v, err)
        if eps_v is not None:
            better = best is None or result.delta < best.delta
        else:
            better = best is None or result.eps < best.eps
        if better:
            best = result
    assert best is not None
    if math.isnan(best.delta) or math.isnan(best.eps):
        raise ArithmeticError(f"composition produced nan over {len(mechs)} rounds")
    return best


def _require_rounds(mechs: Sequence[ShuffledKRR]) -> None:
    """InvalidParameterError unless ``mechs`` is a non-empty sequence of ShuffledKRR rounds."""
    if isinstance(mechs, ShuffledKRR) or not isinstance(mechs, Sequence):
        raise InvalidParameterError(
            f"mechs must be a sequence of ShuffledKRR rounds, got {type(mechs).__name__}"
        )
    if len(mechs) < 1:
        raise InvalidParameterError("mechs must hold at least 1 round, got 0")
    for index, mech in enumerate(mechs):
        if not isinstance(mech, ShuffledKRR):
            raise InvalidParameterError(
                f"mechs[{index}] must be a ShuffledKRR, got {type(mech).__name__}"
            )


def _compose_family_rounds(
    member: PairFamily, mechs: Sequence[ShuffledKRR], discretization: float
) -> tuple[pld_lib.PrivacyLossDistribution | None, float]:
    """One family's PLDs of the rounds composed in the order given (one PLD per distinct
    mechanism), or None once the composition saturates (delta = 1 whatever follows), and the
    sum of the convolutions' rounding bounds (:func:`convolution_error`)."""
    cache: dict[ShuffledKRR, pld_lib.PrivacyLossDistribution] = {}
    composed: pld_lib.PrivacyLossDistribution | None = None
    err = 0.0
    for position, mech in enumerate(mechs):
        if mech not in cache:
            cache[mech] = pair_pld(member, mech, discretization, dense=True)
        if position == 0:
            composed = cache[mech]
        else:
            assert composed is not None
            step = compose_or_saturate(composed, cache[mech])
            if step is None:
                return None, err  # saturated: delta = 1 whatever follows
            err += pld_convolution_error(composed, cache[mech])
            composed = step
    return composed, err


def _composed_result(
    composed: pld_lib.PrivacyLossDistribution | None,
    name: str,
    rounds: int,
    eps: float | None,
    delta: float | None,
    err: float,
) -> ComposedResult:
    """delta at eps plus ``err`` (1 if saturated) or, when eps is None, eps at delta minus
    ``err`` (inf if saturated; OutsideConditionsError if delta <= err): ``err`` bounds the
    composition's rounding."""
    if eps is not None:
        value = 1.0 if composed is None else float(composed.get_delta_for_epsilon(eps)) + err
        return ComposedResult(rounds=rounds, eps=eps, delta=min(1.0, value), pair=name)
    assert delta is not None
    if composed is None:
        return ComposedResult(rounds=rounds, eps=math.inf, delta=delta, pair=name)
    require_above_rounding(delta, err)
    value = float(composed.get_epsilon_for_delta(delta - err))
    return ComposedResult(rounds=rounds, eps=value, delta=delta, pair=name)
