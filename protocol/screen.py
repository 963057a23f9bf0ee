"""The first checks every stage applies to a message, cheapest first (pure core).

Both a shuffler hop and the analyzer screen each incoming ciphertext the same way before any
decryption: it must be bytes (anything else is a caller's bug: TypeError), have the stage's exact
length (``wrong-length``), and not have been seen this round (``duplicate``: the SHA-256 digest
of the ciphertext in the round's seen-set; every ciphertext of the right length is added, so
resending rejected junk never costs a second decryption).
"""

from __future__ import annotations

import hashlib

from .errors import Duplicate, WrongLength


class MessageScreen:
    """Length and seen-set checks for one stage and one round."""

    def __init__(self, length: int) -> None:
        self.length = length
        self._seen: set[bytes] = set()

    def check(self, message: bytes | bytearray | memoryview) -> tuple[bytes, str | None]:
        """(the message as bytes, None) if it passes, else (bytes, its rejection reason).

        Raises TypeError for a non-bytes argument; never raises for any bytes.
        """
        if not isinstance(message, bytes | bytearray | memoryview):
            raise TypeError(f"message must be bytes, got {type(message).__name__}")
        data = bytes(message)
        if len(data) != self.length:
            return data, WrongLength.reason
        digest = hashlib.sha256(data).digest()
        if digest in self._seen:
            return data, Duplicate.reason
        self._seen.add(digest)
        return data, None

    def forget(self) -> None:
        """Drop the seen-set (the round is over)."""
        self._seen = set()
