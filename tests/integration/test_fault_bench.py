"""The fault bench at n = 2,000 (bench/faults.py --quick; shuffledp/simulations/faults): every
scenario of issue 13's table, run once against real processes and Mosquitto.

For every row, whatever today's code does: the fault was injected, and ``counted + lost ==
sent`` with no place where a report was created (lost is read along the stage logs and ends at
the analyzer's ``n_received``, counted is the sum of the report's histogram: the two agree only
if the published report agrees with itself). The verdict must be OK; the scenarios where today's
code still loses reports are marked ``xfail(strict=True)``, so that when the mechanisms of issue
13 land each flips to an unexpected pass and is noticed (then drop its mark); ``plain`` loses
reports in most runs but not in all, so its mark is not strict.

Each scenario runs once (cached for the two tests that read its row); every stage has a
--deadline of 12 s, so a scenario that loses reports waits that long for them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from shuffledp.simulations.faults.records import FaultRow
from shuffledp.simulations.faults.runner import run_scenario
from shuffledp.simulations.faults.scenarios import SCENARIOS
from tests.conftest import require_mosquitto

N = 2_000
DEADLINE = 12.0

#: Scenarios that lose reports today, and how (the rows of `bench/faults.py --quick`).
LOSING_TODAY = {
    "pause-hop0": "hop 0 paused 1 s on a plain Mosquitto: half the round dropped, exit 0",
    "stall-hop0": "hop 0 closes on its deadline before reading its inbox: silent loss",
    "broker-restart": "a broker without persistence loses what it held for hop 0: silent loss",
    "takeover": "a client account takes over hop 0's session: reports lost, or hop 0 crashes",
    "fill-round": "one client-process key fills the round (1,000,000 enrolled per process)",
    "kill-client": "hop 0 waits out its deadline and publishes a smaller round with exit 0",
}

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


#: Losing today, but not always at n = 2,000: their xfail cannot be strict (an XPASS is shown).
SOMETIMES_LOSING_TODAY = {
    "plain": "hop 0's backlog on a plain Mosquitto crosses its default queue of 1000 or not: "
    "0-400 of 2,000 lost in the runs measured (0 in 1 run of 6)",
}


def verdict_param(name: str) -> Any:
    if name in LOSING_TODAY:
        return pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=LOSING_TODAY[name]))
    if name in SOMETIMES_LOSING_TODAY:
        reason = SOMETIMES_LOSING_TODAY[name]
        return pytest.param(name, marks=pytest.mark.xfail(strict=False, reason=reason))
    return name


@pytest.mark.integration
@pytest.mark.parametrize("name", [verdict_param(name) for name in SCENARIOS])
def test_every_report_counted_once_or_the_loss_is_loud(name: str) -> None:
    row = row_of(name)
    assert row.verdict == "OK", row.to_json()
