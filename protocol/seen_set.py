"""A round's set of message digests whose memory does not grow with n (pure: a temporary file).

Every stage refuses an exact copy of a message it already saw this round (``duplicate``,
protocol/screen.py). The set of SHA-256 digests it needs grows with the round: 1e7 messages are
about 1 GiB of Python ``bytes`` in a ``set``. A :class:`SeenSet` keeps at most ``in_memory``
digests in a Python set (the fast path: a round smaller than that costs what a plain set costs);
when that set is full it spills all of them, sorted, in one transaction, into a table on disk and
starts again empty. A digest is new if it is in neither. So the memory is at most ``in_memory``
digests plus SQLite's page cache (``cache_kib``), whatever n is, and the answer to every
:meth:`add` is exactly that of one unbounded set: the check still runs in arrival order, message
by message, so the first copy wins and every later copy is a ``duplicate``, as before.

Why SQLite (the standard library's ``sqlite3``) rather than a hand-written hashed-bucket file: a
B-tree keyed by the digest (``WITHOUT ROWID``: the key is the row) gives membership and insertion
in O(log n) page reads with a bounded page cache, and it is well kept and tested far beyond what
a project-local file format would be. The database is SQLite's private temporary database
(``sqlite3.connect("")``): SQLite creates it in ``SQLITE_TMPDIR``/``TMPDIR`` (else ``/var/tmp``,
then ``/tmp``), unlinks it at once and it vanishes with the connection, so a crash leaves no file
behind. Nothing here needs to survive a crash: a stage restarted from its journal
(protocol/journal.py) replays its journaled inputs, in order, through a fresh screen, which
rebuilds the same set. Hence no WAL and no fsync either (``journal_mode=OFF``,
``synchronous=OFF``): a write-ahead log buys durability this set does not need.

Not thread-safe (neither was the set it replaces): one caller at a time, from any thread.
"""

from __future__ import annotations

import sqlite3
import weakref

from shuffledp.validation import require_int

__all__ = ["DEFAULT_CACHE_KIB", "DEFAULT_IN_MEMORY", "SeenSet"]

DEFAULT_IN_MEMORY = 1 << 18
"""Digests held in memory before the first spill (262,144: about 26 MiB of 32-byte ``bytes`` in
a set). A stage that sees up to 2.6e5 messages never touches the disk and runs as fast as with a
plain set; past that, each new digest costs a B-tree lookup on disk (bench/seen_set.py: 8-19 us
at 1e6 and 3e6 digests on the loaded 2-core machine, against 1.4-3.3 us in a set), bought for a
memory that stays flat (the bench's process peaks at 66 MiB at 1e6 and at 3e6, against 130 and
407 MiB with a set)."""

DEFAULT_CACHE_KIB = 8192
"""SQLite's page cache once spilled, in KiB (its ``cache_size`` pragma, negative = KiB)."""


class SeenSet:
    """Digests seen so far: :meth:`add` says whether a digest is new and remembers it.

    ``in_memory >= 1`` digests are held in a Python set; past that the set spills to a temporary
    SQLite table (see the module docstring). ``cache_kib >= 1`` bounds SQLite's page cache.
    """

    def __init__(
        self, *, in_memory: int = DEFAULT_IN_MEMORY, cache_kib: int = DEFAULT_CACHE_KIB
    ) -> None:
        require_int("in_memory", in_memory, 1)
        require_int("cache_kib", cache_kib, 1)
        self._in_memory = in_memory
        self._cache_kib = cache_kib
        self._recent: set[bytes] = set()
        self._db: sqlite3.Connection | None = None
        self._close_db: weakref.finalize[[], SeenSet] | None = None
        self._spilled = 0

    def __len__(self) -> int:
        return len(self._recent) + self._spilled

    def __contains__(self, digest: object) -> bool:
        if not isinstance(digest, bytes):
            return False
        return digest in self._recent or self._on_disk(digest)

    @property
    def spilled(self) -> int:
        """Digests moved to disk so far (0 while the round fits in memory)."""
        return self._spilled

    def add(self, digest: bytes) -> bool:
        """True if ``digest`` was not in the set (it now is), False if it was already."""
        if digest in self._recent or self._on_disk(digest):
            return False
        self._recent.add(digest)
        if len(self._recent) >= self._in_memory:
            self._spill()
        return True

    def clear(self) -> None:
        """Forget every digest and delete the temporary database (the round is over)."""
        self._recent = set()
        self._spilled = 0
        if self._close_db is not None:
            self._close_db()  # closes the connection once; SQLite deletes the file
        self._db = self._close_db = None

    def _on_disk(self, digest: bytes) -> bool:
        if self._db is None:
            return False
        row = self._db.execute("SELECT 1 FROM seen WHERE digest = ?", (digest,)).fetchone()
        return row is not None

    def _spill(self) -> None:
        """Move the in-memory digests to the table in one transaction, in key order (a B-tree
        fills fastest in order), and empty the in-memory set."""
        db = self._db if self._db is not None else self._open()
        with db:
            db.executemany(
                "INSERT INTO seen (digest) VALUES (?)", ((d,) for d in sorted(self._recent))
            )
        self._spilled += len(self._recent)
        self._recent = set()

    def _open(self) -> sqlite3.Connection:
        # check_same_thread=False: a stage's screen runs in asyncio.to_thread workers, one call
        # at a time (the same discipline as the plain set it replaces).
        db = sqlite3.connect("", check_same_thread=False)
        db.execute("PRAGMA journal_mode=OFF")
        db.execute("PRAGMA synchronous=OFF")
        db.execute("PRAGMA temp_store=FILE")
        db.execute(f"PRAGMA cache_size=-{int(self._cache_kib)}")
        db.execute("CREATE TABLE seen (digest BLOB PRIMARY KEY) WITHOUT ROWID")
        # A set dropped without clear() (an AnalyzerRound is never closed) closes its database
        # when it is collected, not when the process ends.
        self._close_db = weakref.finalize(self, db.close)
        self._db = db
        return db
