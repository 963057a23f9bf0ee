"""Signed batch frames (shuffledp.protocol.frames, version 2) and the END statement.

What is checked:
- the layout is the one the module docstring states (header built here with our own struct,
  signature checked with nacl directly): Ed25519 is deterministic, so equal bytes;
- round trips: every message back, in order, across several frames; an empty (refused) batch
  is complete with its END alone; out-of-order delivery completes with the same multiset;
- the attacks of issue 23: a forged DATA frame 0 ahead of the real one, a forged END before the
  real hop starts, a replayed END (another round, another manifest), a second END, an END whose
  counts disagree, a frame claiming another sender: each is refused under its reason, and the
  real batch still completes with every message;
- property (hypothesis): any single-byte change, truncation or extension of a genuine DATA or
  END frame is refused (yields nothing, counted, never an exception, never closes the batch);
  arbitrary bytes never make ``add`` raise.
"""

from __future__ import annotations

import hashlib
import json
import random
import struct
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nacl.signing import SigningKey

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.end_statement import EndStatement
from shuffledp.protocol.frames import (
    FORGED_END,
    FORGED_FRAME,
    FRAME_BYTES,
    FRAME_REJECTION_REASONS,
    REPLAYED_END,
    REPLAYED_FRAME,
    FrameAssembler,
    FrameSigner,
    encode_batch,
    encode_end,
)
from tests.binding import MANIFEST_DIGEST, OTHER_DIGEST

# The frame as the module docstring specifies it (independent of frames.HEADER):
# magic b"SDPF" | version u8 | kind u8 | sender u16 | manifest 32 | round u64 | seq u32
# | count u32 | item_length u32, then the body, then Ed25519(context | header | body).
SPEC_HEADER = struct.Struct(">4sBBH32sQIII")
CONTEXT = b"shuffledp/frame/v2\0"
MAGIC = b"SDPF"
VERSION = 2
DATA = 1
END = 2
STATEMENT = 3
ROUND = 12345
LENGTH = 7
SENDER = 1  # frames from hop 1, to hop 2 (or the analyzer of 2 hops)
KEY = SigningKey.generate()
STRANGER = SigningKey.generate()
SIGNER = FrameSigner(
    manifest_digest=MANIFEST_DIGEST, round_id=ROUND, sender=SENDER, signing_key=KEY
)


def items(n: int, length: int = LENGTH, *, tag: int = 0) -> list[bytes]:
    """n distinct messages of ``length`` bytes (message i starts with i, big-endian)."""
    return [
        (tag * 1_000_000 + i).to_bytes(4, "big").ljust(length, b"\xab")[:length] for i in range(n)
    ]


def spec_frame(
    *,
    kind: int,
    seq: int,
    count: int,
    body: bytes,
    item_length: int = LENGTH,
    key: SigningKey = KEY,
    sender: int = SENDER,
    digest: bytes = MANIFEST_DIGEST,
    round_id: int = ROUND,
    magic: bytes = MAGIC,
    version: int = VERSION,
) -> bytes:
    """A frame laid out and signed by hand (from the docstring, not with the encoder)."""
    header = SPEC_HEADER.pack(
        magic, version, kind, sender, digest, round_id, seq, count, item_length
    )
    return header + body + key.sign(CONTEXT + header + body).signature


def data_frame(messages: list[bytes], *, seq: int = 0, **fields: Any) -> bytes:
    return spec_frame(kind=DATA, seq=seq, count=len(messages), body=b"".join(messages), **fields)


def statement(
    *, forwarded: int, frames: int, aborted: str | None = None, **changes: Any
) -> dict[str, Any]:
    """The JSON of hop SENDER's END statement for ``forwarded`` messages in ``frames`` frames."""
    accepted = changes.pop("accepted", forwarded)
    rejected = changes.pop("rejected", {"duplicate": 1})
    own = {"accepted": accepted, "forwarded": forwarded, "rejected": rejected}
    body: dict[str, Any] = {
        "stage": f"hop-{SENDER}",
        "accepted": accepted,
        "forwarded": forwarded,
        "frames": frames,
        "rejected": rejected,
        "aborted": aborted,
        "upstream_end": "ab" * 32,
        "stages": {"hop-0": {"accepted": 99}, f"hop-{SENDER}": own},
    }
    body.update(changes)
    body.setdefault("chain", [own_statement(body)])
    return body


def own_statement(body: dict[str, Any]) -> str:
    """Hex of hop SENDER's STATEMENT frame of ``body`` (the statement without its chain, as
    the module docstring lays it out: compact JSON, kind 3, signed by hand)."""
    raw = json.dumps({**body, "chain": []}, separators=(",", ":")).encode()
    seq, count = body.get("frames"), body.get("forwarded")
    if not all(isinstance(x, int) and 0 <= x < 2**32 for x in (seq, count)):
        return "00"  # no frame can hold it: the END is refused for its counts anyway
    assert isinstance(seq, int) and isinstance(count, int)
    return spec_frame(kind=STATEMENT, seq=seq, count=count, body=raw).hex()


def end_frame(
    *, frames: int, messages: int, body: dict[str, Any] | bytes | None = None, **fields: Any
) -> bytes:
    if body is None:
        body = statement(forwarded=messages, frames=frames)
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return spec_frame(kind=END, seq=frames, count=messages, body=raw, **fields)


def end_of(frames: list[bytes], messages: int, **changes: Any) -> bytes:
    """The encoder's END for a batch of ``messages`` in ``frames``."""
    value = statement(forwarded=messages, frames=len(frames), **changes)
    return encode_end(signer=SIGNER, item_length=LENGTH, statement=_typed(value))


def _typed(value: dict[str, Any]) -> EndStatement:
    return EndStatement(**{**value, "chain": tuple(value.get("chain", ()))})


def assembler() -> FrameAssembler:
    return FrameAssembler(ROUND, MANIFEST_DIGEST, SENDER, KEY.verify_key)


def feed(target: FrameAssembler, payloads: list[bytes]) -> list[bytes]:
    out: list[bytes] = []
    for payload in payloads:
        out.extend(target.add(payload))
    return out


def counters(**counts: int) -> dict[str, int]:
    """Every frame reason at 0 but those given (keyword: the slug with '_' for '-')."""
    result = dict.fromkeys(FRAME_REJECTION_REASONS, 0)
    for name, count in counts.items():
        result[name.replace("_", "-")] = count
    return result


# --- layout and round trips -------------------------------------------------------------------


def test_layout_is_the_documented_one() -> None:
    assert SPEC_HEADER.size == 60
    batch = items(3)
    frames = encode_batch(batch, signer=SIGNER, item_length=LENGTH)
    assert frames == [data_frame(batch, seq=0)]
    body = statement(forwarded=3, frames=1)
    end = encode_end(signer=SIGNER, item_length=LENGTH, statement=_typed(body))
    assert end[: SPEC_HEADER.size] == SPEC_HEADER.pack(
        MAGIC, VERSION, END, SENDER, MANIFEST_DIGEST, ROUND, 1, 3, LENGTH
    )
    assert json.loads(end[SPEC_HEADER.size : -64]) == body
    KEY.verify_key.verify(CONTEXT + end[:-64], end[-64:])  # raises if not Ed25519 of it


@pytest.mark.parametrize(
    ("n", "frame_bytes", "per_frame"),
    [
        (10, 20, 2),  # 20 // 7 = 2 messages a frame: 5 frames
        (11, 21, 3),  # 3 a frame, the last frame holds 2
        (5, 3, 1),  # frame_bytes smaller than one message: one message a frame
        (5, 7, 1),  # exactly one message
        (40, FRAME_BYTES, 40),  # the default: one frame
    ],
)
def test_round_trip_in_order(n: int, frame_bytes: int, per_frame: int) -> None:
    batch = items(n)
    frames = encode_batch(batch, signer=SIGNER, item_length=LENGTH, frame_bytes=frame_bytes)
    assert len(frames) == -(-n // per_frame)
    for seq, frame in enumerate(frames):
        fields = SPEC_HEADER.unpack_from(frame)
        assert fields[:6] == (MAGIC, VERSION, DATA, SENDER, MANIFEST_DIGEST, ROUND)
        assert fields[6] == seq and fields[8] == LENGTH and 1 <= fields[7] <= per_frame
        assert len(frame) == SPEC_HEADER.size + fields[7] * LENGTH + 64
    target = assembler()
    end = end_of(frames, n)
    assert feed(target, [*frames, end]) == batch
    assert target.complete
    assert target.log == statement(forwarded=n, frames=len(frames))
    assert target.end_digest == hashlib.sha256(end).hexdigest()
    assert target.expected_frames == len(frames) == target.frames_received
    assert target.expected_messages == n == target.messages_received
    assert target.rejected == counters()


def test_a_refused_batch_is_complete_with_its_end_alone() -> None:
    assert encode_batch([], signer=SIGNER, item_length=LENGTH) == []
    target = assembler()
    assert not target.complete
    end = end_of([], 0, accepted=4, aborted="hop-1 refused: too few")
    assert list(target.add(end)) == []
    assert target.complete
    assert target.log is not None and target.log["aborted"] == "hop-1 refused: too few"
    assert target.rejected == counters()


def test_out_of_order_delivery_completes_with_the_same_multiset() -> None:
    batch = items(23)
    frames = encode_batch(batch, signer=SIGNER, item_length=LENGTH, frame_bytes=3 * LENGTH)
    assert len(frames) == 8
    order = list(range(len(frames)))
    random.Random(4).shuffle(order)
    target = assembler()
    assert list(target.add(end_of(frames, 23))) == []
    out: list[bytes] = []
    for position, index in enumerate(order):
        assert not target.complete
        out.extend(target.add(frames[index]))
        assert target.frames_received == position + 1
    assert target.complete
    assert Counter(out) == Counter(batch) and out != batch
    assert target.rejected == counters()


def test_not_complete_while_any_data_frame_is_missing() -> None:
    batch = items(6)
    frames = encode_batch(batch, signer=SIGNER, item_length=LENGTH, frame_bytes=2 * LENGTH)
    end = end_of(frames, 6)
    for missing in range(3):
        target = assembler()
        feed(target, [f for i, f in enumerate(frames) if i != missing] + [end])
        assert not target.complete and target.frames_received == 2
        feed(target, [frames[missing]])
        assert target.complete
    target = assembler()
    assert feed(target, frames) == batch
    assert not target.complete  # no END


# --- the attacks: forged, replayed, repeated ----------------------------------------------------


def test_a_forged_data_frame_0_ahead_of_the_real_one_does_not_shadow_it() -> None:
    """Issue 23: garbage frame 0 published (with the upstream's broker account) before the real
    one. It is forged-frame, and the real frame 0 is then taken: every message arrives."""
    batch = items(9)
    frames = encode_batch(batch, signer=SIGNER, item_length=LENGTH, frame_bytes=3 * LENGTH)
    garbage = items(3, tag=7)
    forged = [
        data_frame(garbage, seq=0, key=STRANGER),  # signed by another key
        data_frame(garbage, seq=0)[:-64] + bytes(64),  # no signature
        _with_byte(data_frame(garbage, seq=0), -1, data_frame(garbage, seq=0)[-1] ^ 1),
    ]
    target = assembler()
    assert feed(target, forged) == []
    assert target.rejected == counters(forged_frame=3)
    assert feed(target, [*frames, end_of(frames, 9)]) == batch
    assert target.complete and target.messages_received == 9


def test_a_forged_end_before_the_real_hop_starts_never_closes_or_shrinks_the_batch() -> None:
    """Issue 23: an END sent before hop 0 started made hop 1 count 1,489 of 2,000."""
    batch = items(6)
    frames = encode_batch(batch, signer=SIGNER, item_length=LENGTH, frame_bytes=2 * LENGTH)
    short = statement(forwarded=2, frames=1)
    target = assembler()
    feed(target, [end_frame(frames=1, messages=2, body=short, key=STRANGER)])
    assert target.rejected == counters(forged_end=1)
    assert target.statement is None
    feed(target, [frames[0]])
    assert not target.complete  # the forged END said one frame of 2: it does not count
    assert feed(target, [*frames[1:], end_of(frames, 6)]) == batch[2:]
    assert target.complete and target.expected_messages == 6


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"round_id": ROUND + 1}, REPLAYED_END),
        ({"round_id": ROUND - 1}, REPLAYED_END),
        ({"digest": OTHER_DIGEST}, REPLAYED_END),
        ({"sender": SENDER - 1}, FORGED_END),  # signed by the right key, claims another hop
        ({"sender": SENDER + 1}, FORGED_END),
        ({"key": STRANGER}, FORGED_END),
    ],
)
def test_an_end_of_another_round_manifest_or_sender_is_refused(
    fields: dict[str, Any], reason: str
) -> None:
    target = assembler()
    feed(target, [end_frame(frames=0, messages=0, body=statement(forwarded=0, frames=0), **fields)])
    assert target.rejected == counters(**{reason.replace("-", "_"): 1})
    assert target.statement is None and not target.complete


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"round_id": ROUND + 1}, REPLAYED_FRAME),
        ({"digest": OTHER_DIGEST}, REPLAYED_FRAME),
        ({"sender": 0}, FORGED_FRAME),
        ({"key": STRANGER}, FORGED_FRAME),
    ],
)
def test_a_data_frame_of_another_round_manifest_or_sender_is_refused(
    fields: dict[str, Any], reason: str
) -> None:
    target = assembler()
    assert feed(target, [data_frame(items(3), **fields)]) == []
    assert target.rejected == counters(**{reason.replace("-", "_"): 1})
    assert target.frames_received == 0
    batch = items(3)
    assert feed(target, [data_frame(batch), end_of([b""], 3)]) == batch
    assert target.complete


def test_repeats_and_a_second_end() -> None:
    batch = items(4)
    frames = encode_batch(batch, signer=SIGNER, item_length=LENGTH, frame_bytes=2 * LENGTH)
    end = end_of(frames, 4)
    other_end = end_of(frames, 4, rejected={"duplicate": 2})  # genuine, says something else
    target = assembler()
    assert list(target.add(frames[0])) == batch[:2]
    assert list(target.add(frames[0])) == []
    assert target.rejected == counters(duplicate_frame=1)
    # A genuine frame that reuses a number with other content: a repeat as well.
    assert list(target.add(data_frame(items(2, tag=9), seq=0))) == []
    assert list(target.add(end)) == []
    assert list(target.add(end)) == []  # QoS 1 twice: byte for byte
    assert list(target.add(other_end)) == []  # the first END stands
    assert target.rejected == counters(duplicate_frame=3, replayed_end=1)
    assert target.log is not None and target.log["rejected"] == {"duplicate": 1}
    assert list(target.add(frames[1])) == batch[2:]
    assert target.complete


def _broken(**changes: Any) -> dict[str, Any]:
    return statement(**{"forwarded": 3, "frames": 1, **changes})


INCONSISTENT: dict[str, tuple[dict[str, Any] | bytes, int, int]] = {
    "forwarded is not the header's count": (_broken(forwarded=2), 1, 3),
    "frames is not the header's": (_broken(frames=2), 1, 3),
    "header says fewer messages": (_broken(), 1, 2),
    "forwarded is not accepted": (_broken(accepted=4), 1, 3),
    "refused yet forwards": (_broken(aborted="too few"), 1, 3),
    "empty refusal": (statement(forwarded=0, frames=0, aborted=""), 0, 0),
    "more frames than messages": (statement(forwarded=1, frames=2), 2, 1),
    "frames without messages": (statement(forwarded=0, frames=1), 1, 0),
    "another stage": (_broken(stage="hop-0"), 1, 3),
    "no own log": (_broken(stages={"hop-0": {}}), 1, 3),
    "own log disagrees": (
        _broken(stages={"hop-1": {"accepted": 3, "forwarded": 3, "rejected": {}}}),
        1,
        3,
    ),
    "negative rejection": (_broken(rejected={"duplicate": -1}), 1, 3),
    "rejected not an object": (_broken(rejected=[1]), 1, 3),
    "accepted a string": (_broken(accepted="3"), 1, 3),
    "accepted a bool": (statement(forwarded=1, frames=1, accepted=True), 1, 1),
    "upstream_end not hex": (_broken(upstream_end="xyz"), 1, 3),
    "stages a list": (_broken(stages=[]), 1, 3),
    "body a list": (b"[1, 2]", 1, 3),
    "body null": (b"null", 1, 3),
    "body not JSON": (b"{not json", 1, 3),
    "body not UTF-8": (b'{"a": "\xff"}', 1, 3),
    "body deeply nested": (b"[" * 100_000, 1, 3),
}


@pytest.mark.parametrize("case", sorted(INCONSISTENT))
def test_a_genuine_end_that_does_not_add_up_is_refused(case: str) -> None:
    body, frames, messages = INCONSISTENT[case]
    target = assembler()
    assert list(target.add(end_frame(frames=frames, messages=messages, body=body))) == []
    assert target.rejected == counters(forged_end=1)
    assert target.statement is None and not target.complete
    batch = items(3)
    assert feed(target, [data_frame(batch), end_of([b""], 3)]) == batch
    assert target.complete


def test_hop_0_says_no_upstream_end() -> None:
    signer = FrameSigner(manifest_digest=MANIFEST_DIGEST, round_id=ROUND, sender=0, signing_key=KEY)
    good = EndStatement(
        stage="hop-0",
        accepted=0,
        forwarded=0,
        frames=0,
        rejected={},
        aborted="too few",
        upstream_end=None,
        stages={"hop-0": {"accepted": 0, "forwarded": 0, "rejected": {}}},
    )
    target = FrameAssembler(ROUND, MANIFEST_DIGEST, 0, KEY.verify_key)
    feed(target, [encode_end(signer=signer, item_length=LENGTH, statement=good)])
    assert target.complete
    bad = EndStatement(**{**good.to_json(), "upstream_end": "ab" * 32})
    with pytest.raises(InvalidParameterError, match="upstream_end must be null"):
        encode_end(signer=signer, item_length=LENGTH, statement=bad)


def test_encode_end_refuses_a_statement_that_does_not_add_up() -> None:
    with pytest.raises(InvalidParameterError, match=r"END statement refused: .*accepted 4"):
        encode_end(signer=SIGNER, item_length=LENGTH, statement=_typed(_broken(accepted=4)))


# --- malformed frames and bad parameters ------------------------------------------------------

VALID = data_frame(items(3))


def _with_byte(frame: bytes, index: int, value: int) -> bytes:
    data = bytearray(frame)
    data[index] = value
    return bytes(data)


MALFORMED: dict[str, bytes] = {
    "empty": b"",
    "header and signature minus one": VALID[: SPEC_HEADER.size + 63],
    "wrong magic": data_frame(items(3), magic=b"SDPG"),
    "version 1": data_frame(items(3), version=1),
    "version 3": data_frame(items(3), version=3),
    "kind 0": spec_frame(kind=0, seq=0, count=3, body=b"".join(items(3))),
    "kind 3": spec_frame(kind=3, seq=0, count=3, body=b"".join(items(3))),
    "genuine, count 4 of three messages": spec_frame(
        kind=DATA, seq=0, count=4, body=b"".join(items(3))
    ),
    "genuine, item_length 0": spec_frame(kind=DATA, seq=0, count=0, body=b"", item_length=0),
    "genuine END, item_length 0": end_frame(frames=0, messages=0, item_length=0),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_frame_is_counted_and_yields_nothing(case: str) -> None:
    target = assembler()
    assert list(target.add(MALFORMED[case])) == []  # must not raise
    assert target.rejected == counters(malformed_frame=1)
    assert target.log is None and target.frames_received == 0 and not target.complete


def test_encode_batch_rejects_a_message_of_the_wrong_length() -> None:
    good = items(5)
    for bad in ([*good[:4], good[4] + b"x"], [good[0][:-1], *good[1:]], [b"", *good]):
        with pytest.raises(InvalidParameterError, match="7 bytes"):
            encode_batch(bad, signer=SIGNER, item_length=LENGTH, frame_bytes=2 * LENGTH)


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ({"manifest_digest": bytes(31)}, "manifest_digest must be the 32-byte digest"),
        ({"round_id": -1}, "round_id"),
        ({"round_id": 2**64}, "round_id"),
        ({"sender": 2**16}, "sender"),
        ({"signing_key": KEY.verify_key}, "signing_key must be a nacl.signing.SigningKey"),
    ],
)
def test_frame_signer_is_validated(change: dict[str, Any], rule: str) -> None:
    fields: dict[str, Any] = {
        "manifest_digest": MANIFEST_DIGEST,
        "round_id": ROUND,
        "sender": SENDER,
        "signing_key": KEY,
        **change,
    }
    with pytest.raises(InvalidParameterError, match=rule):
        FrameSigner(**fields)


@pytest.mark.parametrize(
    ("arguments", "rule"),
    [
        ((ROUND, bytes(32)[:5], SENDER, KEY.verify_key), "manifest_digest"),
        ((ROUND, MANIFEST_DIGEST, -1, KEY.verify_key), "upstream"),
        ((ROUND, MANIFEST_DIGEST, SENDER, KEY), "upstream_verify_key must be a nacl.signing"),
        ((ROUND, MANIFEST_DIGEST, SENDER, None), "upstream_verify_key must be a nacl.signing"),
    ],
)
def test_frame_assembler_is_validated(arguments: tuple[Any, ...], rule: str) -> None:
    with pytest.raises(InvalidParameterError, match=rule):
        FrameAssembler(*arguments)


# --- property: any single mutation of a genuine frame is refused -------------------------------

BATCH = items(5)
GENUINE_DATA = encode_batch(BATCH, signer=SIGNER, item_length=LENGTH)[0]
GENUINE_END = end_of([GENUINE_DATA], 5)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.sampled_from(["data", "end"]),
    position=st.integers(0, 10**6),
    delta=st.integers(1, 255),
)
def test_any_single_byte_change_of_a_genuine_frame_is_refused(
    which: str, position: int, delta: int
) -> None:
    frame = GENUINE_DATA if which == "data" else GENUINE_END
    index = position % len(frame)
    mutated = _with_byte(frame, index, (frame[index] + delta) % 256)
    target = assembler()
    assert list(target.add(mutated)) == []
    assert sum(target.rejected.values()) == 1
    assert target.statement is None and target.frames_received == 0
    # The genuine frames still do what they should.
    assert feed(target, [GENUINE_DATA, GENUINE_END]) == BATCH
    assert target.complete


@settings(max_examples=150, deadline=None)
@given(
    which=st.sampled_from(["data", "end"]),
    cut=st.integers(0, 10**6),
    extra=st.binary(min_size=1, max_size=8),
)
def test_a_truncated_or_extended_genuine_frame_is_refused(
    which: str, cut: int, extra: bytes
) -> None:
    frame = GENUINE_DATA if which == "data" else GENUINE_END
    for mutated in (frame[: cut % len(frame)], frame + extra, frame[:-64] + extra + frame[-64:]):
        target = assembler()
        assert list(target.add(mutated)) == []
        assert sum(target.rejected.values()) == 1 and target.statement is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=8))
def test_arbitrary_bytes_never_raise_and_yield_nothing(payloads: list[bytes]) -> None:
    target = assembler()
    assert feed(target, payloads) == []
    assert sum(target.rejected.values()) == len(payloads)
    assert target.statement is None


def test_a_view_or_bytearray_of_a_frame_is_taken_like_its_bytes() -> None:
    for wrapper in (bytearray, memoryview):
        target = assembler()
        assert feed(target, [wrapper(GENUINE_DATA), wrapper(GENUINE_END)]) == BATCH  # type: ignore[list-item]
        assert target.complete


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(
    key=st.sampled_from(["stage", "accepted", "forwarded", "frames", "rejected", "aborted"]),
    value=JSON_VALUES,
)
def test_a_genuinely_signed_statement_with_any_count_changed_is_refused(
    key: str, value: Any
) -> None:
    """The hop itself signs a statement with one of its counts (or its name, or its refusal)
    changed to any JSON value: unless the value is the original, it does not add up with the
    header and its own log, and is forged-end, never an exception, never a closed batch."""
    body = statement(forwarded=5, frames=1)
    body[key] = value
    target = assembler()
    assert list(target.add(end_frame(frames=1, messages=5, body=body))) == []
    if json.dumps(value) == json.dumps(statement(forwarded=5, frames=1)[key]):  # True != 1
        assert target.statement is not None
    else:
        assert target.rejected == counters(forged_end=1) and target.statement is None
