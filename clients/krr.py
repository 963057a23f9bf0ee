"""k-randomized response, the local randomizer every client applies (pure core)."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from shuffledp.accountant.mechanism import krr_log_probabilities
from shuffledp.errors import InvalidParameterError
from shuffledp.randomness import RandomLike, as_random_source
from shuffledp.validation import require_positive


def krr_probabilities(k: int, eps0: float) -> tuple[float, float]:
    """(pt, pb): report the true value w.p. pt = e^eps0 / (e^eps0 + k - 1), each other value
    w.p. pb = 1 / (e^eps0 + k - 1)."""
    _check(k, eps0)
    log_pt, log_pb = krr_log_probabilities(k, eps0)
    return math.exp(log_pt), math.exp(log_pb)


def krr_randomize(
    values: npt.ArrayLike, k: int, eps0: float, rng: RandomLike = None
) -> npt.NDArray[np.int64]:
    """k-RR reports of ``values`` (integers in [0, k)), one independent draw each.

    Each value is kept w.p. pt; otherwise the report is uniform over the other k - 1 values
    (a uniform j in [0, k-1), shifted past the true value). Randomness from ``rng``: the OS
    CSPRNG unless a source, a seed or a numpy Generator is passed
    (:func:`~shuffledp.randomness.as_random_source`).
    """
    _check(k, eps0)
    x = np.asarray(values)
    if x.ndim != 1:
        raise InvalidParameterError(f"values must be one-dimensional, got shape {x.shape}")
    if x.size and not np.issubdtype(x.dtype, np.integer):
        raise InvalidParameterError(f"values must be integers, got dtype {x.dtype}")
    x = x.astype(np.int64)
    if x.size and (x.min() < 0 or x.max() >= k):
        bad = int(x[(x < 0) | (x >= k)][0])
        raise InvalidParameterError(f"values must be in [0, k) = [0, {k}), got {bad}")
    source = as_random_source(rng)
    pt, _ = krr_probabilities(k, eps0)
    keep = source.uniform(x.size) < pt
    other = source.integers(k - 1, x.size)
    other = other + (other >= x)  # skip the true value: uniform over the k - 1 others
    return np.where(keep, x, other)


def _check(k: int, eps0: float) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 2:
        raise InvalidParameterError(f"k must be an integer >= 2, got {k!r}")
    require_positive("eps0", eps0)
