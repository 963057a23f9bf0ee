"""Data for simulations: synthetic distributions, given histograms and real check-ins.

Synthetic distributions over the values 0..k-1 (each has ``<name>_distribution(k, ...)``, the
probabilities, and ``<name>_values(n, k, ..., rng)``, n independent draws with a
:class:`~shuffledp.randomness.RandomSource`, the OS CSPRNG unless one is given):

- **normal** (the seed paper's, also called ``synthetic``): the normal distribution N(0, 2), mean 0
  and *variance* 2 (standard deviation sqrt(2)), discretized into k equal-width bins over
  [-3 sqrt(2), 3 sqrt(2)] (three standard deviations each side); a sample outside that interval
  goes to the nearest end bin. Bin j (0-based) is [-3s + j w, -3s + (j+1) w) with s = sqrt(2),
  w = 6 s / k. ``synthetic_values`` / ``synthetic_distribution`` are the same functions.
- **uniform**: 1/k each.
- **zipf** with exponent s (default 1.1): P(j) = (j+1)^-s / H(k, s), H(k, s) = sum_{i=1..k} i^-s,
  so value 0 is the most frequent; s = 0 is the uniform distribution.
- **a given probability vector** (``probabilities:p0,p1,...``): n draws by inverse transform.
- **a given histogram** (``histogram:c0,c1,...``): exactly c_j copies of j, in a uniformly random
  order (n = the sum, k = the number of counts).

:func:`resolve_dataset` turns a ``--dataset`` spec into a :class:`Dataset`; besides the above it
reads real check-ins, ``gowalla:PATH`` (:mod:`shuffledp.simulations.data.checkins`) or
``gowalla`` (the file of ``shuffledp data fetch gowalla``, :mod:`.fetch`), in a region's grid
(:mod:`shuffledp.simulations.data.regions`), with one report per user: the cell of the user's
most recent check-in inside the region (:data:`MOST_RECENT_RULE`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import ndtr, ndtri

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.record import MAX_K
from shuffledp.randomness import RandomLike, RandomSource, as_random_source
from shuffledp.shuffler.permute import uniform_permutation
from shuffledp.simulations.data.regions import DECIMAL_NUMBER, Region
from shuffledp.validation import require_int

__all__ = [
    "DATASET_KINDS",
    "DEFAULT_K",
    "DEFAULT_N",
    "DEFAULT_ZIPF_EXPONENT",
    "MAX_N",
    "MOST_RECENT_RULE",
    "SYNTHETIC_SD",
    "Dataset",
    "DatasetSpec",
    "check_dataset_sizes",
    "distribution_values",
    "histogram_values",
    "normal_distribution",
    "normal_values",
    "parse_dataset_spec",
    "resolve_dataset",
    "synthetic_distribution",
    "synthetic_values",
    "uniform_distribution",
    "uniform_values",
    "zipf_distribution",
    "zipf_values",
]

SYNTHETIC_SD = math.sqrt(2.0)
"""Standard deviation of the synthetic normal (variance 2)."""
_HALF_WIDTH = 3.0 * SYNTHETIC_SD

DEFAULT_N = 10_000
"""Clients of a synthetic dataset when n is not given (``shuffledp simulate``'s default)."""
DEFAULT_K = 15
"""Values of a synthetic dataset when k is not given."""
DEFAULT_ZIPF_EXPONENT = 1.1
"""Exponent s of ``zipf`` without ``:S``."""
MAX_N = 100_000_000
"""Largest n accepted: 800 MB of values, and about ten hours through the pipeline at its
measured 2,800 reports/s (docs/performance.md); anything larger is a typo."""

DATASET_KINDS = (
    "synthetic",
    "normal",
    "uniform",
    "zipf",
    "zipf:S",
    "histogram:C0,C1,...",
    "probabilities:P0,P1,...",
    "gowalla:PATH",
    "gowalla",
)
"""The accepted ``--dataset`` specs, as listed in error messages (``gowalla`` alone: the file
of ``shuffledp data fetch gowalla``)."""

MOST_RECENT_RULE = (
    "one report per user: the cell of the user's most recent check-in inside the region (the "
    "latest time; of equal times, the first in the file); in a lat,lon file (no users) each "
    "row inside the region is one user"
)
"""How ``gowalla:PATH`` turns check-ins into one true value per simulated client."""

_NORMAL_LABEL = "synthetic: N(0, 2) (variance 2) in k equal bins over +-3 sd"


# --- distributions and draws ------------------------------------------------------------------


def _edges(k: int) -> npt.NDArray[np.float64]:
    return np.linspace(-_HALF_WIDTH, _HALF_WIDTH, k + 1)


def synthetic_distribution(k: int) -> npt.NDArray[np.float64]:
    """The probability of each of the k bins of the normal distribution (module docstring)."""
    require_int("k", k, 2, MAX_K)
    cdf = ndtr(_edges(k) / SYNTHETIC_SD)
    cdf[0], cdf[-1] = 0.0, 1.0  # the end bins take the tails
    return np.diff(cdf)


def synthetic_values(n: int, k: int, rng: RandomLike = None) -> npt.NDArray[np.int64]:
    """n values in [0, k), independent draws from :func:`synthetic_distribution`, using ``rng``
    (the OS CSPRNG unless a source is given)."""
    require_int("n", n, 0)
    require_int("k", k, 2, MAX_K)
    source: RandomSource = as_random_source(rng)
    # Inverse transform: u uniform in (0, 1) -> N(0, 2) sample -> bin (u = 0 maps to -inf, bin 0).
    samples = SYNTHETIC_SD * ndtri(source.uniform(n))
    width = 2.0 * _HALF_WIDTH / k
    bins = np.floor((samples + _HALF_WIDTH) / width)
    clipped = np.clip(np.nan_to_num(bins, nan=0.0, neginf=0.0, posinf=k - 1), 0, k - 1)
    out: npt.NDArray[np.int64] = clipped.astype(np.int64)
    return out


normal_distribution = synthetic_distribution
normal_values = synthetic_values


def uniform_distribution(k: int) -> npt.NDArray[np.float64]:
    """1/k for each of the k values."""
    require_int("k", k, 2, MAX_K)
    return np.full(k, 1.0 / k)


def uniform_values(n: int, k: int, rng: RandomLike = None) -> npt.NDArray[np.int64]:
    """n independent uniform values in [0, k) (exactly uniform: rejection sampling)."""
    require_int("n", n, 0, MAX_N)
    require_int("k", k, 2, MAX_K)
    source: RandomSource = as_random_source(rng)
    return source.integers(k, n)


def _require_exponent(s: float) -> float:
    if isinstance(s, bool) or not isinstance(s, int | float) or not math.isfinite(s) or s < 0:
        raise InvalidParameterError(f"the Zipf exponent s must be a finite number >= 0, got {s!r}")
    return float(s)


def zipf_distribution(k: int, s: float = DEFAULT_ZIPF_EXPONENT) -> npt.NDArray[np.float64]:
    """P(j) = (j+1)^-s / sum_{i=1..k} i^-s for j in [0, k) (module docstring)."""
    require_int("k", k, 2, MAX_K)
    exponent = _require_exponent(s)
    weights = np.arange(1, k + 1, dtype=np.float64) ** -exponent
    out: npt.NDArray[np.float64] = weights / weights.sum()
    return out


def zipf_values(
    n: int, k: int, s: float = DEFAULT_ZIPF_EXPONENT, rng: RandomLike = None
) -> npt.NDArray[np.int64]:
    """n independent draws from :func:`zipf_distribution`."""
    return distribution_values(zipf_distribution(k, s), n, rng)


def _require_probabilities(probabilities: npt.ArrayLike) -> npt.NDArray[np.float64]:
    p = np.asarray(probabilities, dtype=np.float64)
    if p.ndim != 1 or not 2 <= p.size <= MAX_K:
        raise InvalidParameterError(
            f"a probability vector needs between 2 and {MAX_K} entries, got shape {p.shape}"
        )
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise InvalidParameterError("probabilities must be finite and >= 0")
    total = float(p.sum())
    if abs(total - 1.0) > 1e-6:
        raise InvalidParameterError(
            f"probabilities must sum to 1 (within 1e-6), got a sum of {total!r}"
        )
    out: npt.NDArray[np.float64] = p / total
    return out


def distribution_values(
    probabilities: npt.ArrayLike, n: int, rng: RandomLike = None
) -> npt.NDArray[np.int64]:
    """n independent draws of j with probability ``probabilities[j]`` (inverse transform).

    u uniform in [0, 1) gives the j with cdf[j-1] <= u < cdf[j]: a bin of probability 0 is never
    drawn, and the cumulative sums are set to exactly 1 from the last bin of positive
    probability on, so rounding in the sum cannot give a zero bin a chance either.
    """
    p = _require_probabilities(probabilities)
    require_int("n", n, 0, MAX_N)
    source: RandomSource = as_random_source(rng)
    cdf = np.cumsum(p)
    last = int(np.flatnonzero(p > 0)[-1])
    cdf[last:] = 1.0
    out: npt.NDArray[np.int64] = np.searchsorted(cdf, source.uniform(n), side="right").astype(
        np.int64
    )
    return out


def _require_counts(counts: npt.ArrayLike) -> npt.NDArray[np.int64]:
    c = np.asarray(counts)
    if c.ndim != 1 or not 2 <= c.size <= MAX_K:
        raise InvalidParameterError(
            f"a histogram needs between 2 and {MAX_K} counts, got shape {c.shape}"
        )
    if not np.issubdtype(c.dtype, np.integer) or np.any(c < 0):
        raise InvalidParameterError("histogram counts must be integers >= 0")
    total = int(c.sum())
    if not 1 <= total <= MAX_N:
        raise InvalidParameterError(f"histogram counts must sum to [1, {MAX_N}], got {total}")
    return c.astype(np.int64)


def histogram_values(counts: npt.ArrayLike, rng: RandomLike = None) -> npt.NDArray[np.int64]:
    """Exactly ``counts[j]`` copies of each j, in a uniformly random order."""
    c = _require_counts(counts)
    values = np.repeat(np.arange(c.size, dtype=np.int64), c)
    return values[uniform_permutation(int(values.size), rng)]


# --- datasets from specs ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Dataset:
    """The true values of one simulated round and what the report says about them."""

    values: npt.NDArray[np.int64]
    """One true value in [0, k) per simulated client."""
    k: int
    label: str
    """One line for the report (``simulation.dataset``)."""
    details: dict[str, Any] = field(default_factory=dict)
    """JSON-ready facts for the report (``simulation.dataset_details``)."""
    true_distribution: npt.NDArray[np.float64] | None = None
    """The distribution the values were drawn from, when there is one: the generator's, the
    histogram's normalised counts, or for check-ins the most-recent cells of every user in the
    region (of which ``values`` may be a random subset)."""

    def __post_init__(self) -> None:
        require_int("k", self.k, 2, MAX_K)
        values = self.values
        if not isinstance(values, np.ndarray) or values.ndim != 1 or values.dtype != np.int64:
            raise InvalidParameterError("a dataset's values must be a 1-d int64 array")
        if values.size and (int(values.min()) < 0 or int(values.max()) >= self.k):
            raise InvalidParameterError(f"a dataset's values must lie in [0, k) = [0, {self.k})")

    @property
    def n(self) -> int:
        return int(self.values.size)


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasetSpec:
    """A parsed ``--dataset`` spec (:func:`parse_dataset_spec`)."""

    text: str
    kind: str
    """normal (also for ``synthetic``), uniform, zipf, histogram, probabilities or gowalla."""
    exponent: float | None = None
    counts: tuple[int, ...] | None = None
    probabilities: tuple[float, ...] | None = None
    path: str | None = None

    @property
    def fixed_n(self) -> int | None:
        """n implied by the spec itself (a histogram's sum), else None."""
        return sum(self.counts) if self.counts is not None else None

    def fixed_k(self, region: Region | None) -> int | None:
        """k implied by the spec (and the region, for check-ins), else None."""
        if self.counts is not None:
            return len(self.counts)
        if self.probabilities is not None:
            return len(self.probabilities)
        if self.kind == "gowalla" and region is not None:
            return region.k
        return None


def _unknown(spec: str, why: str = "") -> InvalidParameterError:
    return InvalidParameterError(
        f"unknown dataset {spec!r}{why}; valid: {', '.join(DATASET_KINDS)}"
    )


def parse_dataset_spec(spec: str) -> DatasetSpec:
    """The parsed spec, or InvalidParameterError naming the valid ones (:data:`DATASET_KINDS`)."""
    if not isinstance(spec, str):
        raise InvalidParameterError(f"dataset must be a string, got {spec!r}")
    text = spec.strip()
    kind, sep, argument = text.partition(":")
    kind = kind.lower()
    if kind in ("synthetic", "normal", "uniform") and not sep:
        return DatasetSpec(text=text, kind="normal" if kind == "synthetic" else kind)
    if kind == "zipf":
        if not sep:
            return DatasetSpec(text=text, kind="zipf", exponent=DEFAULT_ZIPF_EXPONENT)
        if DECIMAL_NUMBER.fullmatch(argument.strip()) is None:
            raise InvalidParameterError(
                f"zipf:S needs a number S >= 0 (the exponent, e.g. zipf:1.1), got {spec!r}"
            )
        return DatasetSpec(
            text=text, kind="zipf", exponent=_require_exponent(float(argument.strip()))
        )
    if kind == "histogram" and sep:
        parts = [part.strip() for part in argument.split(",")]
        if not all(part.isascii() and part.isdigit() for part in parts):
            raise InvalidParameterError(
                f"histogram:C0,C1,... needs integer counts >= 0 separated by commas, got {spec!r}"
            )
        counts = _require_counts(np.array([int(part) for part in parts], dtype=np.int64))
        return DatasetSpec(text=text, kind="histogram", counts=tuple(int(c) for c in counts))
    if kind == "probabilities" and sep:
        parts = [part.strip() for part in argument.split(",")]
        if not all(DECIMAL_NUMBER.fullmatch(part) for part in parts):
            raise InvalidParameterError(
                f"probabilities:P0,P1,... needs decimal numbers separated by commas, got {spec!r}"
            )
        p = _require_probabilities(np.array([float(part) for part in parts]))
        return DatasetSpec(
            text=text, kind="probabilities", probabilities=tuple(float(x) for x in p)
        )
    if kind == "gowalla" and not sep:
        return DatasetSpec(text=text, kind="gowalla", path=str(_fetched_gowalla()))
    if kind == "gowalla" and sep:
        if not argument:
            raise InvalidParameterError("gowalla:PATH needs a path (or - for standard input)")
        return DatasetSpec(text=text, kind="gowalla", path=argument)
    if kind in ("synthetic", "normal", "uniform"):
        raise _unknown(spec, f" ({kind} takes no ':' argument)")
    if kind in ("histogram", "probabilities"):
        raise _unknown(spec, f" ({kind} needs ':' and its argument)")
    raise _unknown(spec)


def _fetched_gowalla() -> str:
    """The SNAP file cached by ``shuffledp data fetch gowalla``, checked against its recorded
    SHA-256 and size; DataMissingError (one line naming the command, exit status 2) if it is
    not there."""
    from shuffledp.simulations.data.fetch import (
        GOWALLA,
        DataMissingError,
        cache_dir,
        fetch_command,
        verify_cached,
    )

    path = verify_cached(GOWALLA)
    if path is None:
        raise DataMissingError(
            f"--dataset gowalla reads the file of `{fetch_command()}`, which is not in "
            f"{cache_dir()}: run that command first, or give gowalla:PATH"
        )
    return str(path)


def check_dataset_sizes(
    spec: str | DatasetSpec, *, n: int | None, k: int | None, region: Region | None
) -> DatasetSpec:
    """The parsed spec, after checking that n, k and region fit it (what can be checked
    without reading a file); InvalidParameterError naming the conflict otherwise. A conflicting
    n or k is an error, never a silent choice of one of them."""
    parsed = spec if isinstance(spec, DatasetSpec) else parse_dataset_spec(spec)
    if n is not None:
        require_int("n", n, 1, MAX_N)
    if k is not None:
        require_int("k", k, 2, MAX_K)
    if parsed.kind == "gowalla":
        if region is None:
            raise InvalidParameterError(
                "gowalla:PATH needs a region: --region sf|paris, or --box with --grid"
            )
        if k is not None and k != region.k:
            raise InvalidParameterError(
                f"k = {k} conflicts with region {region.name}'s {region.k} cells "
                f"({region.columns} x {region.rows}): k is the number of cells; leave --k out "
                "or change --grid"
            )
        return parsed
    if region is not None:
        raise InvalidParameterError(
            f"a region (--region, --box, --grid) applies to gowalla:PATH only, not to "
            f"{parsed.text!r}"
        )
    fixed_n = parsed.fixed_n
    if fixed_n is not None and n is not None and n != fixed_n:
        raise InvalidParameterError(
            f"n = {n} conflicts with {parsed.text!r}: its counts sum to {fixed_n} (n is the sum); "
            "leave --n out"
        )
    fixed_k = parsed.fixed_k(region)
    if fixed_k is not None and k is not None and k != fixed_k:
        raise InvalidParameterError(
            f"k = {k} conflicts with {parsed.text!r}: it has {fixed_k} entries (k is their "
            "number); leave --k out"
        )
    return parsed


def resolve_dataset(
    spec: str,
    *,
    n: int | None,
    k: int | None,
    region: Region | None,
    rng: RandomLike = None,
) -> Dataset:
    """The dataset of a ``--dataset`` spec (:data:`DATASET_KINDS`).

    ``n`` None: every user of a check-in file, a histogram's sum, else :data:`DEFAULT_N`.
    ``k`` None: the region's cells, the number of counts or probabilities, else
    :data:`DEFAULT_K`. For check-ins, a smaller ``n`` is a uniformly random subset of the users
    (drawn with ``rng``), a larger one an error. Randomness: ``rng``, the OS CSPRNG if None.
    """
    parsed = check_dataset_sizes(spec, n=n, k=k, region=region)
    source: RandomSource = as_random_source(rng)
    if parsed.kind == "gowalla":
        assert region is not None and parsed.path is not None  # checked above
        return _gowalla(parsed, parsed.path, n=n, region=region, rng=source)
    size = n if n is not None else (parsed.fixed_n or DEFAULT_N)
    bins = k if k is not None else (parsed.fixed_k(None) or DEFAULT_K)
    details: dict[str, Any] = {"spec": parsed.text, "kind": parsed.kind, "n": size, "k": bins}
    if parsed.kind in ("normal", "uniform", "zipf"):
        return _generated_dataset(parsed, size, bins, source, details)
    return _described_dataset(parsed, size, bins, source, details)


def _generated_dataset(
    parsed: DatasetSpec, size: int, bins: int, source: RandomSource, details: dict[str, Any]
) -> Dataset:
    """``size`` values drawn from one of the generators: normal, uniform or zipf:S."""
    if parsed.kind == "normal":
        return Dataset(
            values=synthetic_values(size, bins, source),
            k=bins,
            label=_NORMAL_LABEL,
            details=details,
            true_distribution=synthetic_distribution(bins),
        )
    if parsed.kind == "uniform":
        return Dataset(
            values=uniform_values(size, bins, source),
            k=bins,
            label="uniform: each of the k values with probability 1/k",
            details=details,
            true_distribution=uniform_distribution(bins),
        )
    assert parsed.kind == "zipf" and parsed.exponent is not None
    s = parsed.exponent
    details["exponent"] = s
    return Dataset(
        values=zipf_values(size, bins, s, source),
        k=bins,
        label=f"zipf: P(j) proportional to 1/(j+1)^{s:g}, j = 0..k-1",
        details=details,
        true_distribution=zipf_distribution(bins, s),
    )


def _described_dataset(
    parsed: DatasetSpec, size: int, bins: int, source: RandomSource, details: dict[str, Any]
) -> Dataset:
    """The dataset the spec itself describes: probabilities:P,... or histogram:C,..."""
    if parsed.kind == "probabilities":
        assert parsed.probabilities is not None
        p = np.asarray(parsed.probabilities)
        return Dataset(
            values=distribution_values(p, size, source),
            k=bins,
            label=f"probabilities: {size} independent draws from the given {bins} probabilities",
            details=details,
            true_distribution=p,
        )
    assert parsed.kind == "histogram" and parsed.counts is not None
    counts = np.asarray(parsed.counts, dtype=np.int64)
    details["counts"] = list(parsed.counts)
    return Dataset(
        values=histogram_values(counts, source),
        k=bins,
        label="histogram: exactly the given counts, in a uniformly random order",
        details=details,
        true_distribution=counts / counts.sum(),
    )


def _gowalla(
    parsed: DatasetSpec, path: str, *, n: int | None, region: Region, rng: RandomSource
) -> Dataset:
    from shuffledp.simulations.data.checkins import CheckInReader, load_checkin_arrays

    reader = CheckInReader(path)
    arrays = load_checkin_arrays(reader, region)
    stats = reader.stats
    every_user = arrays.most_recent_cells()
    users = int(every_user.size)
    if users == 0:
        raise InvalidParameterError(
            f"{path}: no check-in inside region {region.describe()} ({stats.summary()}; "
            f"{arrays.outside:,} outside the region)"
        )
    noun = "users" if arrays.has_users else "rows"
    values, selection = _select_users(every_user, n, noun, region=region, path=path, rng=rng)
    details: dict[str, Any] = {
        "spec": parsed.text,
        "kind": "gowalla",
        "path": path,
        "region": region.describe(),
        "k": region.k,
        **{key: value for key, value in stats.as_dict().items() if key != "source"},
        "load_summary": stats.summary(),
        "inside_region": len(arrays),
        "outside_region": arrays.outside,
        "users": users,
        "users_are": "users" if arrays.has_users else "rows (no user column: each row is one user)",
        "n": int(values.size),
        "selection": selection,
        "rule": MOST_RECENT_RULE,
    }
    if arrays.has_times and len(arrays):
        details["first_time"] = _iso(int(arrays.time.min()))
        details["last_time"] = _iso(int(arrays.time.max()))
    population = np.bincount(every_user, minlength=region.k) / users
    return Dataset(
        values=values.astype(np.int64),
        k=region.k,
        label=_gowalla_label(path, stats.format, region, selection, has_users=arrays.has_users),
        details=details,
        true_distribution=population,
    )


def _select_users(
    every_user: npt.NDArray[np.int64],
    n: int | None,
    noun: str,
    *,
    region: Region,
    path: str,
    rng: RandomSource,
) -> tuple[npt.NDArray[np.int64], str]:
    """Every user's cell, or those of a uniformly random subset of n users (an error if n is
    more than there are), and the sentence saying which."""
    users = int(every_user.size)
    if n is None or n == users:
        return every_user, f"all {users:,} {noun}"
    if n > users:
        raise InvalidParameterError(
            f"n = {n:,} is more than the {users:,} {noun} with a check-in inside region "
            f"{region.name} in {path}; leave --n out to use all of them"
        )
    chosen = np.sort(uniform_permutation(users, rng)[:n])
    return every_user[chosen], f"a uniformly random subset of {n:,} of the {users:,} {noun}"


def _gowalla_label(
    path: str, file_format: str | None, region: Region, selection: str, *, has_users: bool
) -> str:
    if has_users:
        return (
            f"gowalla:{path} ({file_format}), region {region.name} ({region.k} cells); "
            f"{selection}, each reporting the cell of their most recent check-in in the region"
        )
    return (
        f"gowalla:{path} ({file_format}, no users), region {region.name} "
        f"({region.k} cells); {selection}, each row one user"
    )


def _iso(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
