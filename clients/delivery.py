"""A client process's end-to-end delivery: claim, read receipts, resend what is missing.

A broker's PUBACK says the broker has a report, not that hop 0 will get it (protocol/receipts.py).
So once its reports are out, a client process with client authentication
(:func:`confirm_delivery`):

1. claims: publishes a :class:`~shuffledp.protocol.receipts.Claim` (how many clients it hosts,
   how many reports it sent) on its claim topic, again every ``reclaim_interval`` seconds while
   unanswered, and at once when its transport reports a lost MQTT session;
2. reads hop 0's :class:`~shuffledp.protocol.receipts.Receipt` on its receipt topic, forgets the
   reports it confirms (:class:`SentLedger`), and if the receipt answers its latest claim,
   resends the missing ones (the very same bytes) and claims again;
3. stops when every report is confirmed, when a ``closed`` receipt (hop 0's final answer) came,
   or when hop 0 has left (its status is ``done``, ``refused`` or ``failed``, or cleared for
   longer than ``ready_timeout``), and confirms (a claim with ``confirmed``) so that hop 0 stops
   answering.

The outcome (:class:`DeliveryOutcome`) says how many reports hop 0 confirmed, how many were
resent, and how many are proven lost (a final receipt without them) or unconfirmed (hop 0 left
without a final answer).
"""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt

from shuffledp.protocol.receipts import Claim, Receipt
from shuffledp.protocol.stage import Stage
from shuffledp.protocol.transport import publish_all, sessions_lost

__all__ = ["DeliveryOutcome", "SentLedger", "confirm_delivery"]


@dataclass(slots=True)
class SentLedger:
    """The reports of a process's ``clients`` clients, by client index, until hop 0 confirms
    them. ``record(start, messages)``: the sealed reports of clients ``start``, ``start + 1``,
    ...; ``confirm(receipt)``: forget the accepted ones; ``missing_messages()``: the sent and
    unconfirmed ones, in client order, the very same bytes.

    Memory does not grow with the reports' bytes: the sealed reports (all of one length) are
    spilled to an anonymous temporary file (removed by the OS when it is closed, or when the
    process ends however it ends), one fixed slot per client; in memory only two flags per
    client. Plain file slots rather than sqlite: every report is written once at a known offset
    and read back at most once per resend, which needs no index, page cache or transaction."""

    clients: int
    sent: int = 0
    missing: int = 0
    """Reports sent and not (yet) confirmed."""
    _recorded: npt.NDArray[np.bool_] = field(init=False)
    _accepted: npt.NDArray[np.bool_] = field(init=False)
    _file: BinaryIO | None = field(init=False, default=None)
    _length: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self._recorded = np.zeros(self.clients, dtype=bool)
        self._accepted = np.zeros(self.clients, dtype=bool)

    def record(self, start: int, messages: list[bytes]) -> None:
        if not messages:
            return
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="shuffledp-sent-")  # noqa: SIM115
            self._length = len(messages[0])
        if any(len(message) != self._length for message in messages):
            raise ValueError(f"every sealed report of a process is {self._length} bytes")
        self._file.seek(start * self._length)
        self._file.write(b"".join(messages))
        self._recorded[start : start + len(messages)] = True
        self.sent += len(messages)
        self.missing += len(messages)

    def confirm(self, receipt: Receipt) -> None:
        """Take ``receipt`` into account: what it says was accepted stays accepted."""
        newly = receipt.accepted_mask(self.clients) & ~self._accepted
        self._accepted |= newly
        self.missing -= int((newly & self._recorded).sum())

    @property
    def accepted(self) -> int:
        return int(self._accepted.sum())

    def missing_messages(self) -> list[bytes]:
        indices = np.flatnonzero(self._recorded & ~self._accepted)
        if self._file is None or not indices.size:
            return []
        out = []
        for index in indices:
            self._file.seek(int(index) * self._length)
            out.append(self._file.read(self._length))
        return out

    def close(self) -> None:
        """Remove the spilled reports (the OS also does when the process ends)."""
        if self._file is not None:
            self._file.close()
            self._file = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryOutcome:
    """What hop 0 confirmed of a process's ``sent`` reports: ``accepted``; ``lost``: missing
    from hop 0's final receipt; ``unconfirmed``: hop 0 left without a final answer (not proven
    lost: the analyzer's accounting says whether they were); ``resent``: reports sent again;
    ``receipts``: receipts read."""

    sent: int
    accepted: int
    lost: int
    unconfirmed: int
    resent: int
    receipts: int

    def to_json(self) -> dict[str, Any]:
        return {
            "sent": self.sent,
            "accepted": self.accepted,
            "lost": self.lost,
            "unconfirmed": self.unconfirmed,
            "resent": self.resent,
            "receipts": self.receipts,
        }


@dataclass(slots=True, kw_only=True)
class _Exchange:
    """The claims and receipts of one process (confirm_delivery's state)."""

    stage: Stage
    ledger: SentLedger
    process: int
    claim_topic: str
    receipt_topic: str
    ingress: str
    max_in_flight: int
    seq: int = 0
    resent: int = 0
    receipts: int = 0
    last_claim: float = -math.inf

    async def claim(self, *, confirmed: bool = False) -> None:
        self.seq += 1
        claim = Claim(
            seq=self.seq, clients=self.ledger.clients, sent=self.ledger.sent, confirmed=confirmed
        )
        await self.stage.transport.publish(self.claim_topic, claim.encode())
        self.last_claim = time.monotonic()

    async def resend(self) -> None:
        missing = self.ledger.missing_messages()
        await publish_all(
            self.stage.transport,
            ((self.ingress, message) for message in missing),
            max_in_flight=self.max_in_flight,
        )
        self.resent += len(missing)

    def receipt(self, payload: bytes) -> Receipt | None:
        receipt = Receipt.decode(payload, round_id=self.stage.round_id, process=self.process)
        if receipt is not None:
            self.receipts += 1
            self.ledger.confirm(receipt)
        return receipt

    def outcome(self, *, final: bool) -> DeliveryOutcome:
        missing = self.ledger.missing
        return DeliveryOutcome(
            sent=self.ledger.sent,
            accepted=self.ledger.accepted,
            lost=missing if final else 0,
            unconfirmed=0 if final else missing,
            resent=self.resent,
            receipts=self.receipts,
        )


async def confirm_delivery(
    stage: Stage,
    ledger: SentLedger,
    *,
    process: int,
    topics: tuple[str, str, str],
    max_in_flight: int,
    reclaim_interval: float,
    away_timeout: float,
) -> DeliveryOutcome:
    """Claims, receipts and resends until the outcome is known (module docstring).
    ``topics``: (claim topic, receipt topic, hop 0's ingress); the receipt topic must already
    be subscribed. ``away_timeout``: seconds hop 0's status may stay cleared (a restart)."""
    claim_topic, receipt_topic, ingress = topics
    exchange = _Exchange(
        stage=stage,
        ledger=ledger,
        process=process,
        claim_topic=claim_topic,
        receipt_topic=receipt_topic,
        ingress=ingress,
        max_in_flight=max_in_flight,
    )
    sessions = sessions_lost(stage.transport)
    away_since: float | None = None
    final = False
    while ledger.missing:
        now = time.monotonic()
        readiness = stage.readiness
        state = readiness.state if readiness is not None else None
        if readiness is None or readiness.finished:
            break
        away_since = (away_since or now) if state is None else None
        if away_since is not None and now - away_since > away_timeout:
            break
        if sessions_lost(stage.transport) != sessions or now - exchange.last_claim >= (
            reclaim_interval
        ):
            sessions = sessions_lost(stage.transport)
            await exchange.claim()
        wait = exchange.last_claim + reclaim_interval - time.monotonic()
        message = await stage.next_message(max(wait, 0.0))
        if message is None or message.topic != receipt_topic:
            continue
        receipt = exchange.receipt(message.payload)
        if receipt is None:
            continue
        if receipt.closed:
            final = True
            break
        if receipt.seq == exchange.seq and ledger.missing:
            await exchange.resend()
            await exchange.claim()
    final = final or not ledger.missing
    await exchange.claim(confirmed=True)
    return exchange.outcome(final=final)
