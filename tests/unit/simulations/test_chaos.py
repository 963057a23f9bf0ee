"""`shuffledp simulate --chaos`: hostile messages from an authenticated client process.

The pure part (simulations/pipeline/chaos_messages.py) is checked against hop 0 itself: offering the genuine reports,
then the injected messages, then the last genuine report to a HopRound with client
authentication gives exactly the predicted rejections by reason and every genuine report once.
The real processes (n = 2,000, the size the issue asks CI to run) are checked in
tests/integration/test_chaos_processes.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shuffledp.clients.service import ClientSettings
from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.client_auth import ProcessCredentials, process_key
from shuffledp.protocol.transport import MemoryBroker
from shuffledp.randomness import SeededRandom
from shuffledp.shuffler.hop import HopRound
from shuffledp.simulations.pipeline.chaos import run_chaos_clients
from shuffledp.simulations.pipeline.chaos_messages import (
    CHAOS_KINDS,
    EXPECTED_REASON,
    make_chaos_messages,
)
from tests.binding import MANIFEST_DIGEST
from tests.unit.protocol.test_client_auth import MASTER, verifier
from tests.unit.protocol.test_client_auth import seal as seal_messages
from tests.unit.test_services_memory import ANALYZER, EPS0, HOP_PUBLIC, HOPS, PREFIX, H, K

ROUND = 7
PROCESS = ProcessCredentials(process=1, key=process_key(MASTER, 1))


def seal(start: int, values: np.ndarray, round_id: int = ROUND) -> list[bytes]:
    """Authentic messages of PROCESS's clients start, start + 1, ... for ``values``."""
    credentials = [PROCESS.credential(start + i) for i in range(len(values))]
    return seal_messages(values, round_id=round_id, credentials=credentials)


@settings(max_examples=25, deadline=None)
@given(clients=st.integers(2, 12), count=st.integers(0, 60))
def test_hop_0_rejects_every_injected_message_under_its_predicted_reason(
    clients: int, count: int
) -> None:
    values = np.arange(clients) % K
    genuine = seal(0, values)
    sources = genuine[:-1]

    def fresh_report(index: int, old_round: bool) -> bytes:
        return seal(index, values[index : index + 1], ROUND - 1 if old_round else ROUND)[0]

    batch = make_chaos_messages(genuine=sources, count=count, fresh_report=fresh_report)
    assert sum(batch.injected.values()) == len(batch.messages) == count
    # round-robin over the kinds
    assert [batch.injected[kind] for kind in CHAOS_KINDS] == [
        len(range(i, count, len(CHAOS_KINDS))) for i in range(len(CHAOS_KINDS))
    ]
    non_copies = [
        m
        for m, kind in zip(batch.messages, CHAOS_KINDS * count, strict=False)
        if kind != "replayed"
    ]
    assert len(set(non_copies)) == len(non_copies)  # only replays repeat bytes

    hop = HopRound(
        hop_index=0,
        n_hops=H,
        round_id=ROUND,
        private_key=HOPS[0].private,
        expected_size=clients,
        min_batch=1,
        verifier=verifier(ROUND),
    )
    results = hop.offer_many([*sources, *batch.messages, genuine[-1]])
    assert results[: len(sources)] == [None] * len(sources)
    assert results[-1] is None
    assert results[len(sources) : -1] == [
        EXPECTED_REASON[kind] for kind, _ in zip(CHAOS_KINDS * count, range(count), strict=False)
    ]
    assert hop.accepted == clients
    assert {r: c for r, c in hop.rejected.items() if c} == batch.expected_rejections


def test_chaos_is_refused_without_client_authentication() -> None:
    with pytest.raises(InvalidParameterError, match="count must be >= 0"):
        make_chaos_messages(genuine=[b"x" * 100], count=-1, fresh_report=lambda i, o: b"")
    with pytest.raises(InvalidParameterError, match="one length > 40"):
        make_chaos_messages(genuine=[b"x" * 30], count=1, fresh_report=lambda i, o: b"")


@pytest.mark.asyncio
async def test_run_clients_refuses_chaos_without_credentials_before_sending() -> None:
    broker = MemoryBroker()
    settings_ = ClientSettings(
        prefix=PREFIX, round_id=ROUND, k=K, eps0=EPS0, manifest_digest=MANIFEST_DIGEST
    )
    with pytest.raises(InvalidParameterError, match="chaos needs client authentication"):
        await run_chaos_clients(
            broker.connect(),
            settings_,
            np.arange(10) % K,
            hop_public_keys=HOP_PUBLIC,
            analyzer_public_key=ANALYZER.public,
            rng=SeededRandom(1),
            chaos=5,
        )
