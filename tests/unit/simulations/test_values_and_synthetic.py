"""Input data of a round: values files (components_cli.read_values) and the synthetic
distribution of the simulations (simulations.datasets).

- read_values: comments, blank lines and good values are read; the first bad line gives an
  InvalidParameterError that names the file and the line; an unreadable file too;
- synthetic_distribution(k) equals an independent computation in mpmath (50 digits) to 1e-12;
- synthetic_values: chi-square goodness of fit against synthetic_distribution (false-alarm rate
  1e-6 per test), and a check that the same test tells the distribution from the uniform one.
"""

from __future__ import annotations

from pathlib import Path

import mpmath
import numpy as np
import numpy.typing as npt
import pytest
from scipy.stats import chisquare

from shuffledp.cli.components import read_values
from shuffledp.errors import InvalidParameterError
from shuffledp.randomness import SeededRandom
from shuffledp.simulations.data.datasets import synthetic_distribution, synthetic_values

ALPHA = 1e-6  # false-alarm rate of each goodness-of-fit test in this file

# --- read_values ------------------------------------------------------------------------------


def write(tmp_path: Path, text: str, name: str = "values.txt") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def test_read_values_skips_comments_and_blank_lines(tmp_path: Path) -> None:
    text = (
        "# values of round 1\n\n3\n  0  \n4 # trailing comment\n\t\n#2\n1\r\n2\r\n   # indented\n0"
    )
    values = read_values(write(tmp_path, text), 5)
    assert values.dtype == np.int64
    assert values.tolist() == [3, 0, 4, 1, 2, 0]


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n   \n# another\n"])
def test_read_values_of_a_file_without_values_is_empty(text: str, tmp_path: Path) -> None:
    values = read_values(write(tmp_path, text), 3)
    assert values.dtype == np.int64 and values.shape == (0,)


@pytest.mark.parametrize(
    ("lines", "line_number", "fragment"),
    [
        (["1", "x"], 2, "integer"),
        (["1.5"], 1, "integer"),
        (["0", "", "# c", "2 3"], 4, "integer"),
        (["1e3"], 1, "integer"),
        (["0x3"], 1, "integer"),
        (["0", "1", "-1"], 3, "[0, k)"),
        (["4", "5"], 2, "[0, k) = [0, 5), got 5"),
        (["# header", "", "99 # too big"], 3, "got 99"),
        (["2", "x", "-1"], 2, "integer"),  # the first bad line is the one named
    ],
)
def test_read_values_names_file_and_line_of_a_bad_value(
    lines: list[str], line_number: int, fragment: str, tmp_path: Path
) -> None:
    path = write(tmp_path, "\n".join(lines) + "\n", name="my-values.txt")
    with pytest.raises(InvalidParameterError) as caught:
        read_values(path, 5)
    message = str(caught.value)
    assert f"{path}:{line_number}:" in message
    assert "my-values.txt" in message
    assert fragment in message


def test_read_values_of_an_unreadable_path(tmp_path: Path) -> None:
    missing = tmp_path / "missing.txt"
    with pytest.raises(InvalidParameterError, match=r"missing\.txt.*cannot read"):
        read_values(missing, 5)
    with pytest.raises(InvalidParameterError, match="cannot read"):
        read_values(tmp_path, 5)  # a directory
    latin = tmp_path / "latin.txt"
    latin.write_bytes("1 # caf\u00e9\n".encode("latin-1"))
    with pytest.raises(InvalidParameterError, match=r"latin\.txt.*cannot read"):
        read_values(latin, 5)


# str.splitlines would also break lines at U+2028, U+0085, form feeds, \x1c-\x1e and \v, cutting
# a comment short (its rest parsed as a value) and shifting later line numbers.
@pytest.mark.parametrize("separator", ["\u2028", "\x85", "\x0c", "\x1c", "\v"])
def test_read_values_lines_end_at_newline_only(separator: str, tmp_path: Path) -> None:
    path = write(tmp_path, f"1 # a{separator}b\n2\n")
    assert read_values(path, 5).tolist() == [1, 2]
    # and line numbers count newlines: the bad value is on line 3 of the file
    path = write(tmp_path, f"1 # a{separator}b\n2\nx\n")
    with pytest.raises(InvalidParameterError, match=r"values\.txt:3: "):
        read_values(path, 5)


# --- synthetic_distribution -------------------------------------------------------------------


def mpmath_distribution(k: int) -> list[float]:
    """The bins of N(0, 2) over [-3 sqrt 2, 3 sqrt 2] in k equal widths, the end bins taking
    the tails, computed in 50-digit arithmetic."""
    with mpmath.workdps(50):
        sd = mpmath.sqrt(2)
        half = 3 * sd
        width = 2 * half / k
        cdf = [mpmath.ncdf(-half + j * width, mu=0, sigma=sd) for j in range(k + 1)]
        cdf[0], cdf[k] = mpmath.mpf(0), mpmath.mpf(1)
        return [float(cdf[j + 1] - cdf[j]) for j in range(k)]


@pytest.mark.parametrize("k", [2, 5, 15])
def test_synthetic_distribution_matches_mpmath(k: int) -> None:
    got = synthetic_distribution(k)
    want = mpmath_distribution(k)
    assert got.shape == (k,) and got.dtype == np.float64
    assert np.max(np.abs(got - np.array(want))) <= 1e-12
    assert abs(float(got.sum()) - 1.0) <= 1e-12
    assert np.allclose(got, got[::-1], rtol=0, atol=1e-12)  # symmetric about 0


def test_synthetic_distribution_known_values() -> None:
    # k = 2: the halves of a symmetric distribution; k = 3: bins split at +-sqrt 2 (one sd).
    assert synthetic_distribution(2).tolist() == pytest.approx([0.5, 0.5], abs=1e-15)
    one_sd = 0.15865525393145705  # P(Z < -1)
    assert synthetic_distribution(3).tolist() == pytest.approx(
        [one_sd, 1 - 2 * one_sd, one_sd], abs=1e-14
    )


# --- synthetic_values -------------------------------------------------------------------------


def merged_chisquare_p(
    observed: npt.NDArray[np.int64], probabilities: npt.NDArray[np.float64]
) -> float:
    """p-value of Pearson's chi-square goodness of fit, after merging adjacent bins (from the
    left) until every merged bin expects at least 5 observations (the rest goes to the last)."""
    n = int(observed.sum())
    expected = probabilities * n
    merged_observed: list[float] = []
    merged_expected: list[float] = []
    obs_acc = exp_acc = 0.0
    for obs, exp in zip(observed.tolist(), expected.tolist(), strict=True):
        obs_acc += obs
        exp_acc += exp
        if exp_acc >= 5.0:
            merged_observed.append(obs_acc)
            merged_expected.append(exp_acc)
            obs_acc = exp_acc = 0.0
    if exp_acc > 0.0 or obs_acc > 0.0:
        merged_observed[-1] += obs_acc
        merged_expected[-1] += exp_acc
    assert len(merged_observed) >= 2
    result = chisquare(merged_observed, merged_expected)
    return float(result.pvalue)


def test_chisquare_merging_on_known_input() -> None:
    # Expected [1, 2, 3, 94] for n = 100: [1, 2, 3] merge into one bin of 6.
    observed = np.array([0, 3, 3, 94], dtype=np.int64)
    p = merged_chisquare_p(observed, np.array([0.01, 0.02, 0.03, 0.94]))
    assert p == pytest.approx(1.0)  # 6 observed where 6 expected, 94 where 94
    assert merged_chisquare_p(np.array([20, 0, 0, 80]), np.array([0.01, 0.02, 0.03, 0.94])) < ALPHA


@pytest.mark.parametrize(("k", "seed"), [(5, 1), (15, 2), (60, 3)])
def test_synthetic_values_fit_the_synthetic_distribution(k: int, seed: int) -> None:
    n = 200_000
    values = synthetic_values(n, k, SeededRandom(seed))
    assert values.dtype == np.int64 and values.shape == (n,)
    assert int(values.min()) >= 0 and int(values.max()) < k
    counts = np.bincount(values, minlength=k)
    # False-alarm rate ALPHA = 1e-6 (over the choice of seed).
    assert merged_chisquare_p(counts, synthetic_distribution(k)) > ALPHA
    # The test can fail: the same counts are told apart from the uniform distribution.
    assert merged_chisquare_p(counts, np.full(k, 1.0 / k)) < ALPHA


def test_synthetic_values_of_zero_clients_is_empty() -> None:
    values = synthetic_values(0, 5, SeededRandom(1))
    assert values.dtype == np.int64 and values.shape == (0,)
    assert synthetic_values(0, 5).shape == (0,)


@pytest.mark.parametrize(("n", "k"), [(-1, 5), (10, 1), (1.5, 5)])
def test_synthetic_values_reject_bad_parameters(n: int, k: int) -> None:
    with pytest.raises(InvalidParameterError):
        synthetic_values(n, k, SeededRandom(1))
