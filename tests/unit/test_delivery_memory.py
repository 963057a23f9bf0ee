"""End-to-end delivery and loud accounting, whole rounds over the in-memory broker.

Two authenticated client processes (run_clients with their process credentials), hop 0 with
the round's ClientVerifier, two more hops and the analyzer, each on its own connection:

- a broker that drops 10 % of the deliveries on hop 0's ingress and on the claim and receipt
  topics (LossyMemoryBroker, seeded): receipts and resends still count every report exactly
  once (counted == sent, the exact histogram of the seeded k-RR draws);
- a client process that never hands its reports to the broker: nothing can repair that, and
  the round is refused with one line saying how many reports were lost and where;
- the same with accept_loss everywhere: the smaller round is published and the report says so.

k-RR and permutations are seeded: the histograms are known answers.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from shuffledp.analyzer.records import PublishedReport
from shuffledp.clients.service import ClientSettings, run_clients
from shuffledp.protocol.client_auth import (
    ClientRoster,
    ClientVerifier,
    ProcessCredentials,
    process_key,
)
from shuffledp.protocol.topics import claim_topic, ingress_topic
from shuffledp.protocol.transport import LossyMemoryBroker, MemoryBroker
from shuffledp.randomness import SeededRandom
from tests.binding import MANIFEST_DIGEST
from tests.unit.test_services_memory import (
    ANALYZER,
    EPS0,
    HOP_PUBLIC,
    LONG,
    PREFIX,
    K,
    expected_histogram,
    nonzero,
    pipeline,
    start_in_order,
    values_for,
)


@pytest.fixture(autouse=True)
def short_drain(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stages past their deadline wait DRAIN_QUIET seconds without input before closing; 0.2 s
    instead of 1 s keeps these whole rounds fast (what is tested does not depend on its length;
    tests/unit/protocol/test_stage.py tests the drain itself)."""
    monkeypatch.setattr("shuffledp.protocol.stage.DRAIN_QUIET", 0.2)


MASTER = bytes(range(1, 33))
PER_PROCESS = 150
PROCESSES = 2
N = PER_PROCESS * PROCESSES
ROSTER = ClientRoster(client_processes=PROCESSES, clients_per_process=PER_PROCESS)


def authenticated_round(
    broker: MemoryBroker,
    *,
    round_id: int,
    hop0_deadline: float = LONG,
    accept_loss: bool = False,
) -> dict[str, Coroutine[Any, Any, Any]]:
    """The hops (hop 0 checking client authenticators) and the analyzer of a round of N."""
    return pipeline(
        broker,
        round_id=round_id,
        expected_size=N,
        hop0_deadline=hop0_deadline,
        accept_loss=accept_loss,
        hop0_verifier=ClientVerifier(master_key=MASTER, roster=ROSTER, round_id=round_id),
    )


def client_process(
    broker: MemoryBroker,
    process: int,
    values: npt.NDArray[np.int64],
    *,
    round_id: int,
    accept_loss: bool = False,
) -> Coroutine[Any, Any, dict[str, Any]]:
    settings = ClientSettings(
        prefix=PREFIX,
        round_id=round_id,
        k=K,
        eps0=EPS0,
        name=f"clients-{process}",
        ready_timeout=LONG,
        accept_loss=accept_loss,
        reclaim_interval=0.2,
        manifest_digest=MANIFEST_DIGEST,
    )
    return run_clients(
        broker.connect(),
        settings,
        values,
        hop_public_keys=HOP_PUBLIC,
        analyzer_public_key=ANALYZER.public,
        rng=SeededRandom(40 + process),
        credentials=ProcessCredentials(process=process, key=process_key(MASTER, process)),
    )


def process_values(process: int) -> npt.NDArray[np.int64]:
    return values_for(N)[process * PER_PROCESS : (process + 1) * PER_PROCESS]


@pytest.mark.asyncio
async def test_receipts_and_resends_count_every_report_when_a_tenth_of_deliveries_drop() -> None:
    round_id = 21
    # Drops on the leg receipts repair: reports to hop 0, claims, receipts (statuses are
    # retained and never dropped). With ~360 deliveries at 10 %, no drop at all has
    # probability 0.9^360 < 1e-16.
    drop = (
        ingress_topic(PREFIX, round_id, 0),
        claim_topic(PREFIX, round_id, "+"),
        f"{PREFIX}/round/{round_id}/receipt/+",
    )
    broker = LossyMemoryBroker(rate=0.1, seed=2026, drop_topics=drop)
    stages = authenticated_round(broker, round_id=round_id)
    for process in range(PROCESSES):
        stages[f"clients-{process}"] = client_process(
            broker, process, process_values(process), round_id=round_id
        )
    outcome = await start_in_order(stages, list(stages))
    assert broker.dropped > 0
    report = outcome.report
    assert report["n_received"] == N  # counted == sent
    truth = [
        sum(pair)
        for pair in zip(
            *(expected_histogram(process_values(p), 40 + p) for p in range(PROCESSES)),
            strict=True,
        )
    ]
    assert report["histogram"] == truth
    # A resend is the same bytes: at most a duplicate, never a second report counted.
    assert set(nonzero(report["rejected"])) <= {"duplicate"}
    resent = 0
    for process in range(PROCESSES):
        delivery = outcome.results[f"clients-{process}"]["delivery"]
        assert delivery["accepted"] == delivery["sent"] == PER_PROCESS
        assert delivery["lost"] == delivery["unconfirmed"] == 0
        resent += delivery["resent"]
    assert resent > 0  # reports were dropped on the way to hop 0 and sent again
    published = PublishedReport.from_json(report)
    assert published.delivery is not None and published.delivery.lost == 0
    assert published.delivery.counted == N and published.delivery.clients_sent == N
    assert "error" not in report and "warning" not in report


async def never_sends() -> dict[str, Any]:
    """A client process stopped before it handed any report to the broker."""
    return {"sent": 0}


@pytest.mark.asyncio
async def test_a_process_that_never_hands_over_its_reports_fails_the_round_loudly() -> None:
    round_id = 22
    broker = MemoryBroker()
    stages = authenticated_round(broker, round_id=round_id, hop0_deadline=1.0)
    stages["clients-0"] = client_process(broker, 0, process_values(0), round_id=round_id)
    stages["clients-1"] = never_sends()
    outcome = await start_in_order(stages, list(stages))
    line = (
        "lost 150 of 300 reports between clients and hop-0 (the client processes said they "
        "sent 150)"
    )
    hop0 = outcome.hop(0)
    assert hop0.refused == line and hop0.refused_for_loss and hop0.lost == PER_PROCESS
    assert hop0.log["forwarded"] == 0
    for index in (1, 2):
        assert outcome.hop(index).refused == f"upstream refused the round: {line}"
    report = outcome.report
    assert report["error"] == f"the round was refused: {line}"
    assert report["n_received"] == 0 and report["histogram"] == [0] * K
    delivery = PublishedReport.from_json(report).delivery
    assert delivery is not None
    assert (delivery.lost, delivery.counted, delivery.loss_accepted) == (150, 150, False)
    assert delivery.message == line
    # The process that did send has hop 0's word that every one of its reports was accepted.
    assert outcome.results["clients-0"]["delivery"]["accepted"] == PER_PROCESS


@pytest.mark.asyncio
async def test_accept_loss_publishes_the_smaller_round_and_the_report_says_so() -> None:
    round_id = 23
    broker = MemoryBroker()
    stages = authenticated_round(broker, round_id=round_id, hop0_deadline=1.0, accept_loss=True)
    stages["clients-0"] = client_process(
        broker, 0, process_values(0), round_id=round_id, accept_loss=True
    )
    stages["clients-1"] = never_sends()
    outcome = await start_in_order(stages, list(stages))
    assert outcome.hop(0).refused is None and outcome.hop(0).lost == PER_PROCESS
    report = outcome.report
    assert report["n_received"] == PER_PROCESS
    assert report["histogram"] == expected_histogram(process_values(0), 40)
    assert report["privacy"]["n"] == PER_PROCESS
    assert "error" not in report
    line = "lost 150 of 300 reports between clients and hop-0"
    assert report["warning"].startswith(line)
    assert "published with --accept-loss" in report["warning"]
    delivery = PublishedReport.from_json(report).delivery
    assert delivery is not None and delivery.loss_accepted is True and delivery.lost == 150
