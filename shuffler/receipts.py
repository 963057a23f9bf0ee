"""Hop 0's receipt desk: it answers client processes' claims with receipts (protocol/receipts.py).

The desk is hop 0's :class:`~shuffledp.protocol.stage.Aside`. It notes every well-formed
:class:`~shuffledp.protocol.receipts.Claim` on ``claim/clients-j`` (the latest per process) and,
at the next tick, answers it with a :class:`~shuffledp.protocol.receipts.Receipt` on
``receipt/clients-j``: the bitmap of the process's clients whose authentic report hop 0 took
(:meth:`~shuffledp.shuffler.hop.HopRound.reported_since`, read incrementally). The process
resends what is missing and claims again; hop 0 answers every claim, so a claim or a receipt
lost on the way only costs one more round trip.

Once hop 0 stops collecting (:meth:`ReceiptDesk.close`), every process that claimed gets a
``closed`` receipt (its final answer), and hop 0 keeps answering until each has confirmed
(:meth:`ReceiptDesk.settled`) or its linger time is over. A lost MQTT session (the transport's
``sessions_lost`` grew: what the broker queued for hop 0 is gone) makes every unconfirmed
process due for a receipt, so each resends what hop 0 no longer has a chance to get.

Without client authentication (no roster) hop 0 cannot tell whose report it took: the desk only
counts what the processes claim to have sent (``clients_sent``, for the accounting) and sends no
receipts. A claim that is malformed, or from a topic that names no enrolled process, is
counted (``claims_ignored``) and otherwise ignored; a process's bitmap is at most
``min(clients_per_process, expected_size)`` clients, whatever it claims.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from shuffledp.protocol.client_auth import ClientRoster
from shuffledp.protocol.receipts import Claim, Receipt
from shuffledp.protocol.topics import claim_topic, receipt_topic
from shuffledp.protocol.transport import Message, Transport, sessions_lost, topic_matches
from shuffledp.shuffler.hop import HopRound

__all__ = ["ReceiptDesk"]

INDEX_MASK = 0xFFFFFFFF
ABSORB_CHUNK = 1 << 16
"""Client ids read from the hop per step (the hop's log may hold many since the last look)."""


class ReceiptDesk:
    """Hop 0's claims and receipts for one round (module docstring)."""

    def __init__(
        self,
        transport: Transport,
        *,
        prefix: str,
        round_id: int,
        hop: HopRound,
        roster: ClientRoster | None,
        expected_size: int,
        share: tuple[int, int] | None = None,
    ) -> None:
        self._transport = transport
        self._share = share  # (W, P): a peeler answers the processes j with j mod W = P
        self._prefix = prefix
        self._round_id = round_id
        self._hop = hop
        self._roster = roster
        self._size = 0 if roster is None else min(roster.clients_per_process, expected_size)
        self.filter = claim_topic(prefix, round_id, "+")
        self._claims: dict[str, Claim] = {}
        self._due: set[str] = set()
        self._accepted: dict[int, np.ndarray[Any, np.dtype[np.bool_]]] = {}
        self._position = 0
        self._sessions = sessions_lost(transport)
        self.closed = False
        self.claims_ignored = 0
        self.receipts_sent = 0

    @property
    def answers(self) -> bool:
        """True iff the desk sends receipts (client authentication: it knows whose reports)."""
        return self._roster is not None

    @property
    def clients_sent(self) -> int:
        """The reports the client processes say they sent (their latest claims, summed)."""
        return sum(claim.sent for claim in self._claims.values())

    def wants(self, topic: str) -> bool:
        return topic_matches(self.filter, topic)

    def note(self, message: Message) -> None:
        name = message.topic.rsplit("/", 1)[-1]
        claim = Claim.decode(message.payload)
        checked = self._roster is not None or self._share is not None
        if claim is None or (checked and self._process(name) is None):
            self.claims_ignored += 1
            return
        known = self._claims.get(name)
        if known is not None and claim.seq < known.seq:
            return  # an older claim overtaken by a newer one
        self._claims[name] = claim
        if self.answers and not claim.confirmed:
            self._due.add(name)

    def close(self) -> None:
        """Collection is over: read what the hop took last, owe every unconfirmed process its
        final (``closed``) receipt. Call before the hop's round is closed (it forgets who
        reported)."""
        self._absorb()
        self.closed = True
        self._due.update(name for name, claim in self._claims.items() if not claim.confirmed)

    def settled(self) -> bool:
        """True once no receipt is owed and every process that claimed has confirmed."""
        return not self._due and all(claim.confirmed for claim in self._claims.values())

    async def tick(self) -> None:
        """Publish the receipts due (after reading what the hop took since the last tick)."""
        if not self.answers:
            return
        lost = sessions_lost(self._transport)
        if lost != self._sessions:
            self._sessions = lost
            self._due.update(n for n, claim in self._claims.items() if not claim.confirmed)
        if not self._due:
            return
        if not self.closed:
            self._absorb()
        due, self._due = sorted(self._due), set()
        for name in due:
            await self._transport.publish(
                receipt_topic(self._prefix, self._round_id, name), self._receipt(name).encode()
            )
            self.receipts_sent += 1

    def log(self) -> dict[str, Any]:
        """The desk's part of hop 0's round log."""
        return {
            "clients_sent": self.clients_sent,
            "claims": {name: claim.sent for name, claim in sorted(self._claims.items())},
            "claims_ignored": self.claims_ignored,
            "receipts_sent": self.receipts_sent,
        }

    def _process(self, name: str) -> int | None:
        """j of an enrolled process's name ``clients-j``, else None."""
        head, _, number = name.partition("-")
        if head != "clients" or not number.isdigit() or (number != "0" and number[0] == "0"):
            return None
        process = int(number)
        if self._share is not None and process % self._share[0] != self._share[1]:
            return None  # another peeler's process (shuffler/workers.py)
        if self._roster is None:
            return process
        return process if process < self._roster.client_processes else None

    def _bits(self, process: int) -> np.ndarray[Any, np.dtype[np.bool_]]:
        bits = self._accepted.get(process)
        if bits is None:
            bits = self._accepted[process] = np.zeros(self._size, dtype=bool)
        return bits

    def _absorb(self) -> None:
        while self._absorb_some():
            pass

    def _absorb_some(self) -> bool:
        """Read up to ABSORB_CHUNK new ids into the bitmaps (a bounded list, however far the
        hop got since the last look); True if there may be more."""
        ids = self._hop.reported_since(self._position, ABSORB_CHUNK)
        if not ids:
            return False
        self._position += len(ids)
        array = np.asarray(ids, dtype=np.uint64)
        processes = (array >> np.uint64(32)).astype(np.int64)
        indices = (array & np.uint64(INDEX_MASK)).astype(np.int64)
        for process in np.unique(processes):
            chosen = indices[processes == process]
            self._bits(int(process))[chosen[chosen < self._size]] = True
        return True

    def _receipt(self, name: str) -> Receipt:
        process = self._process(name)
        assert process is not None
        claim = self._claims[name]
        assert self._roster is not None
        # An exact enrolment (a round manifest's) may give each process its own size.
        clients = min(claim.clients, self._size, self._roster.size(process))
        bits = self._bits(process)[:clients]
        return Receipt(
            round_id=self._round_id,
            process=process,
            clients=clients,
            bitmap=np.packbits(bits).tobytes(),
            seq=claim.seq,
            closed=self.closed,
        )
