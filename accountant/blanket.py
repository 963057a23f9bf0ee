"""``optimal-blanket``: the optimal decomposition bound of Su, Cheng and Wang for shuffled k-RR.

P. Su, H. Cheng, P. Wang, "Decomposition-Based Optimal Bounds for Privacy Amplification via
Shuffling", IEEE S&P 2026 (arXiv 2504.07414), show that among all ways of splitting the other
users' randomizers into a common part and a data-dependent part (their "general clones"), the
privacy-blanket split of Balle, Bell, Gascon and Nissim (CRYPTO 2019) gives the smallest bound, and
that it equals (1/n) E[(G_1 + ... + G_n)_+] with G_i i.i.d. For k-RR, with E0 = e^eps0,
Ee = e^eps and D = E0 + k - 1:

    G = E0 - Ee w.p. 1/D,  1 - Ee E0 w.p. 1/D,  1 - Ee w.p. (k - 2)/D,  0 w.p. (E0 - 1)/D.

The argument in short (docs/accounting.md has it in full): k-RR of any value is, w.p.
gamma = k / D, a uniform value (the blanket) and otherwise the true value. An adversary told which
other users did not draw from the blanket, and their reports, sees the multiset Y of the M - 1
blanket reports plus u's own k-RR report, M - 1 ~ Bin(n - 1, gamma); the released histogram is a
post-processing of Y and of reports that do not depend on u. With h the counts of Y,
P(h) = Mult_M(h) (k / M) sum_v h_v R_x0(v), so H_eps(P || Q) = E[(1/M) (sum_i g(Y_i))_+] over
uniform Y_i, g(v) = k (R_x0(v) - Ee R_x1(v)), and the identity P(Bin(n, gamma) = m) m / (n gamma)
= P(1 + Bin(n - 1, gamma) = m) turns it into the i.i.d. form above. The pair (Y under x0, Y under
x1) is a dominating pair for every eps at once, so it composes (composition.py).

Evaluated exactly by :func:`gsum.mean_positive_part`, with a rigorous bracket.
"""

from __future__ import annotations

import math

from .bounds import Bound, BoundKind, OutsideConditionsError
from .gsum import Atom, TooLargeError, mean_positive_part
from .mechanism import ShuffledKRR
from .pairs import Bracket

#: Largest eps0 at which k-RR's probabilities are representable: pb = e^-eps0 / (1 + (k-1) e^-eps0)
#: is a double down to about 1e-308 (eps0 ~ 709); beyond it the atoms' probabilities underflow.
EPS0_LIMIT = 700.0


def blanket_atoms(mech: ShuffledKRR, eps: float) -> list[Atom]:
    """The atoms of G, each divided by E0 Ee (same sign pattern; the mean of the positive part
    scales by the same factor, undone by the caller), formed without cancellation:

        (E0 - Ee) / (E0 Ee) = e^-eps (1 - e^(eps - eps0)) = -e^-eps expm1(eps - eps0),
        (1 - Ee E0) / (E0 Ee) = expm1(-(eps + eps0)),
        (1 - Ee) / (E0 Ee) = e^-eps0 expm1(-eps).
    """
    require_eps0_in_range(mech)
    pb = mech.pb_precise
    return [
        Atom(-math.exp(-eps) * math.expm1(eps - mech.eps0), pb),
        Atom(math.expm1(-(eps + mech.eps0)), pb),
        Atom(math.exp(-mech.eps0) * math.expm1(-eps), (mech.k - 2) * pb),
        Atom(0.0, mech.pt_minus_pb),
    ]


def require_eps0_in_range(mech: ShuffledKRR) -> None:
    if mech.eps0 > EPS0_LIMIT:
        raise OutsideConditionsError(
            f"eps0 must be <= {EPS0_LIMIT:g} for the exact bounds (k-RR's probability e^-eps0 "
            f"underflows double precision beyond it), got {mech.eps0:g}"
        )


def scaled_mean_positive_part(mech: ShuffledKRR, eps: float, atoms: list[Atom]) -> Bracket:
    """(E0 Ee / n) E[(sum G)_+] from atoms divided by E0 Ee; log-space scale, capped at 1."""
    inner = mean_positive_part(mech.n, atoms)
    log_scale = mech.eps0 + eps
    # e^(eps0 + eps) rounds to within 1 ulp relative; widen by 4 ulp each way.
    up = 1.0 + 4.0 * 2.0**-52

    def scaled(value: float, widen: float) -> float:
        if value <= 0.0:
            return 0.0
        return min(1.0, math.exp(min(math.log(value) + log_scale, 0.0)) * widen)  # >= 1: capped

    upper = scaled(inner.upper, up)
    return Bracket(scaled(inner.lower, 1.0 / up), max(upper, math.ulp(0.0)))


class OptimalBlanket(Bound):
    """Su, Cheng, Wang (IEEE S&P 2026, arXiv 2504.07414): the optimal (privacy blanket)
    decomposition bound, evaluated exactly (see the module docstring for the argument).
    Guarantees: an upper bound on delta of the released histogram, for every dataset."""

    name = "optimal-blanket"
    kind = BoundKind.UPPER
    guarantee = "valid upper bound on delta for the released histogram (every dataset)"

    def bracket(self, mech: ShuffledKRR, eps: float) -> Bracket:
        if eps >= mech.eps0:
            return Bracket.exact_zero()  # no atom is positive: S <= 0
        try:
            return scaled_mean_positive_part(mech, eps, blanket_atoms(mech, eps))
        except TooLargeError as exc:
            raise OutsideConditionsError(f"optimal-blanket: {exc}") from None
