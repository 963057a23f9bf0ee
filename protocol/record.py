"""The plaintext a client sends to the analyzer: a fixed-size record.

Layout (version 2, RECORD_SIZE = 64 bytes, integers unsigned big-endian)::

    offset 0   1 byte    version (VERSION = 2)
    offset 1   8 bytes   round id, in [0, 2^64)
    offset 9   4 bytes   value (the k-RR report), in [0, k) with k <= 2^32
    offset 13  32 bytes  manifest digest: the identity (SHA-256) of the round manifest
    offset 45  19 bytes  padding, random

Every record has the same size, so every onion of a round has the same length at each hop.

The manifest digest binds the report to the round's agreed parameters (k, eps0, the hops and
their keys, the enrolment...): it sits inside the innermost sealed layer, so no hop can change
it, and the analyzer refuses a record of another manifest as ``wrong-manifest``. A version-1
record (32 bytes, no digest) has another length, so its onion is ``wrong-length`` at hop 0.

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
from shuffledp.protocol.errors import (
    BadVersion,
    ValueOutOfRange,
    WrongLength,
    WrongManifest,
    WrongRound,
)

VERSION = 2
RECORD_SIZE = 64
MAX_ROUND_ID = 2**64 - 1
MAX_K = 2**32
MANIFEST_DIGEST_SIZE = 32
"""Bytes of a round manifest's identity (a SHA-256 digest)."""

_HEADER = struct.Struct(">BQI32s")  # version, round id, value, manifest digest
PADDING_SIZE = RECORD_SIZE - _HEADER.size

PaddingSource = Callable[[int], bytes]
"""``source(n)`` returns n bytes; ``os.urandom`` unless a test passes a deterministic one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """A decoded record. From :func:`decode_record`, it is of the current version, of the
    expected round, and its value is in [0, k) for the k the caller passed."""

    round_id: int
    value: int


def require_manifest_digest(value: object, name: str = "manifest_digest") -> bytes:
    """``value`` as bytes if it is a 32-byte manifest digest, else InvalidParameterError naming
    ``name`` (the round manifest's identity: the SHA-256 of its signed form)."""
    if not isinstance(value, bytes | bytearray) or len(value) != MANIFEST_DIGEST_SIZE:
        got = f"{len(value)} bytes" if isinstance(value, bytes | bytearray) else repr(value)
        raise InvalidParameterError(
            f"{name} must be the {MANIFEST_DIGEST_SIZE}-byte digest of the round manifest, "
            f"got {got}"
        )
    return bytes(value)


def encode_record(
    round_id: int,
    value: int,
    k: int,
    *,
    manifest_digest: bytes,
    padding_source: PaddingSource | None = None,
) -> bytes:
    """The RECORD_SIZE-byte record of ``value`` for round ``round_id`` under the round manifest
    whose digest is ``manifest_digest``, padded with fresh bytes from ``padding_source``
    (default ``os.urandom``).

    Raises InvalidParameterError (never RejectedMessage: nothing was received) unless k is an
    integer in [2, 2^32], value an integer in [0, k), round_id an integer in [0, 2^64) and
    manifest_digest 32 bytes.
    """
    _check_k(k)
    _check_round_id("round_id", round_id)
    digest = require_manifest_digest(manifest_digest)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidParameterError(f"value must be an integer, got {value!r}")
    if not 0 <= value < k:
        raise InvalidParameterError(f"value must be in [0, k) = [0, {k}), got {value}")
    padding = (padding_source or os.urandom)(PADDING_SIZE)
    if not isinstance(padding, bytes) or len(padding) != PADDING_SIZE:
        raise InvalidParameterError(
            f"padding_source must return {PADDING_SIZE} bytes, got {padding!r}"
        )
    return _HEADER.pack(VERSION, round_id, value, digest) + padding


def decode_record(data: bytes, *, expected_round: int, k: int, manifest_digest: bytes) -> Record:
    """The record in ``data``, checked in this order (the first failure is raised):

    - WrongLength: ``len(data) != RECORD_SIZE``;
    - BadVersion: the version byte is not VERSION;
    - WrongManifest: the manifest digest is not ``manifest_digest``;
    - WrongRound: the round id is not ``expected_round``;
    - ValueOutOfRange: the value is not in [0, k).

    Padding is not checked (module docstring). Bad parameters (k, expected_round,
    manifest_digest) raise InvalidParameterError.
    """
    _check_k(k)
    _check_round_id("expected_round", expected_round)
    expected_digest = require_manifest_digest(manifest_digest)
    if len(data) != RECORD_SIZE:
        raise WrongLength(f"record length must be {RECORD_SIZE} bytes, got {len(data)}")
    if data[0] != VERSION:  # read before the layout of this version is assumed
        raise BadVersion(f"record version must be {VERSION}, got {data[0]}")
    _, round_id, value, digest = _HEADER.unpack_from(data)
    if digest != expected_digest:
        raise WrongManifest(
            f"record must be of the round manifest {expected_digest.hex()[:16]}..., "
            f"got {bytes(digest).hex()[:16]}..."
        )
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
