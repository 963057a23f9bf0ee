"""The chain of signed END statements (protocol/end_chain.py, the chain in frames.encode_end).

What is checked, on chains built the way the hops build them (each hop's END taken by a
FrameAssembler, its chain and STATEMENT digest carried on by the next hop):
- an honest chain verifies: one statement per hop, each equal to what its hop signed;
- a later hop (the last one, who signs the END the analyzer verifies) that rewrites, drops,
  reorders or replaces an upstream statement breaks the chain, and the line names the hop; a
  hop whose upstream END never came starts the chain afresh (verified from there on);
- property (hypothesis): any single-byte change of any carried STATEMENT frame is refused,
  either by the END's receiver (the sender's own statement) or by verify_chain;
- check_sums: hop 0 above the manifest's expected, or a stage accounting for more than its
  upstream forwarded, does not add up (the leg is named); a shortfall is left to the delivery;
- a STATEMENT frame alone is no END (malformed-frame), an END without its own statement or
  with one that says otherwise is forged-end;
- the END body stays linear in the hops: 64 hops with a 1 KiB log each fit in MAX_END_BODY.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nacl.signing import SigningKey

from shuffledp.protocol.end_chain import check_sums, verify_chain
from shuffledp.protocol.end_statement import EndStatement, StatementError
from shuffledp.protocol.frames import (
    HEADER,
    KIND_END,
    MAX_END_BODY,
    SIGNATURE_SIZE,
    FrameAssembler,
    FrameSigner,
    encode_end,
    statement_frame,
)
from tests.binding import MANIFEST_DIGEST, OTHER_DIGEST, frame_assembler, frame_signer

ROUND = 7
ITEM = 11
HOPS = 3


def core(hop: int, accepted: int, upstream_end: str | None, **log: Any) -> EndStatement:
    """Hop ``hop``'s statement: ``accepted`` forwarded in one frame, its log under its name."""
    name = f"hop-{hop}"
    own = {"accepted": accepted, "forwarded": accepted, "rejected": {}, **log}
    return EndStatement(
        stage=name,
        accepted=accepted,
        forwarded=accepted,
        frames=1,
        rejected={},
        aborted=None,
        upstream_end=upstream_end,
        stages={name: own},
    )


def take(end: bytes, sender: int) -> FrameAssembler:
    """The receiver of hop ``sender``'s END, after taking it (it must be genuine)."""
    receiver = frame_assembler(ROUND, sender)
    assert list(receiver.add(end)) == []
    assert receiver.statement is not None, receiver.rejected
    return receiver


def honest_ends(counts: tuple[int, ...] = (100, 100, 100)) -> list[bytes]:
    """Every hop's END frame of an honest round, each built on the END its receiver took."""
    ends: list[bytes] = []
    chain: tuple[str, ...] = ()
    upstream: str | None = None
    for hop, accepted in enumerate(counts):
        statement = core(hop, accepted, upstream, note=f"log of hop {hop}")
        end = encode_end(
            signer=frame_signer(hop, ROUND),
            item_length=ITEM,
            statement=statement,
            upstream_chain=chain,
        )
        ends.append(end)
        receiver = take(end, hop)
        assert receiver.statement is not None
        chain, upstream = receiver.statement.chain, receiver.statement_digest
    return ends


def last_statement(end: bytes, n_hops: int = HOPS) -> EndStatement:
    statement = take(end, n_hops - 1).statement
    assert statement is not None
    return statement


def verify(end: EndStatement, n_hops: int = HOPS) -> tuple[EndStatement, ...]:
    keys = tuple(frame_signer(hop, ROUND).signing_key.verify_key for hop in range(n_hops))
    return verify_chain(end, verify_keys=keys, manifest_digest=MANIFEST_DIGEST, round_id=ROUND)


def resigned(chain: list[str], last: EndStatement) -> bytes:
    """The last hop's END, signed by it, carrying ``chain`` (its own statement is added)."""
    return encode_end(
        signer=frame_signer(HOPS - 1, ROUND),
        item_length=ITEM,
        statement=last.core(),
        upstream_chain=tuple(chain),
    )


ENDS = honest_ends()
LAST = last_statement(ENDS[-1])


def test_an_honest_chain_verifies_to_what_each_hop_signed() -> None:
    statements = verify(LAST)
    assert [s.stage for s in statements] == ["hop-0", "hop-1", "hop-2"]
    assert [s.stages[s.stage]["note"] for s in statements] == [f"log of hop {i}" for i in range(3)]
    # Each statement is the one its hop signed in its own END, and commits to the one before.
    for hop, statement in enumerate(statements):
        assert statement == last_statement(ENDS[hop], hop + 1).core()
    for before, after in zip(LAST.chain, statements[1:], strict=False):
        assert after.upstream_end == hashlib.sha256(bytes.fromhex(before)).hexdigest()


def _rewritten_hop_0() -> list[str]:
    """Hop 0's statement with accepted lowered to 90, signed by the last hop (not hop 0)."""
    lowered = core(0, 90, None, note="log of hop 0")
    forged = statement_frame(
        signer=frame_signer(HOPS - 1, ROUND), item_length=ITEM, statement=lowered
    )
    return [forged.hex(), *LAST.chain[1:-1]]


def _resigned_by_hop_0() -> list[str]:
    """Hop 0's own key, but another statement than the one hop 1 committed to."""
    lowered = core(0, 90, None, note="log of hop 0")
    other = statement_frame(signer=frame_signer(0, ROUND), item_length=ITEM, statement=lowered)
    return [other.hex(), *LAST.chain[1:-1]]


def _of_another_round() -> list[str]:
    signer = FrameSigner(
        manifest_digest=OTHER_DIGEST,
        round_id=ROUND,
        sender=0,
        signing_key=frame_signer(0, ROUND).signing_key,
    )
    other = statement_frame(signer=signer, item_length=ITEM, statement=core(0, 100, None))
    return [other.hex(), *LAST.chain[1:-1]]


@pytest.mark.parametrize(
    ("chain", "line"),
    [
        (
            _rewritten_hop_0(),
            "breaks at hop-0: hop-0's statement in the chain is not genuine: it is not a "
            "STATEMENT frame of hop-0",
        ),
        (
            _resigned_by_hop_0(),
            "breaks at hop-0: hop-1's signed statement commits to another statement of hop-0",
        ),
        (list(LAST.chain[1:-1]), "breaks at hop-0: hop-1 carries no signed statement of hop-0"),
        ([], "breaks at hop-1: hop-2 carries no signed statement of hop-1"),
        (
            [LAST.chain[1], LAST.chain[0]],
            "breaks at hop-1: hop-1's statement in the chain is not genuine",
        ),
        (
            _of_another_round(),
            "breaks at hop-0: hop-0's statement in the chain is not genuine: "
            "it is signed for another manifest or round",
        ),
    ],
    ids=["rewritten", "resigned-by-hop-0", "hop-0-dropped", "all-dropped", "reordered", "replayed"],
)
def test_a_rewritten_or_missing_statement_breaks_the_chain_naming_the_hop(
    chain: list[str], line: str
) -> None:
    tampered = last_statement(resigned(chain, LAST))  # the END itself is genuine
    with pytest.raises(StatementError, match="the chain of signed END statements " + line):
        verify(tampered)


def test_a_chain_started_afresh_where_an_end_never_came_is_verified_from_there() -> None:
    """Hop 1 says hop 0's END never reached it (upstream_end null): the chain holds hops 1 and
    2, both verified; the accounting then runs from the clients to hop 1. Said while carrying
    hop 0's statement anyway, it breaks the chain."""
    hop1 = encode_end(signer=frame_signer(1, ROUND), item_length=ITEM, statement=core(1, 100, None))
    receiver = take(hop1, 1)
    assert receiver.statement is not None
    hop2 = encode_end(
        signer=frame_signer(2, ROUND),
        item_length=ITEM,
        statement=core(2, 100, receiver.statement_digest),
        upstream_chain=receiver.statement.chain,
    )
    statements = verify(last_statement(hop2))
    assert [s.stage for s in statements] == ["hop-1", "hop-2"]
    with pytest.raises(StatementError, match="the manifest expects 99"):
        check_sums(statements, expected=99, analyzer_accepted=100, analyzer_rejected={})
    hop2 = encode_end(
        signer=frame_signer(2, ROUND),
        item_length=ITEM,
        statement=core(2, 100, receiver.statement_digest),
        upstream_chain=(LAST.chain[0], *receiver.statement.chain),
    )
    with pytest.raises(
        StatementError, match="breaks at hop-0: hop-1 says hop-0's END never reached it, yet"
    ):
        verify(last_statement(hop2))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_single_byte_change_of_a_carried_statement_is_refused(data: st.DataObject) -> None:
    entry = data.draw(st.integers(0, HOPS - 1), label="entry")
    frame = bytearray(bytes.fromhex(LAST.chain[entry]))
    position = data.draw(st.integers(0, len(frame) - 1), label="position")
    value = data.draw(st.integers(0, 255).filter(lambda v: v != frame[position]), label="value")
    frame[position] = value
    chain = list(LAST.chain)
    chain[entry] = bytes(frame).hex()
    end = resigned(chain[:-1], LAST) if entry < HOPS - 1 else None
    if end is None:  # the last hop's own statement: re-sign its END around the changed one
        wire = replace(LAST, chain=tuple(chain))
        body = json.dumps(wire.to_json(), separators=(",", ":")).encode()
        end = frame_signer(HOPS - 1, ROUND).frame(KIND_END, LAST.frames, LAST.forwarded, ITEM, body)
    receiver = frame_assembler(ROUND, HOPS - 1)
    list(receiver.add(end))
    if receiver.statement is None:  # refused by the END's receiver
        assert entry == HOPS - 1 and receiver.rejected["forged-end"] == 1
        return
    with pytest.raises(StatementError, match="the chain of signed END statements breaks"):
        verify(receiver.statement)


def test_check_sums_refuses_more_than_forwarded_and_leaves_a_shortfall() -> None:
    statements = verify(LAST)
    check_sums(statements, expected=100, analyzer_accepted=97, analyzer_rejected={"x": 1})
    with pytest.raises(StatementError, match="hop-0 accepted 100 reports, the manifest expects 99"):
        check_sums(statements, expected=99, analyzer_accepted=100, analyzer_rejected={})
    with pytest.raises(
        StatementError,
        match="does not add up between hop-2 and analyzer: analyzer accounts for 101 messages, "
        "hop-2 forwarded 100",
    ):
        check_sums(statements, expected=100, analyzer_accepted=100, analyzer_rejected={"y": 1})
    more = verify(last_statement(honest_ends((100, 120, 120)).pop()))
    with pytest.raises(StatementError, match="between hop-0 and hop-1: hop-1 accounts for 120"):
        check_sums(more, expected=100, analyzer_accepted=120, analyzer_rejected={})


def test_a_statement_frame_alone_is_no_end_and_an_end_must_carry_its_own() -> None:
    receiver = frame_assembler(ROUND, 0)
    own = bytes.fromhex(last_statement(ENDS[0], 1).chain[-1])
    assert list(receiver.add(own)) == [] and receiver.rejected["malformed-frame"] == 1
    statement = core(0, 100, None)
    signer = frame_signer(0, ROUND)
    other = statement_frame(signer=signer, item_length=ITEM, statement=core(0, 99, None))
    for chain in ([], [other.hex()]):
        body = json.dumps(replace(statement, chain=tuple(chain)).to_json()).encode()
        receiver = frame_assembler(ROUND, 0)
        list(receiver.add(signer.frame(KIND_END, 1, 100, ITEM, body)))
        assert receiver.statement is None and receiver.rejected["forged-end"] == 1
    assert take(ENDS[0], 0).end_frame == ENDS[0]


def test_64_hops_with_a_kib_log_each_fit_in_an_end() -> None:
    """The chain carries statements, not whole END frames, so the body grows linearly: 64
    hops with a 1 KiB log each is about 64 x 2.5 KB of hex, well under MAX_END_BODY."""
    key = SigningKey.generate()
    chain: tuple[str, ...] = ()
    upstream: str | None = None
    end = b""
    for hop in range(64):
        signer = FrameSigner(
            manifest_digest=MANIFEST_DIGEST, round_id=ROUND, sender=hop, signing_key=key
        )
        statement = core(hop, 100, upstream, padding="x" * 1024)
        end = encode_end(signer=signer, item_length=ITEM, statement=statement, upstream_chain=chain)
        receiver = FrameAssembler(ROUND, MANIFEST_DIGEST, hop, key.verify_key)
        list(receiver.add(end))
        assert receiver.statement is not None
        chain, upstream = receiver.statement.chain, receiver.statement_digest
    body = len(end) - HEADER.size - SIGNATURE_SIZE
    assert 64 * 2 * 1024 < body < MAX_END_BODY // 3
    statements = verify_chain(
        last_statement_of(end, key),
        verify_keys=(key.verify_key,) * 64,
        manifest_digest=MANIFEST_DIGEST,
        round_id=ROUND,
    )
    assert len(statements) == 64


def last_statement_of(end: bytes, key: SigningKey) -> EndStatement:
    receiver = FrameAssembler(ROUND, MANIFEST_DIGEST, 63, key.verify_key)
    list(receiver.add(end))
    assert receiver.statement is not None
    return receiver.statement
