"""Every delta(eps) bound for shuffled k-RR, each labelled with what it guarantees.

Kinds (see :class:`BoundKind`):

* ``upper``: a valid upper bound on delta for the released histogram, for every dataset. Only
  these may feed a reported guarantee.
* ``lower``: at most the true worst-case delta (the exact delta of concrete datasets).
* ``bracket``: ``tight``, [best lower, best upper].
* ``dataset-specific``: exact for one setting that depends on the private data; informative only.
* ``not-a-guarantee``: reproduces a published formula that is wrong; never a guarantee.

Numbers round toward the safe side: an upper bound reports the top of its numerical bracket, a
lower bound the bottom. A bound used outside the conditions under which it was proved raises
:class:`OutsideConditionsError` instead of returning a number.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar

from shuffledp.accountant.bounds.biswas_literal import biswas_literal_delta
from shuffledp.accountant.engines.crossing import lower_near, smallest_eps_at_most
from shuffledp.accountant.engines.pairs import (
    Bracket,
    CloneFormPair,
    TwoCountPair,
    single_bin_delta,
)
from shuffledp.accountant.mechanism import (
    InvalidParameterError,
    ShuffledKRR,
    require_delta,
    require_eps,
)
from shuffledp.errors import OutsideConditionsError as OutsideConditionsError


class BoundKind(StrEnum):
    UPPER = "upper"
    LOWER = "lower"
    BRACKET = "bracket"
    DATASET_SPECIFIC = "dataset-specific"
    NOT_A_GUARANTEE = "not-a-guarantee"


@dataclass(frozen=True, slots=True, kw_only=True)
class DeltaResult:
    """delta at eps from one bound. ``delta`` is the headline value on the bound's safe side."""

    bound: str
    kind: BoundKind
    eps: float
    delta: float
    delta_lower: float
    delta_upper: float
    extra: dict[str, float | str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class EpsResult:
    """eps at a target delta from one bound; ``eps`` is the headline value on the safe side."""

    bound: str
    kind: BoundKind
    delta: float
    eps: float
    eps_lower: float
    eps_upper: float
    extra: dict[str, float | str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Crossing:
    """Where a member's upper side meets a target delta (``upper``, on the safe side), and what
    an exact member (k = 2, k = 3) found on the way: the lower end of the worst case's crossing
    and its dataset (``lower``, ``witness``), and the dataset ``tight`` puts first among its
    lower members (``k2_a``: F(a); ``k3_counts``: (x0, x1, x2))."""

    upper: float
    lower: float | None = None
    witness: str = ""
    k2_a: int | None = None
    k3_counts: tuple[int, int, int] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ExactCase:
    """What an exact upper member (k = 2, k = 3) finds at one eps: its bracket on the true worst
    case, and the dataset behind its lower end, which ``tight`` puts first among its lower
    members (``k2_a``: F(a); ``k3_counts``: (x0, x1, x2))."""

    bracket: Bracket
    k2_a: int | None = None
    k3_counts: tuple[int, int, int] | None = None


class Bound(ABC):
    """A delta(eps) bound for a :class:`ShuffledKRR` mechanism: everything a user or ``tight``
    asks of a bound is a method or attribute here, so no caller needs to know its class.

    * what it means: ``name``, ``kind`` (``kind_for``), ``guarantee`` (``guarantee_for``),
      ``parameters()`` (e.g. nx0);
    * the numbers: ``bracket(mech, eps)`` / ``delta(mech, eps)``, ``eps_bracket(mech, delta)``
      (default: the one safe-side search of crossing.py), ``upper_only``;
    * where it applies: ``refusal(mech)`` (None, or why not, in the user's words); evaluating
      outside its conditions raises OutsideConditionsError;
    * composition: ``dominating_pair(mech)`` (None when it has none), ``composition``
      ("pld" for pairs, "rdp" for an RDP curve);
    * its place in ``tight`` (dominance as data): ``dominates`` (names of the bounds whose true
      value is never below this one's), ``family_a`` (F(a) members), ``post_processing_of``
      (the F(a) whose histogram this member's output post-processes), ``witness()`` (the
      dataset's name when it gives the lower end), ``upper_crossing`` (its eps(delta) inside
      ``tight``), ``exact_case`` (an exact member's worst dataset at eps).
    """

    name: str
    kind: BoundKind
    #: What the number means, one line, shown next to it.
    guarantee: str
    #: Bounds (by name) whose true value is at least this one's: once this one's bracket is
    #: narrow, ``tight`` may skip them (tight.dominated).
    dominates: ClassVar[frozenset[str]] = frozenset()
    #: How ``--rounds`` composes it: "pld" (its dominating pair's privacy loss distribution)
    #: or "rdp" (its Renyi curve).
    composition: ClassVar[str] = "pld"
    #: For a member F(a) of the lower family: a (None for every other bound).
    family_a: int | None = None

    @abstractmethod
    def bracket(self, mech: ShuffledKRR, eps: float) -> Bracket:
        """[lower, upper] around the bound's exact value at eps (eps already validated)."""

    def headline(self, bracket: Bracket) -> float:
        """The side of the bracket that is safe for this kind of bound."""
        return bracket.lower if self.kind is BoundKind.LOWER else bracket.upper

    def kind_for(self, mech: ShuffledKRR) -> BoundKind:
        """What the number means for this mechanism (``kind`` unless a bound says otherwise)."""
        return self.kind

    def guarantee_for(self, mech: ShuffledKRR) -> str:
        """The one-line label for this mechanism (``guarantee`` unless a bound says otherwise)."""
        return self.guarantee

    def parameters(self) -> dict[str, int]:
        """The bound's own parameters beyond the mechanism (single-bin's nx0), for the output."""
        return {}

    def refusal(self, mech: ShuffledKRR) -> str | None:
        """None where the bound applies to ``mech`` at some eps; otherwise why not, in the
        user's words (conditions that depend on eps or delta are checked when evaluated)."""
        return None

    def dominating_pair(self, mech: ShuffledKRR) -> object | None:
        """A pair (P, Q) whose hockey-stick divergence is this bound, for composition (None
        when the bound is not the divergence of a pair it can list)."""
        return None

    def delta(self, mech: ShuffledKRR, eps: float) -> DeltaResult:
        eps = require_eps(eps)
        b = self.bracket(mech, eps)
        kind = self.kind_for(mech)
        return DeltaResult(
            bound=self.name,
            kind=kind,
            eps=eps,
            delta=b.lower if kind is BoundKind.LOWER else b.upper,
            delta_lower=b.lower,
            delta_upper=b.upper,
            extra={} if kind is self.kind else {"guarantee": self.guarantee_for(mech)},
        )

    def upper_only(self, mech: ShuffledKRR, eps: float) -> float:
        """The upper side alone at eps (what calibration needs)."""
        return self.bracket(mech, eps).upper

    def eps_bracket(self, mech: ShuffledKRR, delta: float) -> EpsResult:
        """The eps at which the bound meets ``delta``, rounded to its safe side."""
        return self._eps_bracket(mech, require_delta(delta))

    def calibration_shortcut(self, n: int, k: int, eps: float, delta: float) -> float | None:
        """A faster route to calibrate_eps0's answer where the bound has one (None: search)."""
        return None

    def _eps_bracket(self, mech: ShuffledKRR, delta: float) -> EpsResult:
        """The one safe-side search (crossing.py) over both sides of the bracket."""
        start = self.zero_from(mech)
        start = mech.eps0 if math.isinf(start) else start

        def upper(eps: float) -> float:
            return self.bracket(mech, eps).upper

        def lower(eps: float) -> float:
            return self.bracket(mech, eps).lower

        eps_upper = smallest_eps_at_most(upper, delta, start, upper_side=True)
        eps_lower = lower_near(lower, delta, start, eps_upper)
        # What the number means for this mechanism (wang-krr is an upper bound at k = 2): the
        # headline of an upper bound is its upper end, the safe side.
        kind = self.kind_for(mech)
        headline = eps_lower if kind is BoundKind.LOWER else eps_upper
        return EpsResult(
            bound=self.name,
            kind=kind,
            delta=delta,
            eps=headline,
            eps_lower=eps_lower,
            eps_upper=eps_upper,
        )

    def _closed_form_eps(self, delta: float, value: float) -> EpsResult:
        """An EpsResult for a bound whose eps(delta) is a closed form (already safe-side)."""
        return EpsResult(
            bound=self.name,
            kind=self.kind,
            delta=delta,
            eps=value,
            eps_lower=value,
            eps_upper=value,
        )

    def upper_crossing(self, mech: ShuffledKRR, delta: float, start: float) -> Crossing:
        """Where the upper side meets ``delta`` (safe side), as ``tight``'s eps(delta) asks."""

        def up(e: float) -> float:
            return self.bracket(mech, e).upper

        return Crossing(upper=smallest_eps_at_most(up, delta, start, upper_side=True))

    def exact_case(self, mech: ShuffledKRR, eps: float) -> ExactCase | None:
        """For a member that is the exact worst case (k = 2, k = 3): its bracket at eps and the
        dataset behind its lower end; None for every other bound, and where the bound is 0."""
        return None

    def post_processing_of(self) -> int | None:
        """The a of the F(a) whose histogram this member's output is a post-processing of (so
        its delta never exceeds that F(a)'s), or None."""
        return None

    def witness(self) -> str:
        """The name of the dataset behind this member's value, as ``lower_from`` shows it."""
        return self.name

    def zero_from(self, mech: ShuffledKRR) -> float:
        """An eps at and above which this bound is exactly 0 (inf if none is known)."""
        return mech.eps0


# ---------------------------------------------------------------------------------------------
# Valid upper bounds for the released histogram


class CloneFormBound(Bound):
    """A bound that is the exact divergence of a clone-form dominating pair."""

    @abstractmethod
    def pair(self, mech: ShuffledKRR) -> CloneFormPair:
        """The dominating pair for this mechanism."""

    def bracket(self, mech: ShuffledKRR, eps: float) -> Bracket:
        return self.pair(mech).delta(eps)

    def dominating_pair(self, mech: ShuffledKRR) -> CloneFormPair:
        return self.pair(mech)


class StrongAdversary(CloneFormBound):
    """Strong ("privacy blanket") adversary: Balle, Bell, Gascon, Nissim, "The Privacy Blanket of
    the Shuffle Model", CRYPTO 2019, evaluated exactly as in Koskela, Heikkila, Honkela,
    "Tight Differential Privacy Guarantees for the Shuffle Model", 2021.

    Each other user reports a uniform "blanket" value w.p. gamma = k pb, so it lands on x0 and on
    x1 w.p. pb each; an adversary told everything else sees (N1, N2) ~ Mult(n-1; pb, pb) and u's
    report: P = (N1 + 1, N2), Q = (N1, N2 + 1). Guarantees: an upper bound on delta of the released
    histogram, for every dataset. Computed as a clone-form pair with C ~ Bin(n-1, 2 pb), D = 1.
    """

    name = "strong-adversary"
    kind = BoundKind.UPPER
    guarantee = "valid upper bound on delta for the released histogram (every dataset)"

    def pair(self, mech: ShuffledKRR) -> CloneFormPair:
        return CloneFormPair(
            n_others=mech.n - 1,
            clone_prob=2.0 * mech.pb_precise,
            clone_prob_complement=_one_minus_two_pb(mech),
            log_odds=math.inf,
        )

    def zero_from(self, mech: ShuffledKRR) -> float:
        return math.inf  # P puts mass on outcomes Q cannot produce (N2 = 0 after u's report)


class Clones(CloneFormBound):
    """Feldman, McMillan, Talwar, "Hiding Among the Clones", FOCS 2021 (Theorem 3.2, the reduction
    for any eps0-LDP randomizer), evaluated exactly rather than by their closed form or their
    numerical bracket: C ~ Bin(n-1, e^-eps0), A ~ Bin(C, 1/2), D ~ Bern(e^eps0 / (e^eps0 + 1));
    P = (A + D, C - A + 1 - D), Q = (A + 1 - D, C - A + D). Guarantees: an upper bound on delta of
    the released histogram, for every dataset (it holds for any eps0-LDP randomizer).
    """

    name = "clones"
    kind = BoundKind.UPPER
    guarantee = "valid upper bound on delta for the released histogram (any eps0-LDP randomizer)"

    def pair(self, mech: ShuffledKRR) -> CloneFormPair:
        # D's log-odds is eps0 exactly (p = e^eps0 / (e^eps0 + 1)); 1 - e^-eps0 = -expm1(-eps0).
        return CloneFormPair(
            n_others=mech.n - 1,
            clone_prob=math.exp(-mech.eps0),
            clone_prob_complement=-math.expm1(-mech.eps0),
            log_odds=mech.eps0,
        )


class KRRClones(CloneFormBound):
    """The clone reduction specialised to k-RR (argument in docs/accounting.md, "krr-clones").

    Every other user's report is a mixture "x0 w.p. pb, x1 w.p. pb, otherwise a value-dependent
    rest". An adversary told which users drew x0/x1 this way (C ~ Bin(n-1, 2 pb) of them) and all
    rest reports sees u's report alone: w.p. (k-2) pb it is a rest value (identical under both
    datasets), otherwise it adds to the clones' x0/x1 counts with D ~ Bern(pt / (pt + pb)). So
    delta <= (pt + pb) * H(clone pair with C ~ Bin(n-1, 2 pb), D ~ Bern(pt / (pt + pb))).
    Guarantees: an upper bound on delta of the released histogram, for every dataset.
    """

    name = "krr-clones"
    kind = BoundKind.UPPER
    guarantee = "valid upper bound on delta for the released histogram (every dataset)"

    def pair(self, mech: ShuffledKRR) -> CloneFormPair:
        # D ~ Bern(pt / (pt + pb)) has log-odds log(pt / pb) = eps0 exactly: passing it (not the
        # float pt / (pt + pb), within e^-eps0 of 1) keeps the pair's coefficients accurate at
        # large eps0. pt + pb and its complement (k - 2) pb are formed without subtraction.
        pb = mech.pb_precise
        return CloneFormPair(
            n_others=mech.n - 1,
            clone_prob=2.0 * pb,
            clone_prob_complement=_one_minus_two_pb(mech),
            log_odds=mech.eps0,
            scale=1.0 if mech.k == 2 else min(1.0, mech.pt_precise + pb),
            scale_complement=(mech.k - 2) * pb,
        )


def _one_minus_two_pb(mech: ShuffledKRR) -> float:
    """1 - 2 pb = (pt - pb) + (k - 2) pb, without subtraction (1 = pt + (k - 1) pb)."""
    return mech.pt_minus_pb + (mech.k - 2) * mech.pb_precise


# ---------------------------------------------------------------------------------------------
# Lower bounds and informative values


class WangKRR(Bound):
    """Wang et al., "Shuffle Differential Private Data Aggregation for Random Population", VLDB
    2024: the k-RR case of their variation-ratio bound. Others (N1, N2) ~ Mult(n-1; pb, pb); u adds
    to N1 w.p. pt (P) or pb (Q), to N2 w.p. pb (P) or pt (Q), else to neither.

    Published as an upper bound, but it FAILS as one: exhaustive enumeration at n=4, k=3,
    eps0=0.5, eps=0.3 finds a dataset (every other user holds x0) with delta 0.0124612 >
    0.0120398 (docs/accounting.md). For k >= 3 it is the exact delta of the counts (N_x0, N_x1)
    of the histogram of the dataset in which every other user holds a third value x2: for k = 3
    that is the whole histogram's delta, for k >= 4 a post-processing of it (the full histogram
    also shows which rest value u reported, and its delta is larger, see
    tests/reference/test_oracle_selfcheck.py). Either way it is at most the true worst case, so for k >= 3
    it is a valid LOWER bound, and that is how it is used here.

    For k = 2 there is no third value: no dataset has this pair as (a post-processing of) its
    histogram, so it is not a lower bound. But with k = 2, 1 - 2 pb = pt - pb and the pair is
    exactly the krr-clones pair (C ~ Bin(n-1, 2 pb) clones, u's report on x0 w.p. pt/(pt + pb)),
    a valid upper bound: the published value is computed and labelled UPPER for k = 2.
    """

    name = "wang-krr"
    kind = BoundKind.LOWER
    guarantee = (
        "lower bound on the worst-case delta (exact delta of the dataset 'all others hold x2')"
    )
    guarantee_k2 = (
        "published value; for k = 2 its pair is the krr-clones pair: a valid upper bound, "
        "not a lower bound"
    )

    def kind_for(self, mech: ShuffledKRR) -> BoundKind:
        return BoundKind.UPPER if mech.k == 2 else self.kind

    def guarantee_for(self, mech: ShuffledKRR) -> str:
        return self.guarantee_k2 if mech.k == 2 else self.guarantee

    def bracket(self, mech: ShuffledKRR, eps: float) -> Bracket:
        _require_two_count_range(self.name, mech, eps)
        return TwoCountPair.wang(mech).delta(eps)

    def post_processing_of(self) -> int | None:
        return 0  # the counts (N_x0, N_x1) of F(0)


class AllOthersX0(Bound):
    """The exact delta of the whole released histogram for the dataset in which every other user
    holds x0 (u holds x0 or x1), both directions.

    The others' counts of x0 and x1 are Mult(n-1; pt, pb); every other value is reported by them
    and by u w.p. pb each, so given their total those counts are uniform under both datasets and
    (N_x0, N_x1) is sufficient: the pair is :class:`TwoCountPair` (pt, pb), and the reverse
    direction is (pb, pt) (swap x0 and x1). An exact delta of a concrete dataset, so a lower
    bound on the worst case, for every k >= 2. The exhaustive oracle finds it is the worst
    dataset in several small cases (n=4, k=3, eps0=0.5, eps=0.3: 0.0124612).
    """

    name = "all-others-x0"
    kind = BoundKind.LOWER
    guarantee = (
        "lower bound on the worst-case delta (exact delta of the dataset 'all others hold x0')"
    )

    def bracket(self, mech: ShuffledKRR, eps: float) -> Bracket:
        _require_two_count_range(self.name, mech, eps)
        pt, pb = mech.pt_precise, mech.pb_precise
        forward = TwoCountPair(mechanism=mech, alpha=pt, beta=pb).delta(eps)
        reverse = TwoCountPair(mechanism=mech, alpha=pb, beta=pt).delta(eps)
        return Bracket(max(forward.lower, reverse.lower), max(forward.upper, reverse.upper))


#: TwoCountPair divides coefficients ~ e^eps by theta ~ pb ~ e^-eps0: beyond this sum of the
#: two exponents the quotient overflows double precision.
TWO_COUNT_LIMIT = 700.0


def _require_two_count_range(name: str, mech: ShuffledKRR, eps: float) -> None:
    if eps < mech.eps0 and eps + mech.eps0 + math.log(mech.k) > TWO_COUNT_LIMIT:
        raise OutsideConditionsError(
            f"{name} needs eps + eps0 + log(k) <= {TWO_COUNT_LIMIT:g} below eps0 (its "
            f"coefficients e^eps / pb overflow double precision beyond it), got "
            f"eps={eps:g}, eps0={mech.eps0:g}, k={mech.k}"
        )


@dataclass(frozen=True, slots=True)
class SingleBinDirections:
    d01: Bracket
    d10: Bracket


class SingleBin(Bound):
    """The seed paper's model, computed exactly: Biswas, Jung, Palamidessi, "Tight Differential
    Privacy Guarantees for the Shuffle Model with k-Randomized Response", eqs. 12-13: the count of
    x0 alone, B = Bin(nx0, pt) + Bin(n-1-nx0, pb), P0 = B + Bern(pt), P1 = B + Bern(pb).

    This is what Theorem IV.1 meant (its printed closed form is wrong, see ``biswas-literal``).
    It is NOT a guarantee for the released histogram: the analyzer releases every bin (which
    reveals more), and nx0 is a property of the private data. It is the exact delta of a
    post-processing of the histogram for a concrete dataset, so it is a lower bound on the worst
    case; ``delta`` is the maximum of the two directions.
    """

    name = "single-bin"
    kind = BoundKind.DATASET_SPECIFIC
    guarantee = "exact for the count of x0 alone at this nx0; informative, not a guarantee"

    def __init__(self, nx0: int, *, quick_lower: bool = False) -> None:
        """quick_lower: never widen the window (a cheaper bracket whose lower side stays valid),
        for use as a lower-bound candidate inside ``tight``."""
        if isinstance(nx0, bool) or not isinstance(nx0, int):
            raise InvalidParameterError(f"nx0 must be an integer, got {nx0!r}")
        self.nx0 = nx0
        self.quick_lower = quick_lower

    def parameters(self) -> dict[str, int]:
        return {"nx0": self.nx0}

    def post_processing_of(self) -> int | None:
        return self.nx0  # the count N_x0 of F(nx0)

    def witness(self) -> str:
        return f"single-bin(nx0={self.nx0})"

    def directions(self, mech: ShuffledKRR, eps: float) -> SingleBinDirections:
        if not 0 <= self.nx0 <= mech.n - 1:
            raise InvalidParameterError(
                f"--nx0 must be in [0, n-1] = [0, {mech.n - 1}], got {self.nx0}"
            )
        d01, d10 = single_bin_delta(mech, self.nx0, eps, widen=not self.quick_lower)
        return SingleBinDirections(d01, d10)

    def bracket(self, mech: ShuffledKRR, eps: float) -> Bracket:
        d = self.directions(mech, eps)
        return Bracket(max(d.d01.lower, d.d10.lower), max(d.d01.upper, d.d10.upper))

    def delta(self, mech: ShuffledKRR, eps: float) -> DeltaResult:
        eps = require_eps(eps)
        d = self.directions(mech, eps)
        return DeltaResult(
            bound=self.name,
            kind=self.kind,
            eps=eps,
            delta=max(d.d01.upper, d.d10.upper),
            delta_lower=max(d.d01.lower, d.d10.lower),
            delta_upper=max(d.d01.upper, d.d10.upper),
            extra={
                "nx0": float(self.nx0),
                "delta_x0_over_x1": d.d01.upper,
                "delta_x1_over_x0": d.d10.upper,
            },
        )


class BiswasLiteral(Bound):
    """The printed Theorem IV.1 of Biswas, Jung, Palamidessi, FPS 2023 (arXiv 2205.08858): eq. 6
    with v_s as printed (eq. 15), evaluated in high precision (biswas_literal.py). It reproduces
    the published Tables II (n = 100) and IV and is kept only for that. NOT a valid guarantee:
    its v_s is not log(P0(s) / P1(s)) of the paper's own model, and the value lies below the exact
    single-bin delta by many orders of magnitude (2.4837e-15 against 6.1467e-3 at n=100, k=10,
    eps0=2, nx0=80, eps=0.1). It never feeds a reported guarantee.
    """

    name = "biswas-literal"
    kind = BoundKind.NOT_A_GUARANTEE
    guarantee = (
        "published formula, not a valid guarantee (Theorem IV.1 as printed; reproduces the "
        "paper's Tables II/IV)"
    )

    def __init__(self, nx0: int) -> None:
        self.nx0 = nx0

    def parameters(self) -> dict[str, int]:
        return {"nx0": self.nx0}

    def bracket(self, mech: ShuffledKRR, eps: float) -> Bracket:
        value = biswas_literal_delta(mech.n, mech.k, mech.eps0, self.nx0, eps)
        return Bracket(value, value)

    def zero_from(self, mech: ShuffledKRR) -> float:
        return math.inf


# ---------------------------------------------------------------------------------------------
# Analytic bounds (comparison tables only; refuse outside their conditions)


class Erlingsson(Bound):
    """Erlingsson, Feldman, Mironov, Raghunathan, Talwar, Thakurta, "Amplification by Shuffling",
    SODA 2019, Corollary 5.3.1: eps = 12 eps0 sqrt(log(1/delta) / n), i.e.
    delta = exp(-n (eps / (12 eps0))^2). Valid only for eps0 <= 1/2, n >= 1000, delta <= 0.01 and
    eps <= eps0; outside them it raises instead of returning a number. Guarantees: an upper bound
    (asymptotic constants; loose).
    """

    name = "erlingsson"
    kind = BoundKind.UPPER
    guarantee = "valid upper bound within eps0<=0.5, n>=1000, delta<=0.01, eps<=eps0"

    def bracket(self, mech: ShuffledKRR, eps: float) -> Bracket:
        self._check_mechanism(mech)
        if eps > mech.eps0:
            raise OutsideConditionsError(
                f"erlingsson needs eps <= eps0 = {mech.eps0}, got eps={eps}"
            )
        delta = math.exp(-mech.n * (eps / (12.0 * mech.eps0)) ** 2)
        if delta > 0.01:
            raise OutsideConditionsError(
                f"erlingsson gives delta={delta:.3g} > 0.01 at eps={eps}, outside its conditions"
            )
        return Bracket(delta, delta)

    def eps_for(self, mech: ShuffledKRR, delta: float) -> float:
        self._check_mechanism(mech)
        if delta > 0.01:
            raise OutsideConditionsError(f"erlingsson needs delta <= 0.01, got {delta}")
        eps = 12.0 * mech.eps0 * math.sqrt(math.log(1.0 / delta) / mech.n)
        if eps > mech.eps0:
            raise OutsideConditionsError(
                f"erlingsson gives eps={eps:.4g} > eps0={mech.eps0}, outside its conditions"
            )
        return math.nextafter(eps, math.inf)

    def _eps_bracket(self, mech: ShuffledKRR, delta: float) -> EpsResult:
        return self._closed_form_eps(delta, self.eps_for(mech, delta))

    def refusal(self, mech: ShuffledKRR) -> str | None:
        if mech.eps0 > 0.5:
            return f"erlingsson needs eps0 <= 0.5, got eps0={mech.eps0}"
        if mech.n < 1000:
            return f"erlingsson needs n >= 1000, got n={mech.n}"
        return None

    def _check_mechanism(self, mech: ShuffledKRR) -> None:
        refusal = self.refusal(mech)
        if refusal is not None:
            raise OutsideConditionsError(refusal)


class BlanketAnalytic(Bound):
    """Balle, Bell, Gascon, Nissim, "The Privacy Blanket of the Shuffle Model", CRYPTO 2019,
    Theorem 3.1 (k-RR): eps = sqrt(14 k log(2/delta) / ((n-1) gamma)), gamma = k / (e^eps0 + k - 1),
    i.e. delta = 2 exp(-(n-1) gamma eps^2 / (14 k)). Valid only for 27 k / ((n-1) gamma) <= eps <= 1;
    outside that it raises. Guarantees: an upper bound (loose constants).
    """

    name = "blanket-analytic"
    kind = BoundKind.UPPER
    guarantee = "valid upper bound within 27k/((n-1)gamma) <= eps <= 1"

    @staticmethod
    def _gamma(mech: ShuffledKRR) -> float:
        return mech.k * mech.pb

    def _check_eps(self, mech: ShuffledKRR, eps: float) -> None:
        eps_min = 27.0 * mech.k / ((mech.n - 1) * self._gamma(mech))
        if not eps_min <= eps <= 1.0:
            raise OutsideConditionsError(
                f"blanket-analytic needs {eps_min:.4g} <= eps <= 1 (27k/((n-1)gamma) <= eps <= 1), "
                f"got eps={eps}"
            )

    def bracket(self, mech: ShuffledKRR, eps: float) -> Bracket:
        self._check_eps(mech, eps)
        delta = min(
            1.0, 2.0 * math.exp(-(mech.n - 1) * self._gamma(mech) * eps**2 / (14.0 * mech.k))
        )
        return Bracket(delta, delta)

    def eps_for(self, mech: ShuffledKRR, delta: float) -> float:
        eps = math.sqrt(14.0 * mech.k * math.log(2.0 / delta) / ((mech.n - 1) * self._gamma(mech)))
        eps = math.nextafter(eps, math.inf)
        self._check_eps(mech, eps)
        return eps

    def _eps_bracket(self, mech: ShuffledKRR, delta: float) -> EpsResult:
        return self._closed_form_eps(delta, self.eps_for(mech, delta))


UPPER_BOUNDS: tuple[type[CloneFormBound], ...] = (StrongAdversary, Clones, KRRClones)
