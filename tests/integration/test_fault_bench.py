"""The fault bench at n = 2,000 (bench/faults.py --quick; shuffledp/simulations/faults): every
scenario of issue 13's table, run once against real processes and Mosquitto.

For every row, whatever today's code does: the fault was injected, and ``counted + lost ==
sent`` with no place where a report was created (lost is read along the stage logs and ends at
the analyzer's ``n_received``, counted is the sum of the report's histogram: the two agree only
if the published report agrees with itself). The verdict must be OK in every row: every report
counted exactly once, or (a client process killed before handing its reports to the broker, a
corrupt journal) a non-zero exit whose one line names the loss. Before the delivery receipts,
the journal head checksums, the secret stage client ids and the exact enrolment, seven of the
eleven rows lost reports with exit status 0 (docs/faults.md, "Fault bench").

Each scenario runs once (cached for the two tests that read its row); every stage has a
--deadline of 12 s, so a scenario that loses reports waits that long for them.
"""

from __future__ import annotations

import asyncio

import pytest

from shuffledp.simulations.faults.records import FaultRow
from shuffledp.simulations.faults.runner import run_scenario
from shuffledp.simulations.faults.scenarios import SCENARIOS
from tests.conftest import require_mosquitto

N = 2_000
DEADLINE = 12.0

_rows: dict[str, FaultRow] = {}


def row_of(name: str) -> FaultRow:
    """Scenario ``name`` at n = 2,000, run once per test session."""
    if name not in _rows:
        require_mosquitto()
        _rows[name] = asyncio.run(run_scenario(name, n=N, deadline=DEADLINE, quick=True))
        print(f"{name}: {_rows[name].to_json()}")  # shown with -s or on failure
    return _rows[name]


@pytest.mark.integration
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_row_accounts_for_every_report(name: str) -> None:
    row = row_of(name)
    assert row.notes.get("injected") is True, row.notes
    assert row.sent == N
    assert row.counted + row.lost == row.sent, row.to_json()
    assert all(count > 0 for count in row.lost_at.values()), row.lost_at  # none created
    assert row.lost == 0 or row.verdict == "FAIL" or row.exit_status != 0 or row.other_exits


@pytest.mark.integration
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_report_counted_once_or_the_loss_is_loud(name: str) -> None:
    row = row_of(name)
    assert row.verdict == "OK", row.to_json()
