"""How a hop forwards its permuted batch: signed fixed-header frames (pure core).

Clients publish one MQTT message per report to hop 0. After a hop has permuted its batch, the
order is already random, so the batch travels on as a few large frames instead of one message
per report (docs/transport.md: the per-publish cost of the Python MQTT client, not the broker, is the
bottleneck). A batch is ``DATA`` frames numbered 0..F-1, each holding whole messages of one
fixed length back to back, then one ``END`` frame whose body is the hop's signed statement
(:class:`~shuffledp.protocol.end_statement.EndStatement`: accepted, forwarded, rejected by
reason, refusal, the upstream stages' round logs).

Frame (version 2; integers unsigned big-endian)::

    header (HEADER.size = 60 bytes):
      magic b"SDPF" | version u8 | kind u8 | sender u16 | manifest digest 32 bytes
      | round u64 | seq u32 | count u32 | item_length u32
    body
    signature: 64 bytes, Ed25519 (the sender hop's signing key) of SIGNING_CONTEXT | header | body

``sender`` is the index of the hop that sent the frame; the manifest digest and the round say
which round it belongs to. ``DATA``: ``seq`` is the frame's index, ``count`` the number of
messages, the body exactly ``count * item_length`` bytes. ``END``: ``seq`` is the number of data
frames F, ``count`` the number of messages in all of them, the body the statement as UTF-8 JSON.
``STATEMENT`` (kind 3): the same header and the hop's statement without its chain; it never
travels alone (a receiver drops it as ``malformed-frame``), only hex-encoded in the ``chain`` of
END statements (:func:`statement_frame`, :func:`open_statement`): the END frame of hop j carries
the STATEMENT frames of hops 0..j, so whoever holds the manifest verifies every hop's statement
with that hop's own key (:mod:`~shuffledp.protocol.end_chain`). A hop signs its statement twice,
as its STATEMENT frame and in its END frame: one Ed25519 signature more per hop and round.

Why every frame is signed, not only END: a frame travels under a broker account (the upstream
hop's), and whoever holds that account, or the broker itself, could otherwise publish a DATA
frame 0 ahead of the real one, which would then be dropped as a repeat, or an END frame that
closes the batch early. A signature binds each frame to the upstream hop's key, to this
manifest and round, and to its position; the cost is one Ed25519 signature per 256 KiB frame
(measured by ``bench/wire.py``: well under a millisecond per frame, against tens of
milliseconds to peel the frame's messages).

:class:`FrameAssembler` is the receiving side; no bytes make it raise. Every frame is checked,
cheapest first, and a frame that fails is counted under one reason and dropped:

- ``malformed-frame``: too short, another magic, version or kind, or a sender that is not the
  upstream hop;
- ``forged-frame`` / ``forged-end``: the signature does not verify with the upstream hop's key
  (forged, corrupted, or signed by another key), or, for END, the signed statement is not well
  formed or does not add up (EndStatement.from_json);
- ``replayed-frame`` / ``replayed-end``: a genuine frame of another manifest or round (a replay
  from elsewhere), or a second, different END of this round;
- ``malformed-frame`` also for a genuine DATA frame whose body is not ``count * item_length``;
- ``duplicate-frame``: a data frame number already taken, or the END frame again byte for byte
  (QoS 1 may deliver twice).

The batch is complete when the genuine END has arrived and data frames 0..F-1 with ``count``
messages in all. Messages are then screened one by one by the stage (length, duplicates,
decryption), so a frame cannot smuggle in anything a single message could not; since every
frame is genuine, what the stage then rejects was sent by its upstream hop (a loss to account,
not junk from an outsider: protocol/delivery.py).
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.end_statement import EndStatement, StatementError
from shuffledp.protocol.errors import ForgedEnd
from shuffledp.protocol.record import MAX_ROUND_ID, require_manifest_digest
from shuffledp.validation import require_int

__all__ = [
    "DUPLICATE_FRAME",
    "FORGED_END",
    "FORGED_FRAME",
    "FRAME_BYTES",
    "FRAME_REJECTION_REASONS",
    "MALFORMED_FRAME",
    "REPLAYED_END",
    "REPLAYED_FRAME",
    "FrameAssembler",
    "FrameSigner",
    "encode_batch",
    "encode_end",
    "open_statement",
    "require_signing_key",
    "require_verify_key",
    "statement_frame",
]

MAGIC = b"SDPF"
FRAME_VERSION = 2
KIND_DATA = 1
KIND_END = 2
KIND_STATEMENT = 3
HEADER = struct.Struct(">4sBBH32sQIII")
SIGNATURE_SIZE = 64
SIGNING_CONTEXT = b"shuffledp/frame/v2\0"
"""Signed before every frame's bytes, so a signature over a frame is never valid for anything
else the same key might sign."""
MAX_SENDER = 2**16 - 1
FRAME_BYTES = 256 * 1024
"""Target payload size of a data frame: large enough to amortise a publish, small enough for
any broker's default message size limit."""
MAX_END_BODY = 1 << 20

MALFORMED_FRAME = "malformed-frame"
DUPLICATE_FRAME = "duplicate-frame"
FORGED_FRAME = "forged-frame"
FORGED_END = ForgedEnd.reason
REPLAYED_FRAME = "replayed-frame"
REPLAYED_END = "replayed-end"
FRAME_REJECTION_REASONS: tuple[str, ...] = (
    MALFORMED_FRAME,
    DUPLICATE_FRAME,
    FORGED_FRAME,
    FORGED_END,
    REPLAYED_FRAME,
    REPLAYED_END,
)


def require_signing_key(key: object, name: str = "signing_key") -> SigningKey:
    """``key`` if it is a nacl.signing.SigningKey, else InvalidParameterError naming its type."""
    if not isinstance(key, SigningKey):
        raise InvalidParameterError(
            f"{name} must be a nacl.signing.SigningKey (the hop's Ed25519 key), "
            f"got {type(key).__name__}"
        )
    return key


def require_verify_key(key: object, name: str = "upstream_verify_key") -> VerifyKey:
    """``key`` if it is a nacl.signing.VerifyKey, else InvalidParameterError naming its type."""
    if not isinstance(key, VerifyKey):
        raise InvalidParameterError(
            f"{name} must be a nacl.signing.VerifyKey (the upstream hop's Ed25519 key), "
            f"got {type(key).__name__}"
        )
    return key


@dataclass(frozen=True, slots=True, kw_only=True)
class FrameSigner:
    """Who sends a batch and under which round: hop ``sender`` of the round ``round_id`` of
    the manifest ``manifest_digest``, signing with ``signing_key`` (validated on
    construction)."""

    manifest_digest: bytes
    round_id: int
    sender: int
    signing_key: SigningKey = field(repr=False)

    def __post_init__(self) -> None:
        require_manifest_digest(self.manifest_digest)
        require_int("round_id", self.round_id, 0, MAX_ROUND_ID)
        require_int("sender", self.sender, 0, MAX_SENDER)
        require_signing_key(self.signing_key)

    def frame(self, kind: int, seq: int, count: int, item_length: int, body: bytes) -> bytes:
        """header | body | signature."""
        header = HEADER.pack(
            MAGIC,
            FRAME_VERSION,
            kind,
            self.sender,
            bytes(self.manifest_digest),
            self.round_id,
            seq,
            count,
            item_length,
        )
        signature = self.signing_key.sign(SIGNING_CONTEXT + header + body).signature
        return header + body + signature


def encode_batch(
    messages: Sequence[bytes],
    *,
    signer: FrameSigner,
    item_length: int,
    frame_bytes: int = FRAME_BYTES,
) -> list[bytes]:
    """The signed data frames of ``messages`` (each exactly ``item_length`` bytes), in order,
    each at most ``max(1, frame_bytes // item_length)`` messages. An empty batch has no data
    frames.

    Raises InvalidParameterError for a message of another length or bad parameters.
    """
    if not isinstance(signer, FrameSigner):
        raise InvalidParameterError(f"signer must be a FrameSigner, got {type(signer).__name__}")
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
        frames.append(signer.frame(KIND_DATA, seq, len(chunk), item_length, b"".join(chunk)))
    return frames


def _statement_body(statement: EndStatement) -> bytes:
    body = json.dumps(statement.to_json(), separators=(",", ":"), allow_nan=False).encode()
    if len(body) > MAX_END_BODY:
        raise InvalidParameterError(
            f"END statement must be at most {MAX_END_BODY} bytes, got {len(body)}"
        )
    return body


def statement_frame(*, signer: FrameSigner, item_length: int, statement: EndStatement) -> bytes:
    """The signed STATEMENT frame of ``statement`` without its chain (module docstring)."""
    core = statement.core()
    body = _statement_body(core)
    return signer.frame(KIND_STATEMENT, core.frames, core.forwarded, item_length, body)


def encode_end(
    *,
    signer: FrameSigner,
    item_length: int,
    statement: EndStatement,
    upstream_chain: Sequence[str] = (),
) -> bytes:
    """The signed END frame of ``statement`` (its ``frames`` data frames and ``forwarded``
    messages), whose ``chain`` is ``upstream_chain`` (the chain of the upstream END this hop
    took: the STATEMENT frames of hops 0..j-1, hex) and then this hop's own STATEMENT frame;
    ``statement.chain`` is ignored. InvalidParameterError if the statement is not one the
    receiver would take, or the body exceeds MAX_END_BODY."""
    if not isinstance(signer, FrameSigner):
        raise InvalidParameterError(f"signer must be a FrameSigner, got {type(signer).__name__}")
    require_int("item_length", item_length, 1)
    require_int("frames", statement.frames, 0, 2**32 - 1)
    require_int("messages", statement.forwarded, 0, 2**32 - 1)
    own = statement_frame(signer=signer, item_length=item_length, statement=statement)
    wire = replace(statement, chain=(*upstream_chain, own.hex()))
    body = _statement_body(wire)
    try:  # the check the receiver runs: a hop never signs a statement that does not add up
        EndStatement.from_json(
            json.loads(body),
            sender=signer.sender,
            frames=statement.frames,
            messages=statement.forwarded,
        )
    except StatementError as exc:
        raise InvalidParameterError(f"END statement refused: {exc}") from exc
    return signer.frame(KIND_END, statement.frames, statement.forwarded, item_length, body)


def _verified(frame: bytes, verify_key: VerifyKey) -> bool:
    signed = SIGNING_CONTEXT + frame[: len(frame) - SIGNATURE_SIZE]
    try:
        verify_key.verify(signed, frame[len(frame) - SIGNATURE_SIZE :])
    except BadSignatureError:
        return False
    return True


def open_statement(
    frame: bytes, *, sender: int, verify_key: VerifyKey, manifest_digest: bytes, round_id: int
) -> EndStatement:
    """The statement of hop ``sender``'s STATEMENT frame ``frame`` (bytes), checked as its END
    would be: the header's kind, sender, manifest digest and round, the signature with
    ``verify_key``, a statement that adds up and carries no chain. StatementError (the message
    says which rule) for anything else; never another exception for any bytes."""
    if len(frame) < HEADER.size + SIGNATURE_SIZE:
        raise StatementError(f"a STATEMENT frame is at least {HEADER.size + SIGNATURE_SIZE} bytes")
    magic, version, kind, who, digest, round_, seq, count, _ = HEADER.unpack_from(frame)
    if magic != MAGIC or version != FRAME_VERSION or kind != KIND_STATEMENT or who != sender:
        raise StatementError(f"it is not a STATEMENT frame of hop-{sender}")
    if not _verified(frame, verify_key):
        raise StatementError(f"its signature does not verify with hop-{sender}'s key")
    if digest != manifest_digest or round_ != round_id:
        raise StatementError("it is signed for another manifest or round")
    body = frame[HEADER.size : len(frame) - SIGNATURE_SIZE]
    try:
        statement = EndStatement.from_json(
            json.loads(body.decode()), sender=sender, frames=seq, messages=count
        )
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # StatementError included
        raise StatementError(f"its statement does not add up: {exc}") from exc
    if statement.chain:
        raise StatementError("a STATEMENT frame carries no chain")
    return statement


@dataclass(slots=True)
class FrameAssembler:
    """Collects the frames of one batch for round ``round_id`` of the manifest
    ``manifest_digest``, sent by hop ``upstream`` and signed with ``verify_key``; see the
    module docstring (validated on construction: InvalidParameterError)."""

    round_id: int
    manifest_digest: bytes
    upstream: int
    verify_key: VerifyKey = field(repr=False)
    rejected: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(FRAME_REJECTION_REASONS, 0)
    )
    statement: EndStatement | None = None
    end_digest: str | None = None
    """Hex SHA-256 of the genuine END frame taken (a second copy of it is a duplicate)."""
    end_frame: bytes | None = None
    """The genuine END frame taken, exactly as received."""
    statement_digest: str | None = None
    """Hex SHA-256 of the upstream's STATEMENT frame, the last entry of the chain of the END
    taken: what this hop's statement commits to (``upstream_end``)."""
    _seen: set[int] = field(default_factory=set)
    _messages: int = 0

    def __post_init__(self) -> None:
        require_int("round_id", self.round_id, 0, MAX_ROUND_ID)
        self.manifest_digest = require_manifest_digest(self.manifest_digest)
        require_int("upstream", self.upstream, 0, MAX_SENDER)
        require_verify_key(self.verify_key)

    def add(self, payload: bytes | bytearray | memoryview) -> Iterator[bytes]:
        """The messages of ``payload`` if it is a new, genuine, well-formed data frame (else
        nothing; a genuine END frame records the batch's size and statement). Never raises for
        any bytes-like input."""
        payload = bytes(payload)  # no copy for bytes; a view or bytearray is read once
        if len(payload) < HEADER.size + SIGNATURE_SIZE:
            return self._drop(MALFORMED_FRAME)
        magic, version, kind, sender, digest, round_id, seq, count, item_length = (
            HEADER.unpack_from(payload)
        )
        if magic != MAGIC or version != FRAME_VERSION or kind not in (KIND_DATA, KIND_END):
            return self._drop(MALFORMED_FRAME)
        end = kind == KIND_END
        if sender != self.upstream or not self._genuine(payload):
            return self._drop(FORGED_END if end else FORGED_FRAME)
        if digest != self.manifest_digest or round_id != self.round_id:
            return self._drop(REPLAYED_END if end else REPLAYED_FRAME)
        body = memoryview(payload)[HEADER.size : len(payload) - SIGNATURE_SIZE]
        if item_length < 1:
            return self._drop(MALFORMED_FRAME)
        if end:
            return self._end(payload, seq, count, body)
        if len(body) != count * item_length:
            return self._drop(MALFORMED_FRAME)
        if seq in self._seen:
            return self._drop(DUPLICATE_FRAME)
        self._seen.add(seq)
        self._messages += count
        data = bytes(body)
        return (data[i : i + item_length] for i in range(0, len(data), item_length))

    def restore(self, seq: int, count: int) -> None:
        """Data frame ``seq`` of ``count`` messages was taken before a restart (its messages
        are in the stage's journal): counted as received, so a copy of it is a duplicate."""
        require_int("seq", seq, 0)
        require_int("count", count, 0)
        if seq in self._seen:
            raise InvalidParameterError(f"data frame {seq} is restored twice")
        self._seen.add(seq)
        self._messages += count

    def _genuine(self, payload: bytes) -> bool:
        return _verified(payload, self.verify_key)

    def _drop(self, reason: str) -> Iterator[bytes]:
        self.rejected[reason] += 1
        return iter(())

    def _end(self, payload: bytes, frames: int, messages: int, body: memoryview) -> Iterator[bytes]:
        digest = hashlib.sha256(payload).hexdigest()
        if self.statement is not None:
            return self._drop(DUPLICATE_FRAME if digest == self.end_digest else REPLAYED_END)
        try:
            value = json.loads(bytes(body).decode())
            statement = EndStatement.from_json(
                value, sender=self.upstream, frames=frames, messages=messages
            )
            own = self._own_statement(statement)
        except (UnicodeDecodeError, ValueError, RecursionError):  # StatementError included
            return self._drop(FORGED_END)
        self.statement = statement
        self.end_digest = digest
        self.end_frame = payload
        self.statement_digest = hashlib.sha256(own).hexdigest()
        return iter(())

    def _own_statement(self, statement: EndStatement) -> bytes:
        """The last entry of the END's chain: the upstream's own STATEMENT frame, which must say
        exactly what the END says (StatementError otherwise)."""
        if not statement.chain:
            raise StatementError("an END statement's chain ends with its own statement")
        own = bytes.fromhex(statement.chain[-1])
        signed = open_statement(
            own,
            sender=self.upstream,
            verify_key=self.verify_key,
            manifest_digest=self.manifest_digest,
            round_id=self.round_id,
        )
        if signed != statement.core():
            raise StatementError("the END and its own STATEMENT frame say different things")
        return own

    @property
    def log(self) -> dict[str, Any] | None:
        """The genuine END statement as JSON (``stages``, ``aborted``, the counts), or None."""
        return None if self.statement is None else self.statement.to_json()

    @property
    def expected_frames(self) -> int | None:
        return None if self.statement is None else self.statement.frames

    @property
    def expected_messages(self) -> int | None:
        return None if self.statement is None else self.statement.forwarded

    @property
    def frames_received(self) -> int:
        return len(self._seen)

    @property
    def messages_received(self) -> int:
        return self._messages

    @property
    def complete(self) -> bool:
        """True once the genuine END arrived, every data frame it announced has arrived, and
        they hold the number of messages it announced (an upstream that miscounts never
        completes: the stage then closes at its deadline with what it has)."""
        frames = self.expected_frames
        return (
            frames is not None
            and self._messages == self.expected_messages
            and len(self._seen) >= frames
            and all(seq in self._seen for seq in range(frames))
        )
