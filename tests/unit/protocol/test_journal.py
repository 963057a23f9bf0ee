"""The stage journal's record format and its writer thread (protocol/journal.py,
protocol/journal_writer.py): what is refused, what is cut, and close() under appends in flight.

- A flipped bit anywhere in a record's fixed head (its length included), in the middle of the
  journal or in its last record with the body complete, is refused with a message naming the
  file and the byte offset, and the file is left byte for byte as it was (nothing set aside).
- A genuinely torn last record (the file cut anywhere inside it, head or body) is cut off, and
  the cut bytes are in ``<journal>.torn-<offset>`` (0600) byte for byte; appends continue after.
- A journal of the first format (no magic, no head checksum) or of an unknown later one is
  refused by name.
- The writer thread: close() with many appends queued (from many threads, or from cancelled
  asyncio tasks) returns after every one is on disk, with the descriptor open until the last
  fsync returned, and the lock is free at once; a failed write fails every later append.
- Hypothesis: for random bursts and a random cut point, recovery returns exactly the bursts
  complete before the cut and keeps aside exactly the remaining bytes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import os
import stat
import struct
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.journal import (
    MAGIC,
    RECORD_HEAD,
    ClosedBatch,
    HopJournal,
    JournalError,
    JournalIdentity,
    read_journal,
)
from tests.binding import MANIFEST_DIGEST, OTHER_DIGEST

IDENTITY = JournalIdentity(
    prefix="test/journal",
    round_id=3,
    hop_index=1,  # after hop 0: inputs are journaled whole, whatever their length
    n_hops=3,
    input_length=100,
    expected_size=50,
    min_batch=1,
    key_id="ab" * 32,
    manifest_digest=MANIFEST_DIGEST,
)
BURSTS = [[bytes([i]) * (10 + 7 * i), bytes([100 + i]) * (3 * i)] for i in range(6)]


def write_journal(directory: Path, bursts: list[list[bytes]]) -> Path:
    with HopJournal.open(directory, IDENTITY) as journal:
        for burst in bursts:
            journal.append_inputs(burst)
        return journal.path


def record_starts(data: bytes) -> list[int]:
    """Where each record begins (the header record first), and the end of the file last."""
    starts, offset = [], len(MAGIC)
    while offset < len(data):
        starts.append(offset)
        offset += RECORD_HEAD.size + RECORD_HEAD.unpack_from(data, offset)[0]
    assert offset == len(data)
    return [*starts, offset]


def files_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# --- corruption is refused, never cut -------------------------------------------------------


@pytest.mark.parametrize("which", ["middle", "last"])
def test_a_flipped_bit_in_a_records_head_is_refused_naming_the_offset(
    tmp_path: Path, which: str
) -> None:
    """Every one of the 41 * 8 bits of the head of the fourth record (of seven) or of the last
    one (its body complete), the 64 bits of its length first among them: refused, the message
    names the file, the offset and the head checksum, and nothing is cut or set aside. (The
    first format read a flipped high bit of a length as a torn tail and cut every acknowledged
    record after it.)"""
    path = write_journal(tmp_path, BURSTS)
    intact = path.read_bytes()
    starts = record_starts(intact)
    offset = starts[3] if which == "middle" else starts[-2]
    for bit in range(RECORD_HEAD.size * 8):
        data = bytearray(intact)
        data[offset + bit // 8] ^= 1 << (bit % 8)
        path.write_bytes(bytes(data))
        message = rf"{path.name}: the journal is corrupt at byte {offset}: the head .* fails"
        with pytest.raises(JournalError, match=message):
            read_journal(path, IDENTITY)
        with pytest.raises(JournalError, match=message):
            HopJournal.open(tmp_path, IDENTITY)
        assert path.read_bytes() == bytes(data), bit  # the acknowledged records are all there
    assert files_in(tmp_path) == [path.name]


def test_a_flipped_bit_in_a_complete_last_body_is_refused(tmp_path: Path) -> None:
    path = write_journal(tmp_path, BURSTS)
    data = bytearray(path.read_bytes())
    last = record_starts(bytes(data))[-2]
    data[-1] ^= 0x80
    path.write_bytes(bytes(data))
    with pytest.raises(JournalError, match=rf"corrupt at byte {last}: .* body fails"):
        HopJournal.open(tmp_path, IDENTITY)
    assert path.read_bytes() == bytes(data) and files_in(tmp_path) == [path.name]


def test_the_first_format_and_an_unknown_one_are_refused_by_name(tmp_path: Path) -> None:
    """A file of ``shuffledp-hop-journal/1`` (records ``length u64 | kind u8 | BLAKE2b-128 of
    length, kind and body | body``, no magic) is named as such, never read with the new rules;
    so is a later format this version does not know."""

    def v1_record(kind: int, body: bytes) -> bytes:
        digest = hashlib.blake2b(struct.pack(">QB", len(body), kind), digest_size=16)
        digest.update(body)
        return struct.pack(">QB16s", len(body), kind, digest.digest()) + body

    header = {**IDENTITY.as_json(), "format": "shuffledp-hop-journal/1"}
    old = v1_record(1, json.dumps(header, separators=(",", ":")).encode())
    old += v1_record(2, struct.pack(">II", 1, 3) + b"abc")
    path = tmp_path / IDENTITY.file_name
    path.write_bytes(old)
    with pytest.raises(JournalError, match=r"first format 'shuffledp-hop-journal/1'"):
        HopJournal.open(tmp_path, IDENTITY)
    assert path.read_bytes() == old
    later = b"shuffledp-hop-journal/3\n" + bytes(64)
    path.write_bytes(later)
    with pytest.raises(JournalError, match=r"format 'shuffledp-hop-journal/3', and this"):
        HopJournal.open(tmp_path, IDENTITY)
    assert path.read_bytes() == later and files_in(tmp_path) == [path.name]


# --- a torn last record is cut, and kept aside ----------------------------------------------


def test_a_torn_last_record_is_cut_and_kept_aside_byte_for_byte(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The file cut at every offset inside the last record (inside its head, then its body):
    the other bursts come back, the cut bytes are in ``.torn-<offset>`` (0600), the recovery
    says how many bytes went where, and an append after it reads back."""
    source = write_journal(tmp_path / "source", BURSTS)
    data = source.read_bytes()
    last = record_starts(data)[-2]
    for cut in range(last + 1, len(data)):
        directory = tmp_path / f"cut-{cut}"
        directory.mkdir()
        path = directory / IDENTITY.file_name
        path.write_bytes(data[:cut])
        caplog.clear()
        with (
            caplog.at_level(logging.WARNING, logger="shuffledp.journal"),
            HopJournal.open(directory, IDENTITY) as journal,
        ):
            assert journal.contents.bursts == BURSTS[:-1]
            assert journal.contents.dropped_bytes == cut - last
            torn = directory / f"{path.name}.torn-{last}"
            assert journal.torn_file == torn
            assert torn.read_bytes() == data[last:cut]
            assert stat.S_IMODE(torn.stat().st_mode) == 0o600
            assert path.read_bytes() == data[:last]
            assert f"{cut - last} bytes are kept in {torn}" in caplog.text
            journal.append_inputs([b"after"])
        assert read_journal(path, IDENTITY).bursts == [*BURSTS[:-1], [b"after"]]


def test_a_torn_file_of_the_same_name_is_reused_if_equal_and_kept_if_not(tmp_path: Path) -> None:
    """A recovery that crashed between setting aside and cutting finds its own ``.torn`` file
    (same bytes: reused); another crash at the same offset later (other bytes) gets a new
    name, and the first file is untouched."""
    path = write_journal(tmp_path, BURSTS)
    data = path.read_bytes()
    last = record_starts(data)[-2]
    first = tmp_path / f"{path.name}.torn-{last}"
    first.write_bytes(data[last:-5])
    path.write_bytes(data[:-5])
    with HopJournal.open(tmp_path, IDENTITY) as journal:
        assert journal.torn_file == first
    path.write_bytes(data[:-3])
    with HopJournal.open(tmp_path, IDENTITY) as journal:
        assert journal.torn_file == tmp_path / f"{path.name}.torn-{last}.2"
        assert journal.torn_file.read_bytes() == data[last:-3]
    assert first.read_bytes() == data[last:-5]


def test_a_planted_symlink_is_never_written_through_nor_trusted(tmp_path: Path) -> None:
    """A symlink at ``.torn-<offset>`` (to a file holding the very bytes) is neither followed
    to write nor taken as the bytes kept aside: they go to ``.2``, the target is untouched."""
    path = write_journal(tmp_path, BURSTS)
    data = path.read_bytes()
    last = record_starts(data)[-2]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(data[last:-4])
    (tmp_path / f"{path.name}.torn-{last}").symlink_to(elsewhere)
    path.write_bytes(data[:-4])
    with HopJournal.open(tmp_path, IDENTITY) as journal:
        assert journal.torn_file == tmp_path / f"{path.name}.torn-{last}.2"
        assert journal.torn_file.read_bytes() == data[last:-4]
    assert elsewhere.read_bytes() == data[last:-4]


@settings(max_examples=60, deadline=None)
@given(
    bursts=st.lists(
        st.lists(st.binary(max_size=300), max_size=5),
        max_size=8,
    ),
    cut_fraction=st.floats(0.0, 1.0),
)
def test_recovery_keeps_the_complete_records_and_sets_aside_the_rest(
    tmp_path_factory: pytest.TempPathFactory, bursts: list[list[bytes]], cut_fraction: float
) -> None:
    """Any journal cut anywhere: the bursts complete before the cut come back, in order; the
    bytes after the last complete record are in the ``.torn`` file exactly (none if the cut is
    on a record boundary), and the journal is cut there. A cut inside the magic or the header
    record starts the journal afresh: what it held is a prefix of what is written again."""
    directory = tmp_path_factory.mktemp("j")
    path = write_journal(directory, bursts)
    data = path.read_bytes()
    starts = record_starts(data)
    cut = round(cut_fraction * len(data))
    path.write_bytes(data[:cut])
    with HopJournal.open(directory, IDENTITY) as journal:
        if cut < starts[1]:  # inside the magic or the header record
            assert journal.contents.bursts == [] and journal.torn_file is None
            assert path.read_bytes() == data[: starts[1]]
            return
        complete = sum(1 for end in starts[2:] if end <= cut)
        valid = starts[1 + complete]
        assert journal.contents.bursts == bursts[:complete]
        assert journal.contents.valid_bytes == valid
        assert path.read_bytes() == data[:valid]
        if cut == valid:
            assert journal.torn_file is None and files_in(directory) == [path.name]
        else:
            assert journal.torn_file is not None
            assert journal.torn_file.read_bytes() == data[valid:cut]


# --- the writer thread: close() waits, no descriptor closed under a write -------------------


def test_close_with_many_appends_in_flight_waits_for_all_of_them(tmp_path: Path) -> None:
    """8 threads queue 40 bursts each without waiting; close() right after: every future is
    resolved when it returns, every burst reads back once in each thread's order, and the lock
    is free at once (the issue: "journal is locked by another running process")."""
    journal = HopJournal.open(tmp_path, IDENTITY)

    def submit_all(thread: int) -> list[Future[int]]:
        return [journal.submit_inputs([f"{thread}:{i}".encode()]) for i in range(40)]

    with ThreadPoolExecutor(8) as pool:
        futures = [f for batch in pool.map(submit_all, range(8)) for f in batch]
    journal.close()
    assert all(f.done() and f.result() > 0 for f in futures)
    with HopJournal.open(tmp_path, IDENTITY) as again:
        read = [burst[0].decode() for burst in again.contents.bursts]
    assert sorted(read) == sorted(f"{t}:{i}" for t in range(8) for i in range(40))
    for thread in range(8):
        mine = [int(r.split(":")[1]) for r in read if r.startswith(f"{thread}:")]
        assert mine == list(range(40))


@pytest.mark.asyncio
async def test_cancelled_appenders_then_close_in_a_finally_lose_nothing(tmp_path: Path) -> None:
    """The hop's pattern: 100 tasks await their append, the stage is cancelled, close() runs in
    the ``finally``. Every queued burst is written (written but not acknowledged is harmless)
    and the journal reopens at once."""
    journal = HopJournal.open(tmp_path, IDENTITY)

    async def append(i: int) -> None:
        await asyncio.wrap_future(journal.submit_inputs([i.to_bytes(2, "big")]))

    tasks = [asyncio.create_task(append(i)) for i in range(100)]
    await asyncio.sleep(0)  # every task has queued its burst
    try:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        journal.close()
    with HopJournal.open(tmp_path, IDENTITY) as again:
        assert [int.from_bytes(b[0], "big") for b in again.contents.bursts] == list(range(100))


def blocking_fsync(
    monkeypatch: pytest.MonkeyPatch, check: Callable[[int], None]
) -> tuple[threading.Event, threading.Event]:
    """Make the writer's first fsync wait for ``release`` (os.fsync is patched: the journal's
    writer thread calls it); ``entered`` is set once it waits. ``check(fd)`` runs in every
    fsync, before the real one."""
    entered, release = threading.Event(), threading.Event()
    real = os.fsync

    def fsync(fd: int) -> None:
        entered.set()
        assert release.wait(30), "the test never released the fsync"
        check(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return entered, release


def test_close_returns_only_after_the_fsync_in_flight_and_queued_records_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One append blocked in its fsync, 10 more queued behind it, close() called: close cannot
    return before the fsync does (the descriptor is still the journal's in every fsync), and the
    10 queued records are written together with one more fsync."""
    journal = HopJournal.open(tmp_path, IDENTITY)
    inode = journal.path.stat().st_ino
    checked: list[bool] = []
    entered, release = blocking_fsync(
        monkeypatch, lambda fd: checked.append(os.fstat(fd).st_ino == inode)
    )
    first = journal.submit_inputs([b"first"])
    assert entered.wait(30)
    queued = [journal.submit_inputs([bytes([i])]) for i in range(10)]
    closer = threading.Thread(target=journal.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive() and not first.done()  # blocked behind the fsync, whatever the time
    with pytest.raises(JournalError, match="the journal is closed"):
        journal.submit_inputs([b"late"])  # close() has begun: nothing new is taken
    release.set()
    closer.join()
    assert checked == [True, True] and journal.syncs == 2
    assert first.result() > 0 and all(f.result() > 0 for f in queued)
    monkeypatch.undo()
    bursts = read_journal(journal.path, IDENTITY).bursts
    assert bursts == [[b"first"], *([bytes([i])] for i in range(10))]


def test_a_failed_write_fails_every_later_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk full once: that append and every later one fail (the end of the file is not
    known any more), naming the file; what was written before reads back."""
    journal = HopJournal.open(tmp_path, IDENTITY)
    journal.append_inputs([b"kept"])
    real = os.write

    def full(fd: int, data: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(JournalError, match=rf"{journal.path.name}: cannot append .* No space"):
        journal.append_inputs([b"lost"])
    monkeypatch.setattr(os, "write", real)
    with pytest.raises(JournalError, match="nothing more is appended"):
        journal.append_inputs([b"after"])
    journal.close()
    assert read_journal(journal.path, IDENTITY).bursts == [[b"kept"]]


def test_a_journal_of_another_round_manifest_is_refused(tmp_path: Path) -> None:
    """The journal's header names the manifest digest: a stage run under another manifest
    refuses it by name, and leaves it byte for byte."""
    path = write_journal(tmp_path, BURSTS[:2])
    before = path.read_bytes()
    other = dataclasses.replace(IDENTITY, manifest_digest=OTHER_DIGEST)
    with pytest.raises(JournalError, match=f"manifest = '{MANIFEST_DIGEST.hex()}'"):
        HopJournal.open(tmp_path, other)
    assert path.read_bytes() == before
    with HopJournal.open(tmp_path, IDENTITY) as journal:  # its own manifest reads it back
        assert journal.contents.bursts == BURSTS[:2]


def test_the_identity_checks_its_manifest_digest() -> None:
    with pytest.raises(InvalidParameterError, match="manifest_digest must be the 32-byte digest"):
        dataclasses.replace(IDENTITY, manifest_digest=MANIFEST_DIGEST[:16])


def test_a_released_batch_comes_back_with_the_chain_it_must_be_signed_with(tmp_path: Path) -> None:
    """After a restart a hop signs its END again: with the same chain of upstream statements
    (the upstream's END is not journaled again: its frames were all taken before the release)."""
    chain = ("ab" * 70, "cd" * 90)
    batch = ClosedBatch(
        messages=[b"m" * 100, b"n" * 100],
        item_length=100,
        refused=None,
        log={"accepted": 2},
        stages={"hop-1": {"accepted": 2}},
        chain=chain,
    )
    with HopJournal.open(tmp_path, IDENTITY) as journal:
        journal.append_inputs(BURSTS[0])
        journal.append_closed(batch)
    with HopJournal.open(tmp_path, IDENTITY) as journal:
        assert journal.contents.closed == batch
        assert journal.contents.closed.chain == chain
