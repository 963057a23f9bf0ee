"""A round whose hops are W = 2 peelers and a mixer each, as separate processes on Mosquitto
with the run's accounts, ACLs and bounds plugin (``shuffledp simulate --hop-workers 2``): every
report sent is counted once (n_received == n, nothing rejected, the chain of signed END
statements verified by the analyzer, which otherwise refuses the round), and the hops' logs
carry each peeler's counts, which add up to the batch."""

from __future__ import annotations

import asyncio

from shuffledp.simulations.pipeline.simulate import SimulationOptions, run_simulation
from tests.conftest import require_mosquitto


def test_round_with_two_peelers_per_hop_counts_every_report() -> None:
    require_mosquitto()  # simulate starts its own Mosquitto with the run's accounts
    n = 600
    options = SimulationOptions(n=n, hops=2, broker="mosquitto", hop_workers=2, seed=5)
    report = asyncio.run(run_simulation(options))
    assert report.get("error") is None
    assert report["n_received"] == n
    assert not any(report["rejected"].values())
    for hop in ("hop-0", "hop-1"):
        log = report["stages"][hop]
        assert log["hop_workers"] == 2
        took = [log["workers"][f"{hop}-p{p}"]["accepted"] for p in range(2)]
        assert sum(took) == log["accepted"] == n
