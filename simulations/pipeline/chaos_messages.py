"""Hostile messages a client process injects into its own round, for `shuffledp simulate --chaos`
(pure core).

A chaos client is an authenticated client process that misbehaves on top of sending its genuine
reports: it also sends ``count`` messages built from what it sent, in five kinds, each of which
hop 0 must reject under one known reason (protocol/client_auth.py, shuffler/hop.py):

============== ========================================================= ===========================
kind           message                                                   hop 0 rejects it as
============== ========================================================= ===========================
truncated      a genuine message cut short by 1..39 bytes                ``wrong-length``
replayed       an exact copy of a genuine message already sent           ``duplicate``
corrupted      a genuine message with one bit of its onion flipped       ``bad-authenticator``
second-report  a fresh authentic report from a client that already sent  ``client-already-reported``
old-round      an authentic report tagged for another round              ``bad-authenticator``
============== ========================================================= ===========================

Every injected message differs from every other (distinct cut lengths, distinct flipped bits,
fresh onions), so each is counted once under its own reason and never as a ``duplicate`` of
another injected message (only ``replayed`` copies are duplicates, by design). The process must
send them all after the genuine messages they derive from and before its last genuine report:
then hop 0 has not filled its batch when they arrive, and counts every one.

This needs client authentication: without it a second report or an old round's report would be
taken as a report (flooding), which is what authentication exists to stop. The client process
that sends them is :mod:`shuffledp.simulations.pipeline.chaos` (the production client with its
publisher wrapped).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.client_auth import ENVELOPE_SIZE
from shuffledp.validation import require_int

__all__ = ["CHAOS_KINDS", "EXPECTED_REASON", "ChaosBatch", "make_chaos_messages"]

CHAOS_KINDS: tuple[str, ...] = (
    "truncated",
    "replayed",
    "corrupted",
    "second-report",
    "old-round",
)
EXPECTED_REASON: dict[str, str] = {
    "truncated": "wrong-length",
    "replayed": "duplicate",
    "corrupted": "bad-authenticator",
    "second-report": "client-already-reported",
    "old-round": "bad-authenticator",
}
"""The reason hop 0 rejects each kind for."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChaosBatch:
    """``messages`` to inject, in order, and how many of each kind (``injected``)."""

    messages: list[bytes]
    injected: dict[str, int]

    @property
    def expected_rejections(self) -> dict[str, int]:
        """Rejections at hop 0 by reason that these messages must cause (nonzero only)."""
        out: dict[str, int] = {}
        for kind, count in self.injected.items():
            if not count:
                continue
            reason = EXPECTED_REASON[kind]
            out[reason] = out.get(reason, 0) + count
        return out


def make_chaos_messages(
    *,
    genuine: Sequence[bytes],
    count: int,
    fresh_report: Callable[[int, bool], bytes],
) -> ChaosBatch:
    """``count`` hostile messages (module docstring), kinds in turn, from the ``genuine``
    authenticated messages already sent (the first of them are used as sources, cyclically).

    ``fresh_report(i, old_round)``: a new authentic message of the client that sent
    ``genuine[i]`` (a fresh onion), tagged for this round, or for another round if
    ``old_round``. Raises InvalidParameterError for count < 0, no genuine message, or a genuine
    message too short to hold an envelope and a byte of onion.
    """
    require_int("count", count, 0)
    if not genuine:
        raise InvalidParameterError("genuine must hold at least one message sent, got none")
    length = len(genuine[0])
    if length <= ENVELOPE_SIZE or any(len(m) != length for m in genuine):
        raise InvalidParameterError(
            f"genuine messages must all have one length > {ENVELOPE_SIZE} (authenticated), "
            f"got lengths {sorted({len(m) for m in genuine})[:3]}"
        )
    onion_bits = (length - ENVELOPE_SIZE) * 8
    messages: list[bytes] = []
    injected = dict.fromkeys(CHAOS_KINDS, 0)
    for position in range(count):
        kind = CHAOS_KINDS[position % len(CHAOS_KINDS)]
        use = injected[kind]  # how many of this kind so far: makes every message distinct
        source = use % len(genuine)
        message = genuine[source]
        if kind == "truncated":
            # cut 1..39 bytes, then move to the next source: (source, cut) pairs never repeat
            cut = 1 + (use // len(genuine)) % (ENVELOPE_SIZE - 1)
            out = message[:-cut]
        elif kind == "replayed":
            out = message
        elif kind == "corrupted":
            bit = (use // len(genuine)) % onion_bits
            flipped = bytearray(message)
            flipped[ENVELOPE_SIZE + bit // 8] ^= 1 << (bit % 8)
            out = bytes(flipped)
        else:
            out = fresh_report(source, kind == "old-round")
        messages.append(out)
        injected[kind] += 1
    return ChaosBatch(messages=messages, injected=injected)
