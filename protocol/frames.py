"""How a hop forwards its permuted batch: fixed-header frames (pure core).

Clients publish one MQTT message per report to hop 0. After a hop has permuted its batch, the
order is already random, so the batch travels on as a few large frames instead of one message
per report (docs/transport.md: the per-publish cost of the Python MQTT client, not the broker, is the
bottleneck). A batch is ``DATA`` frames numbered 0..F-1, each holding whole messages of one
fixed length back to back, then one ``END`` frame that says how many data frames and messages
were sent and carries the upstream stages' round logs (counts only, no message content).

Header (HEADER.size = 26 bytes, integers unsigned big-endian)::

    magic b"SDPF" | version u8 | kind u8 | round u64 | seq u32 | count u32 | item_length u32

``DATA``: ``seq`` is the frame's index, ``count`` the number of messages, the body exactly
``count * item_length`` bytes. ``END``: ``seq`` is the number of data frames F, ``count`` the
number of messages in all of them, the body a UTF-8 JSON object (the log).

:class:`FrameAssembler` is the receiving side. Every frame is checked (magic, version, kind,
round, body length, JSON); a frame that fails is counted under ``malformed-frame`` and dropped
(never an exception), a repeated data frame (QoS 1 may deliver twice) under ``duplicate-frame``.
The batch is complete when END has arrived and data frames 0..F-1 with ``count`` messages in
all. Messages are then screened one by one by the stage (length, duplicates, decryption), so a
frame cannot smuggle in anything a single message could not.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.record import MAX_ROUND_ID
from shuffledp.validation import require_int

__all__ = [
    "DUPLICATE_FRAME",
    "FRAME_BYTES",
    "FRAME_REJECTION_REASONS",
    "MALFORMED_FRAME",
    "FrameAssembler",
    "encode_batch",
    "encode_end",
]

MAGIC = b"SDPF"
FRAME_VERSION = 1
KIND_DATA = 1
KIND_END = 2
HEADER = struct.Struct(">4sBBQIII")
FRAME_BYTES = 256 * 1024
"""Target payload size of a data frame: large enough to amortise a publish, small enough for
any broker's default message size limit."""
MAX_END_BODY = 1 << 20

MALFORMED_FRAME = "malformed-frame"
DUPLICATE_FRAME = "duplicate-frame"
FRAME_REJECTION_REASONS: tuple[str, ...] = (MALFORMED_FRAME, DUPLICATE_FRAME)


def encode_batch(
    messages: Sequence[bytes], *, round_id: int, item_length: int, frame_bytes: int = FRAME_BYTES
) -> list[bytes]:
    """The data frames of ``messages`` (each exactly ``item_length`` bytes), in order, each at
    most ``max(1, frame_bytes // item_length)`` messages. An empty batch has no data frames.

    Raises InvalidParameterError for a message of another length or bad parameters.
    """
    require_int("round_id", round_id, 0, MAX_ROUND_ID)
    require_int("item_length", item_length, 1)
    require_int("frame_bytes", frame_bytes, 1)
    per_frame = max(1, frame_bytes // item_length)
    frames = []
    for seq, start in enumerate(range(0, len(messages), per_frame)):
        chunk = messages[start : start + per_frame]
        for message in chunk:
            if len(message) != item_length:
                raise InvalidParameterError(
                    f"every message of a batch must be {item_length} bytes, got {len(message)}"
                )
        header = HEADER.pack(
            MAGIC, FRAME_VERSION, KIND_DATA, round_id, seq, len(chunk), item_length
        )
        frames.append(header + b"".join(chunk))
    return frames


def encode_end(
    *, round_id: int, frames: int, messages: int, item_length: int, log: dict[str, Any]
) -> bytes:
    """The END frame of a batch of ``frames`` data frames and ``messages`` messages."""
    require_int("round_id", round_id, 0, MAX_ROUND_ID)
    require_int("frames", frames, 0, 2**32 - 1)
    require_int("messages", messages, 0, 2**32 - 1)
    require_int("item_length", item_length, 1)
    body = json.dumps(log, separators=(",", ":"), allow_nan=False).encode()
    if len(body) > MAX_END_BODY:
        raise InvalidParameterError(
            f"END log must be at most {MAX_END_BODY} bytes, got {len(body)}"
        )
    return (
        HEADER.pack(MAGIC, FRAME_VERSION, KIND_END, round_id, frames, messages, item_length) + body
    )


@dataclass(slots=True)
class FrameAssembler:
    """Collects the frames of one batch for round ``round_id``; see the module docstring."""

    round_id: int
    rejected: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(FRAME_REJECTION_REASONS, 0)
    )
    log: dict[str, Any] | None = None
    expected_frames: int | None = None
    expected_messages: int | None = None
    _seen: set[int] = field(default_factory=set)
    _messages: int = 0

    def add(self, payload: bytes) -> Iterator[bytes]:
        """The messages of ``payload`` if it is a new, well-formed data frame (else nothing; an
        END frame records the batch's size and log). Never raises for any bytes."""
        if len(payload) < HEADER.size:
            self.rejected[MALFORMED_FRAME] += 1
            return iter(())
        magic, version, kind, round_id, seq, count, item_length = HEADER.unpack_from(payload)
        body = memoryview(payload)[HEADER.size :]
        if (
            magic != MAGIC
            or version != FRAME_VERSION
            or round_id != self.round_id
            or item_length < 1
        ):
            self.rejected[MALFORMED_FRAME] += 1
            return iter(())
        if kind == KIND_END:
            return self._end(seq, count, body)
        if kind != KIND_DATA or len(body) != count * item_length:
            self.rejected[MALFORMED_FRAME] += 1
            return iter(())
        if seq in self._seen:
            self.rejected[DUPLICATE_FRAME] += 1
            return iter(())
        self._seen.add(seq)
        self._messages += count
        data = bytes(body)
        return (data[i : i + item_length] for i in range(0, len(data), item_length))

    def _end(self, frames: int, messages: int, body: memoryview) -> Iterator[bytes]:
        if self.expected_frames is not None:
            self.rejected[DUPLICATE_FRAME] += 1
            return iter(())
        try:
            log = json.loads(bytes(body).decode())
        except (UnicodeDecodeError, ValueError, RecursionError):  # RecursionError: '[[[[...'
            log = None
        if not isinstance(log, dict):
            self.rejected[MALFORMED_FRAME] += 1
            return iter(())
        self.log = log
        self.expected_frames = frames
        self.expected_messages = messages
        return iter(())

    @property
    def frames_received(self) -> int:
        return len(self._seen)

    @property
    def messages_received(self) -> int:
        return self._messages

    @property
    def complete(self) -> bool:
        """True once END arrived, every data frame it announced has arrived, and they hold the
        number of messages it announced (an upstream that miscounts never completes: the stage
        then closes at its deadline with what it has)."""
        return (
            self.expected_frames is not None
            and self._messages == self.expected_messages
            and len(self._seen) >= self.expected_frames
            and all(seq in self._seen for seq in range(self.expected_frames))
        )
