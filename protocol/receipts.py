"""End-to-end delivery between client processes and hop 0: claims and receipts (pure core).

MQTT QoS 1 is hop by hop: a broker acknowledges a publish and may still drop it on the way to a
slow subscriber (Mosquitto drops past a client's queue limit). So a client process does not
take the broker's PUBACK as delivery; it learns from hop 0 which of its clients were accepted
and sends the missing reports again until the round closes.

- :class:`Claim` (client process ``clients-j`` -> hop 0, JSON on
  :func:`~shuffledp.protocol.topics.claim_topic`): ``seq`` (the claim's number, growing),
  ``clients`` (how many clients the process hosts: ids ``j << 32 | i``, ``i < clients``),
  ``sent`` (how many distinct reports it has handed to the broker so far), ``confirmed`` (it
  has its answer and needs no more receipts).
- :class:`Receipt` (hop 0 -> ``clients-j``, binary on
  :func:`~shuffledp.protocol.topics.receipt_topic`): which of the process's clients hop 0
  accepted, as a bitmap over ``[0, clients)`` (bit i set: client ``j << 32 | i`` accepted),
  compressed with zlib; ``seq`` the last claim it answers (0: none yet), ``closed`` hop 0 has
  stopped collecting (the answer is final).

Header of a receipt (RECEIPT_HEADER.size = 30 bytes, unsigned big-endian)::

    magic b"SDPR" | version u8 | round u64 | process u32 | clients u32 | accepted u32 |
    seq u32 | closed u8  then zlib(packbits(bitmap))

Both are read defensively: :func:`Claim.decode` and :func:`Receipt.decode` return None for
anything malformed (never raise for any bytes); a receipt's bitmap must inflate to exactly its
length (no decompression bomb) and hold exactly ``accepted`` set bits.

A resend is the very same bytes as the first send, so a report that did arrive after all is a
``duplicate`` at hop 0 (no second decryption, no second k-RR draw); with client authentication
a report of a client already counted is ``client-already-reported``. Either way it is counted
once.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.record import MAX_ROUND_ID
from shuffledp.validation import require_int

__all__ = ["MAX_RECEIPT_CLIENTS", "RECEIPT_HEADER", "Claim", "Receipt", "bitmap_of"]

MAGIC = b"SDPR"
RECEIPT_VERSION = 1
RECEIPT_HEADER = struct.Struct(">4sBQIIIIB")
MAX_RECEIPT_CLIENTS = 2**32 - 1
MAX_CLAIM_BYTES = 1024


def bitmap_of(indices: npt.ArrayLike, clients: int) -> bytes:
    """The packed bitmap (bit i of byte i // 8, most significant first, as numpy.packbits) of
    the ``indices`` below ``clients``, ``ceil(clients / 8)`` bytes."""
    bits = np.zeros(clients, dtype=bool)
    index = np.asarray(indices, dtype=np.int64)
    bits[index[(index >= 0) & (index < clients)]] = True
    return np.packbits(bits).tobytes()


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """What a client process says it sent (module docstring)."""

    seq: int
    clients: int
    sent: int
    confirmed: bool = False

    def __post_init__(self) -> None:
        require_int("claim seq", self.seq, 1, 2**32 - 1)
        require_int("claim clients", self.clients, 0, MAX_RECEIPT_CLIENTS)
        require_int("claim sent", self.sent, 0, self.clients, bound="[0, clients]")
        if not isinstance(self.confirmed, bool):
            raise InvalidParameterError(f"claim confirmed must be a bool, got {self.confirmed!r}")

    def to_json(self) -> dict[str, object]:
        return {
            "seq": self.seq,
            "clients": self.clients,
            "sent": self.sent,
            "confirmed": self.confirmed,
        }

    def encode(self) -> bytes:
        return json.dumps(self.to_json(), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, payload: bytes) -> Claim | None:
        """The claim in ``payload``, or None if it is not a well-formed one."""
        if len(payload) > MAX_CLAIM_BYTES:
            return None
        try:
            body = json.loads(payload.decode())
        except (UnicodeDecodeError, ValueError, RecursionError):
            return None
        if not isinstance(body, dict) or set(body) != {"seq", "clients", "sent", "confirmed"}:
            return None
        try:
            return cls(
                seq=body["seq"],
                clients=body["clients"],
                sent=body["sent"],
                confirmed=body["confirmed"],
            )
        except InvalidParameterError:
            return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Receipt:
    """Which clients of process ``process`` hop 0 accepted in round ``round_id`` (module
    docstring). ``bitmap``: ``ceil(clients / 8)`` bytes, no bit set at or past ``clients``."""

    round_id: int
    process: int
    clients: int
    bitmap: bytes
    seq: int = 0
    closed: bool = False

    def __post_init__(self) -> None:
        require_int("receipt round_id", self.round_id, 0, MAX_ROUND_ID)
        require_int("receipt process", self.process, 0, 2**32 - 1)
        require_int("receipt clients", self.clients, 0, MAX_RECEIPT_CLIENTS)
        require_int("receipt seq", self.seq, 0, 2**32 - 1)
        if len(self.bitmap) != (self.clients + 7) // 8:
            raise InvalidParameterError(
                f"receipt bitmap must be {(self.clients + 7) // 8} bytes for {self.clients} "
                f"clients, got {len(self.bitmap)}"
            )

    @property
    def accepted(self) -> int:
        """How many clients the receipt says were accepted."""
        return int(np.unpackbits(np.frombuffer(self.bitmap, dtype=np.uint8)).sum())

    def accepted_mask(self, clients: int) -> npt.NDArray[np.bool_]:
        """Bool per client ``0 .. clients - 1``: True iff accepted (False past the bitmap)."""
        bits = np.unpackbits(np.frombuffer(self.bitmap, dtype=np.uint8))[: self.clients]
        mask = np.zeros(clients, dtype=bool)
        shared = min(clients, self.clients)
        mask[:shared] = bits[:shared].astype(bool)
        return mask

    def encode(self) -> bytes:
        header = RECEIPT_HEADER.pack(
            MAGIC,
            RECEIPT_VERSION,
            self.round_id,
            self.process,
            self.clients,
            self.accepted,
            self.seq,
            1 if self.closed else 0,
        )
        return header + zlib.compress(self.bitmap, 1)

    @classmethod
    def decode(cls, payload: bytes, *, round_id: int, process: int) -> Receipt | None:
        """The receipt in ``payload`` if it is a well-formed one for ``round_id`` and
        ``process``, else None (never raises for any bytes)."""
        if len(payload) < RECEIPT_HEADER.size:
            return None
        magic, version, got_round, got_process, clients, accepted, seq, closed = (
            RECEIPT_HEADER.unpack_from(payload)
        )
        if (magic, version, got_round, got_process) != (MAGIC, RECEIPT_VERSION, round_id, process):
            return None
        if closed not in (0, 1):
            return None
        size = (clients + 7) // 8
        inflater = zlib.decompressobj()
        try:
            # max_length 0 would mean "no limit": at least 1, so a bomb never inflates
            bitmap = inflater.decompress(payload[RECEIPT_HEADER.size :], max(size, 1))
        except zlib.error:
            return None
        if len(bitmap) != size or inflater.unconsumed_tail or inflater.unused_data:
            return None
        if not inflater.eof:
            return None
        if clients % 8 and bitmap and bitmap[-1] & (0xFF >> (clients % 8)):
            return None  # a bit set past the last client
        receipt = cls(
            round_id=round_id,
            process=process,
            clients=clients,
            bitmap=bitmap,
            seq=seq,
            closed=bool(closed),
        )
        return receipt if receipt.accepted == accepted else None
