"""The Gowalla check-ins of Figs. 3-7 and Table VI: the two regions, where their file is, and the
population each experiment draws from.

The paper's Section V.D uses check-ins in a northern part of San Francisco (lat 37.7228..37.7946,
lon -122.5153..-122.3789, a 24 x 17 grid: 408 cells) and in Paris (lat 48.8286..48.8798, lon
2.2855..2.3909, 16 x 12: 192 cells), 123,108 and 10,260 check-ins. Our regions
(:mod:`shuffledp.simulations.data.regions`) are the same boxes and grids; the cells are numbered
row-major from the south-west (``cell = row * columns + column``, 0-based).

The file is found by :func:`find_dataset`: ``--dataset``, else the slice in ``--data-dir``, else
the full SNAP file cached by ``shuffledp data fetch gowalla``, else the lat,lon slice in the
repository's sibling ``shared/data``; none of them is one line naming the fetch command. A lat,lon
slice has no user column, so each row is one individual (SF 123,026 rows, Paris 10,991: 82 fewer
and 731 more than the paper's counts); a SNAP file gives one individual per user (the cell of the
user's most recent check-in in the region). Files are read once per process and region
(:func:`load_population` caches), so ``experiment all`` reads each once.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from shuffledp.errors import InvalidParameterError
from shuffledp.randomness import SeededRandom, SystemRandom
from shuffledp.shuffler.permute import uniform_permutation
from shuffledp.simulations.data.checkins import (
    CheckInReader,
    CheckInReadError,
    LoadStats,
    load_checkin_arrays,
)
from shuffledp.simulations.data.fetch import (
    GOWALLA,
    DataMissingError,
    FetchError,
    cache_dir,
    fetch_command,
    verify_cached,
)
from shuffledp.simulations.data.regions import PRESETS, Region
from shuffledp.simulations.experiments.base import ExperimentContext, ExperimentError
from shuffledp.validation import require_int

__all__ = [
    "GOWALLA_EXPERIMENTS",
    "PARIS",
    "SETUPS",
    "SF",
    "Population",
    "RegionSetup",
    "check_data",
    "dataset_path",
    "draw_subset",
    "find_dataset",
    "load_points",
    "load_population",
]


#: The experiments that read the Gowalla check-ins (``--dataset``, ``--data-dir``).
GOWALLA_EXPERIMENTS = ("fig-3", "fig-4", "fig-5", "fig-6", "fig-7", "table-6")


@dataclass(frozen=True, slots=True, kw_only=True)
class RegionSetup:
    """One region of the evaluation: ``name`` (used in messages and file names), its region
    preset, the slice's file name, the paper's check-in count, the n of its TV-vs-n figure
    (``ns``, ``quick_ns``) and the cell indices of Table VI (``table_cells``)."""

    name: str
    region: str
    title: str
    default_file: str
    paper_n: int
    ns: tuple[int, ...]
    quick_ns: tuple[int, ...]
    table_cells: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.region not in PRESETS:
            raise InvalidParameterError(
                f"region must be one of {', '.join(sorted(PRESETS))}, got {self.region!r}"
            )
        k = PRESETS[self.region].k
        for label, values in (("ns", self.ns), ("quick_ns", self.quick_ns)):
            if not values:
                raise InvalidParameterError(f"{label} must hold at least one n")
            for index, n in enumerate(values):
                require_int(f"{label}[{index}]", n, 2)
        for index, cell in enumerate(self.table_cells):
            require_int(f"table_cells[{index}]", cell, 0, k - 1)

    @property
    def grid(self) -> Region:
        return PRESETS[self.region]


#: Fig. 6: "n ranges from 10,000 to 100,000"; Fig. 7: "from 1,000 to 10,000" (Section V.D). We
#: take the 1-2-5 points of those decades (the paper's own points are not stated).
SF = RegionSetup(
    name="gowalla-sf",
    region="sf",
    title="San Francisco",
    default_file="gowalla-sf-latlon.csv",
    paper_n=123_108,
    ns=(10_000, 20_000, 50_000, 100_000),
    quick_ns=(10_000, 50_000),
    table_cells=(40, 80, 120, 160, 200, 240, 280),
)
PARIS = RegionSetup(
    name="gowalla-paris",
    region="paris",
    title="Paris",
    default_file="gowalla-paris-latlon.csv",
    paper_n=10_260,
    ns=(1_000, 2_000, 5_000, 10_000),
    quick_ns=(1_000, 5_000),
    table_cells=(20, 40, 60, 80, 100, 120, 140),
)
SETUPS: dict[str, RegionSetup] = {SF.name: SF, PARIS.name: PARIS}


def _default_data_dir() -> Path:
    """The repository's sibling ``shared/data`` (this file is
    ``<repo>/simulations/experiments/gowalla_data.py``, so parents[3] is the repo's parent)."""
    return Path(__file__).resolve().parents[3] / "shared" / "data"


def dataset_path(context: ExperimentContext, setup: RegionSetup) -> Path:
    """The check-in file to read (:func:`find_dataset` with the context's options)."""
    return find_dataset(setup, context.options.get("dataset"), context.data_dir)


def find_dataset(setup: RegionSetup, given: object, data_dir: Path | None) -> Path:
    """The check-in file to read, the first of: ``given`` (``--dataset``); ``setup.default_file``
    in ``data_dir`` (``--data-dir``); the SNAP file in the cache of ``shuffledp data fetch
    gowalla``, checked against its recorded SHA-256 and size; the slice in the repository's
    sibling ``shared/data``. DataMissingError (exit status 2), one line naming the fetch command
    and ``--data-dir``, if none."""
    if given is not None:
        if not isinstance(given, str | Path) or not str(given):
            raise ExperimentError(
                f"{setup.name}: options['dataset'] must be a file path, got {given!r}"
            )
        path = Path(given)
        if not path.is_file():
            raise DataMissingError(f"{setup.name}: the check-in file {path} does not exist")
        return path
    if data_dir is not None:
        path = data_dir / setup.default_file
        if not path.is_file():
            raise DataMissingError(
                f"{setup.name}: the check-in file {path} does not exist; pass --data-dir with "
                f"the folder holding {setup.default_file}, give another file (SNAP or lat,lon) "
                f"with --dataset FILE, or leave both out to use the file of `{fetch_command()}`"
            )
        return path
    try:
        cached = verify_cached(GOWALLA)
    except FetchError as exc:
        raise ExperimentError(f"{setup.name}: {exc}") from None
    if cached is not None:
        return cached
    slice_path = _default_data_dir() / setup.default_file
    if slice_path.is_file():
        return slice_path
    raise DataMissingError(
        f"{setup.name}: no check-in data: run `{fetch_command()}` (the SNAP file, "
        f"{GOWALLA.size or 0:,} bytes, into {cache_dir()}), or pass --data-dir DIR (the lat,lon "
        f"slices) or --dataset FILE"
    )


def check_data(setups: tuple[RegionSetup, ...], given: object, data_dir: Path | None) -> None:
    """Find every region's file now (``shuffledp experiment`` calls this before any experiment
    runs): a missing one is one DataMissingError line naming the fetch command."""
    for setup in setups:
        find_dataset(setup, given, data_dir)


@dataclass(frozen=True, slots=True, kw_only=True)
class Population:
    """Every individual of a region in a check-in file: one cell each (``values``).

    ``has_users``: False for a lat,lon file (each row one individual), True for SNAP (each user
    one individual: the cell of the most recent check-in inside the region). ``inside`` /
    ``outside``: accepted check-ins inside / outside the region; ``stats``: the reader's counts.
    """

    path: Path
    region: Region
    values: npt.NDArray[np.int64]
    stats: LoadStats
    inside: int
    outside: int
    has_users: bool

    @property
    def n(self) -> int:
        return int(self.values.size)

    @property
    def counts(self) -> npt.NDArray[np.int64]:
        """Individuals per cell (length ``region.k``)."""
        return np.bincount(self.values, minlength=self.region.k).astype(np.int64)

    @property
    def noun(self) -> str:
        return "users" if self.has_users else "rows"

    def describe(self) -> str:
        """One sentence for a summary: the file, what an individual is, N."""
        unit = (
            "users (each reports the cell of their most recent check-in inside the region)"
            if self.has_users
            else "rows (the file has no user column: each row is one individual)"
        )
        return (
            f"`{self.path.name}` ({self.stats.format}; {self.stats.summary()}); "
            f"{self.inside:,} check-ins inside the region, {self.outside:,} outside; "
            f"N = {self.n:,} {unit}"
        )


def _file_key(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return str(path.resolve()), stat.st_size, stat.st_mtime_ns


def load_population(path: Path, region: Region) -> Population:
    """Read ``path`` (SNAP or lat,lon, plain or gzip) and keep the individuals inside ``region``
    (cached per process by the file's path, size and modification time).

    ExperimentError (one line, naming the file) if it cannot be read or fewer than 2 individuals
    fall inside the region; broken lines are counted rejections, never errors.
    """
    try:
        key = _file_key(path)
    except OSError as exc:
        raise ExperimentError(f"{path}: cannot read the check-in file ({exc})") from None
    return _load_population(key, region)


@functools.lru_cache(maxsize=8)
def _load_population(key: tuple[str, int, int], region: Region) -> Population:
    path = Path(key[0])
    try:
        reader = CheckInReader(path)
        arrays = load_checkin_arrays(reader, region)
    except CheckInReadError as exc:
        raise ExperimentError(str(exc)) from None
    values = arrays.most_recent_cells()
    if values.size < 2:
        raise ExperimentError(
            f"{path}: {values.size} individual(s) inside region {region.describe()}, at least 2 "
            f"are needed ({reader.stats.summary()}; {arrays.outside:,} outside the region)"
        )
    values = values.astype(np.int64)
    values.setflags(write=False)  # shared by every caller of the cache
    return Population(
        path=path,
        region=region,
        values=values,
        stats=reader.stats,
        inside=len(arrays),
        outside=arrays.outside,
        has_users=arrays.has_users,
    )


def load_points(path: Path, region: Region) -> tuple[npt.NDArray[np.float64], ...]:
    """(lat, lon) of every check-in inside ``region`` in ``path`` (Fig. 3's maps: every
    check-in, also of a SNAP file), cached per process like :func:`load_population`."""
    try:
        key = _file_key(path)
    except OSError as exc:
        raise ExperimentError(f"{path}: cannot read the check-in file ({exc})") from None
    return _load_points(key, region)


@functools.lru_cache(maxsize=4)
def _load_points(key: tuple[str, int, int], region: Region) -> tuple[npt.NDArray[np.float64], ...]:
    lats: list[float] = []
    lons: list[float] = []
    try:
        for checkin in CheckInReader(Path(key[0])):
            if region.contains(checkin.lat, checkin.lon):
                lats.append(checkin.lat)
                lons.append(checkin.lon)
    except CheckInReadError as exc:
        raise ExperimentError(str(exc)) from None
    return np.asarray(lats, dtype=np.float64), np.asarray(lons, dtype=np.float64)


def draw_subset(
    population: npt.NDArray[np.int64], n: int, seed: int | None
) -> npt.NDArray[np.int64]:
    """n individuals drawn uniformly at random without replacement (the first n of a uniform
    permutation, kept in population order); all of them when n is the population's size.
    ``seed``: None for the OS CSPRNG."""
    size = int(population.size)
    require_int("n", n, 2)
    if n > size:
        raise InvalidParameterError(f"n = {n} is more than the {size} individuals in the data")
    if n == size:
        return np.asarray(population, dtype=np.int64)
    source = SystemRandom() if seed is None else SeededRandom(seed)
    chosen = np.sort(uniform_permutation(size, source)[:n])
    values: npt.NDArray[np.int64] = np.asarray(population, dtype=np.int64)[chosen]
    return values
