"""The experiment framework with real worker processes: the local repeater's process pool, a
Dask cluster, a seeded experiment through both, and Ctrl-C on `shuffledp experiment` (the rest:
tests/unit/simulations/test_experiment_framework.py)."""

from __future__ import annotations

import csv
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from shuffledp.randomness import SeededRandom
from shuffledp.simulations.data.datasets import synthetic_values
from shuffledp.simulations.experiments import fig_2
from shuffledp.simulations.experiments.base import ExperimentContext
from shuffledp.simulations.experiments.fastpath import RoundSpec, run_spec
from shuffledp.simulations.experiments.runner import DaskRepeater, LocalRepeater
from tests.conftest import default_sigint
from tests.unit.simulations.test_experiment_framework import _late_square, _sequential


def _fail_on_three(item: int) -> int:
    if item == 3:
        raise ValueError("repetition 3 failed")
    return item


@pytest.mark.parametrize("workers", [1, 2])
def test_local_repeater_returns_results_in_input_order(workers: int) -> None:
    with LocalRepeater(workers, quiet=True) as repeat:
        assert repeat(_late_square, list(range(8)), label="squares") == [i * i for i in range(8)]
        assert repeat(_late_square, [], label="nothing") == []


def test_local_repeater_raises_a_repetitions_exception() -> None:
    with LocalRepeater(2, quiet=True) as repeat, pytest.raises(ValueError, match="repetition 3"):
        repeat(_fail_on_three, list(range(6)), label="failing")


def _specs() -> list[RoundSpec]:
    values = synthetic_values(500, 15, SeededRandom(1))
    return [RoundSpec(values=values, k=15, eps0=4.0, eps=1.0, seed=seed) for seed in (1, 2, 3)]


def test_dask_repeater_matches_the_local_one() -> None:
    """On a LocalCluster (threads in this process): results in input order, and seeded rounds
    identical to the same rounds run locally."""
    import distributed

    api: Any = distributed  # untyped library
    specs = _specs()
    local = LocalRepeater(1, quiet=True)(run_spec, specs, label="local")
    with (
        api.LocalCluster(processes=False, n_workers=1, threads_per_worker=2) as cluster,
        DaskRepeater(cluster.scheduler_address, quiet=True) as repeat,
    ):
        assert repeat(_late_square, list(range(6)), label="squares") == [i * i for i in range(6)]
        remote = repeat(run_spec, specs, label="rounds")
        with pytest.raises(ValueError, match="repetition 3"):
            repeat(_fail_on_three, list(range(5)), label="failing")
    assert remote == local
    assert [r["histogram"] for r in remote] != [local[0]["histogram"]] * 3


def _run_fig2(tmp: Path, seed: int | None, repeat: Any) -> dict[str, list[dict[str, str]]]:
    """fig-2 in quick mode; setting -> its CSV's rows (the CSV text must match too)."""
    tmp.mkdir()
    context = ExperimentContext(
        out=tmp, quick=True, runs=2, seed=seed, pipeline=False, repeat=repeat, quiet=True
    )
    output = fig_2.run(context)
    tables = {}
    for path in output.files:
        if path.suffix == ".csv":
            with open(path, encoding="utf-8") as handle:
                tables[path.stem] = list(csv.DictReader(handle))
    assert sorted(tables) == ["fig-2-amplified", "fig-2-honest", "fig-2-paper"]
    return tables


def test_seeded_experiment_reproduces_exactly_whatever_the_repeater(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--workers 1 (in this process) and 2 (a process pool) give identical CSVs with a seed,
    byte for byte; another seed gives other draws."""
    monkeypatch.setattr(fig_2, "QUICK_NS", (600, 2_000))
    monkeypatch.setattr(fig_2, "_figure", lambda *args: ())  # the CSVs are compared, not PNGs
    first = _run_fig2(tmp_path / "a", 5, LocalRepeater(1, quiet=True))
    with LocalRepeater(2, quiet=True) as repeat:
        again = _run_fig2(tmp_path / "b", 5, repeat)
    other = _run_fig2(tmp_path / "c", 6, _sequential)
    assert first == again
    for name in first:
        assert (tmp_path / "a" / f"{name}.csv").read_bytes() == (
            tmp_path / "b" / f"{name}.csv"
        ).read_bytes()
    assert len(first["fig-2-paper"]) == 2 * 2  # 2 n x 2 runs
    tv_columns = list(fig_2.ESTIMATORS.values())
    for name in first:
        for row_a, row_c in zip(first[name], other[name], strict=True):
            # Independent draws: equal TV distances for all four estimators have negligible
            # probability.
            assert [row_a[c] for c in tv_columns] != [row_c[c] for c in tv_columns]
    # Runs 0 and 1 of one seed are different draws too.
    assert first["fig-2-paper"][0]["tv_shuffle"] != first["fig-2-paper"][1]["tv_shuffle"]


def test_ctrl_c_stops_the_experiment_and_its_worker_processes(tmp_path: Path) -> None:
    """Ctrl-C while the worker processes compute: exit 130 with one line, no traceback, and
    every process the command started is gone."""
    import psutil

    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "shuffledp",
            "experiment",
            "fig-2",
            "--out",
            str(tmp_path),
            "--runs",
            "20",
            "--workers",
            "2",
            "--quiet",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,  # a backgrounded run inherits SIGINT ignored
    )
    try:
        main_process = psutil.Process(process.pid)
        descendants: list[psutil.Process] = []
        deadline = time.monotonic() + 60
        # Wait for the fork server, the resource tracker and the 2 workers.
        while len(descendants) < 4 and time.monotonic() < deadline:
            time.sleep(0.2)
            descendants = main_process.children(recursive=True)
        assert len(descendants) >= 4, descendants
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert stderr.count("\n") == 1 and "interrupted" in stderr
    _, alive = psutil.wait_procs(descendants, timeout=10)
    assert alive == [], [p.cmdline() for p in alive]
