"""Randomness sources, k-RR and the shuffle permutation.

Statistical tests use chi-square goodness of fit and fail only when p < 1e-6, so each has a
false-alarm rate of 1e-6 (tests on the OS CSPRNG are not seeded: the rate is real).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import chisquare

from shuffledp.clients.krr import krr_probabilities, krr_randomize
from shuffledp.errors import InvalidParameterError
from shuffledp.randomness import RandomSource, SeededRandom, SystemRandom, default_source
from shuffledp.shuffler.permute import permute, uniform_permutation

ALPHA = 1e-6  # false-alarm rate of every goodness-of-fit test here


def sources() -> list[RandomSource]:
    return [SystemRandom(), SeededRandom(20261122)]


@pytest.mark.parametrize("source", sources(), ids=lambda s: s.name)
@pytest.mark.parametrize("high", [1, 2, 7, 1000])
def test_integers_are_uniform(source: RandomSource, high: int) -> None:
    draws = source.integers(high, 200_000)
    assert draws.min() >= 0 and draws.max() < high
    if high > 1:
        counts = np.bincount(draws, minlength=high)
        assert chisquare(counts).pvalue > ALPHA


@pytest.mark.parametrize("source", sources(), ids=lambda s: s.name)
def test_uniform_floats(source: RandomSource) -> None:
    u = source.uniform(200_000)
    assert u.min() >= 0.0 and u.max() < 1.0
    counts = np.histogram(u, bins=50, range=(0.0, 1.0))[0]
    assert chisquare(counts).pvalue > ALPHA


def test_default_is_the_os_csprng_and_seeds_are_reported() -> None:
    assert default_source().name == "os-csprng"
    seeded = default_source(7)
    assert seeded.name == "seeded-pcg64(seed=7)"
    assert np.array_equal(SeededRandom(7).uint64(10), SeededRandom(7).uint64(10))
    assert not np.array_equal(SystemRandom().uint64(4), SystemRandom().uint64(4))


@pytest.mark.parametrize("source", sources(), ids=lambda s: s.name)
@pytest.mark.parametrize(("k", "eps0"), [(2, 0.5), (4, 1.0), (15, 4.0)])
def test_krr_transition_frequencies(source: RandomSource, k: int, eps0: float) -> None:
    """For every true value x the reports follow (pt on x, pb elsewhere)."""
    pt, pb = krr_probabilities(k, eps0)
    assert pt == pytest.approx(math.exp(eps0) / (math.exp(eps0) + k - 1), rel=1e-15)
    assert pt + (k - 1) * pb == pytest.approx(1.0, rel=1e-15)
    n = 60_000
    for x in range(k):
        reports = krr_randomize(np.full(n, x), k, eps0, source)
        counts = np.bincount(reports, minlength=k)
        expected = np.full(k, n * pb)
        expected[x] = n * pt
        assert chisquare(counts, expected).pvalue > ALPHA, (x, counts)


def test_krr_seeded_is_reproducible() -> None:
    values = np.arange(1000) % 5
    a = krr_randomize(values, 5, 1.0, SeededRandom(3))
    b = krr_randomize(values, 5, 1.0, SeededRandom(3))
    assert np.array_equal(a, b)


@pytest.mark.parametrize(
    ("values", "k", "eps0", "message"),
    [
        ([0, 5], 5, 1.0, "values must be in \\[0, k\\) = \\[0, 5\\), got 5"),
        ([-1], 5, 1.0, "got -1"),
        ([0.5], 5, 1.0, "values must be integers"),
        ([0], 1, 1.0, "k must be an integer >= 2, got 1"),
        ([0], 3, 0.0, "eps0 must be > 0, got 0.0"),
        ([0], 3, math.nan, "eps0 must be finite"),
    ],
)
def test_krr_validation(values: list[float], k: int, eps0: float, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        krr_randomize(values, k, eps0, SeededRandom(1))


@pytest.mark.slow
@pytest.mark.parametrize("source", sources(), ids=lambda s: s.name)
def test_permutation_is_uniform_over_all_orders(source: RandomSource) -> None:
    """n = 4: all 24 orders equally likely (48,000 draws, 2,000 expected per order)."""
    index = {p: i for i, p in enumerate(itertools.permutations(range(4)))}
    counts = np.zeros(24)
    for _ in range(48_000):
        counts[index[tuple(int(v) for v in uniform_permutation(4, source))]] += 1
    assert chisquare(counts).pvalue > ALPHA


@pytest.mark.slow
@pytest.mark.parametrize("source", sources(), ids=lambda s: s.name)
def test_permutation_positions_are_uniform(source: RandomSource) -> None:
    """n = 200: where item 0 and item 199 land is uniform over the 200 positions."""
    first = np.zeros(200)
    last = np.zeros(200)
    for _ in range(20_000):
        order = uniform_permutation(200, source)
        position = np.empty(200, dtype=np.int64)
        position[order] = np.arange(200)
        first[position[0]] += 1
        last[position[199]] += 1
    assert chisquare(first).pvalue > ALPHA
    assert chisquare(last).pvalue > ALPHA


def test_permute_keeps_every_item_once() -> None:
    items = [f"m{i}" for i in range(1000)]
    out = permute(items, SystemRandom())
    assert sorted(out) == sorted(items)
    assert out != items  # a fixed point of all 1000 has probability 1/1000!
    assert permute([], SystemRandom()) == []
    with pytest.raises(ValueError, match="n must be a non-negative integer"):
        uniform_permutation(-1)
