"""Randomness that protects users: the OS CSPRNG by default, a seeded generator only on request.

Every randomized component (k-RR in the clients, the permutation in each shuffler hop) takes a
:class:`RandomSource`. :class:`SystemRandom` draws from ``os.urandom`` (the OS CSPRNG) and is
the default; :class:`SeededRandom` wraps numpy's PCG64 for reproducible simulations and says so
in its ``name``, which reports carry. numpy's PCG64 is not a cryptographic generator even when
seeded from os.urandom (docs/transport.md), so it is never the default.

Why not ``secrets.SystemRandom``: it draws one Python int at a time (1.67 s for a permutation of
1e6 items, docs/transport.md); these draw whole arrays from one ``os.urandom`` call.
"""

from __future__ import annotations

import os
from typing import Protocol

import numpy as np
import numpy.typing as npt

_TWO_64 = 1 << 64


class RandomSource(Protocol):
    """Uniform integers and uniform floats, as arrays."""

    @property
    def name(self) -> str:
        """What the report says was used: 'os-csprng' or 'seeded-pcg64(seed=...)'."""
        ...

    def uint64(self, size: int) -> npt.NDArray[np.uint64]:
        """`size` independent uniform 64-bit words."""
        ...

    def integers(self, high: int, size: int) -> npt.NDArray[np.int64]:
        """`size` independent uniform integers in [0, high)."""
        ...

    def uniform(self, size: int) -> npt.NDArray[np.float64]:
        """`size` independent uniform floats in [0, 1), 53 random bits each."""
        ...


class _WordSource:
    """Integers and floats derived exactly from uniform 64-bit words."""

    def uint64(self, size: int) -> npt.NDArray[np.uint64]:
        raise NotImplementedError

    def integers(self, high: int, size: int) -> npt.NDArray[np.int64]:
        if isinstance(high, bool) or not isinstance(high, int) or not 1 <= high <= 2**62:
            raise ValueError(f"high must be an integer in [1, 2^62], got {high!r}")
        if size < 0:
            raise ValueError(f"size must be >= 0, got {size}")
        # Rejection sampling: accept words below the largest multiple of `high` (no modulo bias).
        limit = np.uint64((_TWO_64 // high) * high - 1)
        out = np.empty(size, dtype=np.int64)
        filled = 0
        while filled < size:
            words = self.uint64(size - filled + 8)
            words = words[words <= limit]
            take = min(words.size, size - filled)
            out[filled : filled + take] = (words[:take] % np.uint64(high)).astype(np.int64)
            filled += take
        return out

    def uniform(self, size: int) -> npt.NDArray[np.float64]:
        if size < 0:
            raise ValueError(f"size must be >= 0, got {size}")
        return (self.uint64(size) >> np.uint64(11)).astype(np.float64) * 2.0**-53


class SystemRandom(_WordSource):
    """The OS CSPRNG (``os.urandom``): the default for anything that protects users."""

    @property
    def name(self) -> str:
        return "os-csprng"

    def uint64(self, size: int) -> npt.NDArray[np.uint64]:
        return np.frombuffer(os.urandom(8 * size), dtype=np.uint64).copy()


class SeededRandom(_WordSource):
    """numpy PCG64 from a seed: reproducible simulations only, never a privacy guarantee."""

    def __init__(self, seed: int) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.seed = seed
        self._generator = np.random.Generator(np.random.PCG64(seed))

    @property
    def name(self) -> str:
        return f"seeded-pcg64(seed={self.seed})"

    def uint64(self, size: int) -> npt.NDArray[np.uint64]:
        return self._generator.integers(0, _TWO_64, size=size, dtype=np.uint64, endpoint=False)


def default_source(seed: int | None = None) -> RandomSource:
    """SystemRandom unless a seed is given (then SeededRandom, and its name says so)."""
    return SystemRandom() if seed is None else SeededRandom(seed)
