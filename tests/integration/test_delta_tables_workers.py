"""The delta experiments give the same files whatever the number of worker processes:
every point is computed independently and the results come back in the order of the points."""

from __future__ import annotations

from pathlib import Path

import pytest

from shuffledp.simulations.experiments import load_experiment
from shuffledp.simulations.experiments.base import ExperimentContext
from shuffledp.simulations.experiments.runner import LocalRepeater


def _csv_bytes(name: str, out: Path, workers: int) -> bytes:
    out.mkdir()
    with LocalRepeater(workers, quiet=True) as repeater:
        context = ExperimentContext(
            out=out, quick=True, runs=None, seed=2026, pipeline=False, repeat=repeater
        )
        load_experiment(name)(context)
    return (out / f"{name}.csv").read_bytes()


@pytest.mark.parametrize("name", ["fig-1"])
def test_one_and_two_workers_write_identical_csvs(name: str, tmp_path: Path) -> None:
    one = _csv_bytes(name, tmp_path / "one", 1)
    two = _csv_bytes(name, tmp_path / "two", 2)
    assert one == two and one.count(b"\n") > 20
