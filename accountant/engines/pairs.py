"""Exact hockey-stick divergences of the discrete pairs behind every bound, in log space.

Two engines, one per shape of problem:

* :func:`hockey_stick` takes two log-pmfs over the same outcomes and sums the non-negative terms
  P(o) (1 - e^(eps - L(o))), L = log P/Q, in log space. It is the reference for anything small
  enough to list (test oracles, composition of small pairs).
* The structured pairs below are mixtures, over an observed count c, of pairs built from shifted
  Binomial(c, 1/2) laws (or, for ``single-bin``, a sum of two binomials). For each c the privacy
  loss is monotone in the outcome, so the region where it exceeds eps is a tail and the divergence
  is a short linear combination of binomial tails (computed by ``betainc``, see numerics.py).
  That turns an O(n^2) double sum into O(sqrt(n)) tail evaluations: milliseconds at n = 1e6.

Every structured result is a :class:`Bracket` [lower, upper] around the exact divergence of the
pair, wide enough to cover every floating-point error (tail accuracy, log-weight accuracy,
cancellation, truncated mass); upper bounds are reported from ``upper`` and lower bounds from
``lower``, so rounding always falls on the safe side.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.special import gammaln

from shuffledp.accountant.engines.numerics import (
    GAMMALN_RELERR,
    FloatArray,
    IntArray,
    binomial_window,
    log1mexp,
    log_binom_cdf,
    log_binom_pmf,
    log_binom_sf,
    log_sum,
    log_tail_relative_error,
    log_weight_error,
)
from shuffledp.accountant.mechanism import ShuffledKRR

#: Above this many support points a mixing law is truncated to its 745-nat window.
_FULL_SUPPORT_LIMIT = 20_000
#: Outcomes summed one by one (as non-negative terms) at the start of each region; the rest of
#: the region goes through binomial tails, whose difference loses precision to cancellation.
DIRECT_TERMS = 48
#: Bound on the relative error of every coefficient and probability computed in this module from
#: the exact floats (eps0, eps): each is built from at most about ten correctly rounded or 1-ulp
#: operations (exp, expm1, log1p, tanh, +, *, /) with no cancellation (sums of positive terms;
#: differences such as p - e^eps (1 - p) are rewritten as -p expm1(eps - L) with L exact), so
#: <= 12 ulp; 32 ulp leaves margin. Added to every term's error (see _coef_tail_error) and to the
#: log-weight error (parameters of the binomials: :func:`_param_log_error`).
COEF_RELERR = 32 * 2.0**-53
_LOG_COEF_RELERR = math.log(COEF_RELERR)
_LN2 = math.log(2.0)
#: Bound on the relative error of the computed binomial parameters (pt, pb, 2 pb, e^-eps0,
#: pt / (pt + pb), ...) and of their complements, each formed without subtraction from
#: ShuffledKRR.pt_precise = 1 / (1 + (k-1) e^-eps0) and pb_precise = e^-eps0 / (1 + (k-1) e^-eps0)
#: (not from exp(log pb), which is off by up to eps0 / 2 ulp): <= 8 ulp; 16 leaves margin.
PARAM_RELERR = 16 * 2.0**-53
#: Relative error of the clone-form threshold x = f (c + 1), f a quotient of two coefficients.
_X_RELERR = 2.0 * COEF_RELERR
#: First-try window of the mixing law, in nats below its mode (about +-12.6 standard deviations);
#: the mass outside is bounded and added to the upper side, and if that matters the full
#: 745-nat window (nothing representable left out) is used instead.
NARROW_DEPTH = 80.0


@dataclass(frozen=True, slots=True)
class Bracket:
    """An interval [lower, upper] that contains an exactly defined delta."""

    lower: float
    upper: float

    @staticmethod
    def exact_zero() -> Bracket:
        return Bracket(0.0, 0.0)

    def scaled(self, factor: float) -> Bracket:
        return Bracket(self.lower * factor, self.upper * factor)


def hockey_stick(log_p: npt.ArrayLike, log_q: npt.ArrayLike, eps: float) -> float:
    """H_eps(P || Q) = sum_o max(0, P(o) - e^eps Q(o)) from log-pmfs on a common outcome list.

    Sums the non-negative terms P(o) * (1 - e^(eps - L(o))) with L = log P - log Q, in log space:
    log term = log P + log(1 - exp(-(L - eps))) (log1mexp); L = +inf (Q(o) = 0) gives P(o).
    Returns exactly 0.0 when the loss never exceeds eps.
    """
    lp = np.asarray(log_p, dtype=np.float64)
    lq = np.asarray(log_q, dtype=np.float64)
    if lp.shape != lq.shape:
        raise ValueError(f"log_p and log_q must have the same shape, got {lp.shape} and {lq.shape}")
    with np.errstate(invalid="ignore"):
        loss = lp - lq  # +inf where Q(o) = 0 < P(o); nan where both are 0
    mask = np.isfinite(lp) & (loss > eps)
    if not np.any(mask):
        return 0.0
    excess = loss[mask] - eps
    log_terms = lp[mask] + np.where(
        np.isinf(excess), 0.0, log1mexp(np.where(np.isinf(excess), 1.0, excess))
    )
    return float(np.exp(log_sum(log_terms)))


def hockey_stick_both(log_p: npt.ArrayLike, log_q: npt.ArrayLike, eps: float) -> float:
    """max(H_eps(P||Q), H_eps(Q||P)): a delta for the neighbouring relation in both directions."""
    return max(hockey_stick(log_p, log_q, eps), hockey_stick(log_q, log_p, eps))


# ---------------------------------------------------------------------------------------------
# Clone-form pairs: strong-adversary, clones, krr-clones


@dataclass(frozen=True, slots=True, kw_only=True)
class CloneFormPair:
    """C ~ Bin(n_others, clone_prob), A ~ Bin(C, 1/2), D ~ Bern(p), all independent;
    P = law of (A + D, C - A + 1 - D), Q = law of (A + 1 - D, C - A + D).

    With probability 1 - scale both P and Q emit a common outcome instead (it adds nothing to the
    divergence), so the divergence is ``scale`` times that of the pair above. The pair is symmetric
    (swapping the coordinates maps P to Q), so H(P||Q) = H(Q||P).

    D's law is given by its log-odds L = log(p / (1 - p)) in (0, inf], not by p: at large eps0,
    p = e^eps0 / (e^eps0 + 1) is within 1e-9 of 1, and 1 - p or p - e^eps (1 - p) computed from a
    float p lose most of their digits. L = inf (p = 1) is the strong-adversary pair of Balle et
    al.; L = eps0 with clone_prob = e^-eps0 is Feldman, McMillan and Talwar's clone pair.
    ``clone_prob_complement`` and ``scale_complement`` are 1 - clone_prob and 1 - scale computed
    without subtraction by the caller (default: by subtraction, accurate unless the value is near
    1).
    """

    n_others: int
    clone_prob: float
    log_odds: float
    scale: float = 1.0
    clone_prob_complement: float | None = None
    scale_complement: float | None = None

    def __post_init__(self) -> None:
        if self.n_others < 1:
            raise ValueError(f"n_others must be >= 1, got {self.n_others}")
        if not 0.0 < self.clone_prob <= 1.0:
            raise ValueError(f"clone_prob must be in (0, 1], got {self.clone_prob}")
        if not self.log_odds > 0.0:
            raise ValueError(f"log_odds must be in (0, inf], got {self.log_odds}")
        if not 0.0 < self.scale <= 1.0:
            raise ValueError(f"scale must be in (0, 1], got {self.scale}")
        if self.clone_prob_complement is None:
            object.__setattr__(self, "clone_prob_complement", 1.0 - self.clone_prob)
        elif not 0.0 <= self.clone_prob_complement <= 1.0:
            raise ValueError(
                f"clone_prob_complement must be in [0, 1], got {self.clone_prob_complement}"
            )
        if self.scale_complement is None:
            object.__setattr__(self, "scale_complement", 1.0 - self.scale)
        elif not 0.0 <= self.scale_complement < 1.0:
            raise ValueError(f"scale_complement must be in [0, 1), got {self.scale_complement}")

    @property
    def p(self) -> float:
        """P[D = 1] = 1 / (1 + e^-L), to about 1 ulp."""
        return 1.0 / (1.0 + math.exp(-self.log_odds))

    @property
    def q(self) -> float:
        """P[D = 0] = 1 - p = e^-L / (1 + e^-L), without subtraction (0 for L = inf)."""
        tiny = math.exp(-self.log_odds)
        return tiny / (1.0 + tiny)

    @property
    def max_loss(self) -> float:
        """The largest privacy loss, L = log(p / (1 - p)) (inf for p = 1)."""
        return self.log_odds

    @property
    def _mixing_complement(self) -> float:
        qc = self.clone_prob_complement
        assert qc is not None  # set in __post_init__
        return qc

    def delta(self, eps: float) -> Bracket:
        """A bracket on H_eps(P || Q) (= H_eps(Q || P))."""
        if eps >= self.max_loss:
            return Bracket.exact_zero()
        if math.isinf(self.max_loss):
            # L = inf (p = 1): an outcome Q can produce has P_c(a) / Q_c(a) = b(a-1) / b(a)
            # = a / (c - a + 1) <= c <= n_others, so for eps >= log(n_others) only the outcomes Q
            # cannot produce count and delta is constant (E[2^-C]). Clamping keeps e^eps finite.
            eps = min(eps, math.log(self.n_others))
        with np.errstate(divide="ignore", invalid="ignore"):  # log(0) = -inf is intended
            return _narrow_then_wide(
                lambda depth: self._delta(eps, depth),
                self.n_others,
                self.clone_prob,
                self._mixing_complement,
            )

    def _delta(self, eps: float, depth: float) -> Bracket:
        """The bracket with the mixing law cut ``depth`` nats below its mode.

        Given C = c the term at outcome a is b(a) span (a - x) / (c - a + 1), positive exactly
        for a > x (:class:`_CloneCoefficients`): the region is a >= a* = floor(x) + 1.
        """
        coefs = _CloneCoefficients.at(self.p, self.log_odds, eps)
        c, log_w, log_dropped, w_err = _mixing_window(
            self.n_others, self.clone_prob, depth, self._mixing_complement
        )
        x = (coefs.neg_lo / coefs.span) * (c + 1.0)
        # x is accurate to X_RELERR relative (f: two coefficients and a division).
        x_err = _X_RELERR * (1.0 + x)
        # The top outcome a = c + 1 has loss log(p/(1-p)) > eps (inf for p = 1), so it is always
        # in the region, even where x rounds up to c + 1 (huge eps).
        a_star = np.minimum(np.floor(x) + 1.0, c + 1.0)
        # Whole region a >= a* through tails: coef_hi P[b >= a* - 1] + coef_lo P[b >= a*].
        whole = _CloneTails.at(coefs, a_star, c, log_w)
        # Where c carries weight, sum the first DIRECT_TERMS outcomes one by one instead (the
        # tail difference loses precision to cancellation) and keep tails for the remainder.
        core = _core(whole.pos)
        cc, ac, wc = c[core], a_star[core], log_w[core]
        direct, direct_err = _clone_direct_terms(coefs, cc, x[core], x_err[core], ac, wc)
        prev_err = _clone_near_miss_error(coefs, c, x, x_err, a_star, log_w)
        # Remainder a >= a* + DIRECT_TERMS for the core.
        remainder = _CloneTails.at(coefs, ac + DIRECT_TERMS, cc, wc)
        rest = whole.rows(~core)
        pos = np.concatenate([direct.ravel(), remainder.pos, rest.pos])
        neg = np.concatenate([remainder.neg, rest.neg])
        err = [direct_err.ravel(), prev_err, *remainder.errors(), *rest.errors()]
        w_err += log_weight_error(float(c[-1]), 0.5) + _run_error(float(c[-1]))
        w_err += _param_log_error(self.n_others)  # clone_prob, its complement: a few ulp
        bracket = _combine(pos, neg, err, w_err, log_dropped, weight_per_difference=True)
        return self._scaled(bracket)

    def _scaled(self, bracket: Bracket) -> Bracket:
        """The divergence of the pair from that of its unscaled part (``bracket``)."""
        if self.scale == 1.0:
            return bracket
        # scale is a computed probability too (a few ulp): widen by COEF_RELERR both ways.
        return Bracket(
            bracket.lower * self.scale * (1.0 - COEF_RELERR),
            min(1.0, bracket.upper * self.scale * (1.0 + COEF_RELERR)),
        )

    def outcome_log_pmfs(self, depth: float = 40.0) -> tuple[FloatArray, FloatArray, float]:
        """The pair's likely outcomes, for building a privacy-loss distribution.

        Lists the outcomes (c, a) within ``depth`` nats of the most likely c and, for each c,
        within sqrt(2 depth) + 1 standard deviations of a's centre. Returns (log P, log Q) over
        them (plus the 1 - scale common outcome, with equal P and Q mass, as the last entry) and
        an upper bound on the P-mass (= Q-mass, by symmetry) of everything left out, which a
        pessimistic privacy-loss distribution must count as infinite loss.
        """
        qc = self._mixing_complement
        lo, hi, _ = binomial_window(self.n_others, self.clone_prob, depth=depth, qc=qc)
        c = np.arange(lo, hi + 1, dtype=np.float64)
        log_w = log_binom_pmf(c, self.n_others, self.clone_prob, qc)
        half = (math.sqrt(2.0 * depth) + 1.0) * np.sqrt(c) / 2.0 + 2.0
        a_lo = np.maximum(np.floor(c / 2.0 - half), 0.0)
        a_hi = np.minimum(np.ceil(c / 2.0 + half), c + 1.0)
        counts = (a_hi - a_lo + 1.0).astype(np.int64)
        cc = np.repeat(c, counts)
        ww = np.repeat(log_w, counts)
        offsets = np.arange(cc.size) - np.repeat(np.cumsum(counts) - counts, counts)
        a = np.repeat(a_lo, counts) + offsets
        b_prev = log_binom_pmf(a - 1.0, cc, 0.5)
        b_here = log_binom_pmf(a, cc, 0.5)
        # log p = -log1p(e^-L), log(1 - p) = -L + log p: no 1 - p formed.
        log_p1 = -math.log1p(math.exp(-self.log_odds))
        log_p0 = log_p1 - self.log_odds if math.isfinite(self.log_odds) else -math.inf
        log_scale = math.log(self.scale)
        lp = ww + log_scale + np.logaddexp(log_p1 + b_prev, log_p0 + b_here)
        lq = ww + log_scale + np.logaddexp(log_p0 + b_prev, log_p1 + b_here)
        kept = min(float(np.exp(log_sum(lp))), float(np.exp(log_sum(lq))))
        # What is left out is 1 - kept (of the scaled part); 1e-15 covers the rounding of kept.
        dropped = max(self.scale - kept, 0.0) + 1e-15
        if self.scale < 1.0 and self.scale_complement:
            common = math.log(self.scale_complement)
            lp = np.append(lp, common)
            lq = np.append(lq, common)
        return lp, lq, dropped

    def _a_windows(self, c: FloatArray, depth: float) -> tuple[FloatArray, IntArray]:
        """For each clone count c: the first outcome a listed and how many (outcome_log_pmfs)."""
        half = (math.sqrt(2.0 * depth) + 1.0) * np.sqrt(c) / 2.0 + 2.0
        a_lo = np.maximum(np.floor(c / 2.0 - half), 0.0)
        a_hi = np.minimum(np.ceil(c / 2.0 + half), c + 1.0)
        return a_lo, (a_hi - a_lo + 1.0).astype(np.int64)

    def outcome_count(self, depth: float = 40.0) -> int:
        """How many outcomes :meth:`outcome_log_pmfs` lists (O(n): about 180 C's mean)."""
        qc = self._mixing_complement
        lo, hi, _ = binomial_window(self.n_others, self.clone_prob, depth=depth, qc=qc)
        return int(self._a_windows(np.arange(lo, hi + 1, dtype=np.float64), depth)[1].sum())

    def coarse_outcome_chunks(
        self, max_outcomes: int, depth: float = 40.0, chunk: int = 1 << 20
    ) -> Iterator[tuple[FloatArray, FloatArray]]:
        """(log P, log Q) of a pair that *dominates* this one, in chunks of about ``chunk``
        outcomes, about ``max_outcomes`` in all whatever n (the caller bounds the mass left out
        by 1 - the listed mass, under each law).

        Safe side: the clone counts C of the listed window are taken in blocks of ``stride``
        consecutive values and each block's mass is given to its smallest count c'. The pair
        (C, X ~ pair given C = c') dominates (C, X ~ pair given C): given C = c, the outcome
        with c clones is the one with c' <= c clones plus c - c' more clones, each adding 1 to
        the first or the second coordinate with probability 1/2, the same kernel under P and Q
        (a post-processing), so the pair given c' dominates the pair given c, and so does the
        mixture. The listing has about 180 E[C] outcomes, so stride / C is about
        180 / max_outcomes (4.5e-5 at 4e6): the loss scale, ~ 1 / sqrt(C), grows by about half
        of that. The common outcome of a scale < 1 pair comes last (P = Q there)."""
        qc = self._mixing_complement
        lo, hi, _ = binomial_window(self.n_others, self.clone_prob, depth=depth, qc=qc)
        c_all = np.arange(lo, hi + 1, dtype=np.float64)
        total = int(self._a_windows(c_all, depth)[1].sum())
        stride = max(1, math.ceil(total / max(1, max_outcomes)))
        log_w_all = log_binom_pmf(c_all, self.n_others, self.clone_prob, qc)
        starts = np.arange(0, c_all.size, stride)
        c = c_all[starts]
        log_w = np.array([log_sum(log_w_all[i : i + stride]) for i in starts.tolist()])
        a_lo, counts = self._a_windows(c, depth)
        log_p1 = -math.log1p(math.exp(-self.log_odds))
        log_p0 = log_p1 - self.log_odds if math.isfinite(self.log_odds) else -math.inf
        log_scale = math.log(self.scale)
        first = 0
        while first < c.size:
            last = first + 1
            size = int(counts[first])
            while last < c.size and size + int(counts[last]) <= chunk:
                size += int(counts[last])
                last += 1
            part = slice(first, last)
            cnt = counts[part]
            cc = np.repeat(c[part], cnt)
            ww = np.repeat(log_w[part], cnt)
            offsets = np.arange(cc.size) - np.repeat(np.cumsum(cnt) - cnt, cnt)
            a = np.repeat(a_lo[part], cnt) + offsets
            b_prev = log_binom_pmf(a - 1.0, cc, 0.5)
            b_here = log_binom_pmf(a, cc, 0.5)
            lp = ww + log_scale + np.logaddexp(log_p1 + b_prev, log_p0 + b_here)
            lq = ww + log_scale + np.logaddexp(log_p0 + b_prev, log_p1 + b_here)
            yield lp, lq
            first = last
        if self.scale < 1.0 and self.scale_complement:
            common = np.array([math.log(self.scale_complement)])
            yield common, common.copy()


@dataclass(frozen=True, slots=True)
class _CloneCoefficients:
    """The linear form of a clone-form pair's terms at one eps.

    Outcome a = first coordinate; given C = c: P_c(a) = p b(a-1) + q b(a),
    Q_c(a) = q b(a-1) + p b(a), b = Bin(c, 1/2) pmf. With rho = b(a-1)/b(a) = a/(c-a+1):
    P_c(a) - e Q_c(a) = b(a) (coef_hi rho + coef_lo) = b(a) (coef_hi - coef_lo)(a - x)/(c-a+1)
    where x = f (c+1), f = -coef_lo / (coef_hi - coef_lo): positive exactly for a > x.
    No coefficient is formed by subtracting nearly equal numbers (each is accurate to a few
    ulp, COEF_RELERR): with q / p = e^-L,
      coef_hi = p - e q = -p expm1(eps - L) > 0 (eps < L; eps - L is exact when close),
      -coef_lo = e p - q = expm1(eps) p + (p - q) > 0,
      coef_hi - coef_lo = (p - q)(1 + e),  p - q = tanh(L / 2).
    """

    coef_hi: float
    neg_lo: float  # -coef_lo
    span: float  # coef_hi - coef_lo

    @classmethod
    def at(cls, p: float, log_odds: float, eps: float) -> _CloneCoefficients:
        """The coefficients for P[D = 1] = p with log-odds L = ``log_odds`` (q only via L)."""
        coef_hi = -p * math.expm1(eps - log_odds)
        p_minus_q = math.tanh(log_odds / 2.0)
        neg_lo = math.expm1(eps) * p + p_minus_q
        span = p_minus_q * (1.0 + math.exp(eps))
        return cls(coef_hi=coef_hi, neg_lo=neg_lo, span=span)

    @property
    def log_slope(self) -> float:
        """log(coef_hi - coef_lo)."""
        return math.log(self.span)


@dataclass(frozen=True, slots=True)
class _CloneTails:
    """The region a >= m of each mixing point c through binomial tails, in log space:
    pos = w + log coef_hi + log P[b >= m - 1], neg = w + log(-coef_lo) + log P[b >= m]."""

    pos: FloatArray
    neg: FloatArray
    log_hi: FloatArray  # log P[b >= m - 1]
    log_lo: FloatArray  # log P[b >= m]

    @classmethod
    def at(
        cls, coefs: _CloneCoefficients, m: FloatArray, c: FloatArray, log_w: FloatArray
    ) -> _CloneTails:
        l_hi = log_binom_sf(m - 1.0, c, 0.5)
        l_lo = log_binom_sf(m, c, 0.5)
        pos = log_w + math.log(coefs.coef_hi) + l_hi
        neg = log_w + math.log(coefs.neg_lo) + l_lo
        return cls(pos=pos, neg=neg, log_hi=l_hi, log_lo=l_lo)

    def rows(self, keep: npt.NDArray[np.bool_]) -> _CloneTails:
        """The same tails for the mixing points selected by ``keep`` only."""
        return _CloneTails(self.pos[keep], self.neg[keep], self.log_hi[keep], self.log_lo[keep])

    def errors(self) -> list[FloatArray]:
        """log error bounds of the positive and the negative terms (tail and coefficient)."""
        return [self.pos + _coef_tail_error(self.log_hi), self.neg + _coef_tail_error(self.log_lo)]


def _clone_direct_terms(
    coefs: _CloneCoefficients,
    cc: FloatArray,
    xc: FloatArray,
    x_err: FloatArray,
    ac: FloatArray,
    wc: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """(log terms, log error bounds) of the outcomes a* .. a* + DIRECT_TERMS - 1 of the core
    mixing points cc (thresholds xc, their errors x_err, first outcomes ac, log weights wc)."""
    a = ac[:, None] + np.arange(DIRECT_TERMS)[None, :]
    c2 = np.broadcast_to(cc[:, None], a.shape)
    inside = a <= c2  # a = c + 1 handled below (there b(a) = 0 and the term is coef_hi b(c))
    log_b = _log_pmf_run(ac, cc, DIRECT_TERMS)
    gap = np.where(inside, a - xc[:, None], 1.0)
    denom = np.where(inside, c2 - a + 1.0, 1.0)
    log_scale_ = wc[:, None] + log_b + coefs.log_slope - np.log(denom)
    direct = np.where(inside, log_scale_ + np.log(gap), -np.inf)
    # Rounding of x moves (a - x) by at most x_err: an absolute error per term; the slope
    # (coef_hi - coef_lo) is off by at most COEF_RELERR relative.
    direct_err = np.where(
        inside,
        log_scale_ + np.log(x_err[:, None] + COEF_RELERR * np.abs(gap)),
        -np.inf,
    )
    # a = c + 1 (outside ``inside``, so direct and direct_err are -inf there).
    top = a == c2 + 1.0
    top_term = wc[:, None] + math.log(coefs.coef_hi) - c2 * math.log(2.0)
    direct = np.where(top, top_term, direct)
    direct_err = np.where(top, top_term + _LOG_COEF_RELERR, direct_err)
    return direct, direct_err


def _clone_near_miss_error(
    coefs: _CloneCoefficients,
    c: FloatArray,
    x: FloatArray,
    x_err: FloatArray,
    a_star: FloatArray,
    log_w: FloatArray,
) -> FloatArray:
    """log error bound for the outcome a = a* - 1 of each mixing point: if rounding put a* one
    too high, that outcome has a - x within x_err of 0, so its term is at most
    b(a) span x_err / (c - a + 1)."""
    a_prev = a_star - 1.0
    ok_prev = (a_prev >= 0.0) & (a_prev <= c) & (x - a_prev <= x_err)
    return np.where(
        ok_prev,
        log_w
        + log_binom_pmf(np.where(ok_prev, a_prev, 0.0), c, 0.5)
        + coefs.log_slope
        - np.log(np.where(ok_prev, c - a_prev + 1.0, 1.0))
        + np.log(x_err),
        -np.inf,
    )


# ---------------------------------------------------------------------------------------------
# Wang et al.'s k-RR pair (the exact delta of the dataset "every other user holds a third value")


@dataclass(frozen=True, slots=True, kw_only=True)
class TwoCountPair:
    """Others' counts (A, B) ~ Mult(n-1; alpha, beta); under P user u adds 1 to A w.p. pt and to
    B w.p. pb, under Q to A w.p. pb and to B w.p. pt, otherwise (w.p. r = 1 - pt - pb) to
    neither; the view is (A', B'). H(P||Q) is computed; H(Q||P) is that of (beta, alpha).

    * alpha = beta = pb: Wang et al.'s k-RR pair, the counts of x0 and x1 when every other user
      holds a third value (symmetric);
    * alpha = pt, beta = pb: the exact delta of the whole histogram when every other user holds
      x0 (the other values' counts are uniform given their total under both datasets, so
      (N_x0, N_x1) is sufficient), for any k; (pb, pt): every other user holds x1.
    """

    mechanism: ShuffledKRR
    alpha: float
    beta: float

    @classmethod
    def wang(cls, mech: ShuffledKRR) -> TwoCountPair:
        return cls(mechanism=mech, alpha=mech.pb_precise, beta=mech.pb_precise)

    def others_rest(self) -> float:
        """1 - alpha - beta, the others' probability of landing in neither count.

        When alpha and beta are each k-RR's pt_precise or pb_precise (every use here; other
        values, e.g. the 1-ulp-different ShuffledKRR.pt, are taken as given), it is formed from
        1 = pt + (k - 1) pb without subtraction: (k - 2) pb for {pt, pb} (exactly 0 for k = 2),
        (pt - pb) + (k - 2) pb for (pb, pb). At large eps0, 1 - pt - pb by subtraction would keep only
        ulp / ((k - 2) pb) of relative precision. Other values fall back to the subtraction.
        """
        mech = self.mechanism
        pt, pb = mech.pt_precise, mech.pb_precise
        kinds = sorted("t" if v == pt else "b" if v == pb else "?" for v in (self.alpha, self.beta))
        if kinds == ["b", "t"]:
            return (mech.k - 2) * pb
        if kinds == ["b", "b"]:
            return mech.pt_minus_pb + (mech.k - 2) * pb
        return max(1.0 - self.alpha - self.beta, 0.0)

    def delta(self, eps: float) -> Bracket:
        """A bracket on H_eps(P || Q); exactly 0 for eps >= eps0."""
        if eps >= self.mechanism.eps0:
            # The loss is largest at A' = n, where it is below log(pt/pb) = eps0.
            return Bracket.exact_zero()
        with np.errstate(divide="ignore", invalid="ignore"):  # log(0) = -inf is intended
            return _narrow_then_wide(
                lambda depth: self._delta(eps, depth),
                self.mechanism.n - 1,
                *self._others_total(),
            )

    def _others_total(self) -> tuple[float, float]:
        """(q, 1 - q) for the others' total A + B ~ Bin(n - 1, q), q = alpha + beta."""
        rest = self.others_rest()
        return (1.0 if rest == 0.0 else self.alpha + self.beta), rest

    def _delta(self, eps: float, depth: float) -> Bracket:
        """The bracket with the law of the others' total cut ``depth`` nats below its mode.

        For each observed total t the term at a is b_t(a) (W(t-1)/t) g (a - a_thr(t)), positive
        exactly above a_thr (:class:`_TwoCountCoefficients`): the region is a tail of a.
        """
        n = self.mechanism.n
        # Others' total C = A + B ~ W = Bin(n-1, q); q and 1 - q, theta and 1 - theta are all
        # formed without subtraction (at large eps0, theta = pt / (pt + pb) is within e^-eps0
        # of 1), and passed together to the binomial helpers.
        q, q_c = self._others_total()
        coefs = _TwoCountCoefficients.at(self, eps)
        c, _, log_dropped, w_err = _mixing_window(n - 1, q, depth, q_c)
        t = np.arange(c[0], c[-1] + 2.0)
        t = t[t >= 1.0]  # t = 0 has one outcome with equal mass under P and Q
        log_w_prev = log_binom_pmf(t - 1.0, n - 1, q, q_c)  # W(t-1)
        in_window = (t >= c[0]) & (t <= c[-1])
        log_w_here = np.where(in_window, log_binom_pmf(t, n - 1, q, q_c), -np.inf)  # W(t)
        edge = _TwoCountEdge.at(coefs, t, n, q, q_c)
        pos_t, neg_t, err_t = _two_count_tails(coefs, edge.a_star, t, log_w_prev, log_w_here)
        # The outcome just below a* counts as error (below for the core, here for the rest), and
        # in choosing the core (the computed region may be empty).
        prev_err = _two_count_near_miss_error(coefs, edge, t, log_w_prev)
        core = _core(np.logaddexp(pos_t, prev_err))
        direct, direct_err = _two_count_direct_terms(coefs, edge, core, t, log_w_prev)
        rem_pos, rem_neg, rem_err = _two_count_tails(
            coefs, edge.a_star[core] + DIRECT_TERMS, t[core], log_w_prev[core], log_w_here[core]
        )
        pos = np.concatenate([direct.ravel(), rem_pos, pos_t[~core]])
        neg = np.concatenate([rem_neg, neg_t[~core]])
        err = [direct_err.ravel(), *rem_err, *(x[~core] for x in err_t), prev_err[~core]]
        theta, theta_c = coefs.theta, coefs.theta_c
        w_err += log_weight_error(float(t[-1]), theta, theta_c)
        w_err += _run_error(float(t[-1]), theta, theta_c)
        # q, theta and their complements are computed probabilities (a few ulp).
        w_err += _param_log_error(n - 1) + _param_log_error(float(t[-1]))
        # W(t-1) and W(t) weigh different tails of the remainder, so their errors can pull apart.
        return _combine(pos, neg, err, w_err, log_dropped)


@dataclass(frozen=True, slots=True, kw_only=True)
class _TwoCountCoefficients:
    """The linear form of a two-count pair's terms at one eps.

    Observed total t = A' + B'. Split: u added (others' total t - 1) or not (total t):
    mass of (t, a) under P = W(t-1)[pt b_{t-1}(a-1) + pb b_{t-1}(a)] + r W(t) b_t(a), with
    b_{t-1}(a-1) = b_t(a) a/(t theta) and b_{t-1}(a) = b_t(a) (t-a)/(t (1-theta)). So
    P - e^eps Q is b_t(a) times a linear function of a, increasing (eps < eps0):
      P - e Q = b_t(a) (W(t-1)/t) g (a - a_thr(t)),
      g = (pt - e pb)/theta + (e pt - pb)/(1 - theta),
      a_thr = ((e pt - pb) t/(1 - theta) + (e - 1) s) / g,  s = r (n - t) q / (1 - q)
    (s = r W(t) t / W(t-1)); the loss is monotone in a and the region is a > a_thr.
    No coefficient is a difference of nearly equal numbers (each is accurate to a few ulp,
    COEF_RELERR); with pb / pt = e^-eps0 exactly:
      pt - e pb = -pt expm1(eps - eps0) > 0 (eps - eps0 is exact when they are close),
      e pt - pb = expm1(eps) pt + (pt - pb),  pt - pb = pt (1 - e^-eps0),  e - 1 = expm1(eps).
    """

    theta: float  # A | C = c ~ b_c = Bin(c, theta), theta = alpha / (alpha + beta)
    theta_c: float  # 1 - theta
    r: float  # 1 - pt - pb = (k - 2) pb, without cancellation
    em1: float  # e - 1
    up_coef: float  # pt - e pb
    down_coef: float  # e pt - pb
    g: float

    @classmethod
    def at(cls, pair: TwoCountPair, eps: float) -> _TwoCountCoefficients:
        mech = pair.mechanism
        pt, pb = mech.pt_precise, mech.pb_precise
        theta = pair.alpha / (pair.alpha + pair.beta)
        theta_c = pair.beta / (pair.alpha + pair.beta)
        em1 = math.expm1(eps)
        up_coef = -pt * math.expm1(eps - mech.eps0)
        down_coef = em1 * pt + mech.pt_minus_pb
        return cls(
            theta=theta,
            theta_c=theta_c,
            r=(mech.k - 2) * pb,
            em1=em1,
            up_coef=up_coef,
            down_coef=down_coef,
            g=up_coef / theta + down_coef / theta_c,
        )

    @property
    def log_slope(self) -> float:
        """log g."""
        return math.log(self.g)

    @property
    def log_coef_neg(self) -> float:
        """log((e - 1) r), the coefficient of W(t) P[b_t >= m] (-inf where it is 0)."""
        return math.log(self.em1 * self.r) if self.r > 0.0 and self.em1 > 0.0 else -np.inf


@dataclass(frozen=True, slots=True, kw_only=True)
class _TwoCountEdge:
    """The region a >= a_star of each observed total t, and a - a_thr in its accurate form:
    (a - base) + offset, with (a - t) + h near the top and a - a_thr otherwise (a - base is an
    exact integer, so one rounding); the edge is off by at most thr_err (absolute)."""

    a_star: FloatArray
    thr_err: FloatArray
    base: FloatArray
    offset: FloatArray

    @classmethod
    def at(
        cls, coefs: _TwoCountCoefficients, t: FloatArray, n: int, q: float, q_c: float
    ) -> _TwoCountEdge:
        # r = 0 for k = 2, where q may be 1 (every report lands in A or B): then s = 0.
        s = coefs.r * (n - t) * q / q_c if coefs.r > 0.0 else np.zeros_like(t)
        extra = coefs.em1 * s
        a_thr = (coefs.down_coef * t / coefs.theta_c + extra) / coefs.g
        # Near the top the region's edge is carried as h = t - a_thr = (t (pt - e pb)/theta -
        # (e - 1) s) / g instead: at large eps0 the edge is within 1e-18 t of t, which a_thr
        # cannot resolve (a_thr rounds to t and the one outcome in the region, a = t, is lost).
        high = coefs.up_coef * t / coefs.theta
        h = (high - extra) / coefs.g
        from_top = h < a_thr
        # Each form's terms are accurate to COEF_RELERR and g too, so the edge is off by at most
        # thr_err (absolute): 2 COEF_RELERR times the sum of the magnitudes over g.
        thr_err = 2.0 * COEF_RELERR * np.where(from_top, (high + extra) / coefs.g, a_thr)
        a_star = np.maximum(np.where(from_top, t + 1.0 - np.ceil(h), np.floor(a_thr) + 1.0), 0.0)
        base = np.where(from_top, t, 0.0)
        offset = np.where(from_top, h, -a_thr)
        return cls(a_star=a_star, thr_err=thr_err, base=base, offset=offset)

    def gap(self, aa: FloatArray, rows: npt.NDArray[np.bool_] | slice) -> FloatArray:
        """a - a_thr for outcomes aa (one row per t in ``rows``), from the accurate form."""
        return (aa - self.base[rows][:, None]) + self.offset[rows][:, None]


def _two_count_tails(
    coefs: _TwoCountCoefficients, m: FloatArray, tt: FloatArray, wp: FloatArray, wh: FloatArray
) -> tuple[FloatArray, FloatArray, list[FloatArray]]:
    """Region a >= m through tails: W(t-1)[(pt - e pb) P[b_{t-1} >= m-1]
    + (pb - e pt) P[b_{t-1} >= m]] + (1 - e) r W(t) P[b_t >= m]; (pos, neg, errors)."""
    theta, theta_c = coefs.theta, coefs.theta_c
    l1 = log_binom_sf(m - 1.0, tt - 1.0, theta, theta_c)
    l2 = log_binom_sf(m, tt - 1.0, theta, theta_c)
    l3 = log_binom_sf(m, tt, theta, theta_c)
    pos_ = wp + math.log(coefs.up_coef) + l1
    neg2 = wp + math.log(coefs.down_coef) + l2
    neg3 = wh + coefs.log_coef_neg + l3
    errs = [
        pos_ + _coef_tail_error(l1),
        neg2 + _coef_tail_error(l2),
        neg3 + _coef_tail_error(l3),
    ]
    return pos_, np.logaddexp(neg2, neg3), errs


def _two_count_near_miss_error(
    coefs: _TwoCountCoefficients, edge: _TwoCountEdge, t: FloatArray, log_w_prev: FloatArray
) -> FloatArray:
    """log error bound for the outcome just below a* of each total t: it is in the region if the
    edge is off by its error, and its term is then at most b_t(a) (W(t-1)/t) g thr_err."""
    a_prev = edge.a_star - 1.0
    gap_prev = edge.gap(a_prev[:, None], slice(None))[:, 0]
    ok_prev = (a_prev >= 0.0) & (a_prev <= t) & (np.abs(gap_prev) <= edge.thr_err)
    prev_err = np.full_like(t, -np.inf)
    prev_err[ok_prev] = (
        log_w_prev[ok_prev]
        - np.log(t[ok_prev])
        + coefs.log_slope
        + log_binom_pmf(a_prev[ok_prev], t[ok_prev], coefs.theta, coefs.theta_c)
        + np.log(edge.thr_err[ok_prev])
    )
    return prev_err


def _two_count_direct_terms(
    coefs: _TwoCountCoefficients,
    edge: _TwoCountEdge,
    core: npt.NDArray[np.bool_],
    t: FloatArray,
    log_w_prev: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """(log terms, log error bounds) of the outcomes a* .. a* + DIRECT_TERMS - 1 of the core
    totals, one by one; the error bounds also cover a* - 1 (column 0)."""
    tc, ac, wpc = t[core], edge.a_star[core], log_w_prev[core]
    a = ac[:, None] + np.arange(-1.0, DIRECT_TERMS)[None, :]  # column 0: a* - 1 (error only)
    t2 = np.broadcast_to(tc[:, None], a.shape)
    inside = (a >= 0.0) & (a <= t2)
    log_scale_ = np.where(
        inside,
        _log_pmf_run(ac - 1.0, tc, DIRECT_TERMS + 1, coefs.theta, coefs.theta_c)
        + wpc[:, None]
        - np.log(t2)
        + coefs.log_slope,
        -np.inf,
    )
    gap = np.where(inside, edge.gap(a, core), 1.0)
    direct_full = np.where(inside & (gap > 0.0), log_scale_ + np.log(np.abs(gap)), -np.inf)
    direct = direct_full[:, 1:]
    # Terms in the region carry the edge's error and the slope's (g and the rounding of the
    # gap: COEF_RELERR relative); the outcome just below a* only if it is that close.
    rounding = edge.thr_err[core][:, None]
    near = (gap > 0.0) | (np.abs(gap) <= rounding)
    direct_err = np.where(
        near,
        log_scale_ + np.log(rounding + COEF_RELERR * np.maximum(gap, 0.0)),
        -np.inf,
    )
    return direct, direct_err


# ---------------------------------------------------------------------------------------------
# The seed paper's single-bin model, exactly


def single_bin_delta(
    mech: ShuffledKRR, nx0: int, eps: float, *, widen: bool = True
) -> tuple[Bracket, Bracket]:
    """(H(P0||P1), H(P1||P0)) for the count of x0 alone (Biswas, Jung, Palamidessi, eqs. 12-13).

    B = Bin(nx0, pt) + Bin(n-1-nx0, pb) is the others' count of x0; P0 = B + Bern(pt) (u holds
    x0), P1 = B + Bern(pb) (u holds x1). B is log-concave, so rho(s) = B(s-1)/B(s) increases in s
    and each direction's region is a tail of s; B's tails are sums over the narrower component of
    the wider component's binomial tails.

    The outer component is first cut NARROW_DEPTH nats below its mode; if the error that cut can
    cause is not negligible, it is recomputed on the 745-nat window, unless widen=False (a
    cheaper, wider bracket whose lower side stays valid, for quick lower bounds).
    """
    n = mech.n
    if not 0 <= nx0 <= n - 1:
        raise ValueError(f"nx0 must be in [0, n-1] = [0, {n - 1}], got {nx0}")
    if eps >= mech.eps0:
        # Both losses are bounded by eps0 in absolute value (k-RR is eps0-LDP).
        return Bracket.exact_zero(), Bracket.exact_zero()
    narrow = _single_bin_at(mech, nx0, eps, NARROW_DEPTH)
    lowest = min(narrow[0].lower, narrow[1].lower) if narrow[1].upper > 0.0 else narrow[0].lower
    negligible = lowest > 0.0 and narrow[2] <= math.log(lowest) + math.log(1e-10)
    if not widen or narrow[2] == -math.inf or negligible:
        return narrow[0], narrow[1]
    wide = _single_bin_at(mech, nx0, eps, 745.0)
    return wide[0], wide[1]


def _single_bin_at(
    mech: ShuffledKRR, nx0: int, eps: float, depth: float
) -> tuple[Bracket, Bracket, float]:
    """Both directions with the outer component cut ``depth`` nats below its mode, and the log of
    the error term that cut contributes (-inf when nothing was cut)."""
    n = mech.n
    k = mech.k
    pt, pb = mech.pt_precise, mech.pb_precise
    # 1 - pt and 1 - pb, without subtraction (1 = pt + (k - 1) pb): at large eps0, 1 - pt is
    # ~ (k - 1) e^-eps0 and 1.0 - pt would keep only ulp / (1 - pt) of relative precision.
    not_pt = (k - 1) * pb
    not_pb = pt + (k - 2) * pb
    law = _TwoBinomialSum(nx0, pt, n - 1 - nx0, pb, depth, qc_x=not_pt, qc_y=not_pb)
    e = math.exp(eps)
    em1 = math.expm1(eps)
    pt_minus_pb = mech.pt_minus_pb
    # Direction 0||1: the term at s is a B(s-1) + b B(s) with a = pt - e pb > 0,
    # b = (1-pt) - e (1-pb) < 0; positive iff rho(s) = B(s-1)/B(s) > R0 = -b/a: a tail s >= s0.
    # Both without cancellation (each to a few ulp, COEF_RELERR), using pb / pt = e^-eps0:
    #   a = -pt expm1(eps - eps0),  -b = expm1(eps) (1 - pb) + (pt - pb).
    a01 = -pt * math.expm1(eps - mech.eps0)
    b01 = -(em1 * not_pb + pt_minus_pb)
    s0 = law.first_s_with_log_rho_above(math.log(-b01) - math.log(a01))
    # s0 - 1 is included (error only, unless its term is positive): a threshold off by rounding.
    direct = np.arange(max(s0 - 1, 0), min(s0 + DIRECT_TERMS, law.n_max + 2))
    d01 = _single_bin_direction(
        law, a01, b01, COEF_RELERR, direct, law.log_sf, s0 + DIRECT_TERMS, upper=True
    )
    # Direction 1||0: the term is c B(s-1) + d B(s), c = pb - e pt < 0, d = (1-pb) - e (1-pt);
    # positive iff rho(s) < R1 = d / -c: a head s <= s1 (none if d <= 0).
    #   -c = expm1(eps) pt + (pt - pb);
    #   d = -pt expm1(eps - eps0) for k = 2 (1 - pb = pt, 1 - pt = pb); for k >= 3 it changes
    #   sign at eps = log((1 - pb) / (1 - pt)), which is not a float, so there it is a genuine
    #   difference X - Y (X = 1 - pb, Y = e (1 - pt), each to 4 ulp) whose relative error
    #   d_relerr is bounded from |X| + |Y|.
    c10 = -(em1 * pt + pt_minus_pb)
    if k == 2:
        d10_coef, d10_relerr = a01, COEF_RELERR
    else:
        big_x, big_y = not_pb, e * not_pt
        d10_coef = big_x - big_y
        d_abs_err = 5.0 * 2.0**-53 * (big_x + big_y)
        if d10_coef + d_abs_err <= 0.0:
            return d01, Bracket.exact_zero(), _cut_error(law, e)
        if d10_coef <= d_abs_err:
            # Sign unknown: each term is at most d B(s), so the direction is at most d.
            return d01, Bracket(0.0, min(1.0, d10_coef + d_abs_err)), _cut_error(law, e)
        d10_relerr = COEF_RELERR + d_abs_err / d10_coef
    cut = _cut_error(law, e)
    if d10_coef <= 0.0:
        return d01, Bracket.exact_zero(), cut
    s1 = law.first_s_with_log_rho_above(math.log(d10_coef) - math.log(-c10), inclusive=True) - 1
    # s1 + 1 is included (error only, unless its term is positive), as s0 - 1 above.
    direct = np.arange(max(s1 - DIRECT_TERMS + 1, 0), min(s1 + 2, law.n_max + 2))
    d10 = _single_bin_direction(
        law, d10_coef, c10, d10_relerr, direct, law.log_cdf, s1 - DIRECT_TERMS, upper=False
    )
    return d01, d10, cut


def _single_bin_direction(
    law: _TwoBinomialSum,
    coef_main: float,
    coef_other: float,
    main_relerr: float,
    direct_s: npt.NDArray[np.int64],
    log_tail: Callable[[int], tuple[float, float]],
    remainder_from: int,
    *,
    upper: bool,
) -> Bracket:
    """One direction of the single-bin divergence: direct terms plus a tail remainder.

    upper=True (0||1): terms coef_main B(s-1) + coef_other B(s) for s in direct_s, then the
    remainder s >= remainder_from through upper tails. upper=False (1||0): terms
    coef_main B(s) + coef_other B(s-1), remainder s <= remainder_from through lower tails.
    coef_main is accurate to main_relerr relative, coef_other to COEF_RELERR.
    """
    pmfs = _DirectLogPmfs.of(law, direct_s)
    terms, errs = _single_bin_direct_terms(
        law, pmfs, coef_main, coef_other, main_relerr, direct_s, upper=upper
    )
    if upper:
        (l_main, e_main), (l_other, e_other) = (
            log_tail(remainder_from - 1),
            log_tail(remainder_from),
        )
    else:
        (l_main, e_main), (l_other, e_other) = (
            log_tail(remainder_from),
            log_tail(remainder_from - 1),
        )
    pos = np.asarray([*terms, math.log(coef_main) + l_main])
    neg = np.asarray([math.log(-coef_other) + l_other])
    err = np.asarray(
        [
            *errs,
            math.log(coef_main) + e_main,
            math.log(-coef_other) + e_other,
            # the coefficients' own errors on the two remainder tails
            math.log(coef_main) + l_main + math.log(main_relerr),
            math.log(-coef_other) + l_other + _LOG_COEF_RELERR,
        ]
    )
    # Truncating the outer component's support perturbs each B value and tail by at most the
    # dropped mass; (1 + e^eps) times it per term (<= n_max + 2 terms) covers the divergence.
    extra = _cut_error(law, coef_main - coef_other)
    return _combine(pos, neg, [err, np.asarray([extra])], 0.0, -math.inf)


#: Bound on the unit roundoff used by the single-bin error model (2^-52 = 2.22e-16, rounded up).
_ULP = 2.3e-16


@dataclass(frozen=True, slots=True)
class _DirectLogPmfs:
    """log B at the outcomes of a direction's direct terms (and the one before), with the error
    model of those values.

    Error model: each log B value has absolute error at most abs_err (its weights' gammaln
    errors plus logsumexp rounding). Two neighbouring values share most of it: their ratio is
    off by at most diff_err (the four gammaln values that differ, and two roundings). A term
    m B(s') + o B(s'') = m B(s')(1 + d1) + o B(s'')(1 + d2) is then off by at most
    |d1| term + |o| B(s'') |d2 - d1|.
    """

    values: dict[int, float]
    diff_base: float  # the gammaln part of diff_err
    chain: float  # rounding accumulated by a walk, relative to |log B| (0 without a walk)

    @classmethod
    def of(cls, law: _TwoBinomialSum, direct_s: npt.NDArray[np.int64]) -> _DirectLogPmfs:
        span = (
            np.arange(int(direct_s[0]) - 1, int(direct_s[-1]) + 1)
            if direct_s.size
            else np.arange(0)
        )
        log_b = (
            dict(zip(span.tolist(), law.log_pmf_many(span).tolist(), strict=True))
            if span.size
            else {}
        )
        diff_base = 8.0 * GAMMALN_RELERR * float(gammaln(law.n_max + 2.0))
        chain = 0.0
        if law.n_out == 0 and len(log_b) > 1:
            # B is a single binomial: walk from the first value by the exact ratio
            # B(s)/B(s-1) = (N - s + 1) q / (s (1 - q)), so neighbours differ only by rounding.
            keys = sorted(log_b)
            n_in, q_in = law.n_in, law.q_in
            log_odds = math.log(q_in) - math.log(law.qc_in)
            for prev, cur in itertools.pairwise(keys):
                if log_b[prev] > -math.inf and 1 <= cur <= n_in:
                    log_b[cur] = log_b[prev] + math.log((n_in - cur + 1) / cur) + log_odds
            diff_base = 0.0
            chain = len(keys) * 4.0 * _ULP  # the walk accumulates rounding (relative to |log B|)
        return cls(log_b, diff_base, chain)


def _single_bin_direct_terms(
    law: _TwoBinomialSum,
    pmfs: _DirectLogPmfs,
    coef_main: float,
    coef_other: float,
    main_relerr: float,
    direct_s: npt.NDArray[np.int64],
    *,
    upper: bool,
) -> tuple[list[float], list[float]]:
    """(log terms, log error bounds) of the direct terms coef_main B(s') + coef_other B(s''),
    s' = s - 1 and s'' = s for upper=True, the other way round otherwise."""
    terms: list[float] = []
    errs: list[float] = []
    for s in direct_s:
        main = pmfs.values[int(s) - 1] if upper else pmfs.values[int(s)]
        other = pmfs.values[int(s)] if upper else pmfs.values[int(s) - 1]
        lm = math.log(coef_main) + main
        lo_ = math.log(-coef_other) + other
        if lm == -math.inf:
            continue
        abs_err = law.log_weight_error + (2.0 * _ULP + pmfs.chain) * abs(main)
        diff_err = pmfs.diff_base + 4.0 * _ULP * (abs(main) + abs(other))
        term, err = _single_bin_term(lm, lo_, abs_err, diff_err, main_relerr)
        if term is not None:
            terms.append(term)
        if err is not None:
            errs.append(err)
    return terms, errs


def _single_bin_term(
    lm: float, lo_: float, abs_err: float, diff_err: float, main_relerr: float
) -> tuple[float | None, float | None]:
    """(log term, log error bound) of e^lm - e^lo_, a direct term's positive and negative parts;
    either is None when there is none (no term when the computed value is <= 0)."""
    if lo_ >= lm:
        # Computed as <= 0 (not a term); the true term is at most max(0, computed + error).
        # Relative to |o| B(s''): computed = r - 1 with r = e^(lm - lo_) <= 1.
        r = math.exp(lm - lo_)
        slack = (r - 1.0) * (1.0 - abs_err) + diff_err + main_relerr * r + COEF_RELERR
        return None, (lo_ + math.log(slack) if slack > 0.0 else None)
    # term = e^lm (1 - rho), rho = e^(lo_ - lm) < 1; its error relative to e^lm: the B values'
    # (abs_err on the term, diff_err on the cancelled part) and the coefficients' own errors
    # (main_relerr of the positive part, COEF_RELERR of the negative one).
    if lo_ == -math.inf:  # nothing cancels (and diff_err is inf)
        return lm, lm + math.log(abs_err + main_relerr)
    gap = lm - lo_
    rho = math.exp(-gap)
    term = lm + (math.log1p(-rho) if gap > _LN2 else math.log(-math.expm1(-gap)))
    err = lm + math.log((1.0 - rho) * abs_err + rho * (diff_err + COEF_RELERR) + main_relerr)
    return term, err


def _cut_error(law: _TwoBinomialSum, coef_span: float) -> float:
    """log of the error that cutting the outer component's support can cause in one direction:
    each B value and tail moves by at most the dropped mass, over at most n_max + 2 terms."""
    if law.log_dropped == -math.inf:
        return -math.inf
    return law.log_dropped + math.log((law.n_max + 2) * max(coef_span, 1.0 + coef_span))


class _TwoBinomialSum:
    """The law of X + Y, X ~ Bin(nx, qx), Y ~ Bin(ny, qy), in log space.

    The component with the narrower window (``outer``) is listed point by point; the other
    (``inner``) enters through its pmf and tails. qc_x, qc_y: 1 - qx and 1 - qy computed without
    subtraction (default: by subtraction); every pmf and tail uses them.
    """

    def __init__(
        self,
        nx: int,
        qx: float,
        ny: int,
        qy: float,
        depth: float = 745.0,
        *,
        qc_x: float | None = None,
        qc_y: float | None = None,
    ) -> None:
        self.n_max = nx + ny
        qc_x = 1.0 - qx if qc_x is None else qc_x
        qc_y = 1.0 - qy if qc_y is None else qc_y
        sd_x = math.sqrt(nx * qx * qc_x)
        sd_y = math.sqrt(ny * qy * qc_y)
        if sd_x <= sd_y:
            (self.n_out, self.q_out, self.qc_out) = (nx, qx, qc_x)
            (self.n_in, self.q_in, self.qc_in) = (ny, qy, qc_y)
        else:
            (self.n_out, self.q_out, self.qc_out) = (ny, qy, qc_y)
            (self.n_in, self.q_in, self.qc_in) = (nx, qx, qc_x)
        if self.n_out + 1 <= _FULL_SUPPORT_LIMIT:
            lo, hi, self.log_dropped = 0, self.n_out, -math.inf
        else:
            lo, hi, self.log_dropped = binomial_window(
                self.n_out, self.q_out, depth=depth, qc=self.qc_out
            )
        self.y = np.arange(lo, hi + 1, dtype=np.float64)
        self.log_py = log_binom_pmf(self.y, self.n_out, self.q_out, self.qc_out)
        self.log_weight_error = (
            log_weight_error(self.n_out, self.q_out, self.qc_out)
            + log_weight_error(self.n_in, self.q_in, self.qc_in)
            # pt, pb and their complements are computed probabilities (a few ulp)
            + _param_log_error(self.n_out)
            + _param_log_error(self.n_in)
        )

    def _inner_pmf(self, a: npt.ArrayLike) -> FloatArray:
        return log_binom_pmf(a, self.n_in, self.q_in, self.qc_in)

    def log_pmf(self, s: int) -> float:
        if s < 0 or s > self.n_max:
            return -math.inf
        return float(log_sum(self.log_py + self._inner_pmf(s - self.y)))

    def log_pmf_many(self, s: npt.NDArray[np.int64]) -> FloatArray:
        """log B at each of the points s, in one vectorised pass."""
        ss = np.asarray(s, dtype=np.float64)[:, None]
        grid = self.log_py[None, :] + self._inner_pmf(ss - self.y[None, :])
        return log_sum(grid, axis=1)

    def log_sf(self, m: int) -> tuple[float, float]:
        """(log P[B >= m], log of its error bound)."""
        tails = log_binom_sf(m - self.y, self.n_in, self.q_in, self.qc_in)
        terms = self.log_py + tails
        return float(log_sum(terms)), float(log_sum(terms + (log_tail_relative_error(tails))))

    def log_cdf(self, m: int) -> tuple[float, float]:
        """(log P[B <= m], log of its error bound)."""
        tails = log_binom_cdf(m - self.y, self.n_in, self.q_in, self.qc_in)
        terms = self.log_py + tails
        return float(log_sum(terms)), float(log_sum(terms + (log_tail_relative_error(tails))))

    def log_rho(self, s: int) -> float:
        """log B(s-1)/B(s): -inf at s = 0, +inf at s = n_max + 1."""
        lp_prev, lp_here = self.log_pmf(s - 1), self.log_pmf(s)
        if lp_here == -math.inf:
            return math.inf
        return lp_prev - lp_here

    def first_s_with_log_rho_above(self, log_r: float, inclusive: bool = False) -> int:
        """Smallest s in [0, n_max + 1] with log rho(s) > log_r (>= if inclusive)."""
        lo, hi = 0, self.n_max + 1
        while lo < hi:
            mid = (lo + hi) // 2
            value = self.log_rho(mid)
            if value > log_r or (inclusive and value >= log_r):
                hi = mid
            else:
                lo = mid + 1
        return lo


# ---------------------------------------------------------------------------------------------
# Shared pieces


def _narrow_then_wide(
    evaluate: Callable[[float], Bracket], n_trials: int, q: float, qc: float | None = None
) -> Bracket:
    """Evaluate on a NARROW_DEPTH window of Bin(n_trials, q) (qc: 1 - q, exact); if the mass it
    leaves out (added to the upper side) is not negligible next to the value, evaluate on the
    full 745-nat window."""
    narrow = evaluate(NARROW_DEPTH)
    if n_trials + 1 <= _FULL_SUPPORT_LIMIT:
        return narrow  # the whole support was used
    log_dropped = binomial_window(n_trials, q, depth=NARROW_DEPTH, qc=qc)[2]
    if narrow.lower > 0.0 and log_dropped <= math.log(narrow.lower) + math.log(1e-10):
        return narrow
    return evaluate(745.0)


def _core(log_contribution: FloatArray, depth: float = 12.0) -> npt.NDArray[np.bool_]:
    """The mixing points whose contribution is within e^-depth of the largest one.

    Outside the core the tail formula (a rigorous bracket, with cancellation counted in its
    error) is kept; its points weigh at most e^-12 of the largest each, so their precision loss
    moves the total by well under 1e-9 relative."""
    finite = np.isfinite(log_contribution)
    if not np.any(finite):
        return finite
    return finite & (log_contribution >= np.max(log_contribution[finite]) - depth)


def _log_pmf_run(
    start: FloatArray, c: FloatArray, length: int, q: float = 0.5, qc: float = 0.5
) -> FloatArray:
    """log Bin(c, q) at start, start + 1, ..., start + length - 1 (rows: one per c); qc = 1 - q.

    One gammaln-based value per row, then the exact ratio b(a+1)/b(a) = (c - a) q / ((a + 1)(1 - q));
    the running sum adds at most :func:`_run_error` to each value's absolute error.
    """
    a = start[:, None] + np.arange(length)[None, :]
    cc = np.broadcast_to(c[:, None], a.shape)
    first = log_binom_pmf(start, c, q, qc)
    log_odds = math.log(q) - math.log(qc)
    with np.errstate(divide="ignore", invalid="ignore"):
        steps = np.log(np.maximum(cc[:, :-1] - a[:, :-1], 0.0)) - np.log(a[:, :-1] + 1.0) + log_odds
    run = np.concatenate([first[:, None], first[:, None] + np.cumsum(steps, axis=1)], axis=1)
    return np.where((a >= 0.0) & (a <= cc), run, -np.inf)


def _run_error(c_max: float, q: float = 0.5, qc: float = 0.5) -> float:
    """Absolute log error a :func:`_log_pmf_run` of DIRECT_TERMS steps can accumulate."""
    log_odds = abs(math.log(q) - math.log(qc))
    return DIRECT_TERMS * 4.5e-16 * (2.0 + 2.0 * math.log(c_max + 2.0) + log_odds)


def _mixing_window(
    n_trials: int, q: float, depth: float, qc: float | None = None
) -> tuple[FloatArray, FloatArray, float, float]:
    """Support points c of Bin(n_trials, q) to sum over (those within ``depth`` nats of the mode),
    their log weights, the log of the mass left out, and the absolute error of the log weights
    (qc: 1 - q computed without subtraction)."""
    if n_trials + 1 <= _FULL_SUPPORT_LIMIT:
        lo, hi, log_dropped = 0, n_trials, -math.inf
    else:
        lo, hi, log_dropped = binomial_window(n_trials, q, depth=depth, qc=qc)
    c = np.arange(lo, hi + 1, dtype=np.float64)
    return (
        c,
        log_binom_pmf(c, n_trials, q, qc),
        log_dropped,
        log_weight_error(n_trials, q, qc),
    )


def _coef_tail_error(log_tail: FloatArray) -> FloatArray:
    """log of the relative error of coefficient * tail: the tail's (numerics.py) plus the
    coefficient's (COEF_RELERR; doubled to cover the product of the two)."""
    return log_tail_relative_error(log_tail, extra=2.0 * COEF_RELERR)


def _param_log_error(n_trials: float) -> float:
    """Absolute error of a log Bin(n_trials, q) pmf caused by q and 1 - q being off by at most
    PARAM_RELERR relative each: a log q + (n - a) log(1 - q) moves by at most n PARAM_RELERR."""
    return 1.01 * PARAM_RELERR * float(n_trials)


def _combine(
    pos: FloatArray,
    neg: FloatArray,
    err: list[FloatArray],
    log_weight_err: float,
    log_dropped: float,
    *,
    weight_per_difference: bool = False,
) -> Bracket:
    """Bracket on sum(exp(pos)) - sum(exp(neg)).

    err: log error bounds of the individual terms; log_weight_err: absolute error of every log
    weight; log_dropped: mass left out of the window, whose divergence is at most its mass.
    weight_per_difference: each weight multiplies one non-negative difference (pos_c - neg_c), so
    a weight error scales the value by at most e^err; otherwise it can move pos and neg apart.
    """
    total_pos = float(log_sum(pos))
    total_neg = float(log_sum(neg))
    if total_pos == -math.inf:
        value = 0.0
    else:
        value = math.exp(total_pos) * -math.expm1(min(total_neg - total_pos, 0.0))
    all_err = np.concatenate([np.ravel(x) for x in err])
    # log_sum reads NaN as -inf (no error at all); an error term that is NaN is unknown, so it
    # counts as unbounded instead (the bracket becomes [0, 1]).
    all_err = np.where(np.isnan(all_err), np.inf, all_err)
    abs_err = float(np.exp(log_sum(all_err)))
    growth = math.expm1(log_weight_err)
    if weight_per_difference:
        abs_err += growth * value
    else:
        abs_err += growth * (math.exp(total_pos) + math.exp(total_neg))
    dropped = math.exp(log_dropped) if log_dropped > -math.inf else 0.0
    upper = min(1.0, value + abs_err + dropped)
    if upper == 0.0 and total_pos > -math.inf:
        # A positive value below the smallest double (e.g. 1e-400): 0 would not be an upper bound.
        upper = math.ulp(0.0)
    lower = max(0.0, value - abs_err)
    if upper < sys.float_info.min:
        # Subnormal: exp() and the sums above keep fewer than 53 bits here; pad by two of its ulps.
        upper = upper + 2.0 * math.ulp(upper)
        lower = max(0.0, lower - 2.0 * math.ulp(lower))
    return Bracket(lower, upper)
