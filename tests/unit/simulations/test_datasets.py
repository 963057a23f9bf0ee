"""Datasets of simulations (simulations.datasets): generators, specs and resolve_dataset.

- zipf_distribution equals exact rational arithmetic for s = 1 and 2 (fractions) and a
  50-digit mpmath sum for s = 1.1; s = 0 is uniform; uniform_distribution is 1/k;
- draws: chi-square goodness of fit for uniform, Zipf and a given probability vector (each test
  a false-alarm rate of 1e-6), with a check that the same test rejects a wrong distribution;
  bins of probability 0 are never drawn;
- histogram_values: exactly the given counts, and a uniformly random order (the position of a
  single distinct value is uniform over the positions: chi-square, false-alarm rate 1e-6);
- specs: every valid spec, unknown ones listing the valid ones, conflicting n / k / region;
- resolve_dataset: defaults, the seeded normal dataset equals synthetic_values, and gowalla:PATH
  on the Paris slice (k = 192, n = 1,026 users, the loader's most-recent cells, the report's
  facts), a random subset of users (a sub-multiset, uniform over subsets: chi-square), lat,lon
  files (each row one user), and its errors.
"""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction
from itertools import combinations
from pathlib import Path

import mpmath
import numpy as np
import numpy.typing as npt
import pytest
from scipy.stats import chisquare

from shuffledp.errors import InvalidParameterError
from shuffledp.randomness import SeededRandom
from shuffledp.simulations.data.checkins import CheckInReader, load_checkin_arrays
from shuffledp.simulations.data.datasets import (
    DATASET_KINDS,
    DEFAULT_K,
    DEFAULT_N,
    MOST_RECENT_RULE,
    Dataset,
    check_dataset_sizes,
    distribution_values,
    histogram_values,
    normal_distribution,
    parse_dataset_spec,
    resolve_dataset,
    synthetic_distribution,
    synthetic_values,
    uniform_distribution,
    uniform_values,
    zipf_distribution,
    zipf_values,
)
from shuffledp.simulations.data.regions import PRESETS, Region
from tests.paths import SHARED_DATA

ALPHA = 1e-6  # false-alarm rate of each statistical test in this file
DATA = SHARED_DATA
PARIS_SNAP = DATA / "gowalla-paris-checkins.txt"
PARIS = PRESETS["paris"]


def gof_p(values: npt.NDArray[np.int64], probabilities: npt.NDArray[np.float64]) -> float:
    """Pearson chi-square p-value of the values' counts against the probabilities (every
    expected count here is >= 5, the test's usual condition)."""
    k = probabilities.size
    counts = np.bincount(values, minlength=k)
    assert counts.size == k
    support = probabilities > 0
    expected = probabilities[support] * values.size
    assert expected.min() >= 5
    return float(chisquare(counts[support], expected).pvalue)


# --- distributions ----------------------------------------------------------------------------


@pytest.mark.parametrize(("k", "s"), [(2, 1), (5, 1), (15, 1), (7, 2), (30, 2)])
def test_zipf_distribution_equals_exact_fractions(k: int, s: int) -> None:
    weights = [Fraction(1, (j + 1) ** s) for j in range(k)]
    total = sum(weights)
    expected = [float(w / total) for w in weights]
    assert zipf_distribution(k, s).tolist() == pytest.approx(expected, rel=1e-13, abs=0)


def test_zipf_distribution_default_exponent_matches_mpmath() -> None:
    mpmath.mp.dps = 50
    k = 15
    weights = [mpmath.power(j + 1, mpmath.mpf("-1.1")) for j in range(k)]
    total = mpmath.fsum(weights)
    expected = [float(w / total) for w in weights]
    assert zipf_distribution(k).tolist() == pytest.approx(expected, rel=1e-13, abs=0)
    # Known value: P(0) = 1 / H(15, 1.1) with H(15, 1.1) = 3.0040... (mpmath above).
    assert zipf_distribution(k)[0] == pytest.approx(float(1 / total), rel=1e-14)


def test_uniform_and_degenerate_cases() -> None:
    assert uniform_distribution(4).tolist() == [0.25] * 4
    assert zipf_distribution(6, 0).tolist() == pytest.approx([1 / 6] * 6, rel=1e-15)
    assert np.array_equal(normal_distribution(15), synthetic_distribution(15))
    for p in (zipf_distribution(100, 1.1), zipf_distribution(3, 40.0), uniform_distribution(9)):
        assert float(p.sum()) == pytest.approx(1.0, abs=1e-12)
        assert np.all(np.diff(p) <= 0)  # non-increasing


@pytest.mark.parametrize("s", [-0.5, math.nan, math.inf, "1", True])
def test_zipf_exponent_must_be_a_finite_number_at_least_zero(s: object) -> None:
    with pytest.raises(InvalidParameterError, match="Zipf exponent s must be a finite number"):
        zipf_distribution(5, s)  # type: ignore[arg-type]


# --- draws ------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2])
def test_uniform_values_fit(seed: int) -> None:
    k = 12
    values = uniform_values(60_000, k, SeededRandom(seed))
    assert values.dtype == np.int64 and values.shape == (60_000,)
    assert gof_p(values, uniform_distribution(k)) > ALPHA
    assert gof_p(values, zipf_distribution(k, 0.3)) < ALPHA  # the test has power


@pytest.mark.parametrize(("k", "s", "seed"), [(15, 1.1, 3), (40, 0.7, 4), (6, 2.5, 5)])
def test_zipf_values_fit(k: int, s: float, seed: int) -> None:
    values = zipf_values(100_000, k, s, SeededRandom(seed))
    assert int(values.min()) >= 0 and int(values.max()) < k
    assert gof_p(values, zipf_distribution(k, s)) > ALPHA
    assert gof_p(values, zipf_distribution(k, s * 1.1)) < ALPHA  # the test has power


def test_distribution_values_fit_and_never_draw_zero_bins() -> None:
    p = np.array([0.0, 0.3, 0.0, 0.1, 0.6, 0.0])
    values = distribution_values(p, 50_000, SeededRandom(6))
    assert set(np.unique(values).tolist()) == {1, 3, 4}
    assert gof_p(values, p) > ALPHA
    assert gof_p(values, np.array([0.0, 0.32, 0.0, 0.1, 0.58, 0.0])) < ALPHA
    # The last bin with positive probability is reachable, later zero bins are not.
    edge = distribution_values(np.array([0.5, 0.5, 0.0]), 10_000, SeededRandom(7))
    assert set(np.unique(edge).tolist()) == {0, 1}


@pytest.mark.parametrize(
    ("p", "fragment"),
    [
        ([1.0], "between 2 and"),
        ([0.5, 0.6], "sum to 1"),
        ([0.5, math.nan], "finite and >= 0"),
        ([1.5, -0.5], "finite and >= 0"),
        ([[0.5, 0.5]], "between 2 and"),
    ],
)
def test_distribution_values_reject_bad_vectors(p: list[float], fragment: str) -> None:
    with pytest.raises(InvalidParameterError, match=fragment):
        distribution_values(p, 10, SeededRandom(1))


def test_histogram_values_are_exactly_the_counts() -> None:
    counts = [5, 0, 3, 7, 1]
    values = histogram_values(counts, SeededRandom(8))
    assert values.dtype == np.int64
    assert np.bincount(values, minlength=5).tolist() == counts


@pytest.mark.slow
def test_histogram_values_come_in_a_uniformly_random_order() -> None:
    # One 0 among nine 1s: in a uniformly random order its position is uniform over 10 places.
    rng = SeededRandom(9)
    positions = [int(np.flatnonzero(histogram_values([1, 9], rng) == 0)[0]) for _ in range(20_000)]
    observed = np.bincount(positions, minlength=10)
    assert float(chisquare(observed).pvalue) > ALPHA
    # The test has power: a rotation bias (position 0 half as likely) is detected.
    biased = observed.astype(float).copy()
    biased[0] *= 0.5
    biased[1] += observed[0] * 0.5
    assert float(chisquare(biased).pvalue) < ALPHA


@pytest.mark.parametrize(
    ("counts", "fragment"),
    [([3], "between 2"), ([1, -1], ">= 0"), ([0, 0], "sum to"), ([1.5, 2], "integers")],
)
def test_histogram_values_reject_bad_counts(counts: list[float], fragment: str) -> None:
    with pytest.raises(InvalidParameterError, match=fragment):
        histogram_values(counts)


# --- specs ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "kind", "extra"),
    [
        ("synthetic", "normal", {}),
        ("normal", "normal", {}),
        (" Uniform ", "uniform", {}),
        ("zipf", "zipf", {"exponent": 1.1}),
        ("zipf:2.5", "zipf", {"exponent": 2.5}),
        ("zipf:0", "zipf", {"exponent": 0.0}),
        ("histogram:3,0, 5", "histogram", {"counts": (3, 0, 5)}),
        ("probabilities:0.25,0.75", "probabilities", {"probabilities": (0.25, 0.75)}),
        ("gowalla:/data/a:b.txt.gz", "gowalla", {"path": "/data/a:b.txt.gz"}),
        ("gowalla:-", "gowalla", {"path": "-"}),
    ],
)
def test_valid_specs(spec: str, kind: str, extra: dict[str, object]) -> None:
    parsed = parse_dataset_spec(spec)
    assert parsed.kind == kind
    for name, value in extra.items():
        assert getattr(parsed, name) == value


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("gaussian", "unknown dataset 'gaussian'"),
        ("", "unknown dataset ''"),
        ("uniform:3", "takes no ':' argument"),
        ("histogram", "needs ':' and its argument"),
    ],
)
def test_unknown_specs_list_the_valid_ones(spec: str, fragment: str) -> None:
    with pytest.raises(InvalidParameterError) as caught:
        parse_dataset_spec(spec)
    message = str(caught.value)
    assert fragment in message
    for kind in DATASET_KINDS:
        assert kind in message


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("zipf:", "zipf:S needs a number"),
        ("zipf:-1", "exponent s must be a finite number >= 0, got -1.0"),
        ("zipf:nan", "zipf:S needs a number"),
        ("histogram:1,x", "integer counts"),
        ("histogram:1,-2", "integer counts"),
        ("histogram:4", "between 2"),
        ("histogram:0,0", "sum to"),
        ("probabilities:0.5,0.4", "sum to 1"),
        ("probabilities:0.5,abc", "decimal numbers"),
        ("gowalla:", "needs a path"),
    ],
)
def test_malformed_spec_arguments(spec: str, fragment: str) -> None:
    with pytest.raises(InvalidParameterError, match=fragment):
        parse_dataset_spec(spec)


@pytest.mark.parametrize(
    ("spec", "n", "k", "region", "fragment"),
    [
        (
            "histogram:1,2,3",
            7,
            None,
            None,
            "n = 7 conflicts with 'histogram:1,2,3': its counts sum to 6",
        ),
        ("histogram:1,2,3", None, 4, None, "k = 4 conflicts with 'histogram:1,2,3': it has 3"),
        ("probabilities:0.5,0.5", None, 3, None, "k = 3 conflicts"),
        ("gowalla:x.txt", None, None, None, "gowalla:PATH needs a region"),
        ("gowalla:x.txt", None, 15, PARIS, "k = 15 conflicts with region paris's 192 cells"),
        ("uniform", None, None, PARIS, "applies to gowalla:PATH only"),
        ("zipf", 0, None, None, "n must be in"),
        ("zipf", None, 1, None, "k must be in"),
    ],
)
def test_conflicting_sizes_are_errors(
    spec: str, n: int | None, k: int | None, region: Region | None, fragment: str
) -> None:
    with pytest.raises(InvalidParameterError) as caught:
        check_dataset_sizes(spec, n=n, k=k, region=region)
    assert fragment in str(caught.value)


def test_agreeing_sizes_are_accepted() -> None:
    assert check_dataset_sizes("histogram:1,2,3", n=6, k=3, region=None).counts == (1, 2, 3)
    assert check_dataset_sizes("gowalla:x", n=None, k=192, region=PARIS).path == "x"


# --- resolve_dataset --------------------------------------------------------------------------


def test_resolve_generators_defaults_and_labels() -> None:
    normal = resolve_dataset("synthetic", n=None, k=None, region=None, rng=SeededRandom(3))
    assert (normal.n, normal.k) == (DEFAULT_N, DEFAULT_K)
    # Same draws as before datasets had specs: seeded runs stay reproducible.
    assert np.array_equal(normal.values, synthetic_values(DEFAULT_N, DEFAULT_K, SeededRandom(3)))
    assert normal.true_distribution is not None
    assert np.array_equal(normal.true_distribution, synthetic_distribution(DEFAULT_K))
    assert "variance 2" in normal.label
    zipf = resolve_dataset("zipf:1.5", n=50, k=8, region=None, rng=SeededRandom(4))
    assert (zipf.n, zipf.k, zipf.details["exponent"]) == (50, 8, 1.5)
    assert zipf.true_distribution is not None
    assert np.array_equal(zipf.true_distribution, zipf_distribution(8, 1.5))
    hist = resolve_dataset("histogram:4,0,1", n=None, k=None, region=None, rng=SeededRandom(5))
    assert (hist.n, hist.k) == (5, 3) and np.bincount(hist.values, minlength=3).tolist() == [
        4,
        0,
        1,
    ]
    assert hist.true_distribution is not None and hist.true_distribution.tolist() == [0.8, 0, 0.2]
    probs = resolve_dataset("probabilities:0,1", n=30, k=None, region=None, rng=SeededRandom(6))
    assert probs.k == 2 and probs.values.tolist() == [1] * 30
    uniform = resolve_dataset("uniform", n=20, k=None, region=None)  # the OS CSPRNG
    assert uniform.k == DEFAULT_K and uniform.n == 20


@pytest.mark.shared_data
def test_resolve_gowalla_paris_slice() -> None:
    dataset = resolve_dataset(
        f"gowalla:{PARIS_SNAP}", n=None, k=None, region=PARIS, rng=SeededRandom(1)
    )
    assert (dataset.k, dataset.n) == (192, 1_026)
    loader = load_checkin_arrays(CheckInReader(PARIS_SNAP), PARIS).most_recent_cells()
    assert np.array_equal(dataset.values, loader)
    assert dataset.true_distribution is not None
    assert np.allclose(dataset.true_distribution, np.bincount(loader, minlength=192) / 1_026)
    details = dataset.details
    assert details["format"] == "snap" and details["rows"] == 17_496
    assert details["rejected"] == {} and details["outside_region"] == 17_496 - 11_190
    assert details["inside_region"] == 11_190 and details["users"] == 1_026
    assert details["rule"] == MOST_RECENT_RULE and "most recent check-in" in details["rule"]
    assert details["first_time"].startswith("2009-09-22") and details["last_time"].startswith(
        "2010-10-22"
    )
    assert details["selection"] == "all 1,026 users"
    assert "paris" in details["region"] and "192 cells" in details["region"]


@pytest.mark.shared_data
def test_resolve_gowalla_subset_is_a_sub_multiset_and_seeded() -> None:
    spec = f"gowalla:{PARIS_SNAP}"
    full = resolve_dataset(spec, n=None, k=None, region=PARIS)
    part = resolve_dataset(spec, n=300, k=None, region=PARIS, rng=SeededRandom(2))
    again = resolve_dataset(spec, n=300, k=None, region=PARIS, rng=SeededRandom(2))
    assert part.n == 300 and np.array_equal(part.values, again.values)
    full_counts = np.bincount(full.values, minlength=192)
    assert np.all(np.bincount(part.values, minlength=192) <= full_counts)
    assert part.details["selection"] == "a uniformly random subset of 300 of the 1,026 users"
    with pytest.raises(InvalidParameterError, match="n = 1,027 is more than the 1,026 users"):
        resolve_dataset(spec, n=1_027, k=None, region=PARIS)


@pytest.mark.slow
def test_resolve_gowalla_subset_is_uniform_over_subsets(tmp_path: Path) -> None:
    # Four users, each alone in one cell of a 2 x 2 grid: the values name the chosen users.
    box = Region(name="box", lat_min=0.0, lat_max=2.0, lon_min=0.0, lon_max=2.0, columns=2, rows=2)
    lines = [
        f"{user}\t2010-01-0{1 + user}T00:00:00Z\t{lat}\t{lon}\tL"
        for user, (lat, lon) in enumerate([(0.5, 0.5), (0.5, 1.5), (1.5, 0.5), (1.5, 1.5)])
    ]
    path = tmp_path / "four.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rng = SeededRandom(12)
    draws = 3_000
    seen: Counter[tuple[int, ...]] = Counter()
    for _ in range(draws):
        dataset = resolve_dataset(f"gowalla:{path}", n=2, k=None, region=box, rng=rng)
        seen[tuple(sorted(dataset.values.tolist()))] += 1
    pairs = list(combinations(range(4), 2))
    assert set(seen) == set(pairs)
    assert float(chisquare([seen[pair] for pair in pairs]).pvalue) > ALPHA


def test_resolve_gowalla_latlon_rows_are_users(tmp_path: Path) -> None:
    path = tmp_path / "points.csv"
    path.write_text("lat,lon\n0.5,0.5\n0.5,0.5\n1.5,1.5\n7,7\nbad,1\n", encoding="utf-8")
    box = Region(name="box", lat_min=0.0, lat_max=2.0, lon_min=0.0, lon_max=2.0, columns=2, rows=2)
    dataset = resolve_dataset(f"gowalla:{path}", n=None, k=4, region=box)
    assert dataset.values.tolist() == [0, 0, 3]
    details = dataset.details
    assert details["format"] == "latlon" and details["header"] == "lat,lon"
    assert details["rows"] == 5 and details["rejected"] == {"bad-latitude": 1}
    assert details["rejected_examples"] == {"bad-latitude": [6]}
    assert details["outside_region"] == 1 and details["users"] == 3
    assert details["selection"] == "all 3 rows" and "each row one user" in dataset.label


def test_resolve_gowalla_errors(tmp_path: Path) -> None:
    outside = tmp_path / "far.csv"
    outside.write_text("10,10\n", encoding="utf-8")
    with pytest.raises(InvalidParameterError, match="no check-in inside region"):
        resolve_dataset(f"gowalla:{outside}", n=None, k=None, region=PARIS)
    with pytest.raises(InvalidParameterError, match="cannot read the check-in file"):
        resolve_dataset(f"gowalla:{tmp_path / 'nope.txt'}", n=None, k=None, region=PARIS)


def test_dataset_validates_its_values() -> None:
    with pytest.raises(InvalidParameterError, match=r"\[0, k\) = \[0, 3\)"):
        Dataset(values=np.array([0, 3], dtype=np.int64), k=3, label="x")
    with pytest.raises(InvalidParameterError, match="1-d int64"):
        Dataset(values=np.array([0.0, 1.0]), k=3, label="x")
