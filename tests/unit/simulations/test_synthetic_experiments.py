"""`fig-2` and `table-5` (synthetic N(0, 2) data, k = 15, eps = 4) in --quick mode: the files
they write, and their numbers against known facts (the Gaussian's sigma is the exact analytic
calibration at the stated (eps, delta); the honest eps0 is the largest meeting (4, 1e-6) with the
tight accountant; TV decreases in n; the Gaussian's per-x0 errors are |N(0, sigma^2)| / n)."""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from shuffledp.accountant import ShuffledKRR, Tight, eps_for_delta
from shuffledp.analyzer.baseline import analytic_gaussian_sigma
from shuffledp.simulations.experiments import (
    fig_2,
    figure_style,
    plots,
    synthetic_common,
    table_5,
)
from shuffledp.simulations.experiments.base import ExperimentContext, ExperimentOutput
from shuffledp.simulations.experiments.fastpath import run_spec

pytestmark = pytest.mark.slow  # each experiment takes a few seconds (the accountant per n)

SETTINGS = ("paper", "honest", "amplified")
SEED = 3


def _sequential(fn: Callable[[Any], Any], items: Any, *, label: str) -> list[Any]:
    return [fn(item) for item in items]


def _context(out: Path, *, pipeline: bool = False, runs: int | None = None) -> ExperimentContext:
    out.mkdir(parents=True, exist_ok=True)
    return ExperimentContext(
        out=out, quick=True, runs=runs, seed=SEED, pipeline=pipeline, repeat=_sequential,
        quiet=True,
    )  # fmt: skip


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


#: What a figure drew, per panel: (panel title, line label, x, y) and the legend's texts.
Drawn = tuple[list[tuple[str, str, list[float], list[float]]], dict[str, list[str]]]


@pytest.fixture(scope="module")
def fig2_drawn() -> dict[str, Drawn]:
    """Filled by ``fig2``: every figure it saved, by file stem."""
    return {}


@pytest.fixture(scope="module")
def fig2(
    tmp_path_factory: pytest.TempPathFactory, fig2_drawn: dict[str, Drawn]
) -> tuple[ExperimentOutput, Path]:
    out = tmp_path_factory.mktemp("fig-2")
    save = figure_style.save_figure  # what plots calls (it imports it)

    def recording(fig: Any, path: Path) -> tuple[Path, Path]:
        axes = [ax for ax in fig.axes if ax.get_title()]
        lines = [
            (ax.get_title(), str(line.get_label()), [*map(float, line.get_xdata())],
             [*map(float, line.get_ydata())])
            for ax in axes for line in ax.get_lines()
        ]  # fmt: skip
        legends = {
            ax.get_title(): [text.get_text() for text in ax.get_legend().get_texts()]
            for ax in axes
            if ax.get_legend() is not None
        }
        fig2_drawn[Path(path).stem] = (lines, legends)
        return save(fig, path)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plots, "save_figure", recording)
        return fig_2.run(_context(out)), out


@pytest.fixture(scope="module")
def table5(tmp_path_factory: pytest.TempPathFactory) -> tuple[ExperimentOutput, Path]:
    out = tmp_path_factory.mktemp("table-5")
    return table_5.run(_context(out)), out


def test_fig2_writes_one_csv_and_figure_per_setting(fig2: tuple[ExperimentOutput, Path]) -> None:
    output, out = fig2
    names = {path.name for path in output.files}
    for setting in SETTINGS:
        assert {f"fig-2-{setting}.csv", f"fig-2-{setting}.png", f"fig-2-{setting}.svg"} <= names
        rows = _rows(out / f"fig-2-{setting}.csv")
        assert tuple(rows[0]) == fig_2.COLUMNS
        keys = sorted((int(r["n"]), int(r["run"])) for r in rows)
        assert keys == sorted((n, r) for n in fig_2.QUICK_NS for r in range(fig_2.QUICK_RUNS))
        for row in rows:
            assert row["setting"] == setting and row["path"] == "fast"
            assert int(row["n_received"]) == int(row["n"])
            assert row["randomness"].startswith("seeded-pcg64 from seed ")
            for column in fig_2.ESTIMATORS.values():
                assert 0.0 <= float(row[column]) <= 1.0
    assert (out / "SUMMARY-fig-2.md").read_text(encoding="utf-8") == output.summary
    assert f"seeded from --seed {SEED}" in output.summary


def _check_sigma_and_summary(rows: list[dict[str, str]], summary: str) -> None:
    """sigma = the exact analytic calibration at the row's (eps, gaussian_delta), and the summary
    states that (eps, delta) and sigma."""
    for row in rows:
        eps, delta = float(row["eps"]), float(row["gaussian_delta"])
        exact = analytic_gaussian_sigma(eps, delta)
        assert float(row["gaussian_sigma"]) == pytest.approx(exact, rel=1e-8)
        assert f"({eps:.4g}, {delta:.3g}) | {float(row['gaussian_sigma']):.4g}" in summary


def test_fig2_overlays_the_papers_quoted_tv_values_with_a_legend_entry(
    fig2: tuple[ExperimentOutput, Path], fig2_drawn: dict[str, Drawn]
) -> None:
    """Both panels of every setting's figure draw the TV values the paper quotes in its
    Section V.C (Biswas, Jung, Palamidessi, FPS 2023, the text on Fig. 2: Gaussian and
    shuffle+INV at n = 1,000 and 100,000), exactly, at their n, each series named in the
    legend."""
    quoted = {
        "Gaussian": [(1_000.0, 0.014), (100_000.0, 0.0001)],
        "shuffle+INV": [(1_000.0, 0.026), (100_000.0, 0.0048)],
    }
    expected = {f"{label}: paper, Sec. V.C": points for label, points in quoted.items()}
    for setting in SETTINGS:
        lines, legends = fig2_drawn[f"fig-2-{setting}"]
        for title in ("(a) all estimators", "(b) Gaussian and shuffle+INV"):
            stars = {
                label: list(zip(x, y, strict=True))
                for panel, label, x, y in lines
                if panel == title and "paper" in label
            }
            assert stars == expected, (setting, title)
        assert set(expected) <= set(legends["(a) all estimators"])


def test_fig2_gaussian_sigma_is_the_analytic_calibration_the_summary_states(
    fig2: tuple[ExperimentOutput, Path],
) -> None:
    output, out = fig2
    for setting in SETTINGS:
        _check_sigma_and_summary(_rows(out / f"fig-2-{setting}.csv"), output.summary)


def test_fig2_paper_setting_is_eps0_eq_eps_with_the_printed_formula_at_zero(
    fig2: tuple[ExperimentOutput, Path],
) -> None:
    """eps0 = eps = 4; the printed delta_hat is 0 (eps >= eps0), so the Gaussian gets 1e-6 and
    the summary says so; the shuffle's valid delta at eps = eps0 is exactly 0."""
    output, out = fig2
    for row in _rows(out / "fig-2-paper.csv"):
        assert float(row["eps0"]) == float(row["eps"]) == 4.0
        assert float(row["printed_delta"]) == 0.0
        assert float(row["gaussian_delta"]) == 1e-6
        assert float(row["shuffle_delta_upper"]) == float(row["shuffle_delta_lower"]) == 0.0
    assert "the printed formula gives delta = 0 here" in output.summary
    assert "we assume 1e-06" in output.summary


def _check_honest_eps0(n: int, eps0: float) -> None:
    """eps0 meets (4, 1e-6) with the tight delta_upper; eps0 * (1 + 1e-6) does not."""
    tight = Tight()
    assert tight.delta(ShuffledKRR(n=n, k=15, eps0=eps0), 4.0).delta_upper <= 1e-6
    larger = ShuffledKRR(n=n, k=15, eps0=eps0 * (1 + 1e-6))
    assert tight.delta(larger, 4.0).delta_upper > 1e-6


def test_fig2_honest_eps0_is_the_largest_meeting_the_target(
    fig2: tuple[ExperimentOutput, Path],
) -> None:
    _, out = fig2
    rows = _rows(out / "fig-2-honest.csv")
    eps0 = {int(r["n"]): float(r["eps0"]) for r in rows}
    for n, value in eps0.items():
        _check_honest_eps0(n, value)
    for row in rows:
        assert float(row["eps"]) == 4.0 and float(row["gaussian_delta"]) == 1e-6
        assert float(row["shuffle_delta_upper"]) <= 1e-6
    ns = sorted(eps0)
    assert [eps0[n] for n in ns] == sorted(eps0.values())  # more users, more amplification


def test_fig2_amplified_gaussian_is_at_the_shuffles_tight_eps(
    fig2: tuple[ExperimentOutput, Path],
) -> None:
    _, out = fig2
    expected = {
        n: float(eps_for_delta(Tight(), ShuffledKRR(n=n, k=15, eps0=4.0), 1e-6).eps)
        for n in fig_2.QUICK_NS
    }
    for row in _rows(out / "fig-2-amplified.csv"):
        assert float(row["eps0"]) == 4.0
        assert float(row["eps"]) == pytest.approx(expected[int(row["n"])], rel=1e-12)
        assert 0.0 < float(row["eps"]) < 4.0
        assert float(row["shuffle_delta_upper"]) <= 1e-6


def test_fig2_tv_decreases_in_n(fig2: tuple[ExperimentOutput, Path]) -> None:
    """Medians over the quick runs (5) of shuffle+INV's and the Gaussian's TV fall strictly from
    each n to the next (100, 1,000, 100,000). False-alarm rate: log TV of shuffle+INV is close to
    normal with sd <= 0.26 at every n (100 runs of the full grid, seed 2026); between adjacent
    quick n its mean falls by >= 1.1, so a median of 5 runs (sd ~0.54 of one run's) crosses the
    next one with z >= 6, probability < 1e-8 per comparison (the Gaussian's margin is larger)."""
    _, out = fig2
    for setting in SETTINGS:
        rows = _rows(out / f"fig-2-{setting}.csv")
        for column in ("tv_shuffle_inv", "tv_gaussian"):
            medians = [
                statistics.median(float(r[column]) for r in rows if int(r["n"]) == n)
                for n in fig_2.QUICK_NS
            ]
            assert medians == sorted(medians, reverse=True), (setting, column, medians)
            assert len(set(medians)) == len(medians)


def test_fig2_paper_and_amplified_share_the_shuffled_round(
    fig2: tuple[ExperimentOutput, Path],
) -> None:
    """Both run k-RR at eps0 = 4 on the same data: identical shuffle, shuffle+INV and IBU; only
    the Gaussian differs (another (eps, delta))."""
    _, out = fig2
    paper, amplified = _rows(out / "fig-2-paper.csv"), _rows(out / "fig-2-amplified.csv")
    for a, b in zip(paper, amplified, strict=True):
        for column in ("tv_shuffle", "tv_shuffle_inv", "tv_ibu"):
            assert a[column] == b[column]
        assert a["tv_gaussian"] != b["tv_gaussian"]


def test_fig2_paper_and_honest_share_the_gaussian_release(
    fig2: tuple[ExperimentOutput, Path],
) -> None:
    """Both put the Gaussian at (4, 1e-6) on the same data: one release, the same TV per run;
    their shuffles differ (eps0 4 vs calibrated)."""
    _, out = fig2
    paper, honest = _rows(out / "fig-2-paper.csv"), _rows(out / "fig-2-honest.csv")
    for a, b in zip(paper, honest, strict=True):
        assert a["tv_gaussian"] == b["tv_gaussian"]
        assert a["tv_shuffle_inv"] != b["tv_shuffle_inv"]


def test_table5_writes_its_tables_with_the_published_values(
    table5: tuple[ExperimentOutput, Path],
) -> None:
    output, out = table5
    names = {path.name for path in output.files}
    for setting in SETTINGS:
        assert {f"table-5-{setting}.csv", f"table-5-{setting}-runs.csv"} <= names
        table = _rows(out / f"table-5-{setting}.csv")
        assert tuple(table[0]) == table_5.COLUMNS
        assert [(int(r["n"]), int(r["x0"])) for r in table] == [
            (n, x0) for n in table_5.NS for x0 in table_5.X0S
        ]
        for row in table:
            assert int(row["runs"]) == table_5.QUICK_RUNS
            assert int(row["bin"]) == int(row["x0"]) - 1
            published = table_5.PUBLISHED[int(row["x0"])]
            pair = published[:2] if int(row["n"]) == 1_000 else published[2:]
            assert (float(row["published_gaussian"]), float(row["published_shuffle_inv"])) == pair
            for name in table_5.SERIES:
                q25, median, q75 = (float(row[f"{name}_{s}"]) for s in ("q25", "median", "q75"))
                assert 0.0 <= q25 <= median <= q75 <= 1.0
        runs = _rows(out / f"table-5-{setting}-runs.csv")
        assert len(runs) == len(table_5.NS) * table_5.QUICK_RUNS * len(table_5.X0S)
    for x0 in table_5.X0S:  # every x0 has its row, with the published pair, in every setting
        assert output.summary.count(f"\n| {x0} | ") >= len(SETTINGS)


def test_table5_x0_1_is_the_lower_tail_bin(table5: tuple[ExperimentOutput, Path]) -> None:
    """The documented bin mapping: x0 = 1 is bin 0, the lower tail (p = 0.0047 + sampling)."""
    _, out = table5
    rows = {(int(r["n"]), int(r["x0"])): r for r in _rows(out / "table-5-paper.csv")}
    tail = float(rows[(100_000, 1)]["pi_x0"])
    assert tail == pytest.approx(0.00474, abs=0.0005)
    assert tail < float(rows[(100_000, 7)]["pi_x0"]) / 20


def test_table5_gaussian_errors_are_half_normal_at_the_stated_sigma(
    table5: tuple[ExperimentOutput, Path],
) -> None:
    """Per setting and n, the Gaussian's raw errors * n / sigma over every run and x0 (70
    independent |N(0, 1)| draws) pass a Kolmogorov-Smirnov test against the half-normal at
    level 1e-4 (false-alarm rate 1e-4 per test, 6 tests); sigma is the exact calibration."""
    _, out = table5
    for setting in SETTINGS:
        cells = _rows(out / f"table-5-{setting}-runs.csv")
        for n in table_5.NS:
            picked = [c for c in cells if int(c["n"]) == n]
            scaled = []
            for cell in picked:
                sigma = float(cell["gaussian_sigma"])
                exact = analytic_gaussian_sigma(float(cell["eps"]), float(cell["gaussian_delta"]))
                assert sigma == pytest.approx(exact, rel=1e-8)
                scaled.append(float(cell["gaussian"]) * n / sigma)
            assert stats.kstest(scaled, stats.halfnorm.cdf).pvalue > 1e-4, (setting, n)


def test_table5_summary_states_each_gaussians_guarantee_and_sigma(
    table5: tuple[ExperimentOutput, Path],
) -> None:
    output, out = table5
    for setting in SETTINGS:
        for row in _rows(out / f"table-5-{setting}.csv"):
            eps, delta = float(row["eps"]), float(row["gaussian_delta"])
            sigma = float(row["gaussian_sigma"])
            assert sigma == pytest.approx(analytic_gaussian_sigma(eps, delta), rel=1e-8)
            stated = f"n = {int(row['n']):,}: eps0 = {float(row['eps0']):.4g}, Gaussian at "
            stated += f"(eps, delta) = ({eps:.4g}, {delta:.3g}), sigma = {sigma:.4g}."
            assert stated in output.summary


def test_table5_paper_delta_per_x0_and_honest_eps0(table5: tuple[ExperimentOutput, Path]) -> None:
    _, out = table5
    for cell in _rows(out / "table-5-paper-runs.csv"):
        assert float(cell["eps0"]) == float(cell["eps"]) == 4.0
        assert float(cell["gaussian_delta"]) == 1e-6  # printed formula 0 at eps >= eps0
    honest = {int(c["n"]): float(c["eps0"]) for c in _rows(out / "table-5-honest-runs.csv")}
    for n, eps0 in honest.items():
        _check_honest_eps0(n, eps0)


def test_pipeline_mode_sends_both_rounds_of_every_point_and_matches_the_fast_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--pipeline: every (n, run) sends its two rounds (eps0 = 4 and the honest eps0) to
    ``run_specs_through_pipeline`` (run for real in tests/integration/test_fastpath_pipeline.py;
    replaced here by the fast path, so this checks the plumbing); with the same seeds every
    number equals the fast path's, only ``path`` differs."""
    sent: list[Any] = []

    def fake_pipeline(specs: list[Any], **options: Any) -> list[dict[str, Any]]:
        sent.extend(specs)
        return [{**run_spec(spec), "path": "pipeline"} for spec in specs]

    ns = (600, 900)
    _, fast = synthetic_common.run_points(_context(tmp_path), "fig-2", ns, 1, per_x0=True)
    monkeypatch.setattr(synthetic_common, "run_specs_through_pipeline", fake_pipeline)
    pipeline_context = _context(tmp_path, pipeline=True)
    _, pipe = synthetic_common.run_points(pipeline_context, "fig-2", ns, 1, per_x0=True)
    assert len(sent) == 2 * 2  # 2 n x 1 run x 2 rounds
    assert [spec.eps0 for spec in sent[0::2]] == [4.0, 4.0]
    assert all(spec.eps0 > 4.0 and spec.eps == 4.0 for spec in sent[1::2])
    assert [spec.values.size for spec in sent] == [600, 600, 900, 900]
    assert [row["path"] for row in pipe] == ["pipeline"] * len(fast)
    assert [{**row, "path": "fast"} for row in pipe] == fast
    assert "the real pipeline" in synthetic_common.path_text(pipeline_context)


def test_unseeded_runs_draw_fresh_data(tmp_path: Path) -> None:
    """Without --seed every run is a fresh draw (OS CSPRNG) and the summary says so."""
    context = ExperimentContext(
        out=tmp_path, quick=True, runs=2, seed=None, pipeline=False, repeat=_sequential,
        quiet=True,
    )  # fmt: skip
    point = synthetic_common.Point(plan=synthetic_common.plan_for(300), run=0, seed=None)
    first, second = (synthetic_common.run_point(point) for _ in range(2))
    assert first[0]["true_count_per_x0"] != second[0]["true_count_per_x0"]
    assert "OS CSPRNG" in synthetic_common.randomness_text(context)
    assert not math.isnan(float(np.mean(first[0]["inv_error_per_x0"])))
