"""Checks of parameters at the boundary: each raises InvalidParameterError naming rule and value.

Callers pass the name the user knows (the command-line flag where there is one), so the message
reads like ``--eps0 must be > 0, got -1``.
"""

from __future__ import annotations

import math

from shuffledp.errors import InvalidParameterError


def require_finite(name: str, value: float) -> float:
    """`value` as a float, or InvalidParameterError if it is not a finite real number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidParameterError(f"{name} must be a real number, got {value!r}")
    if not math.isfinite(value):
        raise InvalidParameterError(f"{name} must be finite, got {value}")
    return float(value)


def require_positive(name: str, value: float) -> float:
    """`value` as a float, or InvalidParameterError unless it is finite and > 0."""
    result = require_finite(name, value)
    if result <= 0:
        raise InvalidParameterError(f"{name} must be > 0, got {value}")
    return result


def require_int(
    name: str, value: int, low: int, high: int | None = None, *, bound: str = ""
) -> None:
    """InvalidParameterError unless ``value`` is an integer in [low, high] (high None: no cap);
    ``bound`` names where the limits come from, e.g. '[0, n_hops - 1]'."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidParameterError(f"{name} must be an integer, got {value!r}")
    if high is None:
        if value < low:
            raise InvalidParameterError(f"{name} must be >= {low}, got {value}")
    elif not low <= value <= high:
        where = f"{bound} = " if bound else ""
        raise InvalidParameterError(f"{name} must be in {where}[{low}, {high}], got {value}")
