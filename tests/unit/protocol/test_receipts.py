"""Claims and receipts on the wire (protocol/receipts.py): exact round trips, and None (never an
exception) for anything malformed, a decompression bomb included."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.receipts import RECEIPT_HEADER, Claim, Receipt, bitmap_of


def test_a_claim_round_trips_and_malformed_claims_are_none() -> None:
    claim = Claim(seq=3, clients=10, sent=7, confirmed=True)
    assert Claim.decode(claim.encode()) == claim
    for payload in (
        b"",
        b"\xff",
        b"[]",
        b'{"seq": 1, "clients": 2, "sent": 3, "confirmed": false}',  # sent > clients
        b'{"seq": 0, "clients": 2, "sent": 1, "confirmed": false}',  # seq starts at 1
        b'{"seq": 1, "clients": 2, "sent": 1}',
        b'{"seq": 1, "clients": 2, "sent": 1, "confirmed": 1}',
        b'{"seq": 1, "clients": 2, "sent": 1, "confirmed": false, "x": 0}',
        b"[" * 100_000,
        b" " * 2000,
    ):
        assert Claim.decode(payload) is None, payload


def test_a_claim_out_of_its_rules_names_the_rule() -> None:
    with pytest.raises(InvalidParameterError, match="claim sent must be in"):
        Claim(seq=1, clients=2, sent=3)


def test_the_bitmap_is_numpy_packbits_order() -> None:
    assert bitmap_of([0, 9], 10) == bytes([0b1000_0000, 0b0100_0000])
    assert bitmap_of([], 0) == b""
    assert bitmap_of([12, -1, 10], 10) == bytes(2)  # outside [0, clients): ignored


@settings(max_examples=60, deadline=None)
@given(
    clients=st.integers(0, 3000),
    data=st.data(),
    seq=st.integers(0, 2**32 - 1),
    closed=st.booleans(),
)
def test_a_receipt_round_trips_exactly(
    clients: int, data: st.DataObject, seq: int, closed: bool
) -> None:
    accepted = data.draw(st.sets(st.integers(0, max(clients - 1, 0)), max_size=clients))
    receipt = Receipt(
        round_id=2**64 - 1,
        process=5,
        clients=clients,
        bitmap=bitmap_of(sorted(accepted), clients),
        seq=seq,
        closed=closed,
    )
    decoded = Receipt.decode(receipt.encode(), round_id=2**64 - 1, process=5)
    assert decoded == receipt
    assert decoded.accepted == len(accepted)
    mask = decoded.accepted_mask(clients + 3)  # past the bitmap: not accepted
    assert set(np.flatnonzero(mask).tolist()) == accepted


def receipt_bytes(clients: int, accepted: int, body: bytes, *, closed: int = 0) -> bytes:
    header = RECEIPT_HEADER.pack(b"SDPR", 1, 7, 2, clients, accepted, 1, closed)
    return header + body


def test_malformed_receipts_are_none() -> None:
    good = Receipt(round_id=7, process=2, clients=10, bitmap=bitmap_of([1, 2], 10)).encode()
    assert Receipt.decode(good, round_id=7, process=2) is not None
    assert Receipt.decode(good, round_id=8, process=2) is None  # another round
    assert Receipt.decode(good, round_id=7, process=3) is None  # another process's
    assert Receipt.decode(good[:10], round_id=7, process=2) is None  # truncated header
    assert Receipt.decode(good[:-1], round_id=7, process=2) is None  # truncated body
    assert Receipt.decode(b"XDPR" + good[4:], round_id=7, process=2) is None
    assert Receipt.decode(good + b"x", round_id=7, process=2) is None  # trailing bytes
    bits = bitmap_of([1, 2], 10)
    for payload in (
        receipt_bytes(10, 3, zlib.compress(bits)),  # accepted miscounted
        receipt_bytes(10, 2, zlib.compress(bits), closed=2),  # closed neither 0 nor 1
        receipt_bytes(10, 3, zlib.compress(bits[:1] + b"\x01")),  # a bit past the last client
        receipt_bytes(10, 2, b"not zlib"),
        receipt_bytes(10, 2, zlib.compress(bits + b"\x00")),  # longer than its clients
    ):
        assert Receipt.decode(payload, round_id=7, process=2) is None


def test_a_decompression_bomb_is_refused_without_inflating_it() -> None:
    bomb = zlib.compress(bytes(50_000_000), 9)  # 50 MB of zeros in ~50 kB
    assert len(bomb) < 100_000
    assert Receipt.decode(receipt_bytes(8, 0, bomb), round_id=7, process=2) is None
    assert Receipt.decode(receipt_bytes(0, 0, bomb), round_id=7, process=2) is None


def test_a_receipt_checks_its_bitmap_length() -> None:
    with pytest.raises(InvalidParameterError, match="receipt bitmap must be 2 bytes"):
        Receipt(round_id=1, process=0, clients=9, bitmap=b"\x00")
    assert struct.calcsize(">4sBQIIIIB") == RECEIPT_HEADER.size == 30
