"""argparse ``type=`` converters that check a flag's rule when the command line is parsed.

Each raises ``argparse.ArgumentTypeError("must be ..., got VALUE")``; the parser of
:mod:`shuffledp.cli.main` prints it as one line naming the flag (``--eps0 must be > 0, got -1``)
with exit status 2, before any work starts.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["integer", "non_negative", "positive", "probability", "real"]


def _parse_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None


def integer(low: int, high: int | None = None) -> Callable[[str], int]:
    """An integer in [low, high] (high None: no upper limit)."""

    def convert(text: str) -> int:
        value = _parse_int(text)
        if high is None and value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        if high is not None and not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be in [{low}, {high}], got {value}")
        return value

    convert.__name__ = "integer"
    return convert


def real(text: str) -> float:
    """A finite real number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a real number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be finite, got {text}")
    return value


def positive(text: str) -> float:
    """A finite real number > 0."""
    value = real(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def non_negative(text: str) -> float:
    """A finite real number >= 0."""
    value = real(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def probability(text: str) -> float:
    """A real number strictly between 0 and 1 (a target delta)."""
    value = real(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), got {text}")
    return value
