"""The one thread that appends a journal's records and fsyncs them (pure: files and threads, no
asyncio).

Why a thread owned by the journal: a stage journals a burst while it offers it (both are slow:
fsync, peeling), and must be able to stop at any moment. When callers ran each append in a
thread of their own (``asyncio.to_thread``) a stage that failed or was cancelled closed the file
descriptor in a ``finally`` while an append still wrote or fsync'd it: the lock looked held by
another process to a stage restarted at once, and the descriptor number could be reused by an
unrelated file before the late write landed. Here every append is a job queued to the journal's
own writer thread, its :class:`~concurrent.futures.Future` resolves once the record is on disk
(``fsync``), and :meth:`JournalWriter.stop` returns only when every job queued before it is
done, so the journal closes its descriptor with no write in flight.

Jobs run in the order they were submitted, every one of them, even one whose future a caller
cancelled (written but not acknowledged is harmless: replayed, then delivered again and counted
a duplicate); jobs already queued when the thread takes one are written together and fsync'd
once (a group commit: several bursts cost one fsync). A job is a
function that returns the record's bytes; it runs on the writer thread, so encoding and
checksumming a burst costs the caller nothing. Once a write or an fsync fails, the end of the
file is unknown (a partial record may be there, and a failed fsync may have dropped pages that
a second one would report as written), so every later job fails with the same message: nothing
is appended after a record that may be damaged.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from pathlib import Path

__all__ = ["GROUP_BYTES", "JournalWriter"]

GROUP_BYTES = 64 << 20
"""At most this many bytes of records are written between two fsyncs (a record larger than
this is written alone)."""


@dataclass(frozen=True, slots=True)
class _Job:
    encode: Callable[[], bytes]
    done: Future[int]


class JournalWriter:
    """Appends records to the open file ``fd`` (``path`` names it in errors) from one thread.

    :meth:`submit` queues a job and returns a future that resolves to the bytes written once
    they are fsync'd (or fails with ``error(message)``); :meth:`stop` refuses new jobs and waits
    for every queued one. ``syncs``, ``bytes_written`` and ``sync_seconds`` (write + fsync
    time) measure what the appends cost.
    """

    def __init__(
        self, fd: int, path: Path, *, error: Callable[[str], Exception], name: str
    ) -> None:
        self._fd = fd
        self._path = path
        self._error = error
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()  # guards _stopping against concurrent submit and stop
        self._stopping = False
        self._failure: str | None = None
        self.bytes_written = 0
        self.syncs = 0
        self.sync_seconds = 0.0
        # A daemon: a journal never closed must not keep the interpreter alive; what it had
        # not written then was never acknowledged (a job's future resolves after its fsync).
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, encode: Callable[[], bytes]) -> Future[int]:
        """Queue one record (``encode()`` gives its bytes, on the writer thread)."""
        with self._lock:
            if self._stopping:
                raise self._error(f"{self._path}: the journal is closed")
            done: Future[int] = Future()
            self._jobs.put(_Job(encode, done))
        return done

    def stop(self) -> None:
        """Refuse new jobs and return once every job queued before is done (written, or
        failed). Idempotent; safe from several threads at once."""
        with self._lock:
            if not self._stopping:
                self._stopping = True
                self._jobs.put(None)
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            group, stop = self._gather(job)
            self._commit(group)
            if stop:
                return

    def _gather(self, first: _Job) -> tuple[list[_Job], bool]:
        """``first`` and the jobs queued behind it (and whether the stop mark was among them)."""
        group = [first]
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return group, False
            if job is None:
                return group, True
            group.append(job)

    def _commit(self, group: list[_Job]) -> None:
        """Encode, write and fsync ``group`` (in runs of at most GROUP_BYTES), then resolve
        each job's future."""
        run: list[tuple[_Job, bytes]] = []
        size = 0
        for job in group:
            try:
                record = job.encode()
            except Exception as exc:  # handed to the caller, never lost
                job.done.set_exception(exc)
                continue
            if run and size + len(record) > GROUP_BYTES:
                self._write(run)
                run, size = [], 0
            run.append((job, record))
            size += len(record)
        if run:
            self._write(run)

    def _write(self, run: list[tuple[_Job, bytes]]) -> None:
        if self._failure is None:
            began = time.perf_counter()
            try:
                for _, record in run:
                    view = memoryview(record)
                    while view:
                        view = view[os.write(self._fd, view) :]
                os.fsync(self._fd)
            except OSError as exc:
                self._failure = (
                    f"{self._path}: cannot append to the journal: {exc}; nothing more is "
                    f"appended to it (its last record may be incomplete)"
                )
            else:
                self.sync_seconds += time.perf_counter() - began
                self.syncs += 1
                for job, record in run:
                    self.bytes_written += len(record)
                    _settle(job.done, len(record))
                return
        for job, _ in run:
            _settle(job.done, self._error(self._failure))


def _settle(done: Future[int], outcome: int | Exception) -> None:
    with contextlib.suppress(InvalidStateError):  # already settled: nothing to tell
        if isinstance(outcome, Exception):
            done.set_exception(outcome)
        else:
            done.set_result(outcome)
