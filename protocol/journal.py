"""A stage's journal for one round: what it acknowledged survives a SIGKILL (pure: files, no
asyncio).

A stage is a hop or the analyzer (stage index ``n_hops``, as in ``stage_name``). What follows says
"hop"; the analyzer (:func:`~shuffledp.analyzer.service.run_analyzer` with ``state_dir``) keeps
the same journal of the last hop's frames, replayed through the same :func:`feed_inputs` into its
:class:`~shuffledp.analyzer.round.AnalyzerRound` and frame assembler, and never a ``CLOSED``
record: its output, the report, is computed again from the counts alone (no randomness of its
own to repeat), and the journal is removed once the report is published.

Why: a hop acknowledges an MQTT message (QoS 1 PUBACK) to tell the broker it may forget it. If
the hop then dies before forwarding its batch, an acknowledged report would be lost. So a hop run
with a state directory appends every burst of inputs it is about to acknowledge to this journal
and ``fsync``s it first; restarted with the same settings, it reads the journal back and feeds the
same inputs, in the same order, through the same code (:func:`feed_inputs`), which rebuilds its
:class:`~shuffledp.shuffler.hop.HopRound` (and, after hop 0, its frame assembler) exactly: the
same accepted messages, the same seen-set (a redelivered message is a ``duplicate``, never
accepted twice), the same rejection counts. Messages the broker delivered but the hop had not yet
acknowledged are delivered again by the broker (persistent session).

What is journaled: the hop's raw inputs (ciphertexts for hop 0, frames for a later hop), not the
peeled outputs, because replaying inputs through ``HopRound.offer_many`` is the only way to get
the seen-set and every counter back without a second copy of the hop's rules. A hop-0 input of
the wrong length is journaled as ``b""``: it is rejected as ``wrong-length`` either way, and
storing it verbatim would let one client fill the disk with 16 MiB junk.

Before the hop publishes anything downstream it appends the released batch (``CLOSED``: the
permuted messages, the refusal if any, the round logs). A hop restarted after that point
re-publishes exactly the same frames instead of drawing a new permutation: a downstream that
already took some frames of the first attempt drops the repeats by sequence number, which is only
correct if their contents are identical. The journal is removed once the END frame is published.

File: ``STATE_DIR/<stage>-round-<r>-<prefix digest>.journal`` (stage ``hop-<i>`` or
``analyzer``), mode 0600 (it holds ciphertexts and the hop's output order), locked (``flock``)
by the one process using it. A sequence of records, each ``length u64 | kind u8 | checksum 16
bytes | body`` (``length`` = bytes of ``body``; checksum BLAKE2b-128 of length, kind and body).
The first record is ``HEADER`` (JSON: which prefix, round, stage, batch sizes, k (the analyzer)
and key the journal belongs to); then ``INPUTS`` records (``count u32`` then ``length u32 |
bytes`` per input) and, for a hop, at most one ``CLOSED`` (``json length u32 | JSON |
item_length u32 | count u32 | messages``). A torn tail, the last
record incomplete or failing its checksum, is the record a crash interrupted: never fsync'd, so
nothing in it was acknowledged; it is dropped (and cut off before the next append). A header torn
the same way (a crash while the file was created) leaves an empty journal. Anything else that
does not read back, a bad checksum with records after it, is refused (JournalError), never
dropped: acknowledged reports could be lost silently.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import struct
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.frames import FrameAssembler
from shuffledp.protocol.record import MAX_K, MAX_ROUND_ID
from shuffledp.protocol.screen import Mapper
from shuffledp.protocol.topics import validate_prefix
from shuffledp.validation import require_int

__all__ = [
    "FEED_CHUNK",
    "ClosedBatch",
    "HopJournal",
    "InputSink",
    "JournalContents",
    "JournalError",
    "JournalIdentity",
    "feed_inputs",
    "read_journal",
    "replay",
]

FORMAT = "shuffledp-hop-journal/1"
KIND_HEADER = 1
KIND_INPUTS = 2
KIND_CLOSED = 3
RECORD_HEAD = struct.Struct(">QB16s")
"""length u64 | kind u8 | checksum: 25 bytes before every record body."""
U32 = struct.Struct(">I")
CHECKSUM_BYTES = 16
FILE_MODE = 0o600
DIR_MODE = 0o700
FEED_CHUNK = 4096
"""Messages of a frame burst offered per ``offer_many`` call (any chunking gives the same
results: ``offer_many`` equals one ``offer`` per message)."""


class JournalError(InvalidParameterError):
    """A journal cannot be used: another stage's, locked by a running process, or unwritable.
    The message names the file and the rule."""


class InputSink(Protocol):
    """What a journal's inputs are fed to: a :class:`~shuffledp.shuffler.hop.HopRound` or an
    :class:`~shuffledp.analyzer.round.AnalyzerRound` (both count every message offered, in
    order, as accepted or rejected by reason)."""

    def offer_many(
        self, messages: Sequence[bytes | bytearray | memoryview], *, mapper: Mapper | None = None
    ) -> list[str | None]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalIdentity:
    """What a journal belongs to; a stage refuses a journal written with other values
    (replaying it under another key or batch size would not rebuild the same state).

    ``hop_index``: the stage, a hop in [0, n_hops - 1] or the analyzer, ``n_hops`` (as in
    ``stage_name``); ``input_length``: the exact length of the messages the stage takes
    (``HopRound.input_length``, which differs with client authentication at hop 0, whose state
    the replay also rebuilds; ``AnalyzerRound.input_length``); ``key_id``: hex SHA-256 of the
    stage's public key (:meth:`key_id_of`), never the private key. A hop has a ``min_batch``
    and no ``k``; the analyzer has ``k`` (its range check decides what it counts) and no
    ``min_batch`` (it refuses nothing): :meth:`for_analyzer` builds its identity.
    """

    prefix: str
    round_id: int
    hop_index: int
    n_hops: int
    input_length: int
    expected_size: int
    min_batch: int | None
    key_id: str
    k: int | None = None

    def __post_init__(self) -> None:
        validate_prefix(self.prefix)
        require_int("round_id", self.round_id, 0, MAX_ROUND_ID, bound="[0, 2^64 - 1]")
        require_int("n_hops", self.n_hops, 1)
        require_int(
            "hop_index", self.hop_index, 0, self.n_hops, bound="[0, n_hops] (n_hops: the analyzer)"
        )
        require_int("input_length", self.input_length, 1)
        require_int("expected_size", self.expected_size, 1)
        if self.is_analyzer:
            if self.min_batch is not None:
                raise InvalidParameterError(
                    f"the analyzer's journal has no min_batch (it refuses nothing), got "
                    f"{self.min_batch!r}"
                )
            if self.k is None:
                raise InvalidParameterError("the analyzer's journal needs k, got None")
            require_int("k", self.k, 2, MAX_K)
        else:
            if self.min_batch is None:
                raise InvalidParameterError("a hop's journal needs min_batch, got None")
            require_int(
                "min_batch", self.min_batch, 1, self.expected_size, bound="[1, expected_size]"
            )
            if self.k is not None:
                raise InvalidParameterError(
                    f"a hop's journal has no k (only the analyzer decodes values), got {self.k!r}"
                )
        if (
            not isinstance(self.key_id, str)
            or len(self.key_id) != 64
            or any(c not in "0123456789abcdef" for c in self.key_id)
        ):
            raise InvalidParameterError(
                f"key_id must be 64 lowercase hex digits (SHA-256), got {self.key_id!r}"
            )

    @classmethod
    def for_analyzer(
        cls,
        *,
        prefix: str,
        round_id: int,
        n_hops: int,
        k: int,
        input_length: int,
        expected_size: int,
        key_id: str,
    ) -> JournalIdentity:
        """The identity of the analyzer's journal (stage index ``n_hops``)."""
        return cls(
            prefix=prefix,
            round_id=round_id,
            hop_index=n_hops,
            n_hops=n_hops,
            input_length=input_length,
            expected_size=expected_size,
            min_batch=None,
            key_id=key_id,
            k=k,
        )

    @property
    def is_analyzer(self) -> bool:
        return self.hop_index == self.n_hops

    @property
    def stage(self) -> str:
        """``hop-<i>`` or ``analyzer`` (as ``stage_name``)."""
        return "analyzer" if self.is_analyzer else f"hop-{self.hop_index}"

    @staticmethod
    def key_id_of(public_key: bytes) -> str:
        """The ``key_id`` of a stage's public key (its 32 raw bytes)."""
        return hashlib.sha256(bytes(public_key)).hexdigest()

    @property
    def file_name(self) -> str:
        """Distinct per (prefix, round, stage): the prefix enters as a digest (it may hold
        '/')."""
        digest = hashlib.sha256(self.prefix.encode()).hexdigest()[:16]
        return f"{self.stage}-round-{self.round_id}-{digest}.journal"

    def as_json(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "format": FORMAT,
            "prefix": self.prefix,
            "round_id": self.round_id,
            "hop_index": self.hop_index,
            "n_hops": self.n_hops,
            "input_length": self.input_length,
            "expected_size": self.expected_size,
            "min_batch": self.min_batch,
            "key_id": self.key_id,
        }
        if self.is_analyzer:  # a hop's header stays as it was (journals already written)
            fields["k"] = self.k
        return fields


@dataclass(frozen=True, slots=True, kw_only=True)
class ClosedBatch:
    """What the hop released: ``messages`` in their published order (each ``item_length``
    bytes), ``refused`` (why nothing was released, or None), ``log`` (this hop's round log) and
    ``stages`` (every stage's log so far, this one included)."""

    messages: list[bytes]
    item_length: int
    refused: str | None
    log: dict[str, Any]
    stages: dict[str, Any]

    def __post_init__(self) -> None:
        require_int("item_length", self.item_length, 1)
        for message in self.messages:
            if len(message) != self.item_length:
                raise InvalidParameterError(
                    f"every released message must be item_length = {self.item_length} bytes, "
                    f"got {len(message)}"
                )
        if self.refused is not None and self.messages:
            raise InvalidParameterError(
                f"a refused batch releases no message, got {len(self.messages)}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalContents:
    """A journal as read back: ``bursts`` of inputs in the order they were appended, the
    ``closed`` batch if one was appended, the bytes of complete records (``valid_bytes``) and of
    the dropped torn tail (``dropped_bytes``)."""

    bursts: list[list[bytes]] = field(default_factory=list)
    closed: ClosedBatch | None = None
    valid_bytes: int = 0
    dropped_bytes: int = 0

    @property
    def inputs(self) -> int:
        return sum(len(burst) for burst in self.bursts)


def _checksum(kind: int, body: bytes | memoryview) -> bytes:
    digest = hashlib.blake2b(digest_size=CHECKSUM_BYTES)
    digest.update(struct.pack(">QB", len(body), kind))
    digest.update(body)
    return digest.digest()


def encode_record(kind: int, body: bytes) -> bytes:
    """One record: head (length, kind, checksum) then body."""
    return RECORD_HEAD.pack(len(body), kind, _checksum(kind, body)) + body


def encode_inputs(payloads: Iterable[bytes]) -> bytes:
    items = [bytes(p) for p in payloads]
    parts = [U32.pack(len(items))]
    for item in items:
        parts.append(U32.pack(len(item)))
        parts.append(item)
    return b"".join(parts)


def _decode_inputs(body: memoryview) -> list[bytes] | None:
    """The inputs of an INPUTS body, or None if it is not one (the checksum passed, so only a
    different format version could do that)."""
    if len(body) < U32.size:
        return None
    (count,) = U32.unpack_from(body)
    offset = U32.size
    out: list[bytes] = []
    for _ in range(count):
        if offset + U32.size > len(body):
            return None
        (length,) = U32.unpack_from(body, offset)
        offset += U32.size
        if offset + length > len(body):
            return None
        out.append(bytes(body[offset : offset + length]))
        offset += length
    return out if offset == len(body) else None


def encode_closed(batch: ClosedBatch) -> bytes:
    meta = json.dumps(
        {"refused": batch.refused, "log": batch.log, "stages": batch.stages},
        separators=(",", ":"),
        allow_nan=False,
    ).encode()
    return b"".join(
        [
            U32.pack(len(meta)),
            meta,
            U32.pack(batch.item_length),
            U32.pack(len(batch.messages)),
            *batch.messages,
        ]
    )


def _decode_closed(body: memoryview) -> ClosedBatch | None:
    try:
        (meta_length,) = U32.unpack_from(body)
        meta = json.loads(bytes(body[U32.size : U32.size + meta_length]).decode())
        offset = U32.size + meta_length
        (item_length,) = U32.unpack_from(body, offset)
        (count,) = U32.unpack_from(body, offset + U32.size)
        offset += 2 * U32.size
        if len(body) != offset + count * item_length or not isinstance(meta, dict):
            return None
        messages = [
            bytes(body[offset + i * item_length : offset + (i + 1) * item_length])
            for i in range(count)
        ]
        return ClosedBatch(
            messages=messages,
            item_length=item_length,
            refused=meta.get("refused"),
            log=dict(meta.get("log") or {}),
            stages=dict(meta.get("stages") or {}),
        )
    except (struct.error, UnicodeDecodeError, ValueError, TypeError, RecursionError):
        return None


def _records(path: Path, data: bytes) -> Iterator[tuple[int, int, memoryview, int]]:
    """(start offset, kind, body, end offset) of each complete record with a valid checksum,
    in order, up to the torn tail if there is one (an incomplete last record, or a last record
    whose checksum fails: a write cut short by a crash or a power loss). A record that fails its
    checksum with more bytes after it is not a torn write (appends only): JournalError."""
    offset = 0
    view = memoryview(data)  # record bodies are views: a journal is not copied while read
    while offset + RECORD_HEAD.size <= len(data):
        length, kind, checksum = RECORD_HEAD.unpack_from(data, offset)
        start = offset + RECORD_HEAD.size
        end = start + length
        if end > len(data):
            return
        body = view[start:end]
        if _checksum(kind, body) != checksum:
            if end == len(data):
                return
            raise JournalError(
                f"{path}: the journal is corrupt at byte {offset} (a record that fails its "
                f"checksum, with {len(data) - end} bytes after it): what it holds cannot be "
                f"trusted; remove the file to start the round afresh (its reports are then lost)"
            )
        yield offset, kind, body, end
        offset = end


def _header_record(identity: JournalIdentity) -> bytes:
    return encode_record(
        KIND_HEADER, json.dumps(identity.as_json(), separators=(",", ":")).encode()
    )


def read_journal(path: str | os.PathLike[str], identity: JournalIdentity) -> JournalContents:
    """The contents of the journal at ``path`` (see the module docstring).

    An empty file, or one whose header record is torn (a crash while it was created, before
    anything was acknowledged), reads as an empty journal. Raises JournalError if the file
    cannot be read, is not a journal of this format, or belongs to another prefix, round,
    stage, batch size, k or key (the message names the first field that differs).
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise JournalError(f"{path}: cannot read the journal: {exc}") from exc
    return _parse(path, data, identity)


def _parse(path: Path, data: bytes, identity: JournalIdentity) -> JournalContents:
    records = _records(path, data)
    first = next(records, None)
    if first is None:
        if _header_record(identity).startswith(data):
            # Empty, or torn while its header was written: nothing was acknowledged yet.
            return JournalContents(valid_bytes=0, dropped_bytes=len(data))
        raise JournalError(f"{path}: not a journal of format {FORMAT!r}, or its header is damaged")
    _, kind, body, valid = first
    header: Any = None
    if kind == KIND_HEADER:
        with contextlib.suppress(UnicodeDecodeError, ValueError, RecursionError):
            header = json.loads(bytes(body).decode())
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise JournalError(f"{path}: not a journal of format {FORMAT!r}")
    for name, value in identity.as_json().items():
        if header.get(name) != value:
            raise JournalError(
                f"{path}: the journal belongs to {name} = {header.get(name)!r}, this "
                f"{identity.stage} has {name} = {value!r}; run it with the settings and key "
                f"that wrote it, or remove the file to start the round afresh (what it holds "
                f"is then lost)"
            )
    bursts: list[list[bytes]] = []
    closed: ClosedBatch | None = None
    closable = not identity.is_analyzer  # the analyzer journals no released batch
    for offset, kind, body, end in records:
        items = _decode_inputs(body) if kind == KIND_INPUTS and closed is None else None
        batch = (
            _decode_closed(body) if kind == KIND_CLOSED and closed is None and closable else None
        )
        if items is None and batch is None:
            # The checksum holds, so the writer meant it: another format, or a bug. Refused
            # rather than dropped (acknowledged reports may follow).
            raise JournalError(
                f"{path}: record at byte {offset} of the {identity.stage} journal is not an "
                f"input burst or a closed batch where one is allowed (kind {kind})"
            )
        if items is not None:
            bursts.append(items)
        else:
            closed = batch
        valid = end
    return JournalContents(
        bursts=bursts, closed=closed, valid_bytes=valid, dropped_bytes=len(data) - valid
    )


def replay(
    contents: JournalContents,
    sink: InputSink,
    assembler: FrameAssembler | None,
    *,
    mapper: Mapper | None = None,
) -> None:
    """Feed every journaled burst to a fresh ``sink`` (a hop or the analyzer) and
    ``assembler``, in order: afterwards they are in the state they were in once the last
    complete burst had been fed."""
    for burst in contents.bursts:
        feed_inputs(sink, assembler, burst, mapper=mapper)


def feed_inputs(
    sink: InputSink,
    assembler: FrameAssembler | None,
    inputs: Sequence[bytes],
    *,
    mapper: Mapper | None = None,
) -> None:
    """Offer one burst of inputs to ``sink``: hop 0's client messages directly; the frames of
    a later hop or of the analyzer through ``assembler``, their messages in order. Live
    collection and journal replay both call this, so a replay cannot take another path than
    the original."""
    if assembler is None:
        sink.offer_many(inputs, mapper=mapper)
        return
    for frame in inputs:
        items = list(assembler.add(frame))
        for start in range(0, len(items), FEED_CHUNK):
            sink.offer_many(items[start : start + FEED_CHUNK], mapper=mapper)


class HopJournal:
    """The open journal of one stage (a hop or the analyzer) and round; see the module
    docstring.

    ``HopJournal.open(state_dir, identity)`` creates ``state_dir`` (mode 0700) if needed, opens
    or creates the journal (0600), takes its lock, reads what it holds (:attr:`contents`) and
    cuts off a torn tail. ``append_inputs`` and ``append_closed`` return only once the record is
    on disk (fsync). ``remove`` deletes the file (the round is forwarded); ``close`` keeps it.
    Every OS failure is raised as JournalError naming the file. ``syncs``, ``bytes_written``
    and ``sync_seconds`` (write + fsync time) measure what journaling cost this run.
    """

    def __init__(self, path: Path, fd: int, identity: JournalIdentity, contents: JournalContents):
        self.path = path
        self._fd: int | None = fd
        self.identity = identity
        self.contents = contents
        self._closed_written = contents.closed is not None
        self.bytes_written = 0
        self.syncs = 0
        self.sync_seconds = 0.0

    @classmethod
    def open(cls, state_dir: str | os.PathLike[str], identity: JournalIdentity) -> HopJournal:
        if not isinstance(identity, JournalIdentity):
            raise InvalidParameterError(
                f"identity must be a JournalIdentity, got {type(identity).__name__}"
            )
        directory = Path(state_dir)
        path = directory / identity.file_name
        try:
            directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW  # no planted symlink
            fd = os.open(path, flags, FILE_MODE)
        except OSError as exc:
            raise JournalError(f"{path}: cannot open the journal: {exc}") from exc
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise JournalError(
                    f"{path}: the journal is locked by another running process (is this "
                    f"{identity.stage} already running?)"
                ) from None
            os.fchmod(fd, FILE_MODE)  # an existing file made with a wider mode is narrowed
            size = os.fstat(fd).st_size
            data = os.pread(fd, size, 0) if size else b""
            contents = _parse(path, data, identity)
            if contents.valid_bytes == 0:
                # New, or torn while its header was written (nothing acknowledged yet).
                os.ftruncate(fd, 0)
                os.pwrite(fd, _header_record(identity), 0)
                os.fsync(fd)
                _fsync_directory(directory)
                contents = JournalContents(
                    valid_bytes=os.fstat(fd).st_size, dropped_bytes=contents.dropped_bytes
                )
            elif contents.dropped_bytes:
                os.ftruncate(fd, contents.valid_bytes)
                os.fsync(fd)
            os.lseek(fd, 0, os.SEEK_END)
        except JournalError:
            os.close(fd)
            raise
        except OSError as exc:
            os.close(fd)
            raise JournalError(f"{path}: cannot use the journal: {exc}") from exc
        return cls(path, fd, identity, contents)

    @property
    def has_closed(self) -> bool:
        return self._closed_written

    def journaled_form(self, payloads: Iterable[bytes]) -> list[bytes]:
        """``payloads`` as they are journaled: a hop-0 input of the wrong length becomes b""
        (module docstring); frames are kept whole."""
        if self.identity.hop_index > 0:
            return [bytes(p) for p in payloads]
        length = self.identity.input_length
        return [bytes(p) if len(p) == length else b"" for p in payloads]

    def append_inputs(self, payloads: Iterable[bytes]) -> int:
        """Append one burst of inputs (journaled form) and fsync; returns the bytes written."""
        if self._closed_written:
            raise JournalError(f"{self.path}: the batch is closed, no input may be appended")
        return self._append(KIND_INPUTS, encode_inputs(self.journaled_form(payloads)))

    def append_closed(self, batch: ClosedBatch) -> int:
        """Append the released batch and fsync; at most once, and never by the analyzer."""
        if self.identity.is_analyzer:
            raise JournalError(f"{self.path}: the analyzer journals no released batch")
        if self._closed_written:
            raise JournalError(f"{self.path}: the batch is already recorded as closed")
        written = self._append(KIND_CLOSED, encode_closed(batch))
        self._closed_written = True
        return written

    def _append(self, kind: int, body: bytes) -> int:
        fd = self._require_open()
        record = encode_record(kind, body)
        began = time.perf_counter()
        try:
            view = memoryview(record)
            while view:
                done = os.write(fd, view)
                view = view[done:]
            os.fsync(fd)
        except OSError as exc:
            raise JournalError(f"{self.path}: cannot append to the journal: {exc}") from exc
        self.sync_seconds += time.perf_counter() - began
        self.bytes_written += len(record)
        self.syncs += 1
        return len(record)

    def remove(self) -> None:
        """Delete the journal (its round is forwarded, or its report published) and release
        it."""
        fd = self._require_open()
        try:
            self.path.unlink(missing_ok=True)
            _fsync_directory(self.path.parent)
        except OSError as exc:
            raise JournalError(f"{self.path}: cannot remove the journal: {exc}") from exc
        finally:
            os.close(fd)
            self._fd = None

    def close(self) -> None:
        """Release the journal and keep the file (a restarted stage continues from it)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _require_open(self) -> int:
        if self._fd is None:
            raise JournalError(f"{self.path}: the journal is closed")
        return self._fd

    def __enter__(self) -> HopJournal:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _fsync_directory(directory: Path) -> None:
    """Make a file's creation or removal durable (its directory entry)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
