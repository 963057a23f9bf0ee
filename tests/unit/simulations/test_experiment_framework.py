"""The experiment framework: repeaters, seeds, the CLI, the plots (the repeaters' worker
processes, a Dask cluster and Ctrl-C: tests/integration/test_experiment_processes.py)."""

from __future__ import annotations

import re
import socket
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from shuffledp.cli import main
from shuffledp.simulations.experiments import registry
from shuffledp.simulations.experiments.base import (
    ExperimentContext,
    ExperimentError,
    ExperimentOutput,
)
from shuffledp.simulations.experiments.delta_figures import Trace, TracePanel, trace_plot
from shuffledp.simulations.experiments.plots import (
    BOX_MIN_RUNS,
    RunsPanel,
    heat_maps,
    runs_plot,
)
from shuffledp.simulations.experiments.runner import (
    DaskRepeater,
    LocalRepeater,
    repetition_seed,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _late_square(item: int) -> int:
    """item^2, finishing later the smaller the item (so completion order is reversed)."""
    time.sleep(0.02 * (8 - item % 8))
    return item * item


def _sequential(fn: Any, items: Any, *, label: str) -> list[Any]:
    return [fn(item) for item in items]


# --- repeaters ------------------------------------------------------------------------------


def test_local_repeater_validates_workers() -> None:
    with pytest.raises(ValueError, match="workers must be in"):
        LocalRepeater(0)


def test_repetition_seeds_are_reproducible_and_distinct() -> None:
    assert repetition_seed(None, 3, 1) is None
    seeds = [repetition_seed(7, n, run) for n in (1_000, 3_000) for run in range(50)]
    assert seeds == [repetition_seed(7, n, run) for n in (1_000, 3_000) for run in range(50)]
    assert len(set(seeds)) == len(seeds)  # 100 63-bit draws: a collision has prob ~ 5e-16
    assert all(seed is not None and 0 <= seed < 2**63 for seed in seeds)
    assert repetition_seed(8, 1_000, 0) != repetition_seed(7, 1_000, 0)
    with pytest.raises(ValueError, match="seed must be >= 0"):
        repetition_seed(-1, 0)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_dask_repeater_says_when_the_scheduler_is_unreachable() -> None:
    address = f"tcp://127.0.0.1:{_free_port()}"
    with pytest.raises(ExperimentError, match="cannot reach the Dask scheduler") as info:
        DaskRepeater(address, timeout=1.0)
    assert "\n" not in str(info.value)


def test_dask_repeater_says_when_dask_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ExperimentError, match=r"pip install 'shuffledp\[dask\]'"):
        DaskRepeater("tcp://127.0.0.1:8786")


# --- the command line -----------------------------------------------------------------------


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """(exit status, stdout, stderr); argparse's usage errors leave through SystemExit."""
    try:
        code = main(["experiment", *args])
    except SystemExit as exc:
        assert isinstance(exc.code, int), exc.code
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no-such", "--out", "{tmp}"], "unknown experiment 'no-such'; choose one of: "),
        (["fig-2", "--out", "{tmp}", "--runs", "0"], "--runs must be >= 1, got 0"),
        (["fig-2", "--out", "{tmp}", "--workers", "0"], "--workers must be"),
        (["fig-2", "--out", "{tmp}", "--seed", "-2"], "--seed must be"),
        (
            ["fig-2", "--out", "{tmp}", "--data-dir", "{tmp}/none"],
            "--data-dir must be an existing folder",
        ),
        (["fig-2", "--out", "{tmp}/file"], "/file: is a file, a folder is needed"),
        (["fig-2", "--out", "{tmp}/file/sub"], "/file is not a folder"),
    ],
)
def test_cli_usage_errors_are_one_line_with_exit_2(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("x")
    code, out, err = _cli([a.replace("{tmp}", str(tmp_path)) for a in args], capsys)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("shuffledp experiment: error: ")
    assert message in err
    if "unknown experiment" in message:
        for name in [*registry.EXPERIMENTS, "all"]:
            assert name in err


def test_cli_rejects_pipeline_with_dask(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["experiment", "fig-2", "--out", str(tmp_path), "--pipeline", "--dask", "x"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not allowed with argument" in err


def test_cli_bad_dask_address_is_one_line_with_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = _cli(["fig-2", "--out", str(tmp_path), "--dask", "nonsense::"], capsys)
    assert code == 1
    assert err.count("\n") == 1 and "cannot reach the Dask scheduler at 'nonsense::'" in err


def _fake_experiment(context: ExperimentContext) -> ExperimentOutput:
    squares = context.repeat(_late_square, [1, 2, 3], label="fake")
    table = context.out / "fake.csv"
    table.write_text(
        "item,square\n" + "".join(f"{i},{s}\n" for i, s in zip([1, 2, 3], squares, strict=True))
    )
    summary = context.out / "SUMMARY-fake.md"
    summary.write_text(f"# fake\n\nquick={context.quick} seed={context.seed}\n")
    return ExperimentOutput(name="fake", files=(table, summary), summary=summary.read_text())


def test_cli_all_runs_every_experiment_into_its_folder_and_reports_missing_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        registry,
        "EXPERIMENTS",
        {
            "fake-a": ("tests.unit.simulations.test_experiment_framework:_fake_experiment", "a"),
            "missing": ("shuffledp.simulations.experiments.no_such_module:run", "not written"),
            "fake-b": ("tests.unit.simulations.test_experiment_framework:_fake_experiment", "b"),
        },
    )
    code, out, err = _cli(
        ["all", "--out", str(tmp_path), "--quick", "--seed", "3", "--workers", "1", "--quiet"],
        capsys,
    )
    assert code == 1  # one experiment could not run
    assert err.count("\n") == 1 and "missing: not available" in err
    # each experiment's wall time, and the total with how many of them ran
    assert re.search(r"^fake-a: \d+\.\d s$", out, re.MULTILINE)
    assert re.search(r"^all: 2 of 3 experiments in \d+\.\d s \(wall clock\)$", out, re.MULTILINE)
    for name in ("fake-a", "fake-b"):
        folder = tmp_path / name
        assert (folder / "fake.csv").read_text().splitlines()[1:] == ["1,1", "2,4", "3,9"]
        assert "quick=True seed=3" in (folder / "SUMMARY-fake.md").read_text()
        assert f"summary: {folder / 'SUMMARY-fake.md'}" in out
        assert f"  {folder / 'fake.csv'}" in out


# --- plots ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_plots_write_png_and_svg_and_validate_shapes(tmp_path: Path) -> None:
    runs = runs_plot(
        tmp_path / "runs",
        [RunsPanel("(a)", (1e3, 1e4), {"a": [[1.0, 2.0], [3.0]], "b": [[0.5], []]})],
        xlabel="n",
        ylabel="tv",
        title="t",
    )
    curves = trace_plot(
        tmp_path / "curves.png",
        [TracePanel("(a)", (Trace("a", (0.1, 0.5), (1e-3, 0.0), 0, "line"),))],
        xlabel="eps",
        ylabel="delta",
        title="t",
    )
    for png, svg in (runs, curves):
        assert png.suffix == ".png" and svg.suffix == ".svg" and png.stem == svg.stem
        assert png.read_bytes().startswith(PNG_MAGIC) and len(png.read_bytes()) > 1_000
        assert b"<svg" in svg.read_bytes()[:500]
    # the zero of a log axis is reported in the panel, not dropped silently
    assert "1 value(s) 0 or &lt; 1e-300" in curves[1].read_text()
    with pytest.raises(ValueError, match="must have 2 points, got 1"):
        RunsPanel("(a)", (1.0, 2.0), {"a": [[1.0]]})
    with pytest.raises(ValueError, match="has 7 series; at most 6 per panel"):
        RunsPanel("(a)", (1.0,), {str(i): [[1.0]] for i in range(7)})
    with pytest.raises(ValueError, match="has 7 series; at most 6 per panel"):
        TracePanel("(a)", tuple(Trace(str(i), (1.0,), (1.0,), i, "line") for i in range(7)))
    with pytest.raises(ValueError, match="rows \\* columns = 6 cells, got 5"):
        heat_maps(tmp_path / "bad.png", [("p", np.ones(5))], rows=2, columns=3, title="t")


def test_figures_are_reproducible_byte_for_byte(tmp_path: Path) -> None:
    """The same figure saved twice (different folders, a second apart) gives identical PNG and
    SVG bytes: committed figures can be checked by rerunning (matplotlib's SVG otherwise
    carries the date and random element ids)."""
    saved = []
    for folder in ("first", "second"):
        (tmp_path / folder).mkdir()
        panel = RunsPanel("(a)", (1e3, 1e4), {"a": [[1.0, 2.0], [3.0]], "b": [[0.5], [0.7]]})
        saved.append(
            runs_plot(tmp_path / folder / "runs", [panel], xlabel="n", ylabel="tv", title="t")
        )
        time.sleep(1.0)
    for first, second in zip(*saved, strict=True):
        assert first.read_bytes() == second.read_bytes(), first.name


def test_runs_are_points_below_ten_and_boxes_from_ten() -> None:
    """Every run value is drawn (points below BOX_MIN_RUNS: one marker per value; boxes from
    it on), and which form is used depends on the largest run count."""
    from shuffledp.simulations.experiments.figure_style import pyplot
    from shuffledp.simulations.experiments.plots import _draw_runs

    plt = pyplot()
    few = RunsPanel("few", (1e3, 1e4), {"a": [[1.0, 2.0, 3.0], [4.0]], "b": [[1.0], [2.0]]})
    many = RunsPanel("many", (1e3,), {"a": [list(range(1, BOX_MIN_RUNS + 1))]})
    assert few.most_runs == 3 and many.most_runs == BOX_MIN_RUNS
    fig, (left, right) = plt.subplots(1, 2)
    try:
        assert _draw_runs(left, few, logx=True) == 6
        markers = sum(len(line.get_xdata()) for line in left.lines if line.get_marker() != "None")
        assert markers >= 6  # the six values (the legend proxies add empty lines)
        assert not left.patches
        assert _draw_runs(right, many, logx=True) == BOX_MIN_RUNS
        assert len(right.patches) == 1  # one box
    finally:
        plt.close(fig)


def test_per_x0_boxes_need_ten_positive_runs_and_zeros_are_counted_not_drawn() -> None:
    """Table V/VI figures: a box at an x0 only from BOX_MIN_RUNS values above 0 (a run of exactly
    0 cannot be drawn on log y, and quartiles of the rest would misplace the median): that x0
    shows points instead, and the note counts the zeros."""
    from shuffledp.simulations.experiments.figure_style import pyplot
    from shuffledp.simulations.experiments.table_5_plot import _draw

    plt = pyplot()
    full = [float(v) for v in range(1, BOX_MIN_RUNS + 1)]
    with_zeros = [0.0, 0.0, *full[2:]]
    fig, ax = plt.subplots()
    try:
        hidden = _draw(ax, "Gaussian", [1, 3], [full, with_zeros], [1.0, 1.0], 2.0, "Table V")
        assert hidden == 2
        assert len(ax.patches) == 1  # one box: the x0 with ten positive runs
        points = [  # unjoined markers: the runs shown as points (and the box's empty fliers)
            line for line in ax.lines
            if line.get_linestyle() == "None" and line.get_marker() not in ("None", "*")
        ]  # fmt: skip
        assert sum(len(line.get_xdata()) for line in points) == BOX_MIN_RUNS - 2
    finally:
        plt.close(fig)


def test_series_style_is_fixed_per_mechanism_and_colour_blind_safe() -> None:
    from shuffledp.simulations.experiments.figure_style import OKABE_ITO, series_style

    assert series_style("Gaussian (eps = 0.4)") == series_style("Gaussian")
    assert series_style("shuffle+INV").colour != series_style("shuffle").colour
    styles = [series_style(f"other {i}", i) for i in range(6)]
    assert len({s.colour for s in styles}) == 6
    assert all(s.colour in OKABE_ITO for s in styles)


@pytest.mark.slow
def test_heat_map_puts_row_0_south_and_column_0_west(tmp_path: Path) -> None:
    """One hot cell, cell 0 = row 0 (south), column 0 (west): its bright pixels must sit in
    the lower-left quarter of the panel (origin="lower"), never the upper half."""
    import matplotlib.image

    values = np.zeros(2 * 3)
    values[0] = 1.0
    path, _ = heat_maps(tmp_path / "heat.png", [("one cell", values)], rows=2, columns=3, title="t")
    assert path.read_bytes().startswith(PNG_MAGIC)
    image = matplotlib.image.imread(path)
    height, width = image.shape[:2]
    red, green, blue = image[..., 0], image[..., 1], image[..., 2]
    # viridis' top colour is yellow (high red and green, low blue); the colour bar sits at the
    # right, so look at the left 60 % only.
    yellow = (red > 0.8) & (green > 0.8) & (blue < 0.3)
    yellow[:, int(0.6 * width) :] = False
    rows, cols = np.nonzero(yellow)
    assert rows.size > 100
    assert rows.mean() > height / 2  # image rows grow downwards: lower half = south
    assert cols.mean() < 0.35 * width  # west


def test_runs_are_dodged_at_most_max_dodge_and_medians_are_joined_at_the_true_x() -> None:
    """On a log-n axis each series' runs sit within a factor MAX_DODGE of their n (the boxes
    at n = 100 were drawn as far as 55 and 180 before), and the line joining the medians
    passes through the true n, not the dodged positions."""
    import math

    from shuffledp.simulations.experiments.figure_style import pyplot
    from shuffledp.simulations.experiments.plots import MAX_DODGE, _draw_runs, _offsets

    for count in range(1, 7):
        offsets, _ = _offsets((100, 1_000, 10_000, 100_000), count, logx=True)
        assert max(abs(o) for o in offsets) <= math.log10(MAX_DODGE) + 1e-12
        assert len(set(offsets)) == count  # still side by side
    plt = pyplot()
    x = (100.0, 1_000.0, 10_000.0)
    panel = RunsPanel("p", x, {s: [[1.0, 2.0], [3.0], [4.0]] for s in ("a", "b", "c", "d")})
    fig, ax = plt.subplots()
    try:
        _draw_runs(ax, panel, logx=True)
        joined = [line for line in ax.lines if line.get_marker() in ("None", None, "")]
        medians = [tuple(line.get_xdata()) for line in joined if len(line.get_xdata()) == 3]
        assert medians and all(xs == x for xs in medians)
        for line in ax.lines:  # the run markers: within MAX_DODGE of an x
            for value in line.get_xdata():
                assert min(abs(math.log10(value / n)) for n in x) <= math.log10(MAX_DODGE) + 1e-9
    finally:
        plt.close(fig)


def test_every_setting_has_its_legend() -> None:
    """Figure titles that name a setting say what it means (SETTING_MEANINGS covers SETTINGS)."""
    from shuffledp.simulations.experiments.settings import (
        SETTING_MEANINGS,
        SETTINGS,
        setting_legend,
    )

    assert tuple(SETTING_MEANINGS) == SETTINGS
    assert setting_legend("honest") == f"setting 'honest' ({SETTING_MEANINGS['honest']})"


def test_the_printed_formula_is_exactly_zero_on_fig_1s_diagonal() -> None:
    """At eps >= eps0 the printed formula is 0 (settings.printed_delta_hat's proof); Fig. 1's
    cells at eps = eps0 are exact zeros, not 1e-159 (drawn as the map's darkest cells)."""
    from shuffledp.simulations.experiments.delta_points import _literal_decimal
    from shuffledp.simulations.experiments.fig_1 import full_grid

    grid = full_grid()
    diagonal = [(grid.n, grid.k, eps0, grid.nx0, eps0) for eps0 in grid.eps0_values]
    assert len(diagonal) == 30
    assert all(_literal_decimal(point) == "0" for point in diagonal)
