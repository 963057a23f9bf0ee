"""Batch frames (shuffledp.protocol.frames): encode_batch / encode_end and FrameAssembler.

What is checked:
- the header layout is the one the module docstring states (built here with our own struct);
- round trips: every message back, in order, across several frames (also with frame_bytes below
  one message), an empty batch (no data frame, END only) is complete;
- out-of-order delivery (END first, data shuffled) completes with the same multiset, and
  ``complete`` stays False while any data frame is missing;
- repeats (data frame, END) are counted under duplicate-frame and yield nothing;
- every malformed case is counted under malformed-frame, yields nothing and never raises;
- hypothesis: arbitrary byte strings and mutated frames never make ``add`` raise, and ``add``
  yields exactly the items of new well-formed data frames (a reference parser written from the
  module docstring decides which those are).
"""

from __future__ import annotations

import json
import random
import struct
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.frames import (
    DUPLICATE_FRAME,
    FRAME_BYTES,
    MALFORMED_FRAME,
    FrameAssembler,
    encode_batch,
    encode_end,
)

# The header as the module docstring specifies it (independent of frames.HEADER):
# magic b"SDPF" | version u8 | kind u8 | round u64 | seq u32 | count u32 | item_length u32
SPEC_HEADER = struct.Struct(">4sBBQIII")
MAGIC = b"SDPF"
VERSION = 1
DATA = 1
END = 2
ROUND = 12345
LENGTH = 7


def items(n: int, length: int = LENGTH, *, tag: int = 0) -> list[bytes]:
    """n distinct messages of ``length`` bytes (message i starts with i, big-endian)."""
    return [
        (tag * 1_000_000 + i).to_bytes(4, "big").ljust(length, b"\xab")[:length] for i in range(n)
    ]


def header(
    *,
    kind: int = DATA,
    seq: int = 0,
    count: int = 0,
    item_length: int = LENGTH,
    round_id: int = ROUND,
    magic: bytes = MAGIC,
    version: int = VERSION,
) -> bytes:
    return SPEC_HEADER.pack(magic, version, kind, round_id, seq, count, item_length)


def data_frame(messages: list[bytes], *, seq: int = 0, **fields: Any) -> bytes:
    return header(kind=DATA, seq=seq, count=len(messages), **fields) + b"".join(messages)


def end_frame(*, frames: int, messages: int, body: bytes = b"{}", **fields: Any) -> bytes:
    return header(kind=END, seq=frames, count=messages, **fields) + body


def feed(assembler: FrameAssembler, payloads: list[bytes]) -> list[bytes]:
    out: list[bytes] = []
    for payload in payloads:
        out.extend(assembler.add(payload))
    return out


def counters(malformed: int = 0, duplicate: int = 0) -> dict[str, int]:
    return {MALFORMED_FRAME: malformed, DUPLICATE_FRAME: duplicate}


# --- layout and round trips -------------------------------------------------------------------


def test_header_layout_is_the_documented_one() -> None:
    assert SPEC_HEADER.size == 26
    batch = items(3)
    frames = encode_batch(batch, round_id=ROUND, item_length=LENGTH)
    assert frames == [data_frame(batch, seq=0)]
    end = encode_end(round_id=ROUND, frames=1, messages=3, item_length=LENGTH, log={"a": [1, 2]})
    assert end[: SPEC_HEADER.size] == header(kind=END, seq=1, count=3)
    assert json.loads(end[SPEC_HEADER.size :]) == {"a": [1, 2]}


@pytest.mark.parametrize(
    ("n", "frame_bytes", "per_frame"),
    [
        (10, 20, 2),  # 20 // 7 = 2 messages a frame: 5 frames
        (11, 21, 3),  # 3 a frame, the last frame holds 2
        (5, 3, 1),  # frame_bytes smaller than one message: one message a frame
        (5, 1, 1),
        (5, 7, 1),  # exactly one message
        (40, FRAME_BYTES, 40),  # the default: one frame
    ],
)
def test_round_trip_in_order(n: int, frame_bytes: int, per_frame: int) -> None:
    batch = items(n)
    frames = encode_batch(batch, round_id=ROUND, item_length=LENGTH, frame_bytes=frame_bytes)
    assert len(frames) == -(-n // per_frame)
    for seq, frame in enumerate(frames):
        fields = SPEC_HEADER.unpack_from(frame)
        assert fields == (MAGIC, VERSION, DATA, ROUND, seq, fields[5], LENGTH)
        assert 1 <= fields[5] <= per_frame
        assert len(frame) == SPEC_HEADER.size + fields[5] * LENGTH
    assembler = FrameAssembler(ROUND)
    log = {"stages": {"hop-0": {"accepted": n}}, "aborted": None}
    end = encode_end(round_id=ROUND, frames=len(frames), messages=n, item_length=LENGTH, log=log)
    out = feed(assembler, [*frames, end])
    assert out == batch
    assert assembler.complete
    assert assembler.log == log
    assert assembler.expected_frames == len(frames) == assembler.frames_received
    assert assembler.expected_messages == n == assembler.messages_received
    assert assembler.rejected == counters()


def test_empty_batch_is_complete_with_end_only() -> None:
    assert encode_batch([], round_id=ROUND, item_length=LENGTH) == []
    assembler = FrameAssembler(ROUND)
    assert not assembler.complete
    log = {"aborted": "hop 0 refused"}
    end = encode_end(round_id=ROUND, frames=0, messages=0, item_length=LENGTH, log=log)
    assert list(assembler.add(end)) == []
    assert assembler.complete
    assert assembler.log == log
    assert assembler.messages_received == 0 == assembler.frames_received
    assert assembler.rejected == counters()


def test_out_of_order_delivery_completes_with_the_same_multiset() -> None:
    batch = items(23)
    frames = encode_batch(batch, round_id=ROUND, item_length=LENGTH, frame_bytes=3 * LENGTH)
    assert len(frames) == 8
    end = encode_end(round_id=ROUND, frames=8, messages=23, item_length=LENGTH, log={})
    order = list(range(len(frames)))
    random.Random(4).shuffle(order)
    assert order != sorted(order)
    assembler = FrameAssembler(ROUND)
    assert list(assembler.add(end)) == []
    out: list[bytes] = []
    for position, index in enumerate(order):
        assert not assembler.complete  # frames order[position:] still missing
        out.extend(assembler.add(frames[index]))
        assert assembler.frames_received == position + 1
    assert assembler.complete
    assert Counter(out) == Counter(batch)
    assert out != batch  # the frames really came out of order
    assert assembler.rejected == counters()


def test_not_complete_while_any_data_frame_is_missing() -> None:
    batch = items(6)
    frames = encode_batch(batch, round_id=ROUND, item_length=LENGTH, frame_bytes=2 * LENGTH)
    end = encode_end(round_id=ROUND, frames=3, messages=6, item_length=LENGTH, log={})
    for missing in range(3):
        assembler = FrameAssembler(ROUND)
        feed(assembler, [f for i, f in enumerate(frames) if i != missing] + [end])
        assert not assembler.complete, missing
        assert assembler.frames_received == 2
        feed(assembler, [frames[missing]])
        assert assembler.complete
    # Every data frame but no END: not complete either.
    assembler = FrameAssembler(ROUND)
    assert feed(assembler, frames) == batch
    assert not assembler.complete


def test_repeated_frames_are_counted_and_yield_nothing() -> None:
    batch = items(4)
    frames = encode_batch(batch, round_id=ROUND, item_length=LENGTH, frame_bytes=2 * LENGTH)
    end = encode_end(round_id=ROUND, frames=2, messages=4, item_length=LENGTH, log={"x": 1})
    other_end = encode_end(round_id=ROUND, frames=5, messages=9, item_length=LENGTH, log={"x": 2})
    assembler = FrameAssembler(ROUND)
    assert list(assembler.add(frames[0])) == batch[:2]
    assert list(assembler.add(frames[0])) == []
    assert assembler.rejected == counters(duplicate=1)
    # A data frame that reuses a sequence number with other content is a repeat as well.
    assert list(assembler.add(data_frame(items(2, tag=9), seq=0))) == []
    assert assembler.rejected == counters(duplicate=2)
    assert list(assembler.add(end)) == []
    assert list(assembler.add(end)) == []
    assert list(assembler.add(other_end)) == []  # the first END stands
    assert assembler.rejected == counters(duplicate=4)
    assert (assembler.expected_frames, assembler.expected_messages) == (2, 4)
    assert assembler.log == {"x": 1}
    assert list(assembler.add(frames[1])) == batch[2:]
    assert assembler.complete
    assert assembler.messages_received == 4
    assert list(assembler.add(frames[1])) == []
    assert assembler.rejected == counters(duplicate=5)


def test_encode_batch_rejects_a_message_of_the_wrong_length() -> None:
    good = items(5)
    for bad in ([*good[:4], good[4] + b"x"], [good[0][:-1], *good[1:]], [b"", *good]):
        with pytest.raises(InvalidParameterError, match="7 bytes"):
            encode_batch(bad, round_id=ROUND, item_length=LENGTH, frame_bytes=2 * LENGTH)


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("item_length", {"item_length": 0}),
        ("frame_bytes", {"frame_bytes": 0}),
        ("round_id", {"round_id": -1}),
        ("round_id", {"round_id": 2**64}),
    ],
)
def test_encode_batch_rejects_bad_parameters(field: str, kwargs: dict[str, int]) -> None:
    arguments: dict[str, int] = {"round_id": ROUND, "item_length": LENGTH, **kwargs}
    with pytest.raises(InvalidParameterError, match=field):
        encode_batch(items(2), **arguments)


# --- malformed frames -------------------------------------------------------------------------

VALID = data_frame(items(3))


def _with_byte(frame: bytes, index: int, value: int) -> bytes:
    data = bytearray(frame)
    data[index] = value
    return bytes(data)


MALFORMED: dict[str, bytes] = {
    "empty": b"",
    "one byte short of the header": VALID[: SPEC_HEADER.size - 1],
    "wrong magic": b"SDPG" + VALID[4:],
    "wrong magic case": b"sdpf" + VALID[4:],
    "version 0": _with_byte(VALID, 4, 0),
    "version 2": _with_byte(VALID, 4, 2),
    "wrong round": data_frame(items(3), round_id=ROUND + 1),
    "round 0": data_frame(items(3), round_id=0),
    "kind 0": _with_byte(VALID, 5, 0),
    "kind 3": _with_byte(VALID, 5, 3),
    "kind 255": _with_byte(VALID, 5, 255),
    "body one byte long": VALID + b"\x00",
    "body one byte short": VALID[:-1],
    "header only, count 3": VALID[: SPEC_HEADER.size],
    "count 4, three messages": header(count=4) + b"".join(items(3)),
    "item_length 0, count 0": header(count=0, item_length=0),
    "item_length 0, count 3": header(count=3, item_length=0),
    "item_length 0, end": end_frame(frames=0, messages=0, item_length=0),
    "end of the wrong round": end_frame(frames=0, messages=0, round_id=ROUND - 1),
    "end of the wrong version": _with_byte(end_frame(frames=0, messages=0), 4, 9),
    "end body empty": end_frame(frames=0, messages=0, body=b""),
    "end body not JSON": end_frame(frames=0, messages=0, body=b"{not json"),
    "end body truncated JSON": end_frame(frames=0, messages=0, body=b'{"a": 1'),
    "end body a JSON list": end_frame(frames=0, messages=0, body=b"[1, 2]"),
    "end body a JSON number": end_frame(frames=0, messages=0, body=b"3"),
    "end body a JSON string": end_frame(frames=0, messages=0, body=b'"log"'),
    "end body JSON null": end_frame(frames=0, messages=0, body=b"null"),
    "end body not UTF-8": end_frame(frames=0, messages=0, body=b'{"a": "\xff\xfe"}'),
    "end body latin-1": end_frame(frames=0, messages=0, body='{"a": "é"}'.encode("latin-1")),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_frame_is_counted_and_yields_nothing(case: str) -> None:
    assembler = FrameAssembler(ROUND)
    out = list(assembler.add(MALFORMED[case]))  # must not raise
    assert out == []
    assert assembler.rejected == counters(malformed=1)
    assert assembler.log is None and assembler.expected_frames is None
    assert assembler.frames_received == 0 == assembler.messages_received
    assert not assembler.complete
    # The assembler still works: a malformed END does not stand in the way of the real one.
    batch = items(2)
    end = encode_end(round_id=ROUND, frames=1, messages=2, item_length=LENGTH, log={"ok": True})
    assert feed(assembler, [end, data_frame(batch)]) == batch
    assert assembler.complete and assembler.log == {"ok": True}
    assert assembler.rejected == counters(malformed=1)


def test_deeply_nested_end_body_is_malformed_not_an_exception() -> None:
    assembler = FrameAssembler(ROUND)
    out = list(assembler.add(end_frame(frames=0, messages=0, body=b"[" * 100_000)))
    assert out == []
    assert assembler.rejected == counters(malformed=1)


def test_complete_requires_the_announced_number_of_messages() -> None:
    assembler = FrameAssembler(ROUND)
    feed(assembler, [end_frame(frames=1, messages=5), data_frame(items(3))])
    assert assembler.messages_received == 3
    assert not assembler.complete


# --- property: any bytes ----------------------------------------------------------------------


def reference_items(payloads: list[bytes], round_id: int) -> tuple[list[list[bytes]], Counter[str]]:
    """What the module docstring says ``add`` yields for each payload, and the counters."""
    seen: set[int] = set()
    end_seen = False
    counts: Counter[str] = Counter({MALFORMED_FRAME: 0, DUPLICATE_FRAME: 0})
    outputs: list[list[bytes]] = []
    for payload in payloads:
        out: list[bytes] = []
        outputs.append(out)
        if len(payload) < SPEC_HEADER.size:
            counts[MALFORMED_FRAME] += 1
            continue
        magic, version, kind, rnd, seq, count, item_length = SPEC_HEADER.unpack_from(payload)
        body = payload[SPEC_HEADER.size :]
        if magic != MAGIC or version != VERSION or rnd != round_id or item_length == 0:
            counts[MALFORMED_FRAME] += 1
        elif kind == END:
            if end_seen:
                counts[DUPLICATE_FRAME] += 1
                continue
            try:
                log = json.loads(body.decode("utf-8"))
            except ValueError:  # UnicodeDecodeError is a ValueError
                log = None
            if isinstance(log, dict):
                end_seen = True
            else:
                counts[MALFORMED_FRAME] += 1
        elif kind != DATA or len(body) != count * item_length:
            counts[MALFORMED_FRAME] += 1
        elif seq in seen:
            counts[DUPLICATE_FRAME] += 1
        else:
            seen.add(seq)
            out.extend(body[i * item_length : (i + 1) * item_length] for i in range(count))
    return outputs, counts


@st.composite
def frame_like(draw: st.DrawFn) -> bytes:
    """Well-formed data and END frames, the same with one field or the length mutated (so that
    both branches of every check are reached), and arbitrary bytes."""
    choice = draw(st.integers(0, 4))
    if choice == 0:
        return draw(st.binary(max_size=80))
    fields: dict[str, Any] = {
        "magic": MAGIC,
        "version": VERSION,
        "kind": draw(st.sampled_from([DATA, DATA, END])),
        "round_id": ROUND,
        "seq": draw(st.integers(0, 4)),
        "count": draw(st.integers(0, 4)),
        "item_length": draw(st.sampled_from([1, 3, LENGTH])),
    }
    if fields["kind"] == END:
        body = draw(
            st.one_of(
                st.dictionaries(st.text(max_size=5), st.integers(), max_size=3).map(
                    lambda d: json.dumps(d).encode()
                ),
                st.sampled_from([b"[]", b"null", b"\xff", b"{", b""]),
            )
        )
    else:
        size = int(fields["count"]) * int(fields["item_length"])
        body = draw(st.binary(min_size=size, max_size=size))
    if choice == 3:  # one field changed
        name = draw(st.sampled_from(sorted(fields)))
        fields[name] = draw(
            {
                "magic": st.sampled_from([b"SDPG", b"\x00" * 4, b"FPDS"]),
                "version": st.sampled_from([0, 2, 255]),
                "kind": st.sampled_from([0, DATA, END, 3, 255]),
                "round_id": st.sampled_from([0, ROUND - 1, ROUND + 1, 2**64 - 1]),
                "seq": st.integers(0, 2**32 - 1),
                "count": st.integers(0, 2**32 - 1),
                "item_length": st.sampled_from([0, 1, 2, 2**32 - 1]),
            }[name]
        )
    frame = SPEC_HEADER.pack(*fields.values()) + body
    if choice == 4:  # truncated or extended
        cut = draw(st.integers(0, len(frame) + 3))
        frame = frame[:cut] if cut <= len(frame) else frame + b"\x00" * (cut - len(frame))
    return frame


@pytest.mark.slow
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(frame_like(), max_size=12))
def test_add_never_raises_and_yields_exactly_well_formed_items(payloads: list[bytes]) -> None:
    assembler = FrameAssembler(ROUND)
    expected, counts = reference_items(payloads, ROUND)
    total = 0
    for payload, want in zip(payloads, expected, strict=True):
        got = list(assembler.add(payload))
        assert got == want
        total += len(got)
    assert assembler.rejected == dict(counts)
    assert assembler.messages_received == total
