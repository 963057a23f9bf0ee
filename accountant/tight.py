"""``tight``: a bracket [delta_lower, delta_upper] on the true worst-case delta of the histogram.

* delta_upper: the minimum of the valid numerical upper bounds (optimal-blanket, the optimal
  decomposition bound of Su, Cheng and Wang, evaluated exactly; largest-group, which keeps the
  largest group of other users hidden and is never above it, up to n = LARGEST_GROUP_IN_TIGHT;
  strong-adversary, clones, krr-clones), each at the top of its numerical bracket. This is the
  reported guarantee (above n = 1e5, once it is below 1e-300 the remaining members are not
  evaluated: :func:`negligible`).
  A member that cannot be evaluated here (optimal-blanket where neither gsum engine applies) is
  skipped, and ``upper_skipped`` says so.
* delta_lower: the largest exact delta of concrete datasets computed here, each at the bottom of
  its numerical bracket: the family F(a) (a other users hold x0, the rest one third value;
  family.py) over :func:`family.candidates` (k >= 3: every a up to n = 200, the interior ones
  skipped only once the bracket is narrow: :func:`settled`), wang-krr (a post-processing of F(0), k >= 4), and
  the exact single-bin delta (a post-processing of the histogram) over a set of nx0 values. Any
  dataset's exact delta is a lower bound, so a subset of a or nx0 values still gives one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from shuffledp.accountant.bounds.base import (
    UPPER_BOUNDS,
    Bound,
    BoundKind,
    DeltaResult,
    EpsResult,
    ExactCase,
    OutsideConditionsError,
    SingleBin,
    WangKRR,
)
from shuffledp.accountant.bounds.blanket import OptimalBlanket
from shuffledp.accountant.bounds.largest_group import LargestGroup
from shuffledp.accountant.engines.crossing import EPS_CAP, EPS_TOL, lower_near
from shuffledp.accountant.engines.pairs import Bracket
from shuffledp.accountant.mechanism import ShuffledKRR, require_eps
from shuffledp.accountant.worst_case.family import ENDS_ONLY_FROM as ENDS_ONLY_FROM
from shuffledp.accountant.worst_case.family import NEGLIGIBLE_DELTA as NEGLIGIBLE_DELTA
from shuffledp.accountant.worst_case.family import (
    ExactK2,
    FamilyMember,
    candidates,
    negligible,
)
from shuffledp.accountant.worst_case.k3_exhaustive import (
    K3_MAX_N,
    Counts,
    CountsMember,
    ExactK3,
    k3_calibrate_eps0,
)

#: Up to this n the single-bin lower bound is maximised over every nx0.
ALL_NX0_UP_TO = 64
#: Above it, this many nx0 values spread over [0, n-1] (both ends included).
NX0_SAMPLES = 5
#: Above ENDS_ONLY_FROM (family.py) only the two ends nx0 = 0 and n - 1: the interior samples
#: cost seconds at n = 1e8 (0.07 s at 1e6) and there are far below F(0) (1e-22 against 1e-110 at
#: n = 1e8, k = 15, eps0 = 4, eps = 0.02; their lower ends underflow to 0 already at n = 1e6). A
#: subset of nx0 values still gives a valid lower bound.
#: largest-group is a member of tight up to this n (its place in UPPER_MEMBERS).
LARGEST_GROUP_IN_TIGHT = 200
#: See :func:`dominated`: the clone-form members are skipped once optimal-blanket's bracket is
#: at most this wide (upper / lower - 1), so skipping them can cost at most this relative width.
DOMINATED_WIDTH = 1e-3


def single_bin_candidates(n: int) -> list[int]:
    """The nx0 values tried for the single-bin lower bound."""
    if n <= ALL_NX0_UP_TO:
        return list(range(n))
    if n > ENDS_ONLY_FROM:
        return [0, n - 1]
    step = (n - 1) / (NX0_SAMPLES - 1)
    return sorted({round(i * step) for i in range(NX0_SAMPLES)})


@dataclass(frozen=True, slots=True)
class Member:
    """One member of ``tight`` and its place there, as data: ``tight`` uses it iff
    :meth:`refusal` is None (the bound's own ``Bound.refusal``, then the conditions of its place,
    each in the user's words). ``copies`` spreads one declared member over its parameters
    (single-bin over nx0); by default the bound alone."""

    bound: Bound
    #: Why it is a member, one line (what it adds, what dominates it).
    place: str
    #: Used from this --k on (the members below it at smaller k say why in ``place``).
    k_from: int = 2
    #: Used up to this --n (None: every n the bound accepts).
    n_up_to: int | None = None
    #: Not used where one of these applies: they are the exact worst case there.
    yields_to: tuple[Bound, ...] = ()
    copies: Callable[[ShuffledKRR], list[Bound]] | None = None

    def refusal(self, mech: ShuffledKRR) -> str | None:
        """None where ``tight`` uses this member for ``mech``; otherwise why not."""
        name = self.bound.name
        own = self.bound.refusal(mech)
        if own is not None:
            return own
        if mech.k < self.k_from:
            return f"{name} is a member of tight only from --k {self.k_from}, got {mech.k}"
        if self.n_up_to is not None and mech.n > self.n_up_to:
            return f"{name} is a member of tight only up to --n {self.n_up_to}, got {mech.n}"
        for exact in self.yields_to:
            if exact.refusal(mech) is None:
                return f"{name} is not needed where {exact.name} applies (the exact worst case)"
        return None

    def bounds(self, mech: ShuffledKRR) -> list[Bound]:
        return [self.bound] if self.copies is None else self.copies(mech)


_EXACT: tuple[Bound, ...] = (ExactK2(), ExactK3())

#: The upper members, the usual winner first; a member that refuses is left out (one that
#: cannot be evaluated at some eps raises OutsideConditionsError there and is named in
#: ``upper_skipped``).
UPPER_MEMBERS: tuple[Member, ...] = (
    Member(ExactK2(), "k = 2: the exact worst case max_a F(a), certified"),
    Member(ExactK3(), "k = 3, small n: the exact worst case, every dataset enumerated"),
    Member(OptimalBlanket(), "every k and n: the optimal decomposition bound, the usual winner"),
    Member(
        LargestGroup(),
        "never above optimal-blanket; O(n^3), so up to --n LARGEST_GROUP_IN_TIGHT (0.03 s at "
        "n = 100, 0.08-0.16 s at 200 per eps, and an eps(delta) search asks a few dozen times)",
        n_up_to=LARGEST_GROUP_IN_TIGHT,
        yields_to=_EXACT,
    ),
    *(
        Member(cls(), "clone-form pair; dominated by optimal-blanket (tight.dominated)")
        for cls in UPPER_BOUNDS
    ),
)

#: The lower members after F(a) (and an exact member's witness, which come first: they depend
#: on eps): post-processings of some F(a)'s histogram, so never above it, kept where F(a)
#: cannot be evaluated.
LOWER_MEMBERS: tuple[Member, ...] = (
    Member(
        WangKRR(),
        "the counts (N_x0, N_x1) of F(0), O(sqrt(n)): the lower end left where F(0) is too "
        "large to evaluate; at --k 3 it is F(0) itself, at --k 2 an upper bound",
        k_from=4,
    ),
    Member(
        SingleBin(0, quick_lower=True),
        "the count of x0 of F(nx0), over single_bin_candidates; at --k 2 F(a) is this model",
        k_from=3,
        copies=lambda mech: [
            SingleBin(nx0, quick_lower=True) for nx0 in single_bin_candidates(mech.n)
        ],
    ),
)


class Tight(Bound):
    """[best lower bound, best valid upper bound] on the worst-case delta of the histogram."""

    name = "tight"
    kind = BoundKind.BRACKET
    guarantee = "delta_upper is the valid guarantee; delta_lower <= true worst case <= delta_upper"

    def upper_bounds(self, mech: ShuffledKRR) -> list[Bound]:
        """The valid upper bounds that apply to ``mech`` (UPPER_MEMBERS in their order): for
        k = 2 the certified exact worst case first, for k = 3 and n <= K3_MAX_N the enumeration
        of every dataset, otherwise optimal-blanket."""
        return [b for m in UPPER_MEMBERS if m.refusal(mech) is None for b in m.bounds(mech)]

    def exact_cases(self, mech: ShuffledKRR, eps: float) -> list[ExactCase]:
        """What the exact upper members that apply found at eps (cached: the upper end asked)."""
        found = (bound.exact_case(mech, eps) for bound in self.upper_bounds(mech))
        return [case for case in found if case is not None]

    def lower_bounds(
        self, mech: ShuffledKRR, k2_a: int | None = None, k3_counts: Counts | None = None
    ) -> list[Bound]:
        """The lower members. k = 2: F(k2_a) first, the a that gave the certificate's lower end
        (delta(eps)) or the candidate of an eps(delta) search (family.k2_eps_for_delta); it is
        passed in, never remembered, so the answer does not depend on earlier calls. k = 3:
        the dataset k3_counts first (the enumeration's witness, or the eps(delta) candidate).
        Then every F(a) of :func:`family.candidates`, then LOWER_MEMBERS that apply."""
        # Ordered by how often each is the largest (so searches that skip members that cannot
        # improve the current best do little work); the result does not depend on the order.
        first = [] if k2_a is None else [k2_a]
        members: list[Bound] = [] if k3_counts is None else [CountsMember(k3_counts)]
        members += [
            FamilyMember(a) for a in [*first, *(a for a in candidates(mech) if a not in first)]
        ]
        members += [b for m in LOWER_MEMBERS if m.refusal(mech) is None for b in m.bounds(mech)]
        return members

    def bracket(self, mech: ShuffledKRR, eps: float) -> Bracket:
        return self._evaluate(mech, eps)[0]

    def upper_only(self, mech: ShuffledKRR, eps: float) -> float:
        """delta_upper alone (the valid guarantee), without computing the lower side."""
        return self._upper(mech, eps)[0]

    def _upper(self, mech: ShuffledKRR, eps: float) -> tuple[float, str, list[str]]:
        best, name, skipped = math.inf, "", []
        proven: list[tuple[Bound, Bracket]] = []  # members that dominate others, and their answer
        for bound in self.upper_bounds(mech):
            if negligible(mech, best):
                break  # the minimum could only move below the normal range
            if dominated(bound, proven):
                continue
            try:
                bracket = bound.bracket(mech, eps)
            except OutsideConditionsError as exc:
                skipped.append(f"{bound.name}: {exc}")
                continue
            if bound.dominates:
                proven.append((bound, bracket))
            if bracket.upper < best:
                best, name = bracket.upper, bound.name
        return best, name, skipped

    def _evaluate(self, mech: ShuffledKRR, eps: float) -> tuple[Bracket, str, str, list[str]]:
        best_upper, upper_name, skipped = self._upper(mech, eps)
        best_lower, lower_name = 0.0, "none"
        # An exact member behind the upper end (cached) names its worst dataset: the k = 2
        # certificate its best a, the k = 3 enumeration its witness.
        cases = self.exact_cases(mech, eps)
        k2 = next((case for case in cases if case.k2_a is not None), None)
        k2_a = None if k2 is None else k2.k2_a
        k3_counts = next((case.k3_counts for case in cases if case.k3_counts is not None), None)
        members: list[Bound]
        if negligible(mech, best_upper):
            members = []
        elif k2 is not None and k2_a is not None and narrow(k2.bracket):
            # Every F(a) is at most the certificate's upper end, so no other member can raise the
            # lower end by more than its width (at most DOMINATED_WIDTH; about 1e-14 where it
            # finishes): F(k2_a) alone (at n = 1e5, eps0 = 4, eps = 1 the spread a cost 19 s).
            members = [FamilyMember(k2_a)]
        else:
            members = self.lower_bounds(mech, k2_a, k3_counts)
        family: dict[int, Bracket] = {}
        for member in members:
            if covered(member, family) or settled(member, mech, Bracket(best_lower, best_upper)):
                continue
            try:
                bracket = member.bracket(mech, eps)
            except OutsideConditionsError:
                continue
            if member.family_a is not None:
                family[member.family_a] = bracket
            if bracket.lower > best_lower:
                best_lower, lower_name = bracket.lower, member.witness()
        if best_lower > best_upper:
            # Both sides are rigorous brackets of exact quantities, so this means a bug or a
            # published "upper bound" that fails; never hide it.
            raise ArithmeticError(
                f"tight bracket inverted at n={mech.n}, k={mech.k}, eps0={mech.eps0}, eps={eps}: "
                f"lower {best_lower!r} ({lower_name}) > upper {best_upper!r} ({upper_name})"
            )
        return Bracket(best_lower, best_upper), upper_name, lower_name, skipped

    def _eps_bracket(self, mech: ShuffledKRR, delta: float) -> EpsResult:
        start = self.zero_from(mech)
        return tight_eps(self, mech, delta, mech.eps0 if math.isinf(start) else start)

    def calibration_shortcut(self, n: int, k: int, eps: float, delta: float) -> float | None:
        """k = 3, n <= K3_MAX_N: its first upper member enumerates every dataset: candidates
        first, one enumeration to confirm (k3_exhaustive), instead of an enumeration at every
        step of the calibration (None: no shortcut here, or it did not confirm)."""
        if k == 3 and n <= K3_MAX_N:
            return k3_calibrate_eps0(n, eps, delta, EPS_CAP)
        return None

    def delta(self, mech: ShuffledKRR, eps: float) -> DeltaResult:
        eps = require_eps(eps)
        bracket, upper_name, lower_name, skipped = self._evaluate(mech, eps)
        extra = bracket_extra(upper_name, lower_name, bracket.lower, bracket.upper, skipped)
        return DeltaResult(
            bound=self.name,
            kind=self.kind,
            eps=eps,
            delta=bracket.upper,
            delta_lower=bracket.lower,
            delta_upper=bracket.upper,
            extra=extra,
        )


def with_largest_group(mech: ShuffledKRR) -> bool:
    """Whether ``tight`` evaluates largest-group (its member's refusal is None: k >= 3 without
    the k = 3 enumeration, n <= LARGEST_GROUP_IN_TIGHT)."""
    return any(m.bound.name == "largest-group" and m.refusal(mech) is None for m in UPPER_MEMBERS)


def dominated(bound: Bound, proven: list[tuple[Bound, Bracket]]) -> bool:
    """Whether ``tight`` may skip ``bound`` given the members that declare whom they dominate
    (``Bound.dominates``) and answered, with their brackets: optimal-blanket dominates the
    clone-form bounds.

    Su, Cheng and Wang prove the privacy-blanket decomposition optimal among every way of
    decomposing the other users' randomizers ("general clones"). strong-adversary (the blanket
    decomposition with an adversary told more), clones and krr-clones (clone decompositions) are
    such analyses, so their true values are at least optimal-blanket's: each could lower the
    minimum only by less than optimal-blanket's own bracket width, at most DOMINATED_WIDTH
    (relative). Skipping a valid upper bound can never make the guarantee invalid, only looser;
    tests/reference/test_tight_dominance.py checks the ordering on a grid. They take
    50-100 ms each at n = 1e6 and seconds at 1e8, against a few ms for optimal-blanket.
    """
    return any(bound.name in member.dominates and narrow(b) for member, b in proven)


def covered(member: Bound, family: dict[int, Bracket]) -> bool:
    """Whether ``tight`` may skip the lower member ``member`` given the F(a) brackets evaluated
    so far: wang-krr sees the counts (N_x0, N_x1) of F(0) and single-bin(nx0) the count N_x0 of
    F(nx0), post-processings of those datasets' histograms, so neither exceeds that F(a)'s true
    delta, and each could raise the lower end by less than that bracket's width (at most
    DOMINATED_WIDTH, relative). wang-krr takes 0.1-0.5 s at n = 1e6 where F(0) takes 5 ms."""
    a = member.post_processing_of()
    if a is None:
        return False
    known = family.get(a)
    return known is not None and narrow(known)


def interior(member: Bound, mech: ShuffledKRR) -> bool:
    """Whether ``member`` is F(a) with 0 < a < n - 1 at k >= 3 (family_counts computes them)."""
    a = member.family_a
    return a is not None and mech.k >= 3 and 0 < a < mech.n - 1


def settled(member: Bound, mech: ShuffledKRR, bracket: Bracket) -> bool:
    """Whether ``tight`` may skip the interior F(a) (0 < a < n - 1, k >= 3) given the bracket
    found so far (the ends F(0), F(n - 1) and every upper member): every F(a) is a dataset's
    exact delta, at most the true worst case and so at most the upper end, so once the bracket is
    at most DOMINATED_WIDTH wide (relative) none of them can raise the lower end by more than
    that. Otherwise every a is evaluated (family_counts: all of them at once, about 0.1 s at
    n = 100), and the lower end is the family's best member."""
    return interior(member, mech) and narrow(bracket)


def narrow(bracket: Bracket) -> bool:
    """A positive bracket at most DOMINATED_WIDTH wide (relative)."""
    return bracket.lower > 0.0 and bracket.upper <= bracket.lower * (1.0 + DOMINATED_WIDTH)


def bracket_ratio(lower: float, upper: float) -> float:
    """upper / lower (1 when both are 0, inf when only the lower end is 0)."""
    if upper == 0.0:
        return 1.0
    return upper / lower if lower > 0.0 else math.inf


def bracket_extra(
    upper_name: str, lower_name: str, lower: float, upper: float, skipped: list[str]
) -> dict[str, float | str]:
    """The ``extra`` of a tight result (delta or eps): which bounds gave the two ends, their
    ratio, and the upper bounds that could not be evaluated, if any."""
    extra: dict[str, float | str] = {
        "upper_from": upper_name,
        "lower_from": lower_name,
        "ratio": bracket_ratio(lower, upper),
    }
    if skipped:
        extra["upper_skipped"] = "; ".join(skipped)
    return extra


def witness_name(bound: Bound) -> str:
    """The name of the dataset behind ``bound``'s value (``Bound.witness``)."""
    return bound.witness()


def witness_dataset(name: str) -> dict[str, int | str]:
    """The dataset behind a lower end's name, for --json: {"family": "F", "a": 0},
    {"family": "single-bin", "nx0": 5} or {"family": "counts", "x0": 3, "x1": 0, "x2": 96}
    ({} for none)."""
    if name.startswith("counts(") and name.endswith(")"):
        pairs = (item.split("=") for item in name[len("counts(") : -1].split(","))
        return {"family": "counts", **{key: int(value) for key, value in pairs}}
    for prefix, family, key in (
        ("family-f(a=", "F", "a"),
        ("single-bin(nx0=", "single-bin", "nx0"),
    ):
        if name.startswith(prefix):
            return {"family": family, key: int(name[len(prefix) : -1])}
    return {}


#: An exact (k = 2 or k = 3) crossing this close to its lower end ends the search over the
#: upper members: every valid upper bound meets delta at or above the true eps, so none can
#: lower it by more than this (at n = 1e6, k = 2 the clone pairs cost 0.17 s for nothing).
EXACT_ENOUGH = 1e-9
#: eps(delta) skips the interior F(a) (k >= 3) once eps_upper <= eps_lower (1 + this): every
#: F(a) crosses delta at most at the true eps, so at most eps_upper; none can raise eps_lower by
#: more than this (relative). Otherwise each is checked at eps_lower (one evaluation of all a).
INTERIOR_EPS_WIDTH = 1e-6


def tight_eps(bound: Tight, mech: ShuffledKRR, delta: float, start: float) -> EpsResult:
    """``tight``'s eps(delta): eps_upper = min over valid upper bounds of their eps (the min of
    the functions meets the target at the min of their crossings); eps_lower = max over lower
    bounds l of theirs, since l(eps) > target implies the true delta(eps) > target. Members that
    cannot beat the current best at the current best are skipped (one evaluation each instead of
    a search); members that cannot be evaluated here (OutsideConditionsError) are skipped and
    named. An exact member (k = 2, k = 3) also gives the lower crossing of the worst case's
    dataset and the dataset the lower members start from (Bound.upper_crossing)."""
    best_upper, upper_name, skipped = math.inf, "", []
    exact_lower: tuple[float, str] | None = None
    k2_a: int | None = None
    k3_counts: Counts | None = None
    proven: list[tuple[Bound, Bracket]] = []  # members that dominate others, at their crossing
    for member in bound.upper_bounds(mech):
        if dominated(member, proven):
            continue
        try:
            if (
                math.isfinite(best_upper)
                and member.bracket(mech, best_upper - EPS_TOL).upper > delta
            ):
                continue  # its crossing is above best_upper - tol: it cannot lower the minimum
            crossing = member.upper_crossing(mech, delta, start)
        except OutsideConditionsError as exc:
            skipped.append(f"{member.name}: {exc}")
            continue
        value = crossing.upper
        k2_a = crossing.k2_a if crossing.k2_a is not None else k2_a
        if crossing.lower is not None:
            exact_lower = (crossing.lower, crossing.witness)
            k3_counts = crossing.k3_counts if crossing.k3_counts is not None else k3_counts
        if member.dominates and math.isfinite(value):
            proven.append((member, member.bracket(mech, value)))
        if value < best_upper:
            best_upper, upper_name = value, member.name
        if exact_lower is not None and best_upper <= exact_lower[0] * (1.0 + EXACT_ENOUGH):
            break  # the exact worst case's crossing: no valid upper bound can be lower
    best_upper = min(best_upper, mech.eps0)  # k-RR alone is (eps0, 0)-DP
    best_lower, lower_name = _tight_eps_lower(
        bound, mech, delta, best_upper, exact_lower, k2_a, k3_counts
    )
    eps_lower = min(best_lower, best_upper)
    extra = bracket_extra(upper_name, lower_name, eps_lower, best_upper, skipped)
    return EpsResult(
        bound=bound.name,
        kind=bound.kind,
        delta=delta,
        eps=best_upper,
        eps_lower=eps_lower,
        eps_upper=best_upper,
        extra=extra,
    )


def _tight_eps_lower(
    bound: Tight,
    mech: ShuffledKRR,
    delta: float,
    best_upper: float,
    exact_lower: tuple[float, str] | None = None,
    k2_a: int | None = None,
    k3_counts: Counts | None = None,
) -> tuple[float, str]:
    best_lower, lower_name = exact_lower if exact_lower is not None else (0.0, "none")
    family: dict[int, Bracket] = {}  # F(a) at its crossing, for covered
    for candidate in bound.lower_bounds(mech, k2_a, k3_counts):

        def low(e: float, m: Bound = candidate) -> float:
            return m.bracket(mech, e).lower

        if covered(candidate, family):
            continue
        if interior(candidate, mech) and best_upper <= best_lower * (1.0 + INTERIOR_EPS_WIDTH):
            continue
        try:
            if low(best_lower) <= delta:
                continue  # its crossing is at or below best_lower: it cannot raise the maximum
            # A lower bound's crossing is at most best_upper (there it is <= the truth <= target);
            # with a narrow bracket it is just below, where lower_near looks first.
            value = lower_near(low, delta, max(best_upper, EPS_TOL), best_upper)
        except OutsideConditionsError:
            continue
        if candidate.family_a is not None and value > 0.0:
            family[candidate.family_a] = candidate.bracket(mech, value)
        if value > best_lower:
            best_lower, lower_name = value, candidate.witness()
    return best_lower, lower_name
