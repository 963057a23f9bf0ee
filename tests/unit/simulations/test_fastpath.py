"""The fast in-process path (simulations/experiments/fastpath.py) against exact answers (against
the real pipeline: tests/integration/test_fastpath_pipeline.py, with the two-sample check below).

Statistical checks use Bernstein's inequality with exact variances, so their false-alarm rates
are non-asymptotic. Setting: n users with fixed true values x_i; in every round each reports
y_i ~ k-RR(x_i) independently, so the count of bin j pooled over R rounds is a sum of R n
independent Bernoulli variables with probabilities p_ij = pt if x_i = j else pb. Its mean is
R mu_j and its variance R s_j, with mu_j = c_j pt + (n - c_j) pb and
s_j = c_j pt (1 - pt) + (n - c_j) pb (1 - pb), c_j = #{i : x_i = j}.

Bernstein: for a sum S of independent zero-mean terms with |term| <= M and total variance V,
P(|S| >= t) <= 2 exp(-t^2 / (2 (V + M t / 3))). For m checks sharing a false-alarm rate alpha,
L = ln(2 m / alpha) and the half-width t = L M / 3 + sqrt((L M / 3)^2 + 2 L V) make each check
fail w.p. <= alpha / m, so all pass except w.p. <= alpha (union bound). alpha = 1e-6 in every
test here.

The two-sample check (fast path vs pipeline) has k + 1 checks: each bin, and the statistic
sum_j w_j h_j with w_j = c_j / n (weight of a report = the share of users holding its value),
which gathers the signal of every bin into one number: k-RR with a wrong eps0 (or reports mixed
up across users) moves it by many standard deviations where single bins move by about one.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from shuffledp.analyzer.report import build_report
from shuffledp.clients.krr import krr_probabilities
from shuffledp.randomness import SeededRandom
from shuffledp.simulations.data.datasets import synthetic_values
from shuffledp.simulations.experiments.fastpath import (
    RoundSpec,
    eps_at_delta,
    histogram_of_round,
    run_round,
    run_spec,
)

ALPHA = 1e-6
N = 2_000
K = 15
EPS0 = 4.0
#: The keys of the pipeline's report that the fast path must also give (docs/report-schema.md);
#: the pipeline adds ``timings``, ``stages`` and ``simulation``.
REPORT_KEYS = {
    "round",
    "n_expected",
    "n_received",
    "rejected",
    "k",
    "eps0",
    "histogram",
    "estimate",
    "estimator",
    "privacy",
    "randomness",
    "true_histogram",
    "tv_distance",
    "IBU_method",
    "IBU_distribution",
    "baseline",
}


def _values() -> npt.NDArray[np.int64]:
    """Fixed true values: 2,000 synthetic draws (the seed only fixes the data set)."""
    return synthetic_values(N, K, SeededRandom(20261123))


def _moments(
    values: npt.NDArray[np.int64], k: int, eps0: float
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(mu_j, s_j) of one round: the exact mean and variance of each bin count."""
    pt, pb = krr_probabilities(k, eps0)
    c = np.bincount(values, minlength=k).astype(np.float64)
    n = float(values.size)
    return c * pt + (n - c) * pb, c * pt * (1 - pt) + (n - c) * pb * (1 - pb)


def _weighted_moments(values: npt.NDArray[np.int64], k: int, eps0: float) -> tuple[float, float]:
    """Exact mean and variance of sum_j w_j h_j in one round, w_j = c_j / n: user i's report
    adds w_y, with E w_y = pb sum(w) + (pt - pb) w_{x_i} and E w_y^2 likewise with w^2."""
    pt, pb = krr_probabilities(k, eps0)
    c = np.bincount(values, minlength=k).astype(np.float64)
    w = c / values.size
    mean_w = pb * w.sum() + (pt - pb) * w
    mean_w2 = pb * (w**2).sum() + (pt - pb) * w**2
    return float((c * mean_w).sum()), float((c * (mean_w2 - mean_w**2)).sum())


def _half_width(variance: Any, max_abs: float, checks: int) -> Any:
    """Bernstein half-width of each of ``checks`` checks sharing the false-alarm rate ALPHA."""
    log_term = math.log(2 * checks / ALPHA)
    linear = log_term * max_abs / 3.0
    return linear + np.sqrt(linear**2 + 2.0 * log_term * variance)


def _pooled_fast(values: npt.NDArray[np.int64], rounds: int, eps0: float) -> npt.NDArray[Any]:
    total = np.zeros(K, dtype=np.int64)
    for _ in range(rounds):
        counts = histogram_of_round(values, k=K, eps0=eps0, hops=3)
        assert int(counts.sum()) == values.size
        total += counts
    return total


def _two_sample_rejects(
    values: npt.NDArray[np.int64],
    pipeline_pooled: npt.NDArray[Any],
    pipeline_rounds: int,
    fast_pooled: npt.NDArray[Any],
    fast_rounds: int,
) -> bool:
    """Does the pooled pipeline sample (R_p rounds) differ from the pooled fast sample (R_f
    rounds) beyond the Bernstein half-widths under H0, both samples following k-RR(EPS0) over
    ``values``? Terms: centred report indicators (or weights) divided by R_p or R_f, so
    |term| <= max(1 / R_p, 1 / R_f) (times max w for the weighted check) and the variance is
    the per-round variance times (1 / R_p + 1 / R_f). k + 1 checks share ALPHA."""
    checks = K + 1
    scale = 1.0 / pipeline_rounds + 1.0 / fast_rounds
    max_abs = max(1.0 / pipeline_rounds, 1.0 / fast_rounds)
    difference = pipeline_pooled / pipeline_rounds - fast_pooled / fast_rounds
    _, s = _moments(values, K, EPS0)
    bins = np.abs(difference) > _half_width(s * scale, max_abs, checks)
    w = np.bincount(values, minlength=K) / values.size
    _, weighted_variance = _weighted_moments(values, K, EPS0)
    weighted = abs(float(w @ difference)) > float(
        _half_width(weighted_variance * scale, max_abs * float(w.max()), checks)
    )
    return bool(np.any(bins) or weighted)


def test_fast_path_counts_match_the_exact_expected_counts() -> None:
    """200 rounds pooled (400,000 reports): every bin within its Bernstein half-width of
    R mu_j (terms are centred indicators, |term| <= 1, V_j = R s_j); false alarm <= 1e-6."""
    values = _values()
    rounds = 200
    mu, s = _moments(values, K, EPS0)
    pooled = _pooled_fast(values, rounds, EPS0)
    bound = _half_width(rounds * s, 1.0, K)
    assert np.all(np.abs(pooled - rounds * mu) <= bound), (pooled, rounds * mu, bound)
    # The check has power: the half-widths are a few percent of the counts, while k-RR with
    # eps0 = 3 instead of 4 moves some bins' means by more than twice their half-width.
    mu_other, _ = _moments(values, K, 3.0)
    assert np.max(np.abs(rounds * (mu_other - mu)) - 2 * bound) > 0


def test_two_sample_check_detects_a_wrong_eps0() -> None:
    """The two-sample check used against the pipeline rejects a sample drawn with eps0 = 3 (2
    rounds) against the fast path at eps0 = 4 (200 rounds). Deterministic part: the weighted
    statistic's mean difference exceeds its H0 half-width plus the alternative's own Bernstein
    half-width (k + 1 checks, alpha 1e-6), so the check rejects except w.p. <= 1e-6."""
    values = _values()
    rp, rf = 2, 200
    mean, variance = _weighted_moments(values, K, EPS0)
    mean_alt, variance_alt = _weighted_moments(values, K, 3.0)
    max_abs = float(np.bincount(values, minlength=K).max()) / values.size / rp
    h0 = _half_width(variance * (1 / rp + 1 / rf), max_abs, K + 1)
    alternative = _half_width(variance_alt / rp + variance / rf, max_abs, K + 1)
    assert abs(mean_alt - mean) > h0 + alternative
    wrong = _pooled_fast(values, rp, 3.0)
    right = _pooled_fast(values, rf, EPS0)
    assert _two_sample_rejects(values, wrong, rp, right, rf)


@pytest.mark.slow
def test_report_equals_the_analyzers_report_for_the_same_counts() -> None:
    """The fast path's report is build_report's own (target-delta mode) for the same histogram
    and baseline noise: the cached eps and the patched privacy section change nothing."""
    values = synthetic_values(5_000, K, SeededRandom(3))
    fast = run_round(values, k=K, eps0=EPS0, rng=SeededRandom(11), baseline_rng=5, round_id=4)
    histogram = histogram_of_round(values, k=K, eps0=EPS0, rng=SeededRandom(11))
    assert fast["histogram"] == [int(c) for c in histogram]
    direct = build_report(
        round_id=4,
        k=K,
        eps0=EPS0,
        histogram=histogram,
        n_expected=values.size,
        rejected=fast["rejected"],
        true_histogram=np.bincount(values, minlength=K),
        baseline_rng=5,
        randomness_name=SeededRandom(11).name,
    )
    assert fast.pop("path") == "fast"
    assert fast == direct.to_json()
    assert fast["privacy"]["mode"] == "eps at target delta"
    assert fast["privacy"]["delta"] <= 1e-6
    assert set(fast["rejected"].values()) == {0}
    assert set(fast) >= REPORT_KEYS


@pytest.mark.slow
def test_report_at_a_given_eps_equals_the_analyzers() -> None:
    values = synthetic_values(5_000, K, SeededRandom(4))
    fast = run_round(values, k=K, eps0=EPS0, rng=SeededRandom(2), eps=1.0, baseline_rng=9)
    histogram = histogram_of_round(values, k=K, eps0=EPS0, rng=SeededRandom(2))
    direct = build_report(
        round_id=0,
        k=K,
        eps0=EPS0,
        histogram=histogram,
        n_expected=values.size,
        rejected=fast["rejected"],
        eps=1.0,
        true_histogram=np.bincount(values, minlength=K),
        baseline_rng=9,
        randomness_name=SeededRandom(2).name,
    )
    fast.pop("path")
    assert fast == direct.to_json()


@pytest.mark.slow
def test_a_precomputed_inversion_must_match_the_round() -> None:
    values = synthetic_values(3_000, K, SeededRandom(1))
    inverted = eps_at_delta(3_000, K, EPS0, 1e-6)
    report = run_round(values, k=K, eps0=EPS0, inverted=inverted)
    assert report["privacy"]["eps"] == inverted.eps
    with pytest.raises(ValueError, match=r"inverted must be for \(n, k, eps0, delta\)"):
        run_round(values[:2_999], k=K, eps0=EPS0, inverted=inverted)


@pytest.mark.slow
def test_seeded_specs_reproduce_and_different_seeds_differ() -> None:
    values = synthetic_values(4_000, K, SeededRandom(8))
    first = run_spec(RoundSpec(values=values, k=K, eps0=EPS0, eps=1.0, seed=42))
    again = run_spec(RoundSpec(values=values, k=K, eps0=EPS0, eps=1.0, seed=42))
    other = run_spec(RoundSpec(values=values, k=K, eps0=EPS0, eps=1.0, seed=43))
    assert first == again
    assert "seed 42" in first["randomness"]
    # Two independent 4,000-report histograms coincide with negligible probability, and so do
    # two independent Gaussian noise draws.
    assert first["histogram"] != other["histogram"]
    assert first["tv_distance"]["gaussian"] != other["tv_distance"]["gaussian"]
    unseeded = run_spec(RoundSpec(values=values, k=K, eps0=EPS0, eps=1.0))
    assert unseeded["randomness"] == "os-csprng"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"values": np.array([0, 15])}, r"values must lie in \[0, k\)"),
        ({"values": np.array([1])}, "at least 2 values"),
        ({"values": np.array([0.5, 1.0])}, "integer array"),
        ({"eps0": 0.0}, "eps0 must be > 0"),
        ({"k": 1}, "k must be in"),
        ({"seed": -1}, "seed must be >= 0"),
        ({"target_delta": 1.0}, r"delta must be in \(0, 1\)"),
    ],
)
def test_round_spec_validation(change: dict[str, Any], message: str) -> None:
    fields: dict[str, Any] = {"values": np.array([0, 1, 2]), "k": K, "eps0": EPS0}
    fields.update(change)
    with pytest.raises(ValueError, match=message):
        RoundSpec(**fields)
