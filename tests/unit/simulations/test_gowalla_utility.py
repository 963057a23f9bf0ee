"""The `gowalla-sf` and `gowalla-paris` experiments (Figs. 4-7, Tables V-VI).

The quick runs read the real check-in slices in ``shared/data`` (skipped if absent) and are
checked against an independent recount of the file: the true heat map and the true counts of
the individual-utility cells. The individual utilities are hand-checked on a tiny check-in file
with known counts.
"""

from __future__ import annotations

import csv
import itertools
import math
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from shuffledp.cli import main
from shuffledp.simulations.data.regions import PRESETS
from shuffledp.simulations.experiments import gowalla_utility as gu
from shuffledp.simulations.experiments.base import (
    ExperimentContext,
    ExperimentError,
    ExperimentOutput,
)
from shuffledp.simulations.experiments.fastpath import RoundSpec, run_spec
from shuffledp.simulations.experiments.runner import LocalRepeater
from tests.paths import SHARED_DATA

DATA_DIR = SHARED_DATA
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

#: The evaluation's boxes and grids as docs/data-and-streams.md states them (not from PRESETS):
#: file, lat_min, lat_max, lon_min, lon_max, columns, rows.
BOXES: dict[str, tuple[str, float, float, float, float, int, int]] = {
    "gowalla-sf": ("gowalla-sf-latlon.csv", 37.7228, 37.7946, -122.5153, -122.3789, 24, 17),
    "gowalla-paris": ("gowalla-paris-latlon.csv", 48.8286, 48.8798, 2.2855, 2.3909, 16, 12),
}
SETUPS = {"gowalla-sf": gu.SF, "gowalla-paris": gu.PARIS}
RUNNERS: dict[str, Callable[[ExperimentContext], ExperimentOutput]] = {
    "gowalla-sf": gu.run_sf,
    "gowalla-paris": gu.run_paris,
}


def _sequential(fn: Any, items: Any, *, label: str) -> list[Any]:
    return [fn(item) for item in items]


def _read(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _recount(name: str) -> np.ndarray:
    """Individuals per cell, counted from the file without the project's reader or Region:
    every line is ``lat,lon``; a point's cell is row * columns + column with row 0 in the south
    and column 0 in the west, upper edges in the last row / column, bounds inclusive."""
    file, lat_min, lat_max, lon_min, lon_max, columns, rows = BOXES[name]
    data = np.loadtxt(DATA_DIR / file, delimiter=",", dtype=np.float64, ndmin=2)
    lat, lon = data[:, 0], data[:, 1]
    inside = (lat >= lat_min) & (lat <= lat_max) & (lon >= lon_min) & (lon <= lon_max)
    lat, lon = lat[inside], lon[inside]
    row = np.minimum(np.floor((lat - lat_min) / (lat_max - lat_min) * rows), rows - 1)
    col = np.minimum(np.floor((lon - lon_min) / (lon_max - lon_min) * columns), columns - 1)
    cells = (row * columns + col).astype(np.int64)
    return np.bincount(cells, minlength=rows * columns)


# --- the quick runs on the real slices ----------------------------------------------------------


@pytest.fixture(scope="module")
def repeater() -> Iterator[LocalRepeater]:
    """One pool of 2 processes for both regions (worker start-up is paid once)."""
    with LocalRepeater(2, quiet=True) as repeat:
        yield repeat


@pytest.fixture(scope="module", params=["gowalla-sf", "gowalla-paris"])
def quick_run(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    repeater: LocalRepeater,
) -> tuple[str, Path, ExperimentOutput, np.ndarray]:
    """The region's default --quick run (2 runs per point), seeded, on the real slice."""
    name: str = request.param
    if not DATA_DIR.is_dir():  # as for tests marked shared_data (tests/conftest.py)
        message = f"the check-in slices are not at {DATA_DIR}"
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI must have them)")
        pytest.skip(message)
    out = tmp_path_factory.mktemp(name)
    context = ExperimentContext(
        out=out,
        quick=True,
        runs=None,
        seed=11,
        pipeline=False,
        repeat=repeater,
        data_dir=DATA_DIR,
        quiet=True,
    )
    output = RUNNERS[name](context)
    return name, out, output, _recount(name)


@pytest.mark.slow
def test_quick_run_writes_its_csvs_pngs_and_summary(
    quick_run: tuple[str, Path, ExperimentOutput, np.ndarray],
) -> None:
    name, out, output, recount = quick_run
    expected = {
        f"{name}-tv-vs-n.csv",
        f"{name}-tv-vs-eps.csv",
        f"{name}-cells.csv",
        f"{name}-individual-utility.csv",
        f"{name}-heatmap-data.csv",
        f"{name}-heatmap-paper.png",
        f"{name}-heatmap-calibrated.png",
        f"{name}-tv-vs-n-paper.png",
        f"{name}-tv-vs-n-calibrated.png",
        f"{name}-tv-vs-eps.png",
        f"SUMMARY-{name}.md",
    }
    assert {path.name for path in output.files} == expected
    for path in output.files:
        assert path.parent == out and path.is_file()
        if path.suffix == ".png":
            assert path.read_bytes().startswith(PNG_MAGIC), path
    summary = (out / f"SUMMARY-{name}.md").read_text(encoding="utf-8")
    assert summary == output.summary
    total = int(recount.sum())
    assert f"N = {total:,} rows" in summary
    assert f"{total:,} rows: {total:,} accepted, 0 rejected" in summary
    assert "seeded from --seed 11" in summary
    assert "the fast in-process path" in summary


@pytest.mark.slow
def test_every_tv_distance_lies_in_0_1_and_every_point_has_its_runs(
    quick_run: tuple[str, Path, ExperimentOutput, np.ndarray],
) -> None:
    name, out, _, recount = quick_run
    total = int(recount.sum())
    ns = gu.n_grid(total, SETUPS[name].quick_ns)
    assert ns[-1] == total and len(ns) >= 2
    by_n = _read(out / f"{name}-tv-vs-n.csv")
    assert sorted((r["setting"], int(r["n"]), int(r["run"])) for r in by_n) == sorted(
        (s, n, run) for s in ("paper", "calibrated") for n in ns for run in range(gu.QUICK_RUNS)
    )
    by_eps = _read(out / f"{name}-tv-vs-eps.csv")
    assert sorted((float(r["target_eps"]), int(r["run"])) for r in by_eps) == sorted(
        (eps, run) for eps in gu.QUICK_EPS_GRID for run in range(gu.QUICK_RUNS)
    )
    for row in (*by_n, *by_eps):
        for column in gu.ESTIMATORS.values():
            assert 0.0 <= float(row[column]) <= 1.0, (column, row)
        assert int(row["n_received"]) == int(row["n"])
        assert row["path"] == "fast"
        assert row["randomness"].startswith("seeded-pcg64 from seed ")
    assert all(int(r["n"]) == total for r in by_eps)


@pytest.mark.slow
def test_privacy_columns_are_the_valid_guarantee_shared_by_both_mechanisms(
    quick_run: tuple[str, Path, ExperimentOutput, np.ndarray],
) -> None:
    name, out, _, _ = quick_run
    by_n = _read(out / f"{name}-tv-vs-n.csv")
    by_eps = _read(out / f"{name}-tv-vs-eps.csv")
    for row in (*by_n, *by_eps):
        # The Gaussian is released at exactly the shuffle's (eps, delta_upper).
        assert float(row["gaussian_eps"]) == float(row["eps"])
        assert float(row["gaussian_delta"]) == float(row["delta"])
        assert 0.0 < float(row["delta"]) <= gu.TARGET_DELTA
        assert float(row["delta_lower"]) <= float(row["delta"])
        assert int(row["k"]) == PRESETS[SETUPS[name].region].k
    for row in by_n:
        if row["setting"] == "paper":
            assert float(row["eps0"]) == gu.PAPER_EPS0
            assert float(row["delta_at_eps_eq_eps0"]) == 0.0  # k-RR alone is (eps0, 0)-DP
            assert 0.0 < float(row["eps"]) < gu.PAPER_EPS0
        else:
            assert float(row["eps"]) == gu.TARGET_EPS
            assert row["delta_at_eps_eq_eps0"] == ""
    for row in by_eps:
        assert float(row["eps"]) == float(row["target_eps"])
    # More individuals, more amplification: the calibrated eps0 grows with n and with eps.
    calibrated = {int(r["n"]): float(r["eps0"]) for r in by_n if r["setting"] == "calibrated"}
    ns = sorted(calibrated)
    assert all(calibrated[a] < calibrated[b] for a, b in itertools.pairwise(ns))
    per_eps = {float(r["target_eps"]): float(r["eps0"]) for r in by_eps}
    grid = sorted(per_eps)
    assert all(per_eps[a] < per_eps[b] for a, b in itertools.pairwise(grid))
    # The eps sweep at TARGET_EPS reuses the calibration of the n sweep's last point.
    assert per_eps[gu.TARGET_EPS] == calibrated[ns[-1]]


@pytest.mark.slow
def test_true_heat_map_equals_an_independent_recount_of_the_file(
    quick_run: tuple[str, Path, ExperimentOutput, np.ndarray],
) -> None:
    name, out, _, recount = quick_run
    rows = _read(out / f"{name}-heatmap-data.csv")
    assert [int(r["cell"]) for r in rows] == list(range(recount.size))
    assert [int(r["true_count"]) for r in rows] == recount.tolist()
    total = int(recount.sum())
    columns = BOXES[name][5]
    for setting in ("paper", "calibrated"):
        true_share = np.array([float(r[f"{setting}:true"]) for r in rows])
        np.testing.assert_allclose(true_share, recount / total, rtol=0, atol=1e-15)
        for panel in gu.PANELS:  # every panel is a distribution on the grid
            shares = np.array([float(r[f"{setting}:{panel}"]) for r in rows])
            assert shares.min() >= -1e-12 and math.isclose(shares.sum(), 1.0, abs_tol=1e-9)
    for r in rows:
        assert divmod(int(r["cell"]), columns) == (int(r["row"]), int(r["column"]))


@pytest.mark.slow
def test_individual_utility_uses_the_true_counts_of_the_selected_cells(
    quick_run: tuple[str, Path, ExperimentOutput, np.ndarray],
) -> None:
    name, out, _, recount = quick_run
    total = int(recount.sum())
    rows = _read(out / f"{name}-individual-utility.csv")
    assert {r["setting"] for r in rows} == {"paper", "calibrated"}
    top = int(np.argmax(recount))
    labels = {int(r["cell"]): r["label"] for r in rows}
    assert labels[top].startswith("most visited")
    assert any(recount[cell] == 0 and "empty" in label for cell, label in labels.items())
    for spot in SETUPS[name].spots:
        assert any(spot.name in label for label in labels.values()), spot
    for r in rows:
        cell = int(r["cell"])
        assert float(r["true_count"]) == recount[cell]
        assert math.isclose(float(r["true_share"]), recount[cell] / total, rel_tol=1e-12)
        assert int(r["n"]) == total and int(r["runs"]) == gu.QUICK_RUNS
        assert float(r["median_abs_error_count"]) <= float(r["p90_abs_error_count"]) + 1e-9
        assert (r["median_rel_error"] == "") == (recount[cell] == 0)
    # The table's medians are the medians of the per-run errors in the cells CSV.
    per_run = _read(out / f"{name}-cells.csv")
    for r in rows:
        errors = [
            float(c["abs_error_count"])
            for c in per_run
            if c["setting"] == r["setting"]
            and c["cell"] == r["cell"]
            and c["estimator"] == r["estimator"]
        ]
        assert len(errors) == gu.QUICK_RUNS
        assert math.isclose(
            float(np.median(errors)), float(r["median_abs_error_count"]), abs_tol=1e-9
        )


# --- hand-checked individual utilities on a tiny file -------------------------------------------

PARIS = PRESETS["paris"]


def _centre(row: int, column: int) -> tuple[float, float]:
    lat_step = (PARIS.lat_max - PARIS.lat_min) / PARIS.rows
    lon_step = (PARIS.lon_max - PARIS.lon_min) / PARIS.columns
    return PARIS.lat_min + (row + 0.5) * lat_step, PARIS.lon_min + (column + 0.5) * lon_step


#: cell -> individuals: (row 2, col 3) = 35: 6; (row 10, col 12) = 172: 3; (row 0, col 15) = 15:
#: 1; and 2 at the Eiffel Tower (48.8584, 2.2945: row 6, col 1 = cell 97). The Louvre is in
#: cell 119 (row 7, col 7) and Notre-Dame in 89 (row 5, col 9), both empty here.
TINY_COUNTS = {35: 6, 172: 3, 15: 1, 97: 2}


def _tiny_file(tmp_path: Path) -> Path:
    lines = ["lat,lon"]
    for cell, count in ((35, 6), (172, 3), (15, 1)):
        lat, lon = _centre(*divmod(cell, PARIS.columns))
        lines += [f"{lat:.6f},{lon:.6f}"] * count
    lines += ["48.8584,2.2945"] * 2  # the Eiffel Tower
    lines += ["48.9500,2.3000", "0,0"]  # outside the box
    lines += ["abc,2.3000"]  # broken: a counted rejection
    path = tmp_path / "tiny-paris.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


EXPECTED_CELLS = (
    (35, "most visited", 6),
    (97, "median non-empty; Eiffel Tower", 2),
    (15, "least visited non-empty", 1),
    (0, "empty", 0),
    (119, "Louvre", 0),
    (89, "Notre-Dame", 0),
)


def test_tiny_file_loads_with_known_counts_and_selects_the_expected_cells(tmp_path: Path) -> None:
    population = gu.load_population(_tiny_file(tmp_path), PARIS)
    assert population.n == 12 and not population.has_users
    assert population.inside == 12 and population.outside == 2
    assert population.stats.rows == 15 and population.stats.accepted == 14
    assert dict(population.stats.rejected) == {"bad-latitude": 1}
    counts = population.counts
    assert {int(c): int(counts[c]) for c in np.flatnonzero(counts)} == TINY_COUNTS
    selected = gu.select_cells(counts, PARIS, gu.PARIS.spots)
    assert [(s.cell, s.label, s.true_count) for s in selected] == list(EXPECTED_CELLS)


def _outcome(setting: str, run: int, estimates: dict[int, float]) -> gu.Outcome:
    """An outcome of n = 12 whose every estimator puts ``estimates[cell]`` at each cell."""
    cells = [cell for cell, _, _ in EXPECTED_CELLS]
    truth = np.array([count for _, _, count in EXPECTED_CELLS], dtype=np.int64)
    values = np.array([estimates[cell] for cell in cells], dtype=np.float64)
    return gu.Outcome(
        sweep="n",
        setting=setting,
        n=12,
        run=run,
        row={"eps0": 4.0, "eps": 2.5, "delta": 1e-7 * (run + 1)},
        cell_truth=truth,
        cell_estimates=dict.fromkeys(gu.ESTIMATORS, values),
    )


def test_individual_utility_by_hand() -> None:
    """n = 12. Cell 35 (p = 1/2): estimates 1/4 and 3/4, errors 3 and 3 individuals, relative
    1/2. Cell 97 (p = 1/6): 1/6 and 1/3, errors 0 and 2, median 1, 90th percentile 1.8,
    relative 0 and 1 (median 1/2). Empty cell 0: 0.1 and 0, errors 1.2 and 0 (median 0.6), no
    relative error."""
    base = dict.fromkeys((cell for cell, _, _ in EXPECTED_CELLS), 0.0)
    outcomes = [
        _outcome("paper", 0, {**base, 35: 0.25, 97: 2 / 12, 15: 1 / 12, 0: 0.1}),
        _outcome("paper", 1, {**base, 35: 0.75, 97: 4 / 12, 15: 1 / 12, 0: 0.0}),
    ]
    selected = [
        gu.SelectedCell(cell=c, label=label, true_count=t) for c, label, t in EXPECTED_CELLS
    ]
    rows = gu.individual_utility(outcomes, selected, PARIS)
    assert len(rows) == len(EXPECTED_CELLS) * len(gu.ESTIMATORS)
    ibu = {row["cell"]: row for row in rows if row["estimator"] == "IBU"}
    assert ibu[35]["true_count"] == 6 and ibu[35]["true_share"] == 0.5
    assert math.isclose(ibu[35]["median_abs_error_count"], 3.0)
    assert math.isclose(ibu[35]["median_rel_error"], 0.5)
    assert math.isclose(ibu[97]["median_abs_error_count"], 1.0)
    assert math.isclose(ibu[97]["p90_abs_error_count"], 1.8)
    assert math.isclose(ibu[97]["median_rel_error"], 0.5)
    assert math.isclose(ibu[15]["median_abs_error_count"], 0.0, abs_tol=1e-12)
    assert math.isclose(ibu[0]["median_abs_error_count"], 0.6)
    assert ibu[0]["median_rel_error"] is None and ibu[0]["true_count"] == 0
    assert (ibu[35]["row"], ibu[35]["column"]) == (2, 3)
    assert ibu[35]["delta"] == 2e-7  # the largest (least private) delta over runs
    assert ibu[119]["label"] == "Louvre" and ibu[119]["true_share"] == 0.0


@pytest.mark.slow
def test_tiny_file_end_to_end_through_the_dataset_option(tmp_path: Path) -> None:
    """options["dataset"] replaces the default file; the tables carry the file's true counts."""
    out = tmp_path / "out"
    out.mkdir()
    context = ExperimentContext(
        out=out,
        quick=True,
        runs=2,
        seed=5,
        pipeline=False,
        repeat=_sequential,
        data_dir=tmp_path / "nowhere",  # not read: the option wins
        options={"dataset": str(_tiny_file(tmp_path))},
        quiet=True,
    )
    output = gu.run_paris(context)
    rows = _read(out / "gowalla-paris-individual-utility.csv")
    got = {(int(r["cell"]), r["label"], float(r["true_count"])) for r in rows}
    assert got == {(cell, label, float(count)) for cell, label, count in EXPECTED_CELLS}
    assert {int(r["n"]) for r in _read(out / "gowalla-paris-tv-vs-n.csv")} == {12}
    heat = _read(out / "gowalla-paris-heatmap-data.csv")
    assert {int(r["cell"]): int(r["true_count"]) for r in heat if int(r["true_count"])} == (
        TINY_COUNTS
    )
    assert "15 rows: 14 accepted, 1 rejected (bad-latitude 1)" in output.summary
    assert "outside: 2" in output.summary


def test_a_snap_file_gives_one_report_per_user_their_most_recent_cell(tmp_path: Path) -> None:
    a_lat, a_lon = _centre(2, 3)  # cell 35
    b_lat, b_lon = _centre(10, 12)  # cell 172
    lines = [
        f"u1\t2010-01-02T10:00:00Z\t{a_lat:.6f}\t{a_lon:.6f}\tL1",  # u1's newest: cell 35
        f"u1\t2010-01-01T10:00:00Z\t{b_lat:.6f}\t{b_lon:.6f}\tL2",
        f"u2\t2010-01-01T09:00:00Z\t{b_lat:.6f}\t{b_lon:.6f}\tL2",
        "u3\t2010-01-01T09:00:00Z\t40.0\t2.3\tL3",  # outside the region: not an individual
    ]
    path = tmp_path / "tiny.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    population = gu.load_population(path, PARIS)
    assert population.has_users and population.noun == "users"
    assert sorted(population.values.tolist()) == [35, 172]
    assert population.inside == 3 and population.outside == 1


# --- errors, grids, the Gaussian draw, the pipeline plumbing ------------------------------------


def _context(tmp_path: Path, **changes: Any) -> ExperimentContext:
    values: dict[str, Any] = {
        "out": tmp_path,
        "quick": True,
        "runs": 1,
        "seed": 1,
        "pipeline": False,
        "repeat": _sequential,
        "quiet": True,
    }
    values.update(changes)
    return ExperimentContext(**values)


def test_a_missing_data_file_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ExperimentError, match=r"gowalla-sf-latlon\.csv does not exist.*--data-dir"):
        gu.dataset_path(_context(tmp_path, data_dir=empty), gu.SF)
    missing = tmp_path / "missing.csv"
    with pytest.raises(ExperimentError, match=f"{missing} does not exist"):
        gu.dataset_path(_context(tmp_path, options={"dataset": str(missing)}), gu.PARIS)
    args = ["experiment", "gowalla-paris", "--quick", "--out", str(tmp_path / "o")]
    code = main([*args, "--data-dir", str(empty), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1 and "gowalla-paris-latlon.csv does not exist" in err


def test_a_file_with_no_individual_in_the_region_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "elsewhere.csv"
    path.write_text("10.0,10.0\n11.0,11.0\n", encoding="utf-8")
    with pytest.raises(ExperimentError, match="0 individual"):
        gu.load_population(path, PARIS)


def test_n_grids() -> None:
    assert gu.n_grid(123_026, gu.FULL_N_GRID) == (
        1_000,
        2_154,
        4_642,
        10_000,
        21_544,
        46_416,
        123_026,  # 100,000 is dropped: within a factor 1.25 of N
    )
    assert gu.n_grid(10_991, gu.FULL_N_GRID) == (1_000, 2_154, 4_642, 10_991)
    assert gu.n_grid(12, gu.PARIS.quick_ns) == (12,)
    assert gu.n_grid(123_026, gu.FULL_N_GRID, pipeline=True) == (gu.PIPELINE_N,)
    assert gu.n_grid(12, gu.FULL_N_GRID, pipeline=True) == (12,)


def test_seeded_gaussian_numbers_are_the_reports_own_draw() -> None:
    values = np.repeat(np.arange(8, dtype=np.int64), [40, 30, 20, 10, 5, 3, 2, 0])
    spec = RoundSpec(values=values, k=8, eps0=2.0, eps=1.0, seed=77)
    report = run_spec(spec)
    outcome = gu.round_outcome(report, spec, sweep="n", setting="calibrated", run=0, cells=(0, 7))
    assert outcome.row["tv_gaussian"] == report["tv_distance"]["gaussian"]
    assert outcome.row["gaussian_sigma"] == report["baseline"]["sigma"]
    assert outcome.row["tv_shuffle_inv"] == report["tv_distance"]["shuffle+INV"]
    assert outcome.cell_truth.tolist() == [40, 0]


@pytest.mark.slow
def test_pipeline_mode_sends_one_n_and_every_round_to_the_pipeline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--pipeline: one n only; every round (2 settings + the eps grid, per run) goes to
    ``run_specs_through_pipeline`` (replaced here by the fast path: this checks the plumbing)."""
    sent: list[RoundSpec] = []

    def fake_pipeline(specs: Sequence[RoundSpec], **options: Any) -> list[dict[str, Any]]:
        sent.extend(specs)
        return [{**run_spec(spec), "path": "pipeline"} for spec in specs]

    monkeypatch.setattr(gu, "run_specs_through_pipeline", fake_pipeline)
    out = tmp_path / "out"
    out.mkdir()
    context = _context(out, runs=2, pipeline=True, options={"dataset": str(_tiny_file(tmp_path))})
    output = gu.run_paris(context)
    assert len(sent) == 2 * (2 + len(gu.QUICK_EPS_GRID))
    assert {spec.values.size for spec in sent} == {12}
    rows = _read(out / "gowalla-paris-tv-vs-n.csv") + _read(out / "gowalla-paris-tv-vs-eps.csv")
    assert len(rows) == len(sent) and {row["path"] for row in rows} == {"pipeline"}
    paper = [spec for spec in sent if spec.eps is None]
    assert len(paper) == 2 and all(spec.eps0 == gu.PAPER_EPS0 for spec in paper)
    assert {spec.eps for spec in sent if spec.eps is not None} == set(gu.QUICK_EPS_GRID)
    assert "the real pipeline" in output.summary
