"""A client process's end-to-end delivery (clients/delivery.py through run_clients) against a
scripted hop 0 over the in-memory broker: it resends exactly the reports a receipt misses (the
same bytes), and a final receipt that still misses some ends the process with the loss's one
line (ReportsLostError) unless accept_loss."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from shuffledp.clients.service import ClientSettings, run_clients
from shuffledp.protocol.client_auth import ProcessCredentials, process_key
from shuffledp.protocol.delivery import ReportsLostError
from shuffledp.protocol.receipts import Claim, Receipt, bitmap_of
from shuffledp.protocol.runtime import publish_state
from shuffledp.protocol.topics import claim_topic, ingress_topic, receipt_topic
from shuffledp.protocol.transport import MemoryBroker, MemoryTransport
from shuffledp.randomness import SeededRandom
from tests.binding import MANIFEST_DIGEST
from tests.unit.test_services_memory import ANALYZER, EPS0, HOP_PUBLIC, PREFIX, K, start_in_order

ROUND = 31
N = 10
NAME = "clients-1"


async def scripted_hop0(
    transport: MemoryTransport, answers: list[tuple[list[int], bool]]
) -> dict[str, Any]:
    """Hop 0 that answers the i-th claim with ``answers[i]`` (accepted client indices, closed),
    then says done; returns the reports it received and the claims."""
    await transport.subscribe(ingress_topic(PREFIX, ROUND, 0))
    await transport.subscribe(claim_topic(PREFIX, ROUND, "+"))
    await publish_state(transport, PREFIX, ROUND, "hop-0", "ready")
    reports: list[bytes] = []
    claims: list[Claim] = []
    async for message in transport.messages():
        if message.topic == ingress_topic(PREFIX, ROUND, 0):
            reports.append(message.payload)
            continue
        claim = Claim.decode(message.payload)
        assert claim is not None
        claims.append(claim)
        if claim.confirmed:
            break
        if len(claims) <= len(answers):
            accepted, closed = answers[len(claims) - 1]
            receipt = Receipt(
                round_id=ROUND,
                process=1,
                clients=N,
                bitmap=bitmap_of(accepted, N),
                seq=claim.seq,
                closed=closed,
            )
            await transport.publish(receipt_topic(PREFIX, ROUND, NAME), receipt.encode())
    await publish_state(transport, PREFIX, ROUND, "hop-0", "done")
    return {"reports": reports, "claims": claims}


def clients(broker: MemoryBroker, *, accept_loss: bool = False) -> Any:
    settings = ClientSettings(
        prefix=PREFIX,
        round_id=ROUND,
        k=K,
        eps0=EPS0,
        name=NAME,
        ready_timeout=30.0,
        reclaim_interval=5.0,  # every claim here is answered: no reclaim needed
        accept_loss=accept_loss,
        manifest_digest=MANIFEST_DIGEST,
    )
    return run_clients(
        broker.connect(),
        settings,
        np.arange(N) % K,
        hop_public_keys=HOP_PUBLIC,
        analyzer_public_key=ANALYZER.public,
        rng=SeededRandom(3),
        credentials=ProcessCredentials(process=1, key=process_key(bytes(32), 1)),
    )


@pytest.mark.asyncio
async def test_a_receipt_missing_reports_makes_the_process_resend_exactly_those() -> None:
    broker = MemoryBroker()
    answers = [([0, 1, 2, 3, 4, 5, 6], False), (list(range(N)), False)]
    stages = {"hop-0": scripted_hop0(broker.connect(), answers), "clients": clients(broker)}
    outcome = await start_in_order(stages, ["hop-0", "clients"])
    seen = outcome.results["hop-0"]
    reports = seen["reports"]
    assert len(reports) == N + 3
    assert reports[N:] == reports[7:N]  # the 3 missing, resent as the very same bytes
    assert [c.seq for c in seen["claims"]] == [1, 2, 3]
    assert seen["claims"][-1].confirmed and seen["claims"][0].sent == N
    delivery = outcome.results["clients"]["delivery"]
    assert delivery == {
        "sent": N,
        "accepted": N,
        "lost": 0,
        "unconfirmed": 0,
        "resent": 3,
        "receipts": 2,
    }


@pytest.mark.asyncio
async def test_a_final_receipt_missing_reports_is_a_loss_named_in_one_line() -> None:
    broker = MemoryBroker()
    stages = {
        "hop-0": scripted_hop0(broker.connect(), [([0, 1, 2, 3, 4, 5], True)]),
        "clients": clients(broker),
    }
    with pytest.raises(ExceptionGroup) as caught:
        await start_in_order(stages, ["hop-0", "clients"])
    (error,) = caught.value.exceptions
    assert isinstance(error, ReportsLostError)
    assert str(error) == "lost 4 of 10 reports between clients-1 and hop-0"


@pytest.mark.asyncio
async def test_accept_loss_ends_normally_and_says_what_was_lost() -> None:
    broker = MemoryBroker()
    stages = {
        "hop-0": scripted_hop0(broker.connect(), [([0, 1, 2, 3, 4, 5], True)]),
        "clients": clients(broker, accept_loss=True),
    }
    outcome = await start_in_order(stages, ["hop-0", "clients"])
    delivery = outcome.results["clients"]["delivery"]
    assert (delivery["accepted"], delivery["lost"], delivery["resent"]) == (6, 4, 0)
