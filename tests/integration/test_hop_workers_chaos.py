"""A peeler and a mixer killed with SIGKILL mid-round and restarted from their journals
(``shuffledp simulate --hop-workers 2 --chaos --chaos-kill STAGE``, every hop process with
``--state-dir``) on Mosquitto with the run's accounts, ACLs and bounds plugin.

Each run kills one process of hop 0 once its progress shows a quarter of what it takes (the
peeler ``hop-0-p0``: a quarter of its share; the mixer ``hop-0``: a quarter of the batch), while
the client processes still send (paced over 2 s, 10 % hostile messages among them), and starts
it again with the same arguments. What must hold:

- the histogram is exactly the one of a round with the same seed and no fault (the same
  clients' k-RR draws; here a one-process cascade, so the comparison is also across W): every
  report counted once, none lost, none twice;
- the analyzer published the report, which it refuses when the chain of signed END statements
  does not verify, and the killed process's log says it resumed from its journal;
- hop 0's rejections are exactly what was injected (a restarted process may see a few of its
  journaled inputs again: only ``duplicate`` may exceed the injected replays).

n = 8,000 in 2 hops: a peeler of hop 0 sends a frame to its mixer every 1,638 reports, so the
mixer holds frames of both peelers when it is killed, and more arrive while it is down.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import require_mosquitto

N = 8000
COMMON = ("--n", str(N), "--k", "5", "--hops", "2", "--seed", "11", "--broker", "mosquitto")


def _simulate(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "shuffledp", "simulate", *COMMON, *args, "--json", "--quiet"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@pytest.fixture(scope="module")
def reference_histogram() -> list[int]:
    """The same seed's round without faults, each hop one process."""
    require_mosquitto()
    report = _simulate()
    assert report["n_received"] == N
    histogram: list[int] = report["histogram"]
    return histogram


def _check(report: dict[str, Any], reference: list[int], stage: str) -> None:
    assert report.get("error") is None
    assert report["n_received"] == N
    assert report["histogram"] == reference
    chaos = report["chaos"]
    killed = chaos["hop_killed"]
    assert killed["stage"] == stage
    assert killed["process_was"] == "running" and killed["restarted"] is True
    assert chaos["rejections_as_expected"] and chaos["all_reports_counted_once"]
    assert chaos["redelivered_duplicates"] >= 0


@pytest.mark.integration
def test_a_peeler_killed_mid_round_resumes_and_every_report_counts_once(
    reference_histogram: list[int],
) -> None:
    report = _simulate("--hop-workers", "2", "--chaos", "--chaos-kill", "hop-0-p0")
    _check(report, reference_histogram, "hop-0-p0")
    assert report["chaos"]["hop_killed"]["last_progress_accepted"] < N // 2  # mid-share
    peeler = report["stages"]["hop-0"]["workers"]["hop-0-p0"]
    assert peeler["journal"]["resumed_inputs"] > 0
    assert peeler["accepted"] == peeler["should_have"] == N // 2


@pytest.mark.integration
def test_the_mixer_killed_mid_round_resumes_and_every_report_counts_once(
    reference_histogram: list[int],
) -> None:
    report = _simulate("--hop-workers", "2", "--chaos", "--chaos-kill", "hop-0")
    _check(report, reference_histogram, "hop-0")
    mixer = report["stages"]["hop-0"]
    assert mixer["journal"]["resumed_items"] > 0  # it held frames when it was killed
    assert mixer["accepted"] == mixer["forwarded"] == N


def test_chaos_kill_names_a_process_of_hop_0() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "shuffledp", "simulate", "--n", "100", "--chaos",
         "--chaos-kill", "hop-0-p2", "--hop-workers", "2", "--broker", "mosquitto", "--quiet"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--chaos-kill must be hop-0 or hop-0-p0..hop-0-p1" in done.stderr
    assert "Traceback" not in done.stderr
