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

Evaluated by :func:`gsum.mean_positive_part`, with a rigorous bracket (exactly at small n, by the
Fourier bracket of gsum_fast beyond).
"""

from __future__ import annotations

import math

import numpy as np

from shuffledp.accountant.bounds.base import UPPER_BOUNDS, Bound, BoundKind, OutsideConditionsError
from shuffledp.accountant.engines.gsum import Atom, TooLargeError, mean_positive_part
from shuffledp.accountant.engines.numerics import (
    FloatArray,
    IntArray,
    binomial_window,
    log_binom_pmf,
    log_sum,
)
from shuffledp.accountant.engines.pairs import Bracket
from shuffledp.accountant.mechanism import ShuffledKRR

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

    def scaled(value: float, sign: float) -> float:
        if value <= 0.0:
            return 0.0
        exponent = math.log(value) + log_scale
        # log, + and exp each round by an ulp of their magnitudes: the exponent is off by at most
        # 2 ulp (|log value| + |log_scale|), a relative error of the result; widen by 4 of them
        # plus 4 ulp (the atoms were divided by E0 Ee = e^(eps0 + eps)).
        slack = 4.0 * 2.0**-52 * (abs(math.log(value)) + abs(log_scale) + 1.0)
        # The exponent is capped at 0 (a value >= 1 is capped at 1 anyway): no overflow.
        result = math.exp(min(exponent + sign * slack, 0.0))
        # Below the normal range a double keeps less than 53 bits: pad by two of its ulps.
        return min(1.0, max(0.0, result + sign * 2.0 * math.ulp(result)))

    upper = scaled(inner.upper, 1.0)
    return Bracket(scaled(inner.lower, -1.0), max(upper, math.ulp(0.0)))


class OptimalBlanket(Bound):
    """Su, Cheng, Wang (IEEE S&P 2026, arXiv 2504.07414): the optimal (privacy blanket)
    decomposition bound, evaluated exactly (see the module docstring for the argument).
    Guarantees: an upper bound on delta of the released histogram, for every dataset."""

    name = "optimal-blanket"
    kind = BoundKind.UPPER
    guarantee = "valid upper bound on delta for the released histogram (every dataset)"
    #: Su, Cheng and Wang prove this decomposition optimal among every way of decomposing the
    #: other users' randomizers; the clone-form bounds are such decompositions (tight.dominated).
    dominates = frozenset(cls.name for cls in UPPER_BOUNDS)

    def bracket(self, mech: ShuffledKRR, eps: float) -> Bracket:
        if eps >= mech.eps0:
            return Bracket.exact_zero()  # no atom is positive: S <= 0
        try:
            return scaled_mean_positive_part(mech, eps, blanket_atoms(mech, eps))
        except TooLargeError as exc:
            raise OutsideConditionsError(f"optimal-blanket: {exc}") from None

    def pair(self, mech: ShuffledKRR) -> BlanketPair:
        """The dominating pair (for composition); OutsideConditionsError if too many outcomes."""
        return BlanketPair(mech)

    def dominating_pair(self, mech: ShuffledKRR) -> BlanketPair:
        return self.pair(mech)


#: Most outcomes a listed blanket pair may have (composition builds a privacy-loss distribution
#: from them: about 1 s per million); beyond it the pair refuses and composition uses krr-clones.
MAX_PAIR_OUTCOMES = 6_000_000
#: Depth (nats below each law's mode) of the listed outcomes; the mass left out counts as
#: infinite loss in the privacy-loss distribution.
PAIR_DEPTH = 30.0


class BlanketPair:
    """The dominating pair behind ``optimal-blanket`` (module docstring, step 2), as outcomes.

    Y's sufficient statistic is (M, s, h0): M - 1 ~ Bin(n - 1, gamma) blanket reports plus u's,
    s ~ Bin(M, 2/k) of the M on {x0, x1} (both datasets give them the same law), h0 ~ Bin(s, 1/2)
    on x0 under the uniform reference; then P = reference * ((E0 - 1) h0 + M) gamma / M and Q the
    same with h1 = s - h0 (step 3). Its hockey-stick divergence is the optimal-blanket value at
    every eps, and it is symmetric (swapping h0 and h1 maps P to Q).
    """

    def __init__(self, mech: ShuffledKRR) -> None:
        require_eps0_in_range(mech)
        self.mech = mech
        count = self.outcome_count()
        if count > MAX_PAIR_OUTCOMES:
            raise OutsideConditionsError(
                f"optimal-blanket's pair has about {count:.2g} outcomes at n={mech.n} "
                f"(composition lists at most {MAX_PAIR_OUTCOMES:.0e})"
            )

    def _gamma(self) -> tuple[float, float]:
        """(gamma, 1 - gamma) = (k pb, pt - pb), without subtraction."""
        return self.mech.k * self.mech.pb_precise, self.mech.pt_minus_pb

    def outcome_count(self) -> float:
        gamma, _ = self._gamma()
        q = 2.0 / self.mech.k
        m = 1.0 + (self.mech.n - 1) * gamma
        spread = 2.0 * math.sqrt(2.0 * PAIR_DEPTH) + 2.0
        w_m = min(self.mech.n, spread * math.sqrt((self.mech.n - 1) * gamma * (1 - gamma)) + 3)
        w_s = min(m + 1, spread * math.sqrt(m * q * (1 - q)) + 3)
        w_h = min(m * q + 1, spread * math.sqrt(m * q) / 2 + 3)
        return w_m * w_s * w_h

    def outcome_log_pmfs(self) -> tuple[FloatArray, FloatArray, float]:
        """(log P, log Q) over the listed outcomes and a bound on the mass left out (under either
        law; the windows are symmetric in h0 and h1, so both keep the same mass)."""
        mech = self.mech
        gamma, gamma_c = self._gamma()
        lo, hi, _ = binomial_window(mech.n - 1, gamma, depth=PAIR_DEPTH, qc=gamma_c)
        m = np.arange(lo, hi + 1, dtype=np.float64) + 1.0
        log_w = log_binom_pmf(m - 1.0, mech.n - 1, gamma, gamma_c)
        q_s = 2.0 / mech.k
        index, s, log_s = _children(m, q_s, (mech.k - 2) / mech.k)
        m, log_w = m[index], log_w[index] + log_s
        index, h0, log_h = _children(s, 0.5, 0.5)
        m, s, log_w = m[index], s[index], log_w[index] + log_h
        e0m1 = math.expm1(mech.eps0)
        # gamma / M ((E0 - 1) h + M): u's report among the M, weighted by k-RR (step 3).
        base = log_w + math.log(gamma) - np.log(m)
        log_p = base + np.log(e0m1 * h0 + m)
        log_q = base + np.log(e0m1 * (s - h0) + m)
        kept = min(float(np.exp(log_sum(log_p))), float(np.exp(log_sum(log_q))))
        # 1e-12 covers the rounding of the kept mass (millions of terms, a few ulp each).
        return log_p, log_q, max(1.0 - kept, 0.0) + 1e-12


def _children(trials: FloatArray, q: float, qc: float) -> tuple[IntArray, FloatArray, FloatArray]:
    """For each parent with ``trials`` trials, the values of Bin(trials, q) within PAIR_DEPTH
    nats of its mode (a window symmetric about trials q when q = 1/2): (parent index, value,
    log pmf), flattened."""
    sd = np.sqrt(trials * q * qc)
    half = np.ceil(math.sqrt(2.0 * PAIR_DEPTH) * sd + 2.0)
    centre = trials * q
    lo = np.maximum(np.floor(centre - half), 0.0)
    hi = np.minimum(np.ceil(centre + half), trials)
    if q == 0.5:  # symmetric: h0 in the window iff s - h0 is
        lo = np.maximum(lo, trials - hi)
        hi = trials - lo
    counts = (hi - lo + 1.0).astype(np.int64)
    index: IntArray = np.repeat(np.arange(trials.size, dtype=np.int64), counts)
    offsets = np.arange(index.size) - np.repeat(np.cumsum(counts) - counts, counts)
    values: FloatArray = (lo[index] + offsets).astype(np.float64)
    return index, values, log_binom_pmf(values, trials[index], q, qc)
