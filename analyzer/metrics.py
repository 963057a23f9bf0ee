"""Utility metrics for distribution estimates (docs/estimators.md: total variation distance)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from shuffledp.errors import InvalidParameterError
from shuffledp.validation import require_finite

__all__ = ["PROBABILITY_ATOL", "tv_distance"]

#: Default tolerance for "is a probability vector": entries >= -atol and |sum - 1| <= atol.
PROBABILITY_ATOL = 1e-9


def _require_probability_vector(name: str, arr: npt.NDArray[np.float64], atol: float) -> None:
    if not np.all(np.isfinite(arr)):
        raise InvalidParameterError(f"{name} must be finite, got {arr.tolist()}")
    if arr.size and float(arr.min()) < -atol:
        raise InvalidParameterError(
            f"{name} must have entries >= 0 (tolerance {atol:g}), got {float(arr.min())!r}"
        )
    total = float(arr.sum())
    if abs(total - 1.0) > atol:
        raise InvalidParameterError(f"{name} must sum to 1 (tolerance {atol:g}), got sum {total!r}")


def tv_distance(p: npt.ArrayLike, q: npt.ArrayLike, *, atol: float = PROBABILITY_ATOL) -> float:
    """Total variation distance 0.5 * sum_i |p_i - q_i| between two distributions on {0..k-1}.

    Guarantees: a value in [0, 1] (up to the tolerance), symmetric, 0 iff p = q. Validation: same
    one-dimensional shape, finite, each a probability vector within ``atol`` (entries >= -atol,
    |sum - 1| <= atol); otherwise InvalidParameterError naming the rule and the value.
    """
    tolerance = require_finite("atol", atol)
    if tolerance < 0:
        raise InvalidParameterError(f"atol must be >= 0, got {atol}")
    p_arr = np.asarray(p, dtype=np.float64)
    q_arr = np.asarray(q, dtype=np.float64)
    if p_arr.ndim != 1:
        raise InvalidParameterError(f"p must be one-dimensional, got shape {p_arr.shape}")
    if p_arr.shape != q_arr.shape:
        raise InvalidParameterError(
            f"p and q must have the same shape, got {p_arr.shape} and {q_arr.shape}"
        )
    _require_probability_vector("p", p_arr, tolerance)
    _require_probability_vector("q", q_arr, tolerance)
    return 0.5 * float(np.abs(p_arr - q_arr).sum())
