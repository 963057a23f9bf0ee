"""Whole rounds with every hop as W peelers and a mixer (shuffler/workers.py, shuffler/mixer.py)
over the in-memory broker: clients, 3 hops of W processes each, the analyzer.

What is checked (invariants, no statistics: k-RR and the mixers' permutations are seeded):
- every report is counted exactly once: the analyzer's histogram is exactly the histogram of the
  client processes' seeded k-RR draws, nothing rejected, nothing lost, and the chain of signed
  END statements verifies (the analyzer refuses a round whose chain breaks);
- each mixer's statement says what its peelers accepted (their logs under ``workers``);
- a peeler that crashes mid-round (cancelled) leaves its mixer without its END: the mixer
  refuses the round at its deadline naming it;
- a peeler whose share falls short ends at its deadline saying what it lacks; its mixer refuses
  the round with the loss's line naming that peeler, every later hop stops on the aborted END
  and the analyzer publishes no histogram.

The frames are made small (4 KiB) so that each peeler of a later hop takes several frames of
its upstream's batch (the share by frame number).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import numpy as np
import pytest

from shuffledp.analyzer.service import AnalyzerSettings, run_analyzer
from shuffledp.clients.service import ClientSettings, run_clients
from shuffledp.protocol.transport import MemoryBroker
from shuffledp.randomness import SeededRandom
from shuffledp.shuffler.mixer import run_mixer
from shuffledp.shuffler.workers import PeelerSettings, run_peeler
from tests.binding import MANIFEST_DIGEST, analyzer_binding
from tests.unit.test_services_memory import (
    ANALYZER,
    EPS0,
    HOP_PUBLIC,
    HOPS,
    PREFIX,
    H,
    K,
    expected_histogram,
    hop_settings,
    values_for,
)

SMALL_FRAME = 4096


@pytest.fixture(autouse=True)
def small_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shuffledp.protocol.stage.DRAIN_QUIET", 0.2)
    monkeypatch.setattr("shuffledp.shuffler.workers.FRAME_BYTES", SMALL_FRAME)
    monkeypatch.setattr("shuffledp.shuffler.mixer.FRAME_BYTES", SMALL_FRAME)


def worker_stages(
    broker: MemoryBroker,
    *,
    round_id: int,
    shares: list[int],
    deadline: float = 30.0,
    skip: str | None = None,
) -> dict[str, Coroutine[Any, Any, Any]]:
    """Every hop's peelers and mixer, and the analyzer (``skip``: a stage left out)."""
    n, workers = sum(shares), len(shares)
    stages: dict[str, Coroutine[Any, Any, Any]] = {}
    for j in range(H):
        mixer = hop_settings(j, round_id=round_id, expected_size=n, deadline=deadline)
        stages[f"hop-{j}"] = run_mixer(
            broker.connect(), mixer, workers, HOPS[j].private, rng=SeededRandom(50 + j)
        )
        for p in range(workers):
            size = shares[p] if j == 0 else n
            hop = hop_settings(j, round_id=round_id, expected_size=size, deadline=deadline)
            peeler = PeelerSettings(hop=hop, workers=workers, worker=p)
            stages[f"hop-{j}-p{p}"] = run_peeler(broker.connect(), peeler, HOPS[j].private)
    analyzer = AnalyzerSettings(
        prefix=PREFIX,
        round_id=round_id,
        k=K,
        eps0=EPS0,
        n_hops=H,
        n_expected=n,
        deadline=deadline,
        **analyzer_binding(H),
    )
    stages["analyzer"] = run_analyzer(broker.connect(), analyzer, ANALYZER.private)
    if skip is not None:
        stages.pop(skip).close()
    return stages


def client_stage(
    broker: MemoryBroker, values: np.ndarray[Any, Any], *, round_id: int, index: int, peeler: int
) -> Coroutine[Any, Any, dict[str, Any]]:
    settings = ClientSettings(
        prefix=PREFIX,
        round_id=round_id,
        k=K,
        eps0=EPS0,
        manifest_digest=MANIFEST_DIGEST,
        name=f"clients-{index}",
        peeler=peeler,
    )
    return run_clients(
        broker.connect(),
        settings,
        values,
        hop_public_keys=HOP_PUBLIC,
        analyzer_public_key=ANALYZER.public,
        rng=SeededRandom(1000 + index),
    )


async def run_all(stages: dict[str, Coroutine[Any, Any, Any]]) -> dict[str, Any]:
    results: dict[str, Any] = {}

    async def one(name: str, stage: Coroutine[Any, Any, Any]) -> None:
        results[name] = await stage

    async with asyncio.timeout(60), asyncio.TaskGroup() as group:
        for name, stage in stages.items():
            group.create_task(one(name, stage), name=name)
    return results


@pytest.mark.parametrize("workers", [2, 4])
def test_round_with_hop_workers_counts_every_report_once(workers: int) -> None:
    broker = MemoryBroker()
    n_per = 150
    values = [values_for(n_per) for _ in range(workers)]
    shares = [n_per] * workers
    stages = worker_stages(broker, round_id=7, shares=shares)
    for p in range(workers):
        stages[f"clients-{p}"] = client_stage(broker, values[p], round_id=7, index=p, peeler=p)
    results = asyncio.run(run_all(stages))
    report = results["analyzer"]
    expected = np.sum([expected_histogram(values[p], 1000 + p) for p in range(workers)], axis=0)
    assert report["n_received"] == n_per * workers
    assert report["histogram"] == [int(c) for c in expected]
    assert not any(report["rejected"].values())
    for j in range(H):
        mixer = results[f"hop-{j}"]
        assert mixer.refused is None
        assert mixer.log["accepted"] == mixer.log["forwarded"] == n_per * workers
        took = [mixer.log["workers"][f"hop-{j}-p{p}"]["accepted"] for p in range(workers)]
        assert sum(took) == n_per * workers
        if j > 0:  # the upstream's frames were shared out: every peeler took some
            assert all(t > 0 for t in took)


def test_a_short_peeler_is_named_by_its_mixer_and_the_round_refused() -> None:
    broker = MemoryBroker()
    # peeler 1 of hop 0 expects 50 reports, its client process sends 40: at its deadline it
    # ends with what it has and says what it lacks; the mixer refuses the round naming it.
    stages = worker_stages(broker, round_id=8, shares=[40, 50], deadline=1.0)
    for p, n_sent in enumerate([40, 40]):
        stages[f"clients-{p}"] = client_stage(
            broker, values_for(n_sent), round_id=8, index=p, peeler=p
        )
    results = asyncio.run(run_all(stages))
    refused = results["hop-0"].refused
    assert refused == "lost 10 of 50 reports between clients and hop-0-p1"
    assert results["hop-0-p1"].log["lost"] == 10
    for j in (1, 2):  # every later hop stops on the aborted END and says why
        assert results[f"hop-{j}"].refused.startswith("upstream refused the round")
    report = results["analyzer"]
    assert "between clients and hop-0-p1" in report["error"]
    assert report["n_received"] == 0


async def crash_after(stage: Coroutine[Any, Any, Any], seconds: float) -> str:
    """Run ``stage`` and kill it (cancel) after ``seconds``, as a crash mid-round."""
    try:
        await asyncio.wait_for(stage, seconds)
    except TimeoutError:
        return "crashed"
    return "finished"


def test_a_peeler_that_crashes_mid_round_is_named_and_the_round_refused() -> None:
    broker = MemoryBroker()
    stages = worker_stages(broker, round_id=9, shares=[40, 50], deadline=1.0)
    stages["hop-0-p1"] = crash_after(stages["hop-0-p1"], 0.3)  # before its share is complete
    for p, n_sent in enumerate([40, 30]):
        stages[f"clients-{p}"] = client_stage(
            broker, values_for(n_sent), round_id=9, index=p, peeler=p
        )
    results = asyncio.run(run_all(stages))
    assert results["hop-0-p1"] == "crashed"
    assert results["hop-0"].refused == "hop-0-p1's END never reached hop-0"
    assert "hop-0-p1's END never reached hop-0" in results["analyzer"]["error"]
    assert results["analyzer"]["n_received"] == 0
