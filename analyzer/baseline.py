"""Central-DP baseline: the analytic Gaussian mechanism on the true histogram.

A trusted curator holding the true histogram x (n users, each in one of k bins) releases
x + N(0, sigma^2 I), with sigma the analytic calibration of Balle and Wang, "Improving the Gaussian
mechanism for differential privacy: analytical calibration and optimal denoising", ICML 2018
(arXiv:1805.06530), Theorem 8: the mechanism is (eps, delta)-DP iff

    Phi(D / (2 sigma) - eps sigma / D) - e^eps Phi(-D / (2 sigma) - eps sigma / D) <= delta,

with D the L2 sensitivity. Neighbours replace one user's value (n is public), which moves one unit
between two bins: D = sqrt(2). The report's ``gaussian`` entry compares the shuffled k-RR estimators
against this at the same (eps, delta) (docs/estimators.md).

Noise comes from diffprivlib's ``GaussianAnalytic`` (diffprivlib 0.6.6, IBM). What this module
found in its source (site-packages/diffprivlib/mechanisms/gaussian.py, utils.py):

* Epsilon: ``GaussianAnalytic`` accepts any epsilon > 0 (only the classic ``Gaussian`` refuses
  epsilon > 1), and delta in (0, 1]; this module requires finite eps > 0 and 0 < delta < 1.
* Calibration accuracy: its bisection evaluates Phi as (1 + erf(x / sqrt 2)) / 2, which cancels
  in the lower tail. Where the terms of the condition fall below ~1e-16 (large eps with small
  delta) its sigma is wrong, in both directions: eps = 20, delta = 1e-9 gives a sigma 4.3% too
  small, whose true delta is 9.4 times the target. This module therefore computes the exact
  calibration itself (:func:`analytic_gaussian_sigma`, log-space normal tails) and never releases
  less noise than that: when diffprivlib's sigma is smaller, its standard-normal draws are rescaled
  to the exact sigma. Where diffprivlib is accurate (relative difference below 1e-8 for eps <= 10,
  delta >= 1e-6, see tests/unit/analyzer/test_analyzer_baseline.py) that rescaling is a no-op at that level.
  Its calibration also overflows e^eps above eps ~ 709 (numpy warnings, silenced here; the exact
  sigma still applies) and is far off for tiny delta (eps = 1, delta = 1e-300: 13.9 for 52.1).
* Default randomness (``random_state=None``): diffprivlib draws from ``secrets.SystemRandom`` (the
  OS CSPRNG via os.urandom, 53-bit floats) and forms each standard normal as the sum of two
  ``random.normalvariate`` draws (Kinderman-Monahan ratio of uniforms) divided by sqrt 2, following
  Holohan and Braghin, "Secure random sampling in differential privacy", arXiv:2107.10138. That is
  unpredictable but still floating-point noise, not a discrete or exactly rounded sampler (see
  Mironov, CCS 2012, on floating-point attacks). With an int seed or a
  ``numpy.random.RandomState`` it uses that RandomState (Mersenne Twister, reproducible, not
  cryptographic); caution: passing numpy's global RandomState singleton makes it silently switch
  to SystemRandom. diffprivlib does not accept ``numpy.random.Generator``; this module turns a
  Generator into a RandomState seeded from it, so a seeded Generator gives reproducible noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.special import log_ndtr

from shuffledp.accountant.mechanism import require_delta
from shuffledp.analyzer.estimators import project_to_simplex
from shuffledp.errors import InvalidParameterError
from shuffledp.validation import require_positive

FloatArray = npt.NDArray[np.float64]
RandomState = int | np.random.Generator | np.random.RandomState | None

__all__ = [
    "L2_SENSITIVITY_REPLACE_ONE",
    "GaussianBaseline",
    "RandomState",
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "gaussian_baseline",
]

#: L2 sensitivity of a histogram when one user's value is replaced: one bin -1, another +1.
L2_SENSITIVITY_REPLACE_ONE = math.sqrt(2.0)
#: Relative precision of the sigma bisection in :func:`analytic_gaussian_sigma`.
_SIGMA_RTOL = 1e-13


@dataclass(frozen=True, slots=True, kw_only=True)
class GaussianBaseline:
    """One release of the central baseline.

    ``noisy_counts``: the true histogram plus N(0, sigma^2) per bin (may be negative or
    fractional). ``estimate``: noisy_counts / n projected onto the probability simplex.
    ``sigma``: the noise scale used (the exact analytic calibration, or diffprivlib's if larger).
    ``sigma_diffprivlib``: diffprivlib's own calibration, for the record. ``eps``, ``delta``: the
    guarantee, for replace-one neighbours with n public.
    """

    noisy_counts: FloatArray
    estimate: FloatArray
    sigma: float
    sigma_diffprivlib: float
    eps: float
    delta: float


def analytic_gaussian_delta(
    sigma: float, eps: float, sensitivity: float = L2_SENSITIVITY_REPLACE_ONE
) -> float:
    """The exact delta(eps) of the Gaussian mechanism with scale sigma (Balle and Wang, Thm 8).

    Phi(D/(2 sigma) - eps sigma/D) - e^eps Phi(-D/(2 sigma) - eps sigma/D), with both terms in
    log space (scipy.special.log_ndtr), so it is accurate in the tails and for large eps. Clipped
    at 0 (the difference can round below 0 far out). Decreasing in sigma.
    """
    sigma_value = require_positive("sigma", sigma)
    eps_value = require_positive("eps", eps)
    d = require_positive("sensitivity", sensitivity)
    a = d / (2.0 * sigma_value)
    b = eps_value * sigma_value / d
    log_first = float(log_ndtr(a - b))
    log_second = eps_value + float(log_ndtr(-a - b))
    if log_second >= log_first:
        return 0.0
    return math.exp(log_first) * -math.expm1(log_second - log_first)


def analytic_gaussian_sigma(
    eps: float, delta: float, sensitivity: float = L2_SENSITIVITY_REPLACE_ONE
) -> float:
    """The smallest sigma for which the Gaussian mechanism is (eps, delta)-DP (Balle and Wang).

    Bisection in log sigma on the monotone condition analytic_gaussian_delta(sigma) <= delta, to
    relative precision 1e-13; the returned end of the bracket satisfies the condition as computed
    (the safe side). Independent of diffprivlib.
    """
    eps_value = require_positive("eps", eps)
    delta_value = require_delta(delta)
    d = require_positive("sensitivity", sensitivity)

    def private(sigma: float) -> bool:
        return analytic_gaussian_delta(sigma, eps_value, d) <= delta_value

    low = high = d
    while not private(high):
        high *= 2.0
    while private(low):
        low /= 2.0
    while high - low > _SIGMA_RTOL * high:
        middle = math.sqrt(low * high)
        if private(middle):
            high = middle
        else:
            low = middle
    return high


def _as_diffprivlib_state(
    random_state: RandomState,
) -> int | np.random.RandomState | None:
    """diffprivlib takes None, an int or a RandomState; a Generator seeds a fresh RandomState."""
    if isinstance(random_state, np.random.Generator):
        entropy = [int(word) for word in random_state.integers(0, 2**63, size=4)]
        return np.random.RandomState(np.random.MT19937(np.random.SeedSequence(entropy)))
    if random_state is None or isinstance(random_state, np.random.RandomState):
        return random_state
    if isinstance(random_state, bool) or not isinstance(random_state, int | np.integer):
        raise InvalidParameterError(
            "random_state must be None, an int, a numpy Generator or RandomState, "
            f"got {random_state!r}"
        )
    if not 0 <= random_state < 2**32:
        raise InvalidParameterError(
            f"random_state as an int seed must be in [0, 2**32), got {random_state}"
        )
    return int(random_state)


def _validate_true_counts(true_counts: npt.ArrayLike) -> tuple[FloatArray, float]:
    arr = np.asarray(true_counts)
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iuf":
        raise InvalidParameterError(f"true_counts must be integers, got dtype {arr.dtype}")
    if arr.ndim != 1 or arr.size < 2:
        raise InvalidParameterError(
            f"true_counts must be one-dimensional with k >= 2 bins, got shape {arr.shape}"
        )
    x = arr.astype(np.float64)
    if not np.all(np.isfinite(x)) or np.any(x != np.floor(x)) or np.any(x < 0):
        raise InvalidParameterError(
            f"true_counts must be non-negative integers, got {arr.tolist()}"
        )
    n = float(x.sum())
    if n < 1:
        raise InvalidParameterError(f"true_counts must sum to n >= 1, got {n:g}")
    return x, n


def gaussian_baseline(
    true_counts: npt.ArrayLike,
    eps: float,
    delta: float,
    *,
    random_state: RandomState = None,
) -> GaussianBaseline:
    """Release the true histogram with the analytic Gaussian mechanism at (eps, delta).

    Each bin gets independent N(0, sigma^2) noise, sigma = max(exact analytic calibration,
    diffprivlib's), L2 sensitivity sqrt(2) (replace-one neighbours); the distribution estimate is
    the noisy histogram divided by the public n and projected onto the simplex
    (:func:`shuffledp.analyzer.estimators.project_to_simplex`; post-processing, so free).

    Guarantees: (eps, delta)-DP for replace-one neighbours (the released sigma is never below the
    exact calibration); ``estimate`` on the simplex. ``random_state``: None for diffprivlib's
    default (``secrets.SystemRandom``), an int / RandomState / numpy Generator for reproducible
    simulations (see the module docstring). Validation: eps finite > 0, 0 < delta < 1, counts
    non-negative integers with n >= 1.
    """
    x, n = _validate_true_counts(true_counts)
    eps_value = require_positive("eps", eps)
    delta_value = require_delta(delta)
    state = _as_diffprivlib_state(random_state)
    sigma_exact = analytic_gaussian_sigma(eps_value, delta_value, L2_SENSITIVITY_REPLACE_ONE)
    with np.errstate(over="ignore", invalid="ignore"):  # its e^eps overflows above eps ~ 709
        # Imported here: diffprivlib pulls in scikit-learn (~0.8 s), which only simulations need.
        from diffprivlib.mechanisms import GaussianAnalytic

        mechanism = GaussianAnalytic(
            epsilon=eps_value,
            delta=delta_value,
            sensitivity=L2_SENSITIVITY_REPLACE_ONE,
            random_state=state,
        )
    sigma_dpl = math.sqrt(float(mechanism.variance(0.0)))
    # Noise is drawn at zero and added, so its scale can be corrected exactly (see module doc).
    noise = np.array([float(mechanism.randomise(0.0)) for _ in range(x.size)], dtype=np.float64)
    sigma = sigma_dpl
    if sigma_dpl < sigma_exact:
        noise *= sigma_exact / sigma_dpl
        sigma = sigma_exact
    noisy = x + noise
    return GaussianBaseline(
        noisy_counts=noisy,
        estimate=project_to_simplex(noisy / n),
        sigma=sigma,
        sigma_diffprivlib=sigma_dpl,
        eps=eps_value,
        delta=delta_value,
    )
