"""The plaintext a client sends to the analyzer: a fixed-size record.

Layout (RECORD_SIZE = 32 bytes, integers unsigned big-endian)::

    offset 0   1 byte    version (VERSION)
    offset 1   8 bytes   round id, in [0, 2^64)
    offset 9   4 bytes   value (the k-RR report), in [0, k) with k <= 2^32
    offset 13  19 bytes  padding, random

Every record has the same size, so every onion of a round has the same length at each hop.

The padding is random (``os.urandom``) and is not checked on decoding: random bytes admit no test,
and the record is only ever read by the analyzer, which learns its content anyway, so padding
cannot carry anything past the shuffle. Zero padding would allow a "bad-padding" check, but would
only catch malformed clients, which the version, round and range checks already catch. The spare
bytes leave room for later fields under a new version.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.errors import BadVersion, ValueOutOfRange, WrongLength, WrongRound

VERSION = 1
RECORD_SIZE = 32
MAX_ROUND_ID = 2**64 - 1
MAX_K = 2**32

_HEADER = struct.Struct(">BQI")  # version, round id, value
PADDING_SIZE = RECORD_SIZE - _HEADER.size

PaddingSource = Callable[[int], bytes]
"""``source(n)`` returns n bytes; ``os.urandom`` unless a test passes a deterministic one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """A decoded record. From :func:`decode_record`, it is of the current version, of the
    expected round, and its value is in [0, k) for the k the caller passed."""

    round_id: int
    value: int


def encode_record(
    round_id: int, value: int, k: int, *, padding_source: PaddingSource | None = None
) -> bytes:
    """The RECORD_SIZE-byte record of ``value`` for round ``round_id``, padded with fresh bytes
    from ``padding_source`` (default ``os.urandom``).

    Raises InvalidParameterError (never RejectedMessage: nothing was received) unless k is an
    integer in [2, 2^32], value an integer in [0, k) and round_id an integer in [0, 2^64).
    """
    _check_k(k)
    _check_round_id("round_id", round_id)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidParameterError(f"value must be an integer, got {value!r}")
    if not 0 <= value < k:
        raise InvalidParameterError(f"value must be in [0, k) = [0, {k}), got {value}")
    padding = (padding_source or os.urandom)(PADDING_SIZE)
    if not isinstance(padding, bytes) or len(padding) != PADDING_SIZE:
        raise InvalidParameterError(
            f"padding_source must return {PADDING_SIZE} bytes, got {padding!r}"
        )
    return _HEADER.pack(VERSION, round_id, value) + padding


def decode_record(data: bytes, *, expected_round: int, k: int) -> Record:
    """The record in ``data``, checked in this order (the first failure is raised):

    - WrongLength: ``len(data) != RECORD_SIZE``;
    - BadVersion: the version byte is not VERSION;
    - WrongRound: the round id is not ``expected_round``;
    - ValueOutOfRange: the value is not in [0, k).

    Padding is not checked (module docstring). Bad parameters (k, expected_round) raise
    InvalidParameterError.
    """
    _check_k(k)
    _check_round_id("expected_round", expected_round)
    if len(data) != RECORD_SIZE:
        raise WrongLength(f"record length must be {RECORD_SIZE} bytes, got {len(data)}")
    version, round_id, value = _HEADER.unpack_from(data)
    if version != VERSION:
        raise BadVersion(f"record version must be {VERSION}, got {version}")
    if round_id != expected_round:
        raise WrongRound(f"record round must be {expected_round}, got {round_id}")
    if value >= k:
        raise ValueOutOfRange(f"record value must be in [0, k) = [0, {k}), got {value}")
    return Record(round_id=round_id, value=value)


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or not 2 <= k <= MAX_K:
        raise InvalidParameterError(f"k must be an integer in [2, 2^32], got {k!r}")


def _check_round_id(name: str, round_id: int) -> None:
    if isinstance(round_id, bool) or not isinstance(round_id, int):
        raise InvalidParameterError(f"{name} must be an integer, got {round_id!r}")
    if not 0 <= round_id <= MAX_ROUND_ID:
        raise InvalidParameterError(f"{name} must be in [0, 2^64), got {round_id}")
