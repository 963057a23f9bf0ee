"""Randomness that protects users: the OS CSPRNG by default, a seeded generator only on request.

Every randomized component (k-RR in the clients, the permutation in each shuffler hop) takes a
:class:`RandomSource`. :class:`SystemRandom` draws from ``os.urandom`` (the OS CSPRNG) and is
the default; :class:`SeededRandom` wraps numpy's PCG64 for reproducible simulations and says so
in its ``name``, which reports carry. numpy's PCG64 is not a cryptographic generator even when
seeded from os.urandom (docs/transport.md), so it is never the default.

Wherever a component takes randomness (``rng=`` or ``seed=``) it goes through one adapter,
:func:`as_random_source` for ``rng=`` (None is the OS CSPRNG, a numpy ``Generator`` is used as it
is through :class:`GeneratorRandom`, a :class:`RandomSource` is kept) and :func:`source_from_seed`
/ :func:`seed_value` for ``seed=`` (None, an int, or a numpy ``Generator`` a seed is drawn from).
Each source's ``name`` says which kind it is (:func:`source_kind`: os, seeded, generator).

Why not ``secrets.SystemRandom``: it draws one Python int at a time (1.67 s for a permutation of
1e6 items, docs/transport.md); these draw whole arrays from one ``os.urandom`` call.
"""

from __future__ import annotations

import os
from typing import Literal, Protocol, TypeAlias, runtime_checkable

import numpy as np
import numpy.typing as npt

from shuffledp.errors import InvalidParameterError

__all__ = [
    "GeneratorRandom",
    "RandomLike",
    "RandomSource",
    "SeedLike",
    "SeededRandom",
    "SystemRandom",
    "as_random_source",
    "default_source",
    "seed_value",
    "source_from_seed",
    "source_kind",
]

_TWO_64 = 1 << 64


@runtime_checkable
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


class GeneratorRandom(_WordSource):
    """A numpy ``Generator`` the caller made (reproducible if it was seeded; never a privacy
    guarantee). Its words are the Generator's own ``integers(0, 2^64, dtype=uint64)``, so
    ``GeneratorRandom(np.random.default_rng(s))`` draws exactly what ``SeededRandom(s)`` draws."""

    def __init__(self, generator: np.random.Generator) -> None:
        if not isinstance(generator, np.random.Generator):
            raise InvalidParameterError(
                f"generator must be a numpy Generator, got {type(generator).__name__}"
            )
        self._generator = generator

    @property
    def generator(self) -> np.random.Generator:
        return self._generator

    @property
    def name(self) -> str:
        return f"numpy-generator({type(self._generator.bit_generator).__name__})"

    def uint64(self, size: int) -> npt.NDArray[np.uint64]:
        return self._generator.integers(0, _TWO_64, size=size, dtype=np.uint64, endpoint=False)


class SeededRandom(GeneratorRandom):
    """numpy PCG64 from a seed: reproducible simulations only, never a privacy guarantee."""

    def __init__(self, seed: int) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise InvalidParameterError(f"seed must be a non-negative integer, got {seed!r}")
        self.seed = seed
        super().__init__(np.random.Generator(np.random.PCG64(seed)))

    @property
    def name(self) -> str:
        return f"seeded-pcg64(seed={self.seed})"


#: What every ``rng=`` argument accepts: None (the OS CSPRNG), a numpy ``Generator``, or a
#: :class:`RandomSource`.
RandomLike: TypeAlias = "RandomSource | np.random.Generator | None"
#: What every ``seed=`` argument accepts: None (the OS CSPRNG), an int >= 0, or a numpy
#: ``Generator`` (a seed is drawn from it).
SeedLike: TypeAlias = "np.random.Generator | int | None"


def as_random_source(rng: RandomLike, name: str = "rng") -> RandomSource:
    """The one adapter from an ``rng=`` argument to a :class:`RandomSource`.

    None: :class:`SystemRandom` (the OS CSPRNG, the default); a numpy ``Generator``:
    :class:`GeneratorRandom` over it (its state advances as it is used); a RandomSource: itself.
    Anything else (an int, a legacy ``RandomState``) is an InvalidParameterError naming ``name``;
    a seed goes to a ``seed=`` argument (:func:`source_from_seed`) or into
    ``np.random.default_rng(seed)``.
    """
    if rng is None:
        return SystemRandom()
    if isinstance(rng, np.random.Generator):
        return GeneratorRandom(rng)
    if isinstance(rng, RandomSource) and not isinstance(rng, np.random.RandomState):
        return rng
    hint = (
        f"; for a seed pass np.random.default_rng({rng})"
        if isinstance(rng, int | np.integer) and not isinstance(rng, bool)
        else ""
    )
    raise InvalidParameterError(
        f"{name} must be a RandomSource, a numpy Generator or None (the OS CSPRNG), got "
        f"{type(rng).__name__} {rng!r}{hint}"
    )


def source_from_seed(seed: SeedLike, name: str = "seed") -> RandomSource:
    """The source of a ``seed=`` argument: None the OS CSPRNG, an int >= 0
    :class:`SeededRandom`, a numpy ``Generator`` :class:`GeneratorRandom` over it."""
    if isinstance(seed, np.random.Generator):
        return GeneratorRandom(seed)
    value = seed_value(seed, name)
    return SystemRandom() if value is None else SeededRandom(value)


def seed_value(seed: SeedLike, name: str = "seed") -> int | None:
    """A ``seed=`` argument as a seed that can be written down (passed to another process):
    None stays None (the OS CSPRNG), an int >= 0 is checked, a numpy ``Generator`` gives one
    63-bit seed drawn from it (reproducible if the Generator was seeded). InvalidParameterError
    naming ``name`` otherwise."""
    if seed is None:
        return None
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(0, 2**63, dtype=np.int64))
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise InvalidParameterError(
            f"{name} must be None (the OS CSPRNG), an integer >= 0 or a numpy Generator, got "
            f"{type(seed).__name__} {seed!r}"
        )
    if seed < 0:
        raise InvalidParameterError(f"{name} must be >= 0, got {seed}")
    return int(seed)


def source_kind(source: RandomSource) -> Literal["os", "seeded", "generator", "custom"]:
    """Which kind of randomness a source is, for reports: the OS CSPRNG, a seed, a caller's
    numpy Generator, or another RandomSource."""
    if isinstance(source, SystemRandom):
        return "os"
    if isinstance(source, SeededRandom):
        return "seeded"
    if isinstance(source, GeneratorRandom):
        return "generator"
    return "custom"


def default_source(seed: SeedLike = None) -> RandomSource:
    """SystemRandom unless a seed is given (then SeededRandom, and its name says so; a numpy
    Generator: GeneratorRandom). The same as :func:`source_from_seed`."""
    return source_from_seed(seed)
