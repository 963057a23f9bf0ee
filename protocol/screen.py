"""The first checks every stage applies to a message, cheapest first (pure core).

Both a shuffler hop and the analyzer screen each incoming ciphertext the same way before any
decryption: it must be bytes (anything else is a caller's bug: TypeError), have the stage's exact
length (``wrong-length``), and not have been seen this round (``duplicate``: the SHA-256 digest
of the ciphertext in the round's seen-set; every ciphertext of the right length is added, so
resending rejected junk never costs a second decryption). The seen-set is a
:class:`~shuffledp.protocol.seen_set.SeenSet`: in memory up to ``seen_in_memory`` digests, on
disk past that, so a stage's memory does not grow with the round's size.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from typing import Any

from shuffledp.protocol.errors import Duplicate, WrongLength
from shuffledp.protocol.seen_set import DEFAULT_IN_MEMORY, SeenSet


class MessageScreen:
    """Length and seen-set checks for one stage and one round (``seen_in_memory``: digests
    held in memory before the seen-set spills to disk, protocol/seen_set.py)."""

    def __init__(self, length: int, *, seen_in_memory: int = DEFAULT_IN_MEMORY) -> None:
        self.length = length
        self._seen = SeenSet(in_memory=seen_in_memory)

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
        if not self._seen.add(digest):
            return data, Duplicate.reason
        return data, None

    def forget(self) -> None:
        """Drop the seen-set and its temporary file, if any (the round is over)."""
        self._seen.clear()


Mapper = Callable[[Callable[[bytes], Any], Iterable[bytes]], Iterable[Any]]
"""``map``-like: ``mapper(fn, items)`` returns ``fn(item)`` for each item, in order."""


def parallel_mapper(executor: Executor, parts: int) -> Mapper:
    """A Mapper that splits the items into ``parts`` contiguous slices and runs each slice as one
    task of ``executor`` (one task per slice, not per item: a task costs tens of microseconds,
    as much as the decryption it would run). Results come back in the items' order."""

    def run(fn: Callable[[bytes], Any], items: Iterable[bytes]) -> list[Any]:
        todo = list(items)
        if parts < 2 or len(todo) < 2 * parts:
            return [fn(item) for item in todo]
        size = math.ceil(len(todo) / parts)
        futures = [
            executor.submit(_apply_all, fn, todo[start : start + size])
            for start in range(0, len(todo), size)
        ]
        out: list[Any] = []
        for future in futures:
            out.extend(future.result())
        return out

    return run


def _apply_all(fn: Callable[[bytes], Any], items: list[bytes]) -> list[Any]:
    return [fn(item) for item in items]
