"""The analyzer's side of one round: peel the last layer, validate, count (pure core, no I/O).

An :class:`AnalyzerRound` is fed what the last hop released, one :meth:`AnalyzerRound.offer` call
per message. Checks, in order; the first failure is the reason the message is rejected and
counted under its slug (``AnalyzerRound.rejected``, every slug of
:data:`shuffledp.protocol.REJECTION_REASONS` present):

1. ``wrong-length``: the length is not ``message_length(n_hops, n_hops)`` (the record plus one
   sealed-box layer);
2. ``duplicate``: the SHA-256 digest of the ciphertext is in the round's seen-set (every
   ciphertext of the right length that reaches this step is added);
3. ``decryption-failed``: the layer does not open with the analyzer's private key;
4. then :func:`shuffledp.protocol.decode_record` with this round and k: ``bad-version``,
   ``wrong-round``, ``value-out-of-range``.

A message that passes is one report: its value's bin of the histogram grows by one. No bytes
input makes ``offer`` raise. Guarantees: ``histogram().sum() == n_received`` and
``n_received + sum(rejected.values())`` equals the number of offers.
"""

from __future__ import annotations

import hashlib

import numpy as np
import numpy.typing as npt
from nacl.public import PrivateKey

from shuffledp.accountant.mechanism import InvalidParameterError
from shuffledp.protocol.errors import REJECTION_REASONS, Duplicate, RejectedMessage, WrongLength
from shuffledp.protocol.onion import message_length, peel
from shuffledp.protocol.record import MAX_K, MAX_ROUND_ID, decode_record

__all__ = ["AnalyzerRound"]


class AnalyzerRound:
    """The analyzer of round ``round_id``: k bins, ``n_hops`` hops before it.

    Parameters (keyword-only, validated: InvalidParameterError naming the rule and the value):
    ``round_id`` in [0, 2^64), ``k`` in [2, 2^32], ``n_hops >= 1``, ``private_key`` a nacl
    PrivateKey (the analyzer's).
    """

    def __init__(self, *, round_id: int, k: int, n_hops: int, private_key: PrivateKey) -> None:
        _check_int("round_id", round_id, 0, MAX_ROUND_ID)
        _check_int("k", k, 2, MAX_K)
        _check_int("n_hops", n_hops, 1, None)
        if not isinstance(private_key, PrivateKey):
            raise InvalidParameterError(
                f"private_key must be a nacl.public.PrivateKey, got {type(private_key).__name__}"
            )
        self._round_id = round_id
        self._k = k
        self._n_hops = n_hops
        self._key = private_key
        self._length = message_length(n_hops, n_hops)
        self._seen: set[bytes] = set()
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
    def n_hops(self) -> int:
        return self._n_hops

    @property
    def input_length(self) -> int:
        """The exact length of every message the analyzer accepts."""
        return self._length

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
        if not isinstance(message, bytes | bytearray | memoryview):
            raise TypeError(f"message must be bytes, got {type(message).__name__}")
        data = bytes(message)
        if len(data) != self._length:
            return self._reject(WrongLength.reason)
        digest = hashlib.sha256(data).digest()
        if digest in self._seen:
            return self._reject(Duplicate.reason)
        self._seen.add(digest)
        try:
            record = decode_record(
                peel(data, self._key, expected_length=self._length),
                expected_round=self._round_id,
                k=self._k,
            )
        except RejectedMessage as exc:
            return self._reject(exc.reason)
        self._counts[record.value] += 1
        self._received += 1
        return None

    def _reject(self, reason: str) -> str:
        self._rejected[reason] += 1
        return reason


def _check_int(name: str, value: int, low: int, high: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidParameterError(f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        rule = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise InvalidParameterError(f"{name} must be {rule}, got {value}")
