"""The analyzer's side of one round: peel the last layer, validate, count (pure core, no I/O).

An :class:`AnalyzerRound` is fed what the last hop released, one :meth:`AnalyzerRound.offer` call
per message. Checks, in order; the first failure is the reason the message is rejected and
counted under its slug (``AnalyzerRound.rejected``, every slug of
:data:`shuffledp.protocol.REJECTION_REASONS` present):

1. ``wrong-length``: the length is not ``message_length(n_hops, n_hops)`` (the record plus one
   sealed-box layer);
2. ``duplicate``: the SHA-256 digest of the ciphertext is in the round's seen-set (every
   ciphertext of the right length that reaches this step is added; in memory up to
   ``seen_in_memory`` digests, then on disk: protocol/seen_set.py);
3. ``decryption-failed``: the layer does not open with the analyzer's private key;
4. then :func:`shuffledp.protocol.decode_record` with this round, manifest digest and k:
   ``bad-version``, ``wrong-manifest``, ``wrong-round``, ``value-out-of-range``.

A message that passes is one report: its value's bin of the histogram grows by one. No bytes
input makes ``offer`` raise. Guarantees: ``histogram().sum() == n_received`` and
``n_received + sum(rejected.values())`` equals the number of offers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from nacl.public import PrivateKey

from shuffledp.protocol.errors import REJECTION_REASONS, RejectedMessage
from shuffledp.protocol.onion import message_length, peel, require_private_key
from shuffledp.protocol.record import (
    MAX_K,
    MAX_ROUND_ID,
    decode_record,
    require_manifest_digest,
)
from shuffledp.protocol.screen import Mapper, MessageScreen
from shuffledp.protocol.seen_set import DEFAULT_IN_MEMORY
from shuffledp.validation import require_int

__all__ = ["AnalyzerRound"]


class AnalyzerRound:
    """The analyzer of round ``round_id``: k bins, ``n_hops`` hops before it.

    Parameters (keyword-only, validated: InvalidParameterError naming the rule and the value):
    ``round_id`` in [0, 2^64), ``k`` in [2, 2^32], ``n_hops >= 1``, ``private_key`` a nacl
    PrivateKey (the analyzer's), ``manifest_digest`` the 32-byte digest of the round manifest
    (a record of another manifest is ``wrong-manifest``), ``seen_in_memory >= 1`` the digests
    of the seen-set held in memory before it spills to disk (protocol/seen_set.py: the analyzer's
    memory does not grow with n; the answers are the same either way).
    """

    def __init__(
        self,
        *,
        round_id: int,
        k: int,
        n_hops: int,
        private_key: PrivateKey,
        manifest_digest: bytes,
        seen_in_memory: int = DEFAULT_IN_MEMORY,
    ) -> None:
        require_int("round_id", round_id, 0, MAX_ROUND_ID)
        require_int("k", k, 2, MAX_K)
        require_int("n_hops", n_hops, 1)
        require_private_key(private_key)
        self._manifest_digest = require_manifest_digest(manifest_digest)
        self._round_id = round_id
        self._k = k
        self._n_hops = n_hops
        self._key = private_key
        self._screen = MessageScreen(message_length(n_hops, n_hops), seen_in_memory=seen_in_memory)
        self._counts = np.zeros(k, dtype=np.int64)
        self._received = 0
        self._rejected: dict[str, int] = dict.fromkeys(REJECTION_REASONS, 0)

    @property
    def round_id(self) -> int:
        return self._round_id

    @property
    def k(self) -> int:
        return self._k

    @property
    def manifest_digest(self) -> bytes:
        return self._manifest_digest

    @property
    def n_hops(self) -> int:
        return self._n_hops

    @property
    def input_length(self) -> int:
        """The exact length of every message the analyzer accepts."""
        return self._screen.length

    @property
    def n_received(self) -> int:
        """Valid reports counted so far."""
        return self._received

    @property
    def rejected(self) -> dict[str, int]:
        """A copy of the rejection counters, every reason of REJECTION_REASONS present."""
        return dict(self._rejected)

    def histogram(self) -> npt.NDArray[np.int64]:
        """A copy of the counts: int64, length k, summing to n_received."""
        return self._counts.copy()

    def offer(self, message: bytes | bytearray | memoryview) -> str | None:
        """None if ``message`` is a valid report (counted), else its rejection reason (counted).

        TypeError for a non-bytes argument (a caller's bug); never raises for any bytes.
        """
        data, reason = self._screen.check(message)
        if reason is not None:
            return self._reject(reason)
        try:
            record = decode_record(
                peel(data, self._key, expected_length=self._screen.length),
                expected_round=self._round_id,
                k=self._k,
                manifest_digest=self._manifest_digest,
            )
        except RejectedMessage as exc:
            return self._reject(exc.reason)
        self._counts[record.value] += 1
        self._received += 1
        return None

    def offer_many(
        self, messages: Sequence[bytes | bytearray | memoryview], *, mapper: Mapper | None = None
    ) -> list[str | None]:
        """Offer ``messages`` in order: the same results and counts as :meth:`offer` on each in
        turn, with decryption and decoding run by ``mapper`` (default ``map``; e.g.
        ``ThreadPoolExecutor.map`` to open layers on several cores)."""
        run = mapper if mapper is not None else map
        results: list[str | None] = [None] * len(messages)
        pending: list[tuple[int, bytes]] = []
        for index, message in enumerate(messages):
            data, reason = self._screen.check(message)
            if reason is not None:
                results[index] = self._reject(reason)
            else:
                pending.append((index, data))
        opened = list(run(self._try_open, [data for _, data in pending]))
        for (index, _), out in zip(pending, opened, strict=True):
            if isinstance(out, str):
                results[index] = self._reject(out)
            else:
                assert isinstance(out, int)
                self._counts[out] += 1
                self._received += 1
        return results

    def _try_open(self, data: bytes) -> int | str:
        """The report's value, or the reason it is rejected (thread-safe: no state)."""
        try:
            record = decode_record(
                peel(data, self._key, expected_length=self._screen.length),
                expected_round=self._round_id,
                k=self._k,
                manifest_digest=self._manifest_digest,
            )
        except RejectedMessage as exc:
            return exc.reason
        return record.value

    def _reject(self, reason: str) -> str:
        self._rejected[reason] += 1
        return reason
