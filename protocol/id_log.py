"""A round's log of client ids, in the order appended, whose memory does not grow with n (pure: a
temporary file).

Hop 0 (or its peeler) with client authentication keeps the id of every client whose authentic
report it took, in order, so that its receipt desk (shuffler/receipts.py) can read what is new
since its last look and tell each client process which of its clients were taken. A Python list
of ints costs about 36 bytes per id (1e7 reports: 360 MiB). An :class:`IdLog` keeps at most
``in_memory`` ids in a list; when that list is full it appends them, as fixed 8-byte big-endian
records, to a temporary file and starts again empty. Reading from a position reads the file from
byte ``8 * position`` (a seek, not a search) and then the list: the same ids, in the same order,
as one unbounded list.

Why a plain file rather than SQLite (protocol/seen_set.py uses it for membership): the log is
only appended and read forward by position, which fixed-size records in a file do with one seek
and one read; a B-tree would add nothing. The file is ``tempfile.TemporaryFile`` (unlinked at
once, gone with the process) and needs no durability: a stage restarted from its journal
replays its inputs through a fresh screen, which rebuilds the same log.

Not thread-safe: one caller at a time, from any thread.
"""

from __future__ import annotations

import tempfile
from typing import IO

import numpy as np

from shuffledp.validation import require_int

__all__ = ["DEFAULT_IN_MEMORY", "IdLog"]

DEFAULT_IN_MEMORY = 1 << 18
"""Ids held in memory before the first spill (262,144: about 9 MiB of Python ints)."""
RECORD = np.dtype(">u8")


class IdLog:
    """Unsigned 64-bit ids in the order appended (see the module docstring)."""

    def __init__(self, *, in_memory: int = DEFAULT_IN_MEMORY) -> None:
        require_int("in_memory", in_memory, 1)
        self._in_memory = in_memory
        self._tail: list[int] = []
        self._file: IO[bytes] | None = None
        self._spilled = 0

    def __len__(self) -> int:
        return self._spilled + len(self._tail)

    @property
    def spilled(self) -> int:
        """Ids moved to the file so far."""
        return self._spilled

    def append(self, value: int) -> None:
        self._tail.append(value)
        if len(self._tail) >= self._in_memory:
            self._spill()

    def since(self, position: int, limit: int | None = None) -> list[int]:
        """The ids from the ``position``-th on (at most ``limit`` of them), in order."""
        require_int("position", position, 0)
        stop = len(self) if limit is None else min(len(self), position + limit)
        out: list[int] = []
        if position < min(stop, self._spilled) and self._file is not None:
            end = min(stop, self._spilled)
            self._file.seek(position * RECORD.itemsize)
            data = self._file.read((end - position) * RECORD.itemsize)
            out = np.frombuffer(data, dtype=RECORD).tolist()
        start = max(position, self._spilled) - self._spilled
        out.extend(self._tail[start : max(start, stop - self._spilled)])
        return out

    def clear(self) -> None:
        """Forget every id and delete the file (the round is over)."""
        self._tail = []
        self._spilled = 0
        if self._file is not None:
            self._file.close()
            self._file = None

    def _spill(self) -> None:
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="shuffledp-ids-")  # noqa: SIM115 (clear)
        self._file.seek(0, 2)
        self._file.write(np.asarray(self._tail, dtype=RECORD).tobytes())
        self._file.flush()
        self._spilled += len(self._tail)
        self._tail = []
