"""``tight``: a bracket [delta_lower, delta_upper] on the true worst-case delta of the histogram.

* delta_upper: the minimum of the valid numerical upper bounds (strong-adversary, clones,
  krr-clones), each at the top of its numerical bracket. This is the reported guarantee.
* delta_lower: the largest exact delta of concrete datasets computed here, each at the bottom of
  its numerical bracket: every other user holds x0 (the whole histogram's exact delta, both
  directions), every other user holds a third value (the wang-krr pair, k >= 3), and
  the exact single-bin delta (a post-processing of the histogram) over a set of nx0 values,
  every nx0 when n <= :data:`ALL_NX0_UP_TO`. Any dataset's exact delta is a lower bound, so a
  subset of nx0 values still gives one.
"""

from __future__ import annotations

import math

from .bounds import (
    UPPER_BOUNDS,
    AllOthersX0,
    Bound,
    BoundKind,
    CloneFormBound,
    DeltaResult,
    SingleBin,
    WangKRR,
)
from .mechanism import ShuffledKRR, require_eps
from .pairs import Bracket

#: Up to this n the single-bin lower bound is maximised over every nx0.
ALL_NX0_UP_TO = 64
#: Above it, this many nx0 values spread over [0, n-1] (both ends included).
NX0_SAMPLES = 5


def single_bin_candidates(n: int) -> list[int]:
    """The nx0 values tried for the single-bin lower bound."""
    if n <= ALL_NX0_UP_TO:
        return list(range(n))
    step = (n - 1) / (NX0_SAMPLES - 1)
    return sorted({round(i * step) for i in range(NX0_SAMPLES)})


class Tight(Bound):
    """[best lower bound, best valid upper bound] on the worst-case delta of the histogram."""

    name = "tight"
    kind = BoundKind.BRACKET
    guarantee = "delta_upper is the valid guarantee; delta_lower <= true worst case <= delta_upper"

    def upper_bounds(self) -> list[CloneFormBound]:
        """The valid upper bounds, the usual winner for k-RR (krr-clones) first."""
        return sorted((cls() for cls in UPPER_BOUNDS), key=lambda b: b.name != "krr-clones")

    def lower_bounds(self, mech: ShuffledKRR) -> list[Bound]:
        # Ordered by how often each is the largest (so searches that skip members that cannot
        # improve the current best do little work); the result does not depend on the order.
        members: list[Bound] = [WangKRR()] if mech.k >= 3 else []
        members.append(AllOthersX0())
        members += [SingleBin(nx0, quick_lower=True) for nx0 in single_bin_candidates(mech.n)]
        return members

    def bracket(self, mech: ShuffledKRR, eps: float) -> Bracket:
        return self._evaluate(mech, eps)[0]

    def upper_only(self, mech: ShuffledKRR, eps: float) -> float:
        """delta_upper alone (the valid guarantee), without computing the lower side."""
        return min(bound.bracket(mech, eps).upper for bound in self.upper_bounds())

    def _evaluate(self, mech: ShuffledKRR, eps: float) -> tuple[Bracket, str, str]:
        best_upper, upper_name = math.inf, ""
        for bound in self.upper_bounds():
            value = bound.bracket(mech, eps).upper
            if value < best_upper:
                best_upper, upper_name = value, bound.name
        best_lower, lower_name = 0.0, "none"
        for member in self.lower_bounds(mech):
            value = member.bracket(mech, eps).lower
            if value > best_lower:
                best_lower, lower_name = value, witness_name(member)
        if best_lower > best_upper:
            # Both sides are rigorous brackets of exact quantities, so this means a bug or a
            # published "upper bound" that fails; never hide it.
            raise ArithmeticError(
                f"tight bracket inverted at n={mech.n}, k={mech.k}, eps0={mech.eps0}, eps={eps}: "
                f"lower {best_lower!r} ({lower_name}) > upper {best_upper!r} ({upper_name})"
            )
        return Bracket(best_lower, best_upper), upper_name, lower_name

    def delta(self, mech: ShuffledKRR, eps: float) -> DeltaResult:
        eps = require_eps(eps)
        bracket, upper_name, lower_name = self._evaluate(mech, eps)
        return DeltaResult(
            bound=self.name,
            kind=self.kind,
            eps=eps,
            delta=bracket.upper,
            delta_lower=bracket.lower,
            delta_upper=bracket.upper,
            extra={"upper_from": upper_name, "lower_from": lower_name},
        )


def witness_name(bound: Bound) -> str:
    if isinstance(bound, SingleBin):
        return f"single-bin(nx0={bound.nx0})"
    return bound.name
