"""The mixer's journal and store for one round: what it acknowledged survives a SIGKILL, in a
memory that does not grow with n (pure: one SQLite database, no asyncio).

A mixer run with a state directory (``shuffledp hop --role mixer --state-dir DIR``) keeps its
whole state in one database, ``DIR/hop-I-mix-round-R-<prefix digest>.sqlite`` (mode 0600; its
WAL beside it), and acknowledges a burst of sealed frames only once the burst is committed:

- ``items(bucket, id, item)``: every item a peeler sent, in the bucket drawn for it uniformly at
  random (OS CSPRNG), ``id`` its place in the order of arrival. This is the external shuffle's
  storage (shuffler/external_shuffle.py without a journal): the database *is* the bucket files,
  so nothing is stored twice. The key ``(bucket, id)`` keeps a bucket's rows together on disk
  (``WITHOUT ROWID``, 64 KiB pages so that rows of a few hundred bytes fit many to a page): the
  release reads one bucket at a time, in order, with bounded memory.
- ``frames(sender, seq, count)``: which data frame of which peeler it holds, so that a frame
  delivered again after a restart (the broker's redelivery of what was not acknowledged, or a
  restarted peeler sending its output again) is a ``duplicate-frame``, never counted twice;
- ``ends(sender, frame)``: each peeler's END frame, exactly as signed (replayed through the same
  check on restart);
- ``meta``: what the journal belongs to (refused under other settings), the count of unsealable
  messages, and, once the mixer has accounted for its peelers, its decision (``closed``: the
  counts, the refusal if any, its log);
- ``orders(bucket, perm)``: the permutation drawn for a bucket, committed before any of its
  items is released, so that a mixer restarted mid-release publishes exactly the same frames
  again (its downstream drops the repeats by number, correct only if their contents are the
  same), as a one-process hop's ``CLOSED`` record does.

Why SQLite (``sqlite3`` ships with Python) rather than the one-process hop's hand-written journal
(protocol/journal.py): that journal holds raw inputs and is read back whole into memory on
restart, so it would hold the mixer's whole batch (n items) twice, once on disk and once in
memory at recovery. The mixer needs three things to change together for each burst: the items
in their buckets, which frames they came in, and the counters. In WAL mode with
``synchronous=FULL`` one ``COMMIT`` makes all of them durable with one ``fsync`` of the WAL, and a
burst interrupted by a crash is rolled back whole by SQLite (never acknowledged, so the broker
delivers it again). Bucket files plus a record of frames would need one ``fsync`` per bucket
file and per record each burst and a truncation of every bucket to its last recorded size on
restart, which is the part of a database worth not rewriting.

Not thread-safe: one caller at a time, from any thread (the mixer's calls are sequential).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from shuffledp.protocol.journal import DIR_MODE, FILE_MODE, JournalError
from shuffledp.randomness import RandomLike, RandomSource, as_random_source
from shuffledp.shuffler.permute import uniform_permutation
from shuffledp.validation import require_int

__all__ = ["MixJournal", "mix_journal_name"]

PAGE_SIZE = 65536
CACHE_KIB = 16384
"""SQLite's page cache (KiB): bounded, whatever n is."""
FORMAT = "shuffledp-mix-journal/1"
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS frames(sender INTEGER, seq INTEGER, count INTEGER NOT NULL, "
    "PRIMARY KEY(sender, seq)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS ends(sender INTEGER PRIMARY KEY, frame BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS items(bucket INTEGER, id INTEGER, item BLOB NOT NULL, "
    "PRIMARY KEY(bucket, id)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS orders(bucket INTEGER PRIMARY KEY, perm BLOB NOT NULL)",
)


def mix_journal_name(stage: str, prefix: str, round_id: int) -> str:
    """Distinct per (prefix, round, mixer), next to the peelers' and hops' journals."""
    digest = hashlib.sha256(prefix.encode()).hexdigest()[:16]
    return f"{stage}-mix-round-{round_id}-{digest}.sqlite"


class MixJournal:
    """The open journal and store of one mixer and round; see the module docstring.

    ``MixJournal.open(state_dir, name, identity, item_length=, buckets=)``: creates or opens
    the database, takes its lock (``<name>.lock``), refuses a database of other settings
    (JournalError naming the file and the field). As the mixer's store: ``count``, ``buckets``,
    ``add_many`` and ``release`` as :class:`~shuffledp.shuffler.external_shuffle.BucketShuffle`;
    ``note_data``/``note_end`` record frames in the same transaction, ``commit`` ends it.
    """

    def __init__(
        self,
        path: Path,
        db: sqlite3.Connection,
        lock_fd: int,
        *,
        item_length: int,
        buckets: int,
        rng: RandomLike,
    ) -> None:
        self.path = path
        self._db = db
        self._lock_fd: int | None = lock_fd
        self._item_length = item_length
        self._buckets = buckets
        self._rng: RandomSource = as_random_source(rng)
        self._count = int(db.execute("SELECT COUNT(*) FROM items").fetchone()[0])
        self.resumed_items = self._count
        self._released = False
        self.commits = 0

    @classmethod
    def open(
        cls,
        state_dir: str | os.PathLike[str],
        name: str,
        identity: dict[str, Any],
        *,
        item_length: int,
        buckets: int,
        rng: RandomLike = None,
    ) -> MixJournal:
        require_int("item_length", item_length, 1)
        require_int("buckets", buckets, 1)
        directory = Path(state_dir)
        path = directory / name
        lock_fd = _lock(directory, path)
        try:
            db = _connect(path)
            _check_identity(db, path, {**identity, "format": FORMAT, "buckets": buckets})
        except sqlite3.Error as exc:
            os.close(lock_fd)
            raise JournalError(f"{path}: cannot use the mixer's journal: {exc}") from exc
        except JournalError:
            os.close(lock_fd)
            raise
        return cls(path, db, lock_fd, item_length=item_length, buckets=buckets, rng=rng)

    @property
    def count(self) -> int:
        """Items held (committed or in the open transaction)."""
        return self._count

    @property
    def buckets(self) -> int:
        return self._buckets

    def _begin(self) -> None:
        if not self._db.in_transaction:
            self._db.execute("BEGIN")

    def add_many(self, items: Sequence[bytes]) -> None:
        """Spread ``items`` over the buckets at random (in the open transaction)."""
        if self._released:
            raise JournalError(f"{self.path}: a released batch takes no more items")
        for item in items:
            if len(item) != self._item_length:
                raise JournalError(
                    f"{self.path}: every item must be {self._item_length} bytes, got {len(item)}"
                )
        if not items:
            return
        self._begin()
        chosen = self._rng.integers(self._buckets, len(items))
        start = self._count
        self._db.executemany(
            "INSERT INTO items(bucket, id, item) VALUES (?, ?, ?)",
            (
                (int(b), start + i, bytes(item))
                for i, (b, item) in enumerate(zip(chosen, items, strict=True))
            ),
        )
        self._count += len(items)

    def note_data(self, sender: int, seq: int, count: int) -> None:
        """Data frame ``seq`` of peeler ``sender`` (``count`` items) is held."""
        self._begin()
        self._db.execute(
            "INSERT INTO frames(sender, seq, count) VALUES (?, ?, ?)", (sender, seq, count)
        )

    def note_end(self, sender: int, frame: bytes) -> None:
        """Peeler ``sender``'s END frame, as signed."""
        self._begin()
        self._db.execute("INSERT INTO ends(sender, frame) VALUES (?, ?)", (sender, frame))

    def commit(self, unsealable: int) -> None:
        """Make the open transaction durable (one fsync of the WAL): call before the burst is
        acknowledged."""
        self._begin()
        self._set("unsealable", str(unsealable))
        self._db.execute("COMMIT")
        self.commits += 1

    def frames(self) -> list[tuple[int, int, int]]:
        """(sender, seq, count) of every data frame held."""
        rows = self._db.execute("SELECT sender, seq, count FROM frames ORDER BY sender, seq")
        return [(int(a), int(b), int(c)) for a, b, c in rows]

    def ends(self) -> list[tuple[int, bytes]]:
        return [(int(s), bytes(f)) for s, f in self._db.execute("SELECT sender, frame FROM ends")]

    @property
    def unsealable(self) -> int:
        value = self._get("unsealable")
        return 0 if value is None else int(value)

    @property
    def closed(self) -> dict[str, Any] | None:
        """The mixer's decision once it accounted for its peelers (``close_round``), or None."""
        value = self._get("closed")
        return None if value is None else dict(json.loads(value))

    @property
    def peelers_ready(self) -> bool:
        """True once the mixer heard every peeler ready (a restarted mixer does not wait for
        them again: they may be done and gone)."""
        return self._get("peelers_ready") is not None

    def mark_peelers_ready(self) -> None:
        self._begin()
        self._set("peelers_ready", "1")
        self._db.execute("COMMIT")

    def close_round(self, decision: dict[str, Any]) -> None:
        """Commit the decision: a restarted mixer releases from it, collecting nothing."""
        self._begin()
        self._set("closed", json.dumps(decision, sort_keys=True))
        self._db.execute("COMMIT")

    def release(self) -> Iterator[bytes]:
        """Every item held, once, bucket after bucket, each bucket in its committed permutation
        (drawn and committed first if it has none): the same order on every call, uniform over
        all orders (docs/hop-workers.md)."""
        self._released = True
        length = self._item_length
        for bucket in range(self._buckets):
            rows = [
                bytes(r[0])
                for r in self._db.execute(
                    "SELECT item FROM items WHERE bucket = ? ORDER BY id", (bucket,)
                )
            ]
            order = self._order(bucket, len(rows))
            for i in order:
                item = rows[int(i)]
                if len(item) != length:
                    raise JournalError(f"{self.path}: an item of bucket {bucket} is damaged")
                yield item

    def _order(self, bucket: int, size: int) -> np.ndarray[Any, np.dtype[np.int64]]:
        row = self._db.execute("SELECT perm FROM orders WHERE bucket = ?", (bucket,)).fetchone()
        if row is not None:
            order = np.frombuffer(bytes(row[0]), dtype=">u4").astype(np.int64)
            if len(order) != size:
                raise JournalError(
                    f"{self.path}: bucket {bucket} holds {size} items, its order {len(order)}"
                )
            return order
        order = uniform_permutation(size, self._rng)
        self._begin()
        self._db.execute(
            "INSERT INTO orders(bucket, perm) VALUES (?, ?)",
            (bucket, order.astype(">u4").tobytes()),
        )
        self._db.execute("COMMIT")  # before any of its items leaves
        return order

    def _get(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _set(self, key: str, value: str) -> None:
        self._db.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def close(self) -> None:
        """Close the database (an open transaction is rolled back: it was never acknowledged)
        and release the lock; the files stay for a restart. Idempotent."""
        with contextlib.suppress(sqlite3.Error):
            self._db.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def remove(self) -> None:
        """Close, then delete the database, its WAL and lock (the round is forwarded)."""
        lock = self.path.with_name(self.path.name + ".lock")
        with contextlib.suppress(sqlite3.Error):
            self._db.close()
        for suffix in ("", "-wal", "-shm"):
            self.path.with_name(self.path.name + suffix).unlink(missing_ok=True)
        lock.unlink(missing_ok=True)
        self.close()


def _lock(directory: Path, path: Path) -> int:
    """An exclusive flock on ``<path>.lock`` (a separate file: closing another descriptor of
    the database would drop SQLite's own POSIX locks)."""
    lock = path.with_name(path.name + ".lock")
    try:
        directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, FILE_MODE)
    except OSError as exc:
        raise JournalError(f"{path}: cannot open the mixer's journal: {exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise JournalError(
            f"{path}: the journal is locked by another running process (is this mixer already "
            "running?)"
        ) from None
    return fd


def _connect(path: Path) -> sqlite3.Connection:
    fresh = not path.exists()
    if fresh:  # created 0600 before SQLite opens it (it holds the hop's peeled layers)
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE))
    os.chmod(path, FILE_MODE)
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    if fresh:
        db.execute(f"PRAGMA page_size={PAGE_SIZE}")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")  # the WAL is fsync'd at every COMMIT
    db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
    for statement in SCHEMA:
        db.execute(statement)
    return db


def _check_identity(db: sqlite3.Connection, path: Path, identity: dict[str, Any]) -> None:
    row = db.execute("SELECT value FROM meta WHERE key = 'identity'").fetchone()
    if row is None:
        db.execute(
            "INSERT INTO meta(key, value) VALUES ('identity', ?)",
            (json.dumps(identity, sort_keys=True),),
        )
        return
    stored = json.loads(row[0])
    for key in sorted(set(stored) | set(identity)):
        if stored.get(key) != identity.get(key):
            raise JournalError(
                f"{path}: the journal belongs to other settings ({key} is "
                f"{stored.get(key)!r} there, {identity.get(key)!r} here); move it away to run "
                "this round afresh"
            )
