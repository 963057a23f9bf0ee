"""Empirical privacy audit: a statistical lower bound on delta at eps, from runs of the mechanism.

The accountant proves upper bounds and computes exact deltas of concrete datasets; the audit checks
both against experiment. It runs shuffled k-RR T times on each dataset of a neighbouring pair
(P: user u holds x0 = 0, Q: u holds x1 = 1, the other n - 1 users fixed), and turns the counts of
a rejection region S into a one-sided confidence bound ``delta_lower_ci`` on
delta(eps) >= P(S) - e^eps Q(S). If the audit's bound ever exceeds the accountant's valid
guarantee (delta_upper), either a 5 % event happened or a guarantee is wrong; if it exceeds a
published value, that value is refuted by experiment, not only by algebra.

Neighbouring pairs (:class:`AuditDataset`)
------------------------------------------
* ``worst``: of the two families whose exact delta the accountant uses as its lower bound, the
  one with the larger exact delta at (n, k, eps0, eps): every other user holds x0
  (``all-others-x0``, :class:`~shuffledp.accountant.AllOthersX0`, both directions), or every other
  user holds a third value x2 = 2 (``all-others-x2``, k >= 3, the ``wang-krr`` pair). Both values
  are the exact delta of the counts (h_x0, h_x1), which is what the audit's regions look at (for
  all-others-x0 it is also the whole histogram's delta). Ties go to all-others-x0.
* ``single-bin --nx0 M``: the seed paper's setting (Biswas, Jung, Palamidessi, Theorem IV.1): M
  other users hold x0 and the other n - 1 - M hold x2 = 2 (x1 when k = 2, where there is no third
  value). The seed paper looks at the count of x0 only, for which any non-x0 value of the rest
  gives the same law; a single third value is our choice (it keeps the count of x1 pure noise, so
  u's report stands out there too). The release audited is the whole histogram.

Simulation (:func:`sample_histograms`)
--------------------------------------
Each trial is a full shuffled k-RR histogram. The shuffle does not change a histogram, and k-RR
is "report the true value w.p. 1 - gamma, else a uniform value over all k" with
gamma = k pb (pt = 1 - gamma + gamma / k), so the histogram of a dataset with m_v users on
value v is ``m - b + U``: b_v ~ Bin(m_v, gamma) blanket users per value, and their reports
U ~ Mult(sum b_v; 1/k, ..., 1/k). b_v is drawn by inverting Bin(m_v, gamma)'s cumulative table
(searchsorted), U by the chain Bin(rest, 1/(k - j)), j = 0..k-2, inverted by
``scipy.stats.binom.ppf``; every uniform comes from the run's :class:`RandomSource` (the OS
CSPRNG unless a seed is given), so the cost is O(T k), whatever n. Outcomes of probability below
2^-53 per draw (the resolution of a uniform) are never produced: a bias of at most 1e-16 per
trial. ``tests/unit/simulations/test_audit.py`` checks this against per-user k-RR through the clients' own
:func:`shuffledp.clients.krr.krr_randomize` (chi-square against the exact law).

Rejection region (:func:`choose_region`)
----------------------------------------
The statistic is the pair of counts (h_x0, h_x1), a post-processing of the histogram. Its exact
law under P and Q is computed (:func:`exact_two_count`: trinomials per group of other users,
convolved directly, so every cell keeps its relative precision) when it is small enough
(:data:`EXACT_MAX_CELLS`, :data:`EXACT_MAX_CONVOLUTION`); the score of an outcome is then its
exact privacy loss L = log P(h_x0, h_x1) / Q(h_x0, h_x1). Otherwise the score is h_x0 - h_x1
(u's report moves it up under P). Candidate regions: {score >= t} for the direction P || Q and
{score <= t} for Q || P (roles of P and Q swapped), for every score value t seen in the
selection half. The trials of each side are split: the first half chooses the region, the
second (held out) measures it. The region chosen maximises, on the selection half, the very
bound computed below (the empirical P(S) - e^eps Q(S) less its sampling error): a region of tiny
mass whose point estimate is noise then loses to one the held-out half can confirm; ties go to
the larger point estimate.

Why the bound is valid
----------------------
S is a function of the selection half only, which is independent of the held-out half. Given S,
the held-out counts are a ~ Bin(T_h, P(S)) and b ~ Bin(T_h, Q(S)), independent. The one-sided
Clopper-Pearson bounds at level 1 - alpha/2 (``scipy.stats.beta``) satisfy
Pr[P(S) < lower(a)] <= alpha/2 and Pr[Q(S) > upper(b)] <= alpha/2, so with probability at least
1 - alpha (union bound) both hold, and then
    delta_pair(eps) = sup_S' P(S') - e^eps Q(S') >= P(S) - e^eps Q(S) >= lower(a) - e^eps upper(b).
The pair is a concrete pair of neighbouring datasets and S an event of the release, so the true
worst-case delta of the mechanism is at least delta_pair(eps). ``delta_lower_ci`` is that bound
(alpha = 0.05, so 95 %), clipped at 0 and reduced by a relative 1e-12 for the floating-point error
of ``beta.ppf`` (the safe side for a lower bound). The selection half only decides which region
is measured; it never enters the bound.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import signal, special, stats

from shuffledp.accountant import (
    BOUND_NAMES,
    AllOthersX0,
    OutsideConditionsError,
    ShuffledKRR,
    Tight,
    WangKRR,
    make_bound,
    needs_nx0,
)
from shuffledp.accountant.bounds.base import BoundKind
from shuffledp.accountant.mechanism import require_eps
from shuffledp.errors import InvalidParameterError
from shuffledp.randomness import RandomSource, SeedLike, default_source, seed_value
from shuffledp.validation import require_finite, require_int

__all__ = [
    "AUDIT_ALPHA",
    "DEFAULT_TRIALS",
    "AuditDataset",
    "AuditResult",
    "ExactTwoCount",
    "Region",
    "all_others_dataset",
    "bound_rows",
    "choose_region",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "exact_two_count",
    "lower_confidence_bound",
    "published_value",
    "run_audit",
    "sample_histograms",
    "single_bin_dataset",
    "worst_dataset",
]

#: One-sided error rate of the audit's bound (95 % confidence).
AUDIT_ALPHA = 0.05
#: Trials per dataset by default: at the reference point (n=100, k=10, eps0=2, nx0=80,
#: eps=0.1) this gives delta_lower_ci of 0.02 to 0.03 in about 4 s (2 cores).
DEFAULT_TRIALS = 200_000
#: Largest number of trials per dataset accepted.
MAX_TRIALS = 100_000_000
#: Largest k: the sampler does k - 1 inverse-binomial steps per trial.
MAX_K = 4096
#: Histograms are drawn at most this many trials at a time ...
CHUNK_TRIALS = 20_000
#: ... and at most this many counts (trials x k, 16 MB of int64) at a time.
CHUNK_CELLS = 2_000_000
#: The exact law of (h_x0, h_x1) is computed only when its grid has at most this many cells ...
EXACT_MAX_CELLS = 4_000_000
#: ... and the direct convolution of two groups takes at most this many multiply-adds.
EXACT_MAX_CONVOLUTION = 300_000_000
#: Relative margin for the floating-point error of the Clopper-Pearson quantiles.
_FLOAT_MARGIN = 1e-12

X0, X1, X2 = 0, 1, 2


# ---------------------------------------------------------------------------------------------
# Neighbouring pairs


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditDataset:
    """A neighbouring pair: the other n - 1 users hold ``others`` (others[v] of them hold v); the
    audited user u holds x0 = 0 under P and x1 = 1 under Q."""

    name: str
    n: int
    k: int
    others: tuple[int, ...]
    description: str
    nx0: int | None = None

    def __post_init__(self) -> None:
        require_int("n", self.n, 2)
        require_int("k", self.k, 2, MAX_K)
        if len(self.others) != self.k:
            raise InvalidParameterError(
                f"others must have one count per value (k = {self.k}), got {len(self.others)}"
            )
        for value, count in enumerate(self.others):
            require_int(f"others[{value}]", count, 0)
        if sum(self.others) != self.n - 1:
            raise InvalidParameterError(
                f"others must count the n - 1 = {self.n - 1} other users, got {sum(self.others)}"
            )

    def counts(self, user_value: int) -> tuple[int, ...]:
        """How many users hold each value when u holds ``user_value``."""
        require_int("user_value", user_value, 0, self.k - 1, bound="[0, k - 1]")
        return tuple(c + (v == user_value) for v, c in enumerate(self.others))

    def values(self, user_value: int) -> npt.NDArray[np.int64]:
        """The whole dataset as one value per user (u last)."""
        counts = self.counts(user_value)
        return np.repeat(np.arange(self.k, dtype=np.int64), counts)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "nx0": self.nx0,
            "others": {str(v): c for v, c in enumerate(self.others) if c},
            "user_value": {"P": X0, "Q": X1},
        }


def all_others_dataset(n: int, k: int, value: int) -> AuditDataset:
    """Every other user holds ``value`` (x0 = 0 or a third value x2 = 2)."""
    require_int("n", n, 2)
    require_int("k", k, 2, MAX_K)
    if value not in (X0, X2):
        raise InvalidParameterError(f"value must be x0 = 0 or x2 = 2, got {value}")
    if value == X2 and k < 3:
        raise InvalidParameterError(f"all-others-x2 needs a third value, k >= 3, got k={k}")
    others = [0] * k
    others[value] = n - 1
    name = "all-others-x0" if value == X0 else "all-others-x2"
    return AuditDataset(
        name=name,
        n=n,
        k=k,
        others=tuple(others),
        description=f"all {n - 1} other users hold x{value}={value}; u holds x0=0 (P) or x1=1 (Q)",
    )


def single_bin_dataset(n: int, k: int, nx0: int) -> AuditDataset:
    """The seed paper's setting: nx0 others hold x0, the rest x2 = 2 (x1 = 1 when k = 2)."""
    require_int("n", n, 2)
    require_int("k", k, 2, MAX_K)
    require_int("--nx0", nx0, 0, n - 1, bound="[0, n - 1]")
    rest_value = X2 if k >= 3 else X1
    others = [0] * k
    others[X0] = nx0
    others[rest_value] += n - 1 - nx0
    return AuditDataset(
        name="single-bin",
        n=n,
        k=k,
        others=tuple(others),
        nx0=nx0,
        description=(
            f"{nx0} other users hold x0=0, {n - 1 - nx0} hold x{rest_value}={rest_value}; "
            "u holds x0=0 (P) or x1=1 (Q)"
        ),
    )


def worst_dataset(mech: ShuffledKRR, eps: float) -> tuple[AuditDataset, dict[str, float]]:
    """The family with the larger exact delta of (h_x0, h_x1) at eps (bottom of its bracket),
    and both values by name."""
    candidates = {"all-others-x0": AllOthersX0().bracket(mech, eps).lower}
    if mech.k >= 3:
        candidates["all-others-x2"] = WangKRR().bracket(mech, eps).lower
    best = max(candidates, key=lambda name: (candidates[name], name == "all-others-x0"))
    value = X0 if best == "all-others-x0" else X2
    return all_others_dataset(mech.n, mech.k, value), candidates


# ---------------------------------------------------------------------------------------------
# Sampling


def _binomial_table_draw(
    trials: int, u: npt.NDArray[np.float64], p: float
) -> npt.NDArray[np.int64]:
    """Bin(trials, p) at each uniform u, by inverting the cumulative table."""
    cdf = stats.binom.cdf(np.arange(trials + 1), trials, p)
    draws = np.searchsorted(cdf, u, side="right")
    return np.minimum(draws, trials).astype(np.int64)


def sample_histograms(
    counts: tuple[int, ...] | list[int],
    eps0: float,
    trials: int,
    source: RandomSource,
) -> npt.NDArray[np.int64]:
    """``trials`` independent shuffled k-RR histograms (shape (trials, k)) of a dataset in which
    counts[v] users hold value v (k = len(counts)); the method is in the module docstring."""
    k = len(counts)
    require_int("k", k, 2, MAX_K)
    require_int("trials", trials, 0)
    for value, count in enumerate(counts):
        require_int(f"counts[{value}]", count, 0)
    mech = ShuffledKRR(n=max(2, sum(counts)), k=k, eps0=eps0)
    gamma = min(1.0, k * mech.pb_precise)  # blanket probability k pb (< 1 for eps0 > 0)
    hist = np.zeros((trials, k), dtype=np.int64)
    blanket = np.zeros(trials, dtype=np.int64)
    for value, count in enumerate(counts):
        if count == 0:
            continue
        b = _binomial_table_draw(count, source.uniform(trials), gamma)
        hist[:, value] += count - b
        blanket += b
    remaining = blanket.astype(np.float64)
    for j in range(k - 1):
        u = source.uniform(trials)
        share = stats.binom.ppf(u, remaining, 1.0 / (k - j))
        share = np.clip(np.nan_to_num(share, nan=0.0), 0.0, remaining)  # ppf(0) is -1
        hist[:, j] += share.astype(np.int64)
        remaining -= share
    hist[:, k - 1] += remaining.astype(np.int64)
    return hist


def chunk_trials(k: int) -> int:
    """Trials per chunk for k values (:data:`CHUNK_TRIALS`, :data:`CHUNK_CELLS`)."""
    return max(1, min(CHUNK_TRIALS, CHUNK_CELLS // k))


def sample_two_counts(
    dataset: AuditDataset,
    user_value: int,
    eps0: float,
    trials: int,
    source: RandomSource,
    advance: Callable[[], None] | None = None,
) -> npt.NDArray[np.int64]:
    """(h_x0, h_x1) of ``trials`` full histograms, drawn :func:`chunk_trials` at a time."""
    counts = dataset.counts(user_value)
    out = np.empty((trials, 2), dtype=np.int64)
    chunk = chunk_trials(dataset.k)
    for start in range(0, trials, chunk):
        size = min(chunk, trials - start)
        out[start : start + size] = sample_histograms(counts, eps0, size, source)[:, [X0, X1]]
        if advance is not None:
            advance()
    return out


# ---------------------------------------------------------------------------------------------
# The exact law of (h_x0, h_x1)


@dataclass(frozen=True, slots=True)
class ExactTwoCount:
    """Log-pmfs of (h_x0, h_x1) under P and Q, grids of shape (n + 1, n + 1)."""

    log_p: npt.NDArray[np.float64]
    log_q: npt.NDArray[np.float64]

    def loss(self) -> npt.NDArray[np.float64]:
        """log P / Q per cell: +inf where only P can occur, -inf where only Q, 0 where neither."""
        with np.errstate(invalid="ignore"):
            loss = self.log_p - self.log_q
        return np.where(np.isnan(loss), 0.0, loss)

    def delta(self, eps: float) -> float:
        """max(H_eps(P || Q), H_eps(Q || P)) of the statistic."""
        return max(_hockey(self.log_p, self.log_q, eps), _hockey(self.log_q, self.log_p, eps))


def _hockey(log_p: npt.NDArray[np.float64], log_q: npt.NDArray[np.float64], eps: float) -> float:
    with np.errstate(invalid="ignore", over="ignore"):
        keep = log_p - log_q > eps
    lp, lq = log_p[keep], log_q[keep]
    if lp.size == 0:
        return 0.0
    # sum p (1 - e^(eps - L)) over cells with L > eps: non-negative terms, no cancellation
    terms = np.exp(lp) * -np.expm1(np.minimum(eps - (lp - lq), 0.0))
    return float(terms.sum())


def _trinomial_log_pmf(m: int, a: float, b: float, rest: float) -> npt.NDArray[np.float64]:
    """log P(A = i, B = j) for (A, B, m - A - B) ~ Mult(m; a, b, rest), grid (m + 1, m + 1)."""
    i = np.arange(m + 1)[:, None]
    j = np.arange(m + 1)[None, :]
    r = m - i - j
    valid = r >= 0
    rc = np.maximum(r, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_rest = np.where(rc > 0, rc * math.log(rest) if rest > 0 else -np.inf, 0.0)
        log_pmf = (
            special.gammaln(m + 1)
            - special.gammaln(i + 1)
            - special.gammaln(j + 1)
            - special.gammaln(rc + 1)
            + i * math.log(a)
            + j * math.log(b)
            + log_rest
        )
    return np.where(valid, log_pmf, -np.inf)


def _shift_add(
    grid: npt.NDArray[np.float64], n: int, pt: float, pb: float, rest: float
) -> npt.NDArray[np.float64]:
    """Add u's report: +1 to h_x0 w.p. pt, to h_x1 w.p. pb, to neither w.p. rest."""
    out = np.zeros((n + 1, n + 1))
    m = grid.shape[0]
    out[:m, :m] += rest * grid
    out[1 : m + 1, :m] += pt * grid
    out[:m, 1 : m + 1] += pb * grid
    return out


def exact_two_count(dataset: AuditDataset, eps0: float) -> ExactTwoCount | None:
    """The exact law of (h_x0, h_x1) under P and Q, or None when it is too large to compute
    (see :data:`EXACT_MAX_CELLS`, :data:`EXACT_MAX_CONVOLUTION`)."""
    n, k = dataset.n, dataset.k
    if (n + 1) ** 2 > EXACT_MAX_CELLS:
        return None
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    pt, pb = mech.pt_precise, mech.pb_precise
    groups = [(v, m) for v, m in enumerate(dataset.others) if m > 0]
    sizes = [(m + 1) ** 2 for _, m in groups]
    if len(groups) > 1 and math.prod(sizes) > EXACT_MAX_CONVOLUTION:
        return None
    others: npt.NDArray[np.float64] = np.ones((1, 1))
    for value, m in groups:
        a = pt if value == X0 else pb
        b = pt if value == X1 else pb
        # 1 - a - b without subtraction: (k - 2) pb with one pt, (pt - pb) + (k - 2) pb without
        rest = (k - 2) * pb if value in (X0, X1) else mech.pt_minus_pb + (k - 2) * pb
        group = np.exp(_trinomial_log_pmf(m, a, b, rest))
        others = signal.convolve(others, group, method="direct")
    u_rest = (k - 2) * pb
    p = _shift_add(others, n, pt, pb, u_rest)
    q = _shift_add(others, n, pb, pt, u_rest)
    with np.errstate(divide="ignore"):
        return ExactTwoCount(np.log(p), np.log(q))


# ---------------------------------------------------------------------------------------------
# Confidence bounds and regions


def clopper_pearson_lower(
    successes: npt.ArrayLike, trials: int, tail: float
) -> npt.NDArray[np.float64]:
    """One-sided Clopper-Pearson lower bound: Pr[p < bound] <= tail (0 when successes = 0)."""
    a = np.asarray(successes, dtype=np.float64)
    out = np.zeros(a.shape)
    positive = a > 0
    out[positive] = stats.beta.ppf(tail, a[positive], trials - a[positive] + 1)
    return out


def clopper_pearson_upper(
    successes: npt.ArrayLike, trials: int, tail: float
) -> npt.NDArray[np.float64]:
    """One-sided Clopper-Pearson upper bound: Pr[p > bound] <= tail (1 when successes = trials)."""
    b = np.asarray(successes, dtype=np.float64)
    out = np.ones(b.shape)
    below = b < trials
    out[below] = stats.beta.ppf(1.0 - tail, b[below] + 1, trials - b[below])
    return out


def lower_confidence_bound(
    a: npt.ArrayLike, b: npt.ArrayLike, trials: int, eps: float, alpha: float
) -> npt.NDArray[np.float64]:
    """lower_CP(a) - e^eps upper_CP(b), each at level 1 - alpha/2, clipped at 0 (module docstring:
    a one-sided 1 - alpha bound on P(S) - e^eps Q(S)), with a relative 1e-12 margin."""
    low = clopper_pearson_lower(a, trials, alpha / 2) * (1.0 - _FLOAT_MARGIN)
    high = clopper_pearson_upper(b, trials, alpha / 2) * (1.0 + _FLOAT_MARGIN)
    return np.maximum(low - math.exp(eps) * high, 0.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class Region:
    """{score >= threshold} (direction "P||Q") or {score <= threshold} ("Q||P": the audit then
    measures Q(S) - e^eps P(S)). ``statistic`` names the score."""

    statistic: str
    direction: str
    threshold: float

    def __post_init__(self) -> None:
        if self.direction not in ("P||Q", "Q||P"):
            raise InvalidParameterError(f"direction must be P||Q or Q||P, got {self.direction!r}")

    def contains(self, scores: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
        if self.direction == "P||Q":
            return scores >= self.threshold
        return scores <= self.threshold

    def describe(self) -> str:
        op = ">=" if self.direction == "P||Q" else "<="
        return f"{self.statistic} {op} {self.threshold:.6g} (direction {self.direction})"


@dataclass(frozen=True, slots=True)
class _Choice:
    region: Region
    selection_lower: float
    selection_estimate: float


def choose_region(
    score_p: npt.NDArray[np.float64],
    score_q: npt.NDArray[np.float64],
    statistic: str,
    eps: float,
    alpha: float = AUDIT_ALPHA,
) -> _Choice:
    """The candidate region (module docstring) with the largest lower confidence bound on the
    selection trials ``score_p``, ``score_q`` (same length); ties: the larger point estimate."""
    trials = score_p.size
    if score_q.size != trials or trials == 0:
        raise InvalidParameterError(
            f"selection halves must be non-empty and of equal size, got {trials}, {score_q.size}"
        )
    thresholds = np.unique(np.concatenate([score_p, score_q]))
    sp, sq = np.sort(score_p), np.sort(score_q)
    best: _Choice | None = None
    best_key = (-1.0, -math.inf)
    for direction in ("P||Q", "Q||P"):
        if direction == "P||Q":  # {score >= t}: counts at or above t
            a = trials - np.searchsorted(sp, thresholds, side="left")
            b = trials - np.searchsorted(sq, thresholds, side="left")
        else:  # {score <= t}, the roles of P and Q swapped
            a = np.searchsorted(sq, thresholds, side="right")
            b = np.searchsorted(sp, thresholds, side="right")
        lcb = lower_confidence_bound(a, b, trials, eps, alpha)
        estimate = (a - math.exp(eps) * b) / trials
        index = int(np.lexsort((estimate, lcb))[-1])  # largest lcb, then largest estimate
        key = (float(lcb[index]), float(estimate[index]))
        if key > best_key:
            best_key = key
            region = Region(
                statistic=statistic, direction=direction, threshold=float(thresholds[index])
            )
            best = _Choice(region, key[0], key[1])
    assert best is not None
    return best


# ---------------------------------------------------------------------------------------------
# Bounds beside the result


def published_value(
    n: int, k: int, eps0: float, nx0: int | None, eps: float
) -> dict[str, Any] | None:
    """The seed paper's printed Theorem IV.1 value (Table IV) where the point is one it quotes."""
    if nx0 is None:
        return None
    from shuffledp.simulations.experiments.published import PUBLISHED_TABLE_IV

    value = PUBLISHED_TABLE_IV.get((n, k, float(eps0), nx0), {}).get(float(eps))
    if value is None:
        return None
    return {
        "bound": "biswas-literal",
        "value": value,
        "source": "published value of the printed Theorem IV.1 (Biswas, Jung, Palamidessi, "
        "Table IV); the bound biswas-literal evaluates the same formula",
        "label": "published formula, not a valid guarantee",
    }


def bound_rows(mech: ShuffledKRR, eps: float, nx0: int | None) -> list[dict[str, Any]]:
    """Every bound's value at (n, k, eps0, eps) with its label, or the reason it has none."""
    rows: list[dict[str, Any]] = []
    for name in BOUND_NAMES:
        if needs_nx0(name) and nx0 is None:
            rows.append({"bound": name, "error": "needs nx0 (the single-bin dataset, --nx0 M)"})
            continue
        bound = make_bound(name, nx0 if needs_nx0(name) else None)
        row: dict[str, Any] = {
            "bound": name,
            "kind": str(bound.kind_for(mech)),
            "guarantee": bound.guarantee_for(mech),
        }
        if name == "biswas-literal" and (
            published := published_value(mech.n, mech.k, mech.eps0, nx0, eps)
        ):
            row["published"] = published["value"]  # beside the evaluated formula
        try:
            result = bound.delta(mech, eps)
        except OutsideConditionsError as exc:
            row["error"] = str(exc)
        else:
            row["delta"] = result.delta
            if result.kind is not BoundKind.NOT_A_GUARANTEE:
                row.update(delta_lower=result.delta_lower, delta_upper=result.delta_upper)
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------
# The audit


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditResult:
    """Everything the audit found; :meth:`as_json` is what ``--json`` prints."""

    n: int
    k: int
    eps0: float
    eps: float
    dataset: AuditDataset
    worst_candidates: dict[str, float] | None
    trials: int
    selection_trials: int
    held_out_trials: int
    alpha: float
    region: Region
    selection_lower_ci: float
    p_in_region: int
    q_in_region: int
    numerator_lower: float
    denominator_upper: float
    delta_lower_ci: float
    exact_region_delta: float | None
    exact_statistic_delta: float | None
    randomness: str
    seed: int | None
    bounds: list[dict[str, Any]] = field(default_factory=list)
    delta_upper: float
    published: dict[str, Any] | None
    elapsed_s: float

    @property
    def below_valid_guarantee(self) -> bool:
        return self.delta_lower_ci <= self.delta_upper

    @property
    def refutes_published(self) -> bool | None:
        if self.published is None:
            return None
        return self.delta_lower_ci > float(self.published["value"])

    def as_json(self) -> dict[str, Any]:
        dataset = self.dataset.as_json()
        if self.worst_candidates is not None:
            dataset["worst_candidates"] = self.worst_candidates
        return {
            "n": self.n,
            "k": self.k,
            "eps0": self.eps0,
            "eps": self.eps,
            "dataset": dataset,
            "trials": self.trials,
            "selection_trials": self.selection_trials,
            "held_out_trials": self.held_out_trials,
            "alpha": self.alpha,
            "confidence": 1.0 - self.alpha,
            "region": {
                "statistic": self.region.statistic,
                "direction": self.region.direction,
                "threshold": self.region.threshold,
                "description": self.region.describe(),
                "selection_lower_ci": self.selection_lower_ci,
            },
            "counts": {
                "p_in_region": self.p_in_region,
                "q_in_region": self.q_in_region,
                "held_out_trials": self.held_out_trials,
            },
            "region_masses": {
                "numerator": self.region.direction[0],
                "numerator_lower": self.numerator_lower,
                "denominator_upper": self.denominator_upper,
                "level_each": 1.0 - self.alpha / 2,
            },
            "delta_lower_ci": self.delta_lower_ci,
            "exact": None
            if self.exact_region_delta is None
            else {
                "region_delta": self.exact_region_delta,
                "statistic_delta": self.exact_statistic_delta,
            },
            "randomness": self.randomness,
            "seed": self.seed,
            "bounds": self.bounds,
            "delta_upper": self.delta_upper,
            "published": self.published,
            "checks": {
                "below_valid_guarantee": self.below_valid_guarantee,
                "refutes_published": self.refutes_published,
            },
            "elapsed_s": self.elapsed_s,
        }


def _region_mass(log_pmf: npt.NDArray[np.float64], inside: npt.NDArray[np.bool_]) -> float:
    values = log_pmf[inside]
    return float(np.exp(special.logsumexp(values))) if values.size else 0.0


def run_audit(
    *,
    n: int,
    k: int,
    eps0: float,
    eps: float,
    dataset: str = "worst",
    nx0: int | None = None,
    trials: int = DEFAULT_TRIALS,
    seed: SeedLike = None,
    alpha: float = AUDIT_ALPHA,
    with_bounds: bool = True,
    progress: Callable[[int], Callable[[], None]] | None = None,
) -> AuditResult:
    """Audit shuffled k-RR(n, k, eps0) at eps on a neighbouring pair (module docstring).

    ``dataset``: "worst" or "single-bin" (then ``nx0`` is required); ``trials`` per dataset
    (half chooses the region, half is held out); ``seed``: None for the OS CSPRNG, an int, or a
    numpy Generator (a seed is drawn from it and recorded); ``progress``: given the number of
    steps, returns the callable to advance by one; ``with_bounds``: compute every bound beside
    the result (delta_upper, the valid guarantee, always).
    """
    started = time.monotonic()
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    eps, alpha = _check_audit_parameters(k, eps, trials, alpha)
    seed_int = seed_value(seed)  # a numpy Generator: a seed drawn from it, recorded
    pair, worst_candidates = _neighbouring_pair(dataset, nx0, mech, eps, n=n, k=k)
    source = default_source(seed_int)
    stats_p, stats_q = _sample_pair(pair, mech.eps0, trials, source, progress)
    exact = exact_two_count(pair, mech.eps0)
    scores = _Scores.of(exact, stats_p, stats_q)
    measured = _measure(scores, eps, alpha)
    exact_region_delta, exact_statistic_delta = _exact_deltas(exact, measured.region, eps)
    return AuditResult(
        n=n,
        k=k,
        eps0=mech.eps0,
        eps=eps,
        dataset=pair,
        worst_candidates=worst_candidates,
        trials=trials,
        selection_trials=measured.selection_trials,
        held_out_trials=measured.held_out_trials,
        alpha=alpha,
        region=measured.region,
        selection_lower_ci=measured.selection_lower_ci,
        p_in_region=measured.p_in_region,
        q_in_region=measured.q_in_region,
        numerator_lower=measured.numerator_lower,
        denominator_upper=measured.denominator_upper,
        delta_lower_ci=measured.delta_lower_ci,
        exact_region_delta=exact_region_delta,
        exact_statistic_delta=exact_statistic_delta,
        randomness=source.name if seed_int is None else f"{source.name} (reproducible audit)",
        seed=seed_int,
        bounds=bound_rows(mech, eps, pair.nx0) if with_bounds else [],
        delta_upper=Tight().upper_only(mech, eps),
        published=published_value(n, k, mech.eps0, pair.nx0, eps),
        elapsed_s=round(time.monotonic() - started, 3),
    )


def _sample_pair(
    pair: AuditDataset,
    eps0: float,
    trials: int,
    source: RandomSource,
    progress: Callable[[int], Callable[[], None]] | None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(h_x0, h_x1) of ``trials`` histograms under P, then under Q; ``progress`` is told the
    number of chunks of both."""
    chunks = -(-trials // chunk_trials(pair.k))
    advance = progress(2 * chunks) if progress is not None else None
    stats_p = sample_two_counts(pair, X0, eps0, trials, source, advance)
    stats_q = sample_two_counts(pair, X1, eps0, trials, source, advance)
    return stats_p, stats_q


def _check_audit_parameters(k: int, eps: float, trials: int, alpha: float) -> tuple[float, float]:
    """(eps, alpha) checked, after k and --trials."""
    require_int("k", k, 2, MAX_K)
    eps = require_eps(eps)
    require_int("--trials", trials, 20, MAX_TRIALS)
    alpha = require_finite("alpha", alpha)
    if not 0.0 < alpha < 1.0:
        raise InvalidParameterError(f"alpha must be in (0, 1), got {alpha}")
    return eps, alpha


def _neighbouring_pair(
    dataset: str, nx0: int | None, mech: ShuffledKRR, eps: float, *, n: int, k: int
) -> tuple[AuditDataset, dict[str, float] | None]:
    """The pair ``--dataset`` names, with the worst family's candidates (None for single-bin)."""
    if dataset == "worst":
        if nx0 is not None:
            raise InvalidParameterError("--nx0 goes with --dataset single-bin, not worst")
        return worst_dataset(mech, eps)
    if dataset == "single-bin":
        if nx0 is None:
            raise InvalidParameterError("--dataset single-bin needs --nx0 M (others holding x0)")
        return single_bin_dataset(n, k, nx0), None
    raise InvalidParameterError(f"dataset must be worst or single-bin, got {dataset!r}")


@dataclass(frozen=True, slots=True)
class _Scores:
    """The score of every trial under P and under Q, and what the score is."""

    p: npt.NDArray[np.float64]
    q: npt.NDArray[np.float64]
    statistic: str

    @classmethod
    def of(
        cls,
        exact: ExactTwoCount | None,
        stats_p: npt.NDArray[np.int64],
        stats_q: npt.NDArray[np.int64],
    ) -> _Scores:
        """The exact privacy loss of (h_x0, h_x1) when its law is known, else h_x0 - h_x1."""
        if exact is not None:
            loss = exact.loss()
            return cls(
                loss[stats_p[:, 0], stats_p[:, 1]],
                loss[stats_q[:, 0], stats_q[:, 1]],
                "exact privacy loss log P/Q of (h_x0, h_x1)",
            )
        return cls(
            (stats_p[:, 0] - stats_p[:, 1]).astype(np.float64),
            (stats_q[:, 0] - stats_q[:, 1]).astype(np.float64),
            "h_x0 - h_x1",
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Measured:
    """The region chosen on the selection half and what the held-out half says of it."""

    region: Region
    selection_trials: int
    selection_lower_ci: float
    held_out_trials: int
    p_in_region: int
    q_in_region: int
    numerator_lower: float
    denominator_upper: float
    delta_lower_ci: float


def _measure(scores: _Scores, eps: float, alpha: float) -> _Measured:
    """Choose the region on the first half of the trials, bound its delta on the second."""
    half = scores.p.size // 2
    choice = choose_region(scores.p[:half], scores.q[:half], scores.statistic, eps, alpha)
    region = choice.region
    held_p, held_q = scores.p[half:], scores.q[half:]
    held = held_p.size
    in_p, in_q = int(region.contains(held_p).sum()), int(region.contains(held_q).sum())
    # a: trials of the dataset in the numerator that fall in S; b: of the other one
    a, b = (in_p, in_q) if region.direction == "P||Q" else (in_q, in_p)
    return _Measured(
        region=region,
        selection_trials=half,
        selection_lower_ci=choice.selection_lower,
        held_out_trials=held,
        p_in_region=in_p,
        q_in_region=in_q,
        numerator_lower=float(clopper_pearson_lower(a, held, alpha / 2)),
        denominator_upper=float(clopper_pearson_upper(b, held, alpha / 2)),
        delta_lower_ci=float(lower_confidence_bound(a, b, held, eps, alpha)),
    )


def _exact_deltas(
    exact: ExactTwoCount | None, region: Region, eps: float
) -> tuple[float | None, float | None]:
    """(the region's exact P(S) - e^eps Q(S) in its direction, the statistic's exact delta), or
    (None, None) when the exact law was not computed."""
    if exact is None:
        return None, None
    inside = region.contains(exact.loss())
    numerator, other = (
        (exact.log_p, exact.log_q) if region.direction == "P||Q" else (exact.log_q, exact.log_p)
    )
    region_delta = _region_mass(numerator, inside) - math.exp(eps) * _region_mass(other, inside)
    return region_delta, exact.delta(eps)
