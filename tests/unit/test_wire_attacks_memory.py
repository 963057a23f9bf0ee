"""Issue 23's attacks on the frames between hops, as whole rounds over the in-memory broker.

Whoever holds hop 0's broker account (or the broker) can publish on hop 1's ingress. Before the
frames were signed, a forged END sent before hop 0 started made hop 1 count 1,489 of 2,000
with nothing lost, and a garbage data frame 0 ahead of the real one shadowed it (the real one
was dropped as a repeat). Here the attacker publishes, before hop 0 starts: a forged END (a key
of its own) announcing a short batch, hop 0's genuine END of another round (a replay), a forged
data frame 0 and a genuine data frame 0 of another round. Every report must still be counted,
each attack frame counted under its reason, and nothing reported lost.

And a hop whose batch is too small for its upstream's (``--expected`` below the round's size)
refuses the round with the loss's line naming ``batch-full``: those reports came in genuine
frames, they are lost, not junk.
"""

from __future__ import annotations

import os
from collections.abc import Coroutine
from typing import Any

import pytest
from nacl.signing import SigningKey

from shuffledp.protocol import message_length
from shuffledp.protocol.end_statement import EndStatement
from shuffledp.protocol.frames import FrameSigner, encode_batch, encode_end
from shuffledp.protocol.topics import ingress_topic
from shuffledp.protocol.transport import MemoryBroker, publish_all
from shuffledp.randomness import SeededRandom
from shuffledp.shuffler.service import run_hop
from tests.binding import MANIFEST_DIGEST, frame_signer, signed_end
from tests.unit.test_services_memory import (
    CLIENT_SEED,
    HOPS,
    PREFIX,
    clients,
    expected_histogram,
    hop_settings,
    nonzero,
    pipeline,
    start_in_order,
    values_for,
    wait_ready,
)

N = 600
ITEM = message_length(1, 3)


def attack_frames(round_id: int) -> list[bytes]:
    """What the attacker publishes on hop 1's ingress before hop 0 starts."""
    stranger = FrameSigner(
        manifest_digest=MANIFEST_DIGEST,
        round_id=round_id,
        sender=0,
        signing_key=SigningKey.generate(),
    )
    short = EndStatement(
        stage="hop-0",
        accepted=100,
        forwarded=100,
        frames=1,
        rejected={},
        aborted=None,
        upstream_end=None,
        stages={"hop-0": {"accepted": 100, "forwarded": 100, "rejected": {}}},
    )
    garbage = [os.urandom(ITEM) for _ in range(100)]
    return [
        encode_end(signer=stranger, item_length=ITEM, statement=short),  # forged-end
        signed_end(sender=0, round_id=round_id + 1, frames=1, messages=100, item_length=ITEM),
        encode_batch(garbage, signer=stranger, item_length=ITEM)[0],  # forged-frame
        encode_batch(garbage, signer=frame_signer(0, round_id + 1), item_length=ITEM)[0],
    ]


async def attacker(broker: MemoryBroker, round_id: int) -> int:
    transport = broker.connect()
    await wait_ready(transport, round_id, "hop-1")
    topic = ingress_topic(PREFIX, round_id, 1)
    return await publish_all(transport, ((topic, frame) for frame in attack_frames(round_id)))


@pytest.mark.asyncio
async def test_forged_and_replayed_frames_before_hop_0_starts_change_nothing() -> None:
    round_id = 23
    broker = MemoryBroker()
    values = values_for(N)
    stages: dict[str, Coroutine[Any, Any, Any]] = pipeline(
        broker, round_id=round_id, expected_size=N
    )
    stages["clients"] = clients(broker, values, round_id=round_id, seed=CLIENT_SEED)
    stages["attacker"] = attacker(broker, round_id)
    order = ["analyzer", "hop-2", "hop-1", "attacker", "hop-0", "clients"]
    outcome = await start_in_order(stages, order, gap=0.05)
    assert outcome.results["attacker"] == 4
    report = outcome.report
    assert "error" not in report
    assert report["n_received"] == N
    assert report["histogram"] == expected_histogram(values, CLIENT_SEED)
    hop1 = report["stages"]["hop-1"]
    assert nonzero(hop1["frames_rejected"]) == {
        "forged-end": 1,
        "replayed-end": 1,
        "forged-frame": 1,
        "replayed-frame": 1,
    }
    assert hop1["accepted"] == N and nonzero(hop1["rejected"]) == {}
    assert report["delivery"]["lost"] == 0
    # The chain: hop 2's statement commits to hop 1's END, which commits to hop 0's.
    assert report["stages"]["hop-1"]["upstream_end"] is not None
    assert report["stages"]["hop-2"]["upstream_end"] is not None


@pytest.mark.asyncio
async def test_a_later_hop_with_too_small_a_batch_refuses_naming_batch_full() -> None:
    round_id = 24
    broker = MemoryBroker()
    values = values_for(N)
    stages = pipeline(broker, round_id=round_id, expected_size=N)
    stages["hop-1"].close()
    stages["hop-1"] = run_hop(
        broker.connect(),
        hop_settings(1, round_id=round_id, expected_size=N - 100),
        HOPS[1].private,
        rng=SeededRandom(7),
    )
    stages["clients"] = clients(broker, values, round_id=round_id, seed=CLIENT_SEED)
    outcome = await start_in_order(stages, ["analyzer", "hop-2", "hop-1", "hop-0", "clients"])
    hop1 = outcome.hop(1)
    line = f"lost 100 of {N} reports between hop-0 and hop-1 (batch-full 100)"
    assert hop1.refused == line and hop1.refused_for_loss
    assert outcome.report["error"] == f"the round was refused: {line}"
    assert outcome.report["delivery"]["lost"] == 100
