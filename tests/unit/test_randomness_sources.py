"""One adapter for randomness (shuffledp.randomness): a numpy Generator is accepted wherever an
``rng=`` is, a seed wherever a ``seed=`` is, the OS CSPRNG stays the default, and the source's
name says which kind was used."""

from __future__ import annotations

import re

import numpy as np
import pytest

from shuffledp.clients.krr import krr_randomize
from shuffledp.errors import InvalidParameterError
from shuffledp.randomness import (
    GeneratorRandom,
    SeededRandom,
    SystemRandom,
    as_random_source,
    seed_value,
    source_from_seed,
    source_kind,
)
from shuffledp.shuffler.permute import uniform_permutation
from shuffledp.simulations.data.datasets import synthetic_values
from shuffledp.simulations.experiments.fastpath import histogram_of_round


def test_a_generator_draws_what_the_seeded_source_of_the_same_seed_draws() -> None:
    # default_rng(s) and PCG64(s) both seed PCG64 through SeedSequence(s): the same stream.
    seeded = SeededRandom(2024).uint64(1000)
    generator = GeneratorRandom(np.random.default_rng(2024)).uint64(1000)
    assert np.array_equal(seeded, generator)
    assert not np.array_equal(seeded, GeneratorRandom(np.random.default_rng(2025)).uint64(1000))


def test_krr_and_the_permutation_use_a_generator_as_a_source_not_as_positional_numbers() -> None:
    """Generator.integers(low, high) and .uniform(low) have other signatures than a
    RandomSource's; passed through unadapted they would draw something else silently."""
    values = np.arange(500) % 7
    by_generator = krr_randomize(values, 7, 1.0, np.random.default_rng(5))
    by_seed = krr_randomize(values, 7, 1.0, SeededRandom(5))
    assert np.array_equal(by_generator, by_seed)
    order = uniform_permutation(300, np.random.default_rng(6))
    assert np.array_equal(np.sort(order), np.arange(300))
    assert np.array_equal(order, uniform_permutation(300, SeededRandom(6)))


def test_a_generator_advances_and_the_default_is_the_os_csprng() -> None:
    generator = np.random.default_rng(9)
    first = synthetic_values(200, 15, generator)
    second = synthetic_values(200, 15, generator)
    assert not np.array_equal(first, second)  # the caller's Generator moved on
    assert np.array_equal(first, synthetic_values(200, 15, np.random.default_rng(9)))
    assert isinstance(as_random_source(None), SystemRandom)
    counts = histogram_of_round(np.zeros(100, dtype=np.int64), k=3, eps0=1.0, rng=generator)
    assert int(counts.sum()) == 100


def test_each_kind_of_source_says_what_it_is() -> None:
    assert source_kind(as_random_source(None)) == "os"
    assert as_random_source(None).name == "os-csprng"
    generator_source = as_random_source(np.random.default_rng(1))
    assert source_kind(generator_source) == "generator"
    assert generator_source.name == "numpy-generator(PCG64)"
    assert source_kind(source_from_seed(3)) == "seeded"
    assert source_from_seed(3).name == "seeded-pcg64(seed=3)"
    assert source_kind(source_from_seed(np.random.default_rng(1))) == "generator"
    assert source_kind(source_from_seed(None)) == "os"
    kept = SeededRandom(4)
    assert as_random_source(kept) is kept


def test_a_seed_drawn_from_a_generator_is_reproducible() -> None:
    a = seed_value(np.random.default_rng(77))
    b = seed_value(np.random.default_rng(77))
    assert a == b
    assert a is not None and 0 <= a < 2**63
    assert seed_value(None) is None
    assert seed_value(12) == 12


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            42,
            "rng must be a RandomSource, a numpy Generator or None (the OS CSPRNG), got int 42; "
            "for a seed pass np.random.default_rng(42)",
        ),
        (np.random.RandomState(1), "rng must be a RandomSource, a numpy Generator or None"),
        (1.5, "got float 1.5"),
        (True, "got bool True"),
    ],
)
def test_rng_refuses_what_is_not_randomness(value: object, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=re.escape(message)):
        as_random_source(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-1, "seed must be >= 0, got -1"),
        (True, "seed must be None (the OS CSPRNG), an integer >= 0 or a numpy Generator, got bool"),
        (2.0, "got float 2.0"),
    ],
)
def test_seed_refuses_what_is_not_a_seed(value: object, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=re.escape(message)):
        seed_value(value)  # type: ignore[arg-type]
