"""The Gowalla experiments' data and arithmetic, on tiny files with known answers (fast tier):
loading, subsets, the sweep's n, Table VI's cells and errors, and the stop without data."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from shuffledp.cli import main
from shuffledp.errors import InvalidParameterError
from shuffledp.simulations.data.fetch import CACHE_ENV, DataMissingError
from shuffledp.simulations.data.regions import PRESETS
from shuffledp.simulations.experiments import fig_4_5, gowalla_rounds, table_6
from shuffledp.simulations.experiments import gowalla_data as gd
from shuffledp.simulations.experiments.base import ExperimentContext, ExperimentError
from shuffledp.simulations.experiments.fastpath import RoundSpec, run_spec
from shuffledp.simulations.experiments.fig_6_7 import n_points
from shuffledp.simulations.experiments.gowalla_data import GOWALLA_EXPERIMENTS
from shuffledp.simulations.experiments.gowalla_rounds import RoundResult
from shuffledp.simulations.experiments.registry import EXPERIMENTS
from shuffledp.simulations.experiments.settings import SettingPrivacy

PARIS = PRESETS["paris"]


def _centre(row: int, column: int) -> tuple[float, float]:
    lat_step = (PARIS.lat_max - PARIS.lat_min) / PARIS.rows
    lon_step = (PARIS.lon_max - PARIS.lon_min) / PARIS.columns
    return PARIS.lat_min + (row + 0.5) * lat_step, PARIS.lon_min + (column + 0.5) * lon_step


#: cell -> individuals: (row 2, col 3) = 35: 6; (row 10, col 12) = 172: 3; (row 0, col 15) = 15:
#: 1; and 2 at the Eiffel Tower (48.8584, 2.2945: row 6, col 1 = cell 97).
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


def test_tiny_file_loads_with_known_counts_rejections_and_points(tmp_path: Path) -> None:
    path = _tiny_file(tmp_path)
    population = gd.load_population(path, PARIS)
    assert population.n == 12 and not population.has_users and population.noun == "rows"
    assert population.inside == 12 and population.outside == 2
    assert population.stats.rows == 15 and population.stats.accepted == 14
    assert dict(population.stats.rejected) == {"bad-latitude": 1}
    counts = population.counts
    assert {int(c): int(counts[c]) for c in np.flatnonzero(counts)} == TINY_COUNTS
    assert "N = 12 rows" in population.describe()
    lat, lon = gd.load_points(path, PARIS)
    assert lat.size == lon.size == 12
    assert sorted(PARIS.cells_of(lat, lon).tolist()) == sorted(population.values.tolist())
    # the cache hands back the same (read-only) population; a changed file is read again
    assert gd.load_population(path, PARIS) is population
    assert not population.values.flags.writeable
    path.write_text(path.read_text(encoding="utf-8") + "48.8584,2.2945\n", encoding="utf-8")
    assert gd.load_population(path, PARIS).n == 13


def test_a_snap_file_gives_one_individual_per_user_their_most_recent_cell(tmp_path: Path) -> None:
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
    population = gd.load_population(path, PARIS)
    assert population.has_users and population.noun == "users"
    assert sorted(population.values.tolist()) == [35, 172]
    assert population.inside == 3 and population.outside == 1
    assert gd.load_points(path, PARIS)[0].size == 3  # the maps show every check-in


def test_a_file_with_no_individual_in_the_region_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "elsewhere.csv"
    path.write_text("10.0,10.0\n11.0,11.0\n", encoding="utf-8")
    with pytest.raises(ExperimentError, match="0 individual"):
        gd.load_population(path, PARIS)


def test_draw_subset_is_a_seeded_subset_without_replacement() -> None:
    population = np.arange(1000, dtype=np.int64) % 7
    labelled = np.arange(1000, dtype=np.int64)
    chosen = gd.draw_subset(labelled, 300, 5)
    assert chosen.size == 300 and np.unique(chosen).size == 300  # no repeats
    assert np.all(np.diff(chosen) > 0)  # population order kept
    assert np.array_equal(chosen, gd.draw_subset(labelled, 300, 5))
    assert not np.array_equal(chosen, gd.draw_subset(labelled, 300, 6))
    assert np.array_equal(gd.draw_subset(population, 1000, 5), population)  # n = N: all
    with pytest.raises(InvalidParameterError, match="n = 1001 is more than the 1000"):
        gd.draw_subset(population, 1001, 5)


def test_the_sweeps_n_are_the_papers_decades_cut_at_the_data() -> None:
    assert gd.SF.ns[0] == 10_000 and gd.SF.ns[-1] == 100_000  # Fig. 6: 10,000 to 100,000
    assert gd.PARIS.ns[0] == 1_000 and gd.PARIS.ns[-1] == 10_000  # Fig. 7: 1,000 to 10,000
    assert n_points(gd.SF.ns, 123_026) == gd.SF.ns
    assert n_points(gd.PARIS.ns, 1_026) == (1_000,)  # the Paris SNAP users: one point
    assert n_points(gd.PARIS.ns, 12) == (12,)  # nothing fits: everyone


def test_table_6_cells_are_the_papers_indices_in_our_row_major_numbering() -> None:
    """The paper's x0 (Table VI) read as 0-based row-major from the south-west."""
    assert gd.SF.table_cells == tuple(range(40, 281, 40))
    assert gd.PARIS.table_cells == tuple(range(20, 141, 20))
    assert {r: tuple(cells) for r, cells in table_6.PUBLISHED.items()} == {
        gd.SF.name: gd.SF.table_cells,
        gd.PARIS.name: gd.PARIS.table_cells,
    }
    sf = PRESETS["sf"]
    assert (sf.columns, sf.rows) == (24, 17)
    # SF cell 40 = row 1, column 16: its centre is in the second band from the south
    lat_lo, lat_hi, lon_lo, lon_hi = sf.cell_bounds(40)
    assert sf.cell_of(0.5 * (lat_lo + lat_hi), 0.5 * (lon_lo + lon_hi)) == 40
    assert math.isclose(lat_lo, sf.lat_min + (sf.lat_max - sf.lat_min) / 17)
    assert math.isclose(lon_lo, sf.lon_min + 16 * (sf.lon_max - sf.lon_min) / 24)


def test_other_readings_of_x0_by_hand() -> None:
    """SF (17 rows x 24 columns), x0 = 40: row 1, column 16 from the south-west; 1-based: 39;
    from the north: row 15 from the south, cell 15 * 24 + 16 = 376; column-major: column 2,
    row 6, cell 6 * 24 + 2 = 146."""
    cells = {r: table_6.read_cell(40, r, 17, 24) for r in table_6.READINGS}
    assert cells == {"ours": 40, "1-based": 39, "from the north": 376, "column-major": 146}
    for reading in table_6.READINGS:  # every reading maps the grid onto itself one to one
        first = 1 if reading == "1-based" else 0
        mapped = {table_6.read_cell(x, reading, 17, 24) for x in range(first, first + 408)}
        assert mapped == set(range(408))


def test_table_6_errors_by_hand() -> None:
    """n = 10 in 4 cells, truth (5, 3, 2, 0). Gaussian noisy counts (6.5, 3, 1, -0.5): errors
    (0.15, 0, 0.1, 0.05); shuffle+INV shares (0.4, 0.3, 0.3, 0): errors (0.1, 0, 0.1, 0)."""
    privacy = SettingPrivacy(
        setting="paper", n=10, k=4, eps0=4.0, eps=4.0, gaussian_delta=1e-6,
        shuffle_delta_upper=0.0, shuffle_delta_lower=0.0, printed_delta=0.0, note="test",
    )  # fmt: skip
    share = np.array([0.25, 0.25, 0.25, 0.25])
    result = RoundResult(
        region="x", run=0, privacy=privacy, truth=np.array([5, 3, 2, 0]),
        shares={"Gaussian": share, "shuffle": share, "shuffle+INV": np.array([0.4, 0.3, 0.3, 0.0]),
                "IBU": share},
        gaussian_noisy=np.array([6.5, 3.0, 1.0, -0.5]), gaussian_sigma=1.0, shuffle_delta=0.0,
        shuffle_delta_lower=0.0, ibu_method="test", randomness="test",
    )  # fmt: skip
    errors = table_6.cell_errors(result)
    np.testing.assert_allclose(errors.gaussian, [0.15, 0.0, 0.1, 0.05], atol=1e-15)
    np.testing.assert_allclose(errors.shuffle_inv, [0.1, 0.0, 0.1, 0.0], atol=1e-15)
    assert result.tv["shuffle+INV"] == pytest.approx(0.1)  # 0.5 * (0.1 + 0 + 0.1 + 0)
    assert result.tv["Gaussian"] == pytest.approx(0.5 * (0.25 + 0.05 + 0.05 + 0.25))


def test_the_gowalla_experiments_are_registered_and_the_old_names_are_gone() -> None:
    assert set(GOWALLA_EXPERIMENTS) <= set(EXPERIMENTS)
    assert GOWALLA_EXPERIMENTS == ("fig-3", "fig-4", "fig-5", "fig-6", "fig-7", "table-6")
    assert not {"gowalla-sf", "gowalla-paris"} & set(EXPERIMENTS)


@pytest.fixture
def no_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache (the variable) and no sibling shared/data slices."""
    cache = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(cache))
    monkeypatch.setattr(gd, "_default_data_dir", lambda: tmp_path / "no-shared-data")
    return cache


@pytest.mark.parametrize("name", GOWALLA_EXPERIMENTS)
def test_without_data_each_experiment_stops_with_one_line_naming_the_fetch_command(
    name: str, no_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = main(["experiment", name, "--quick", "--out", str(out), "--quiet"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == "" and captured.err.count("\n") == 1
    assert "run `shuffledp data fetch gowalla`" in captured.err
    assert not out.exists()  # before any work


def test_without_data_all_strict_stops_before_any_work_naming_fetch_and_the_runnable_ones(
    no_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`all --strict` holds the check-in experiments: with no data nothing runs (exit 2), and the
    one line names the fetch command, --data-dir and the experiments that run without data."""
    out = tmp_path / "out"
    code = main(["experiment", "all", "--quick", "--out", str(out), "--quiet", "--strict"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == "" and captured.err.count("\n") == 1
    assert (
        "nothing was run" in captured.err and "run `shuffledp data fetch gowalla`" in captured.err
    )
    assert "--data-dir DIR" in captured.err
    runnable = [name for name in EXPERIMENTS if name not in GOWALLA_EXPERIMENTS]
    assert runnable and f"run by name ({', '.join(runnable)})" in captured.err
    assert not out.exists()  # before any work


@dataclass(frozen=True)
class _NoFiles:
    files: tuple[Path, ...] = ()


def test_without_data_all_runs_the_others_and_lists_the_skipped_ones_and_why(
    no_data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without --strict, `all` runs every experiment that needs no check-ins (here a stand-in
    that records its name), exit status 0, and ends by listing the skipped ones with the fetch
    command, on stdout and as one warning line on stderr."""
    from shuffledp.simulations.experiments import registry

    ran: list[str] = []

    def load(name: str) -> Any:
        def experiment(context: ExperimentContext) -> _NoFiles:
            ran.append(name)
            return _NoFiles()

        return experiment

    monkeypatch.setattr(registry, "load_experiment", load)
    code = main(["experiment", "all", "--quick", "--out", str(tmp_path / "out"), "--quiet"])
    captured = capsys.readouterr()
    runnable = [name for name in EXPERIMENTS if name not in GOWALLA_EXPERIMENTS]
    assert code == 0 and ran == runnable
    *_, summary, skipped = captured.out.splitlines()
    assert summary.startswith(f"all: {len(runnable)} of {len(runnable)} experiments in ")
    assert summary.endswith(f"; {len(GOWALLA_EXPERIMENTS)} skipped")
    assert skipped.startswith(f"skipped: {', '.join(GOWALLA_EXPERIMENTS)}: ")
    assert "run `shuffledp data fetch gowalla`" in skipped and "--data-dir DIR" in skipped
    assert captured.err.count("\n") == 1 and "--strict makes this an error" in captured.err


def test_a_missing_slice_in_data_dir_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(
        DataMissingError, match=r"gowalla-sf-latlon\.csv does not exist.*--data-dir"
    ):
        gd.find_dataset(gd.SF, None, tmp_path)
    missing = tmp_path / "missing.csv"
    with pytest.raises(DataMissingError, match=f"{missing} does not exist"):
        gd.find_dataset(gd.PARIS, str(missing), None)


@pytest.mark.parametrize("name", ["fig-6", "all"])
def test_an_empty_data_dir_is_bad_input_exit_2_saying_how_to_get_the_data(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Missing check-in data is bad input like any missing file (exit status 2, as elsewhere),
    one line naming the fetch command and --data-dir; nothing runs (all: with --strict)."""
    empty, out = tmp_path / "empty", tmp_path / "out"
    empty.mkdir()
    strict = ["--strict"] if name == "all" else []
    argv = ["experiment", name, "--quick", "--quiet", "--data-dir", str(empty), "--out", str(out)]
    code = main([*argv, *strict])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == "" and captured.err.count("\n") == 1
    assert "--data-dir" in captured.err and "`shuffledp data fetch gowalla`" in captured.err
    assert str(empty / "gowalla-sf-latlon.csv") in captured.err
    assert not out.exists()


@pytest.mark.slow
def test_pipeline_mode_sends_every_round_to_the_pipeline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--pipeline: every round of fig-5 (3 settings x runs) goes to ``run_specs_through_pipeline``
    (replaced here by the fast path: this checks the plumbing), at the setting's eps0 and eps.
    The honest and amplified plans are stand-ins (the accountant at n = 12 takes seconds)."""
    sent: list[RoundSpec] = []

    def plan(request: gowalla_rounds.PlanRequest) -> SettingPrivacy:
        if request.setting == "paper":
            return gowalla_rounds.make_plan(request)
        honest = request.setting == "honest"
        return SettingPrivacy(
            setting=request.setting, n=request.n, k=request.k, eps0=6.0 if honest else 4.0,
            eps=request.eps if honest else 1.0, gaussian_delta=1e-6, shuffle_delta_upper=1e-6,
            shuffle_delta_lower=0.0, printed_delta=None, note="stand-in",
        )  # fmt: skip

    monkeypatch.setattr(fig_4_5, "make_plan", plan)

    def fake_pipeline(specs: list[RoundSpec], **options: Any) -> list[dict[str, Any]]:
        sent.extend(specs)
        return [{**run_spec(spec), "path": "pipeline"} for spec in specs]

    monkeypatch.setattr(gowalla_rounds, "run_specs_through_pipeline", fake_pipeline)
    out = tmp_path / "out"
    out.mkdir()
    context = ExperimentContext(
        out=out, quick=True, runs=2, seed=3, pipeline=True, repeat=_refuse, quiet=True,
        options={"dataset": str(_tiny_file(tmp_path))},
    )  # fmt: skip
    output = fig_4_5.run_paris(context)
    assert len(sent) == 3 * 2 and {spec.values.size for spec in sent} == {12}
    rows = list(csv.DictReader((out / "fig-5.csv").read_text(encoding="utf-8").splitlines()))
    assert len(rows) == 6 and {row["path"] for row in rows} == {"pipeline"}
    # (eps0, eps) of the rounds sent: paper (4, 4), honest (6, 4), amplified (4, 1)
    assert sorted((spec.eps0, spec.eps) for spec in sent) == sorted(
        [(4.0, 4.0), (6.0, 4.0), (4.0, 1.0)] * 2
    )
    assert "the real pipeline" in output.summary


def _refuse(fn: Any, items: Any, *, label: str) -> list[Any]:
    """A repeater for the accountant's plans only: rounds must not come through here."""
    assert "accountant" in label, label
    return [fn(item) for item in items]


def test_dataset_is_refused_for_experiments_that_do_not_read_check_ins(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`all` holds experiments without check-ins: --dataset is a usage error (exit 2, one line
    naming the Gowalla experiments), before anything runs."""
    path = _tiny_file(tmp_path)
    out = tmp_path / "out"
    code = main(["experiment", "all", "--quick", "--out", str(out), "--dataset", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "--dataset applies to the Gowalla experiments only" in err
    assert all(name in err for name in GOWALLA_EXPERIMENTS)
    assert not out.exists()
