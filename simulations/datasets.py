"""Data for simulations: the synthetic distribution of the seed paper's evaluation.

``synthetic_values(n, k, rng)``: n samples of the normal distribution N(0, 2), mean 0 and
*variance* 2 (standard deviation sqrt(2)), discretized into k equal-width bins over
[-3 sqrt(2), 3 sqrt(2)] (three standard deviations each side); a sample outside that interval
goes to the nearest end bin. Bin j (0-based) is [-3s + j w, -3s + (j+1) w) with s = sqrt(2),
w = 6 s / k. The distribution of the values is :func:`synthetic_distribution`.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy.special import ndtr, ndtri

from shuffledp.accountant.mechanism import require_int
from shuffledp.protocol.record import MAX_K
from shuffledp.randomness import RandomSource, SystemRandom

__all__ = ["SYNTHETIC_SD", "synthetic_distribution", "synthetic_values"]

SYNTHETIC_SD = math.sqrt(2.0)
"""Standard deviation of the synthetic normal (variance 2)."""
_HALF_WIDTH = 3.0 * SYNTHETIC_SD


def _edges(k: int) -> npt.NDArray[np.float64]:
    return np.linspace(-_HALF_WIDTH, _HALF_WIDTH, k + 1)


def synthetic_distribution(k: int) -> npt.NDArray[np.float64]:
    """The probability of each of the k bins (module docstring); sums to 1."""
    require_int("k", k, 2, MAX_K)
    cdf = ndtr(_edges(k) / SYNTHETIC_SD)
    cdf[0], cdf[-1] = 0.0, 1.0  # the end bins take the tails
    return np.diff(cdf)


def synthetic_values(n: int, k: int, rng: RandomSource | None = None) -> npt.NDArray[np.int64]:
    """n values in [0, k), independent draws from :func:`synthetic_distribution`, using ``rng``
    (the OS CSPRNG unless a source is given)."""
    require_int("n", n, 0)
    require_int("k", k, 2, MAX_K)
    source: RandomSource = rng if rng is not None else SystemRandom()
    # Inverse transform: u uniform in (0, 1) -> N(0, 2) sample -> bin (u = 0 maps to -inf, bin 0).
    samples = SYNTHETIC_SD * ndtri(source.uniform(n))
    width = 2.0 * _HALF_WIDTH / k
    bins = np.floor((samples + _HALF_WIDTH) / width)
    clipped = np.clip(np.nan_to_num(bins, nan=0.0, neginf=0.0, posinf=k - 1), 0, k - 1)
    out: npt.NDArray[np.int64] = clipped.astype(np.int64)
    return out
