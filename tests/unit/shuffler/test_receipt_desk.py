"""Hop 0's receipt desk (shuffler/receipts.py): which claim gets which receipt, a lost session
makes every unconfirmed process due again, the final receipts once collection is over, and a
client process's ledger (clients/delivery.py) reading them."""

from __future__ import annotations

import numpy as np
import pytest

from shuffledp.clients.delivery import SentLedger
from shuffledp.protocol.receipts import Claim, Receipt
from shuffledp.protocol.topics import claim_topic, receipt_topic
from shuffledp.protocol.transport import MemoryBroker, MemoryTransport, Message
from shuffledp.shuffler.receipts import ReceiptDesk
from tests.unit.protocol.test_client_auth import ROSTER, ROUND, hop0, reports
from tests.unit.test_services_memory import PREFIX


def claim(process: str, seq: int, *, sent: int = 10, confirmed: bool = False) -> Message:
    payload = Claim(seq=seq, clients=10, sent=sent, confirmed=confirmed).encode()
    return Message(claim_topic(PREFIX, ROUND, process), payload)


def receipts(spy: MemoryTransport) -> dict[str, list[Receipt]]:
    out: dict[str, list[Receipt]] = {}
    while not spy._queue.empty():
        message = spy._queue.get_nowait()
        name = message.topic.rsplit("/", 1)[-1]
        decoded = Receipt.decode(message.payload, round_id=ROUND, process=int(name[-1]))
        assert decoded is not None
        out.setdefault(name, []).append(decoded)
    return out


@pytest.mark.asyncio
async def test_claims_get_receipts_of_exactly_what_hop_0_accepted() -> None:
    assert ROSTER.clients_per_process >= 10
    broker = MemoryBroker()
    transport, spy = broker.connect(), broker.connect()
    await spy.subscribe(f"{PREFIX}/round/{ROUND}/receipt/+")
    hop = hop0(expected_size=40)
    desk = ReceiptDesk(
        transport, prefix=PREFIX, round_id=ROUND, hop=hop, roster=ROSTER, expected_size=40
    )
    assert desk.wants(claim_topic(PREFIX, ROUND, "clients-0")) and desk.answers
    assert not desk.wants(receipt_topic(PREFIX, ROUND, "clients-0"))
    hop.offer_many(reports([(0, i) for i in (0, 1, 2, 7)] + [(1, 3)]))
    desk.note(claim("clients-0", 1))
    for junk in (
        claim("clients-5", 1),  # not an enrolled process
        Message(claim_topic(PREFIX, ROUND, "hop-0"), Claim(seq=1, clients=1, sent=1).encode()),
        Message(claim_topic(PREFIX, ROUND, "clients-1"), b"not a claim"),
    ):
        desk.note(junk)
    assert desk.claims_ignored == 3
    await desk.tick()
    got = receipts(spy)
    assert list(got) == ["clients-0"]  # only a claim is answered
    (first,) = got["clients-0"]
    assert (first.seq, first.closed, first.clients) == (1, False, 10)
    assert np.flatnonzero(first.accepted_mask(10)).tolist() == [0, 1, 2, 7]
    await desk.tick()
    assert receipts(spy) == {}  # answered once
    # The broker kept no session: what it queued for hop 0 is gone; every unconfirmed
    # process gets a receipt, so that it resends what is missing.
    transport.lose_session()
    await desk.tick()
    assert [r.seq for r in receipts(spy)["clients-0"]] == [1]
    # An older claim never overrides a newer one.
    desk.note(claim("clients-0", 3, sent=9))
    desk.note(claim("clients-0", 2, sent=1))
    desk.note(claim("clients-1", 1, sent=4))
    assert desk.clients_sent == 9 + 4
    hop.offer_many(reports([(0, 3)], seed=5))
    await desk.tick()
    got = receipts(spy)
    assert np.flatnonzero(got["clients-0"][0].accepted_mask(10)).tolist() == [0, 1, 2, 3, 7]
    assert got["clients-0"][0].seq == 3
    assert np.flatnonzero(got["clients-1"][0].accepted_mask(10)).tolist() == [3]
    # Collection is over: a final (closed) receipt for every unconfirmed process, then the
    # desk is settled once each has confirmed.
    desk.note(claim("clients-0", 4, confirmed=True))
    desk.close()
    assert not desk.settled()
    await desk.tick()
    got = receipts(spy)
    assert list(got) == ["clients-1"] and got["clients-1"][0].closed is True
    desk.note(claim("clients-1", 2, sent=4, confirmed=True))
    assert desk.settled()
    assert desk.log()["receipts_sent"] == desk.receipts_sent == 5


def test_a_client_process_ledger_forgets_what_receipts_confirm() -> None:
    ledger = SentLedger(6)
    ledger.record(0, [b"a", b"b", b"c"])
    ledger.record(3, [b"d", b"e", b"f"])
    assert (ledger.sent, ledger.missing) == (6, 6)
    bits = np.packbits(np.array([1, 0, 1, 0, 0, 1], dtype=bool)).tobytes()
    ledger.confirm(Receipt(round_id=ROUND, process=0, clients=6, bitmap=bits))
    assert ledger.missing_messages() == [b"b", b"d", b"e"]
    assert (ledger.accepted, ledger.missing) == (3, 3)
    # A later, shorter receipt takes nothing back: what was accepted stays accepted.
    shorter = np.packbits(np.array([0, 1], dtype=bool)).tobytes()
    ledger.confirm(Receipt(round_id=ROUND, process=0, clients=2, bitmap=shorter))
    assert ledger.missing_messages() == [b"d", b"e"]
    assert (ledger.accepted, ledger.missing) == (4, 2)


def test_a_ledger_spills_reports_to_fixed_slots_in_any_order() -> None:
    ledger = SentLedger(5)
    ledger.record(3, [b"dd", b"ee"])  # a later chunk first: slots, not an append log
    ledger.record(0, [b"aa", b"bb", b"cc"])
    assert ledger.missing_messages() == [b"aa", b"bb", b"cc", b"dd", b"ee"]
    with pytest.raises(ValueError, match="every sealed report of a process is 2 bytes"):
        ledger.record(0, [b"xyz"])
    ledger.close()
    assert ledger.missing_messages() == []  # the spilled file is gone


def _in_order(got: dict[str, list[Receipt]]) -> list[Receipt]:
    return [r for name in sorted(got) for r in got[name]]


async def _receipts_with(
    seen_in_memory: int, batches: list[list[tuple[int, int]]]
) -> list[Receipt]:
    """The receipts clients-0 and clients-1 get while hop 0 takes ``batches`` (a claim and a
    tick after each), then the final ones."""
    broker = MemoryBroker()
    transport, spy = broker.connect(), broker.connect()
    await spy.subscribe(f"{PREFIX}/round/{ROUND}/receipt/+")
    hop = hop0(expected_size=40, seen_in_memory=seen_in_memory)
    desk = ReceiptDesk(
        transport, prefix=PREFIX, round_id=ROUND, hop=hop, roster=ROSTER, expected_size=40
    )
    out: list[Receipt] = []
    for seq, batch in enumerate(batches, start=1):
        hop.offer_many(reports(batch, seed=seq))
        desk.note(claim("clients-0", seq))
        desk.note(claim("clients-1", seq))
        await desk.tick()
        out += _in_order(receipts(spy))
    desk.close()
    await desk.tick()
    out += _in_order(receipts(spy))
    return out


@pytest.mark.asyncio
async def test_receipts_are_the_same_when_the_log_of_who_reported_spills_to_disk() -> None:
    """seen_in_memory=3: hop 0's log of client ids (and its seen-sets) spill to disk every third
    entry, many times over; every receipt, bit for bit, is the one an unbounded log gives."""
    batches = [
        [(0, 0), (1, 4), (0, 2), (0, 9), (1, 0)],
        [(1, 1), (0, 2), (0, 3)],  # (0, 2) reports again: refused, not confirmed twice
        [(0, 5), (1, 9), (1, 2), (0, 7), (1, 3), (0, 8), (1, 8)],
    ]
    spilled = await _receipts_with(3, batches)
    in_memory = await _receipts_with(1 << 18, batches)
    assert spilled == in_memory
    final = {r.process: r for r in spilled if r.closed}
    bits = {
        p: np.unpackbits(np.frombuffer(r.bitmap, dtype=np.uint8))[:10] for p, r in final.items()
    }
    assert np.flatnonzero(bits[0]).tolist() == [0, 2, 3, 5, 7, 8, 9]
    assert np.flatnonzero(bits[1]).tolist() == [0, 1, 2, 3, 4, 8, 9]
