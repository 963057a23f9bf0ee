"""One shuffler hop for one round: accept, peel, permute, release (pure core: no I/O, no asyncio).

A :class:`HopRound` is fed the messages that arrived on the hop's ingress topic, one
:meth:`HopRound.offer` call each, and releases its batch once with :meth:`HopRound.close`. The
transport layer (MQTT, in-memory) decides when to close (round size reached, or deadline) and
publishes what ``close`` returns; it never sees the messages in arrival order.

Checks on every offered message, cheapest first; the first failure is the reason it is rejected
and counted (``HopRound.rejected``, one counter per slug of :data:`HOP_REJECTION_REASONS`):

1. ``wrong-length``: the length is not ``message_length(hop_index, n_hops)``, the exact length
   of every message this hop receives in a round (nothing else is looked at);
2. ``duplicate``: the SHA-256 digest of the ciphertext is in the round's seen-set. Every
   ciphertext of the right length that reaches this step is added to the set, so exact copies,
   replays of an accepted message and repeats of a message rejected below are all caught here
   and cost no second decryption;
3. ``batch-full``: ``expected_size`` messages are already accepted (the message is not opened);
4. only at hop 0 with client authentication (a
   :class:`~shuffledp.protocol.client_auth.ClientVerifier` passed as ``verifier``; every
   message then carries a 40-byte envelope in front of the onion):
   ``unknown-client`` (the id is not enrolled), ``bad-authenticator`` (the tag does not verify
   for this round), ``client-already-reported`` (this client's authentic report was already
   taken this round: one report per client per round). The envelope is stripped: only the onion
   goes on, so the hop's output has the same length with or without authentication;
5. ``decryption-failed``: the layer does not open with this hop's private key (addressed to
   another key, corrupted or forged).

A message that passes all of them is accepted: its layer is peeled at once and the plaintext (the
message for the next stage) kept. No input of type bytes makes ``offer`` raise.

Guarantees of ``close``: it releases all accepted messages and only them, each exactly once, in
an order drawn uniformly at random from the hop's :class:`~shuffledp.randomness.RandomSource`
(:func:`~shuffledp.shuffler.permute.uniform_permutation`; the OS CSPRNG unless a source is
passed), so the output order carries no information about the arrival order. It never releases
fewer than ``min_batch`` messages: below that it raises :class:`BatchTooSmall` and drops what it
held. ``close`` is final either way; a closed round refuses offers (:class:`RoundClosedError`).

The seen-set is per round, and its memory is bounded: past ``seen_in_memory`` digests it spills
to a temporary SQLite table (protocol/seen_set.py), with the same answers. It is per round: a replay of a message from an earlier round reaches a fresh
``HopRound`` as a new message (hops cannot read round ids) and is rejected by the analyzer as
``wrong-round``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nacl.public import PrivateKey

from shuffledp.errors import InvalidParameterError, OperationalError
from shuffledp.protocol.client_auth import ENVELOPE_SIZE, ClientRoster, ClientVerifier
from shuffledp.protocol.errors import (
    CLIENT_AUTH_REJECTION_TYPES,
    ClientAlreadyReported,
    DecryptionFailed,
    Duplicate,
    RejectedMessage,
    UnknownClient,
    WrongLength,
)
from shuffledp.protocol.id_log import IdLog
from shuffledp.protocol.onion import message_length, peel, require_private_key
from shuffledp.protocol.record import MAX_ROUND_ID
from shuffledp.protocol.screen import Mapper, MessageScreen
from shuffledp.protocol.seen_set import DEFAULT_IN_MEMORY, SeenSet
from shuffledp.randomness import RandomLike, RandomSource, as_random_source
from shuffledp.shuffler.permute import uniform_permutation
from shuffledp.validation import require_int

__all__ = [
    "BATCH_FULL",
    "HOP_REJECTION_REASONS",
    "BatchTooSmall",
    "HopOutput",
    "HopRound",
    "RoundClosedError",
]

BATCH_FULL = "batch-full"
"""Reason slug of a well-formed, new message that arrives once the batch holds expected_size."""

HOP_REJECTION_REASONS: tuple[str, ...] = (
    WrongLength.reason,
    Duplicate.reason,
    BATCH_FULL,
    *(t.reason for t in CLIENT_AUTH_REJECTION_TYPES),
    DecryptionFailed.reason,
)
"""Every reason a hop rejects a message for, in the order the checks run (the client
authentication reasons stay 0 at later hops and without authentication)."""


class BatchTooSmall(OperationalError):  # noqa: N818 (names the condition, like the protocol's reasons)
    """A hop was closed with fewer accepted messages than its minimum batch: it releases nothing.

    Attributes: ``round_id``, ``hop_index``, ``accepted``, ``min_batch``.
    """

    def __init__(self, *, round_id: int, hop_index: int, accepted: int, min_batch: int) -> None:
        super().__init__(
            f"hop {hop_index} of round {round_id} must hold at least min_batch = {min_batch} "
            f"messages to release its batch, it accepted {accepted}; nothing is released"
        )
        self.round_id = round_id
        self.hop_index = hop_index
        self.accepted = accepted
        self.min_batch = min_batch


class RoundClosedError(OperationalError):
    """An offer to, or a second close of, a hop round that was already closed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HopOutput:
    """What one hop releases for one round.

    ``messages``: the peeled messages (each ``message_length(hop_index + 1, n_hops)`` bytes), in
    a uniformly random order; ``accepted``: how many were accepted (= ``len(messages)``, all of
    them are forwarded); ``rejected``: count per reason, every slug of
    :data:`HOP_REJECTION_REASONS` present (0 if none).
    """

    round_id: int
    hop_index: int
    messages: list[bytes]
    accepted: int
    rejected: dict[str, int]

    @property
    def forwarded(self) -> int:
        """How many messages go to the next stage."""
        return len(self.messages)


class HopRound:
    """Hop ``hop_index`` (of ``n_hops``) in round ``round_id``; see the module docstring.

    Parameters (keyword-only, validated: InvalidParameterError naming the rule and the value):
    ``hop_index`` in [0, n_hops), ``n_hops >= 1``, ``round_id`` in [0, 2^64), ``private_key`` a
    nacl PrivateKey, ``expected_size >= 1`` (the round's batch size), ``min_batch`` in
    [1, expected_size], ``rng`` the permutation's randomness (default: the OS CSPRNG),
    ``verifier`` (hop 0 only) the round's client authentication, or None for none;
    ``client_share`` (W, P): a peeler P of W (shuffler/workers.py) takes only the clients of
    the client processes j with j mod W = P (another's is ``unknown-client``);
    ``seen_in_memory >= 1``: digests of the seen-set held in memory before it spills to disk
    (protocol/seen_set.py; the answers are the same either way).
    """

    def __init__(
        self,
        *,
        hop_index: int,
        n_hops: int,
        round_id: int,
        private_key: PrivateKey,
        expected_size: int,
        min_batch: int,
        rng: RandomLike = None,
        verifier: ClientVerifier | None = None,
        client_share: tuple[int, int] | None = None,
        seen_in_memory: int = DEFAULT_IN_MEMORY,
    ) -> None:
        require_int("n_hops", n_hops, 1)
        require_int("hop_index", hop_index, 0, n_hops - 1, bound="[0, n_hops - 1]")
        require_int("round_id", round_id, 0, MAX_ROUND_ID, bound="[0, 2^64 - 1]")
        require_int("expected_size", expected_size, 1)
        require_int("min_batch", min_batch, 1, expected_size, bound="[1, expected_size]")
        require_private_key(private_key)
        self._hop_index = hop_index
        self._n_hops = n_hops
        self._round_id = round_id
        self._key = private_key
        self._expected_size = expected_size
        self._min_batch = min_batch
        self._rng: RandomSource = as_random_source(rng)
        if verifier is not None:
            if not isinstance(verifier, ClientVerifier):
                raise InvalidParameterError(
                    f"verifier must be a ClientVerifier or None, got {verifier!r}"
                )
            if hop_index != 0:
                raise InvalidParameterError(
                    f"client authentication is checked by hop 0 only, got hop_index {hop_index}"
                )
            if verifier.round_id != round_id:
                raise InvalidParameterError(
                    f"verifier must be for round {round_id}, got round {verifier.round_id}"
                )
        self._verifier = verifier
        if client_share is not None:
            require_int("client_share workers", client_share[0], 1)
            require_int("client_share worker", client_share[1], 0, client_share[0] - 1)
        self._share = client_share
        self._reported = SeenSet(in_memory=seen_in_memory)  # client ids, 8 bytes each
        # the same ids, in the order they reported (the receipts' source), bounded in memory
        self._reported_log = IdLog(in_memory=seen_in_memory)
        self._onion_length = message_length(hop_index, n_hops)
        envelope = ENVELOPE_SIZE if verifier is not None else 0
        self._screen = MessageScreen(self._onion_length + envelope, seen_in_memory=seen_in_memory)
        self._held: list[bytes] = []
        self._accepted = 0
        self._rejected: dict[str, int] = dict.fromkeys(HOP_REJECTION_REASONS, 0)
        self._closed = False

    # --- read-only state ---------------------------------------------------------------------

    @property
    def hop_index(self) -> int:
        return self._hop_index

    @property
    def n_hops(self) -> int:
        return self._n_hops

    @property
    def round_id(self) -> int:
        return self._round_id

    @property
    def expected_size(self) -> int:
        return self._expected_size

    @property
    def min_batch(self) -> int:
        return self._min_batch

    @property
    def input_length(self) -> int:
        """The exact length of every message this hop accepts."""
        return self._screen.length

    @property
    def roster(self) -> ClientRoster | None:
        """The enrolment the hop's client authentication checks (None without)."""
        return self._verifier.roster if self._verifier is not None else None

    @property
    def authenticated(self) -> bool:
        """True if this hop checks client authenticators (hop 0 with a verifier)."""
        return self._verifier is not None

    @property
    def accepted(self) -> int:
        """Messages accepted so far."""
        return self._accepted

    @property
    def rejected(self) -> dict[str, int]:
        """A copy of the rejection counters, every reason present."""
        return dict(self._rejected)

    @property
    def offered(self) -> int:
        """Every offer so far: accepted + sum(rejected)."""
        return self._accepted + sum(self._rejected.values())

    @property
    def is_full(self) -> bool:
        """True once expected_size messages are accepted (further new messages: batch-full)."""
        return self._accepted >= self._expected_size

    @property
    def closed(self) -> bool:
        return self._closed

    def reported_since(self, position: int, limit: int | None = None) -> list[int]:
        """The ids of the clients whose authentic report was taken (hop 0 with a verifier), in
        the order they came, from the ``position``-th on, at most ``limit`` (the receipts'
        source: a caller keeps its position and reads only what is new). Empty once the round
        is closed. Past ``seen_in_memory`` ids the log spills to a temporary file
        (protocol/id_log.py): the same ids, in the same order."""
        return self._reported_log.since(position, limit)

    # --- the round ---------------------------------------------------------------------------

    def offer(self, message: bytes | bytearray | memoryview) -> str | None:
        """None if ``message`` is accepted, else the reason slug it was rejected for (counted).

        Raises RoundClosedError if the round is closed and TypeError for a non-bytes argument
        (a caller's bug, not a message); never raises for any bytes.
        """
        if self._closed:
            raise RoundClosedError(
                f"hop {self._hop_index} of round {self._round_id} is closed: it takes no offers"
            )
        data, reason = self._screen.check(message)
        if reason is not None:
            return self._reject(reason)
        if self.is_full:
            return self._reject(BATCH_FULL)
        try:
            inner = peel(self._authenticate(data), self._key, expected_length=self._onion_length)
        except RejectedMessage as exc:
            return self._reject(exc.reason)
        self._held.append(inner)
        self._accepted += 1
        return None

    def offer_many(
        self, messages: Sequence[bytes | bytearray | memoryview], *, mapper: Mapper | None = None
    ) -> list[str | None]:
        """Offer ``messages`` in order: the same results, counters and accepted messages as
        calling :meth:`offer` on each in turn, with the decryptions run by ``mapper`` (default
        the built-in ``map``; ``ThreadPoolExecutor.map`` peels on several cores, as libsodium
        releases the GIL). ``mapper(fn, items)`` must return ``fn(item)`` for each item, in order.

        Exactness: the screen (length, seen-set) runs in order; decryptions are gathered only
        while the candidates cannot overflow the batch, so ``batch-full`` falls on exactly the
        messages it would fall on one at a time.
        """
        if self._closed:
            raise RoundClosedError(
                f"hop {self._hop_index} of round {self._round_id} is closed: it takes no offers"
            )
        run = mapper if mapper is not None else map
        results: list[str | None] = [None] * len(messages)
        pending: list[tuple[int, bytes]] = []

        def flush() -> None:
            peeled = list(run(self._try_peel, [data for _, data in pending]))
            for (index, _), out in zip(pending, peeled, strict=True):
                if isinstance(out, str):
                    results[index] = self._reject(out)
                else:
                    self._held.append(out)
                    self._accepted += 1
            pending.clear()

        for index, message in enumerate(messages):
            data, reason = self._screen.check(message)
            if reason is not None:
                results[index] = self._reject(reason)
                continue
            if self._accepted + len(pending) >= self._expected_size:
                flush()
                if self.is_full:
                    results[index] = self._reject(BATCH_FULL)
                    continue
            try:
                onion = self._authenticate(data)
            except RejectedMessage as exc:
                results[index] = self._reject(exc.reason)
                continue
            pending.append((index, onion))
        flush()
        return results

    def _authenticate(self, data: bytes) -> bytes:
        """The onion inside ``data``: ``data`` itself without client authentication, else the
        envelope's onion once the tag verifies and the client has not reported yet this round
        (the client is then marked as reported, whatever its onion turns out to hold: an
        authentic client gets one try per round). Raises the RejectedMessage to count."""
        if self._verifier is None:
            return data
        client_id, onion = self._verifier.open(data)
        if self._share is not None and (client_id >> 32) % self._share[0] != self._share[1]:
            raise UnknownClient(
                f"client {client_id} belongs to another peeler's client processes than "
                f"{self._share[1]} of {self._share[0]}"
            )
        if not self._reported.add(client_id.to_bytes(8, "big")):
            raise ClientAlreadyReported(
                f"client {client_id} already reported in round {self._round_id}"
            )
        self._reported_log.append(client_id)
        return onion

    def _try_peel(self, data: bytes) -> bytes | str:
        """The peeled message, or the reason it does not open (thread-safe: no state)."""
        try:
            return peel(data, self._key, expected_length=self._onion_length)
        except RejectedMessage as exc:
            return exc.reason

    def drain(self) -> list[bytes]:
        """The messages accepted since the last drain, in the order they were accepted, no
        longer held (a peeler of a hop of several processes streams them to its mixer, which
        permutes the whole batch: shuffler/workers.py). A drained message is still counted as
        accepted; ``close`` releases only what was not drained."""
        held, self._held = self._held, []
        return held

    def close(self) -> HopOutput:
        """Release the batch, uniformly permuted; final (see the module docstring).

        Raises BatchTooSmall (and drops the held messages) if fewer than min_batch were
        accepted; RoundClosedError if already closed.
        """
        if self._closed:
            raise RoundClosedError(
                f"hop {self._hop_index} of round {self._round_id} is already closed"
            )
        self._closed = True
        held, self._held = self._held, []
        self._screen.forget()
        self._reported.clear()
        self._reported_log.clear()
        if self._accepted < self._min_batch:
            raise BatchTooSmall(
                round_id=self._round_id,
                hop_index=self._hop_index,
                accepted=self._accepted,
                min_batch=self._min_batch,
            )
        order = uniform_permutation(len(held), self._rng)
        return HopOutput(
            round_id=self._round_id,
            hop_index=self._hop_index,
            messages=[held[int(i)] for i in order],
            accepted=self._accepted,
            rejected=dict(self._rejected),
        )

    def _reject(self, reason: str) -> str:
        self._rejected[reason] += 1
        return reason
