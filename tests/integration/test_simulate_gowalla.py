"""`shuffledp simulate --dataset ...`: real check-ins and synthetic specs through the pipeline.

Integration (embedded broker started by simulate, one process per component):
- `simulate --dataset gowalla:<Paris SNAP slice> --region paris --json`: all 1,026 users report
  (n_received == 1,026), k == 192, the true histogram equals the loader's most-recent-check-in
  counts, and the report's simulation section carries the dataset facts and the rule; the text
  report (format_report) prints them;
- `simulate --dataset histogram:... --seed S --json`: the true histogram is exactly the counts.

Without a broker (in-process, nothing is started): the dataset errors of the command line are
one line on stderr with exit code 2, before any process starts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from shuffledp.cli import main
from shuffledp.cli.simulate import format_report
from shuffledp.simulations.data.checkins import CheckInReader, load_checkin_arrays
from shuffledp.simulations.data.datasets import MOST_RECENT_RULE
from shuffledp.simulations.data.regions import PRESETS
from shuffledp.simulations.pipeline.records import RoundLog
from shuffledp.simulations.pipeline.simulate import SimulationOptions
from tests.paths import SHARED_DATA

DATA = SHARED_DATA
PARIS_SNAP = DATA / "gowalla-paris-checkins.txt"


def _simulate_json(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "shuffledp", "simulate", "--json", "--quiet", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@pytest.mark.shared_data
@pytest.mark.integration
def test_simulate_gowalla_paris() -> None:
    report = _simulate_json("--dataset", f"gowalla:{PARIS_SNAP}", "--region", "paris")
    assert report["k"] == 192
    assert report["n_expected"] == report["n_received"] == 1_026
    assert sum(report["histogram"]) == 1_026
    expected = np.bincount(
        load_checkin_arrays(CheckInReader(PARIS_SNAP), PRESETS["paris"]).most_recent_cells(),
        minlength=192,
    )
    assert report["true_histogram"] == expected.tolist()
    assert report["privacy"]["n"] == 1_026
    sim = report["simulation"]
    assert "most recent check-in" in sim["dataset"]
    details = sim["dataset_details"]
    assert details["kind"] == "gowalla" and details["format"] == "snap"
    assert details["rows"] == 17_496 and details["rejected"] == {}
    assert details["outside_region"] == 17_496 - 11_190
    assert details["users"] == 1_026 and details["rule"] == MOST_RECENT_RULE
    assert details["region"].startswith("paris: lat 48.8286..48.8798")
    text = format_report(RoundLog.from_json(report))
    assert "17,496 rows: 17,496 accepted, 0 rejected" in text
    assert "11,190 inside the region, 6,306 outside" in text
    assert f"rule: {MOST_RECENT_RULE}" in text


@pytest.mark.integration
def test_simulate_histogram_spec_is_exact() -> None:
    counts = [6, 0, 3, 2, 9]
    report = _simulate_json("--dataset", "histogram:" + ",".join(map(str, counts)), "--seed", "4")
    assert report["k"] == 5 and report["n_received"] == 20
    assert report["true_histogram"] == counts
    assert report["simulation"]["dataset_details"]["counts"] == counts
    assert "seeded" in report["randomness"]


# --- errors, in-process (no broker, nothing started) -----------------------------------------


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        pytest.param(
            [f"--dataset=gowalla:{PARIS_SNAP}"],
            "gowalla:PATH needs a region",
            marks=pytest.mark.shared_data,  # the file is checked before the region
        ),
        pytest.param(
            [f"--dataset=gowalla:{PARIS_SNAP}", "--region", "paris", "--k", "15"],
            "k = 15 conflicts",
            marks=pytest.mark.shared_data,
        ),
        pytest.param(
            [f"--dataset=gowalla:{PARIS_SNAP}", "--region", "paris", "--n", "2000"],
            "more than the 1,026 users",
            marks=pytest.mark.shared_data,
        ),
        (
            ["--dataset=gowalla:/no/such/file.txt", "--region", "sf"],
            "--dataset /no/such/file.txt: no such file (the Gowalla check-ins: run "
            "`shuffledp data fetch gowalla`, then --dataset gowalla)",
        ),
        (["--dataset", "uniform", "--region", "sf"], "applies to gowalla:PATH only"),
        (["--dataset", "histogram:1,2", "--n", "4"], "n = 4 conflicts"),
        (["--dataset", "zipf:-"], "zipf:S needs a number"),
        (["--dataset", "weibull"], "unknown dataset 'weibull'"),
        (["--dataset=gowalla:x", "--box", "1,2,3,4"], "--box needs --grid"),
        (["--dataset=gowalla:x", "--box", "1,2,3", "--grid", "2x2"], "--box must be"),
        (["--dataset=gowalla:x", "--region", "sf", "--grid", "2by3"], "--grid must be"),
        (["--dataset=gowalla:x", "--region", "rome"], "unknown region 'rome'"),
    ],
)
def test_dataset_errors_are_one_line(
    args: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["simulate", "--quiet", *args])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith("shuffledp simulate: error: ") and err.count("\n") == 1, err
    assert fragment in err


def test_simulation_options_check_the_dataset() -> None:
    paris = PRESETS["paris"]
    options = SimulationOptions(n=None, k=192, dataset="gowalla:x.txt", region=paris)
    assert options.region is paris and options.n is None
    with pytest.raises(ValueError, match="k = 15 conflicts with region paris's 192 cells"):
        SimulationOptions(n=None, dataset="gowalla:x.txt", region=paris)
    with pytest.raises(ValueError, match="n is the dataset's size"):
        _ = options.effective_deadline
    assert SimulationOptions(n=None, k=3, dataset="histogram:1,2,3").n is None
