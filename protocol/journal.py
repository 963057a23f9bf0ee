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
by the one process using it. It begins with :data:`MAGIC` (``shuffledp-hop-journal/2`` and a
newline), then a sequence of records, each a fixed head of :data:`RECORD_HEAD` (41 bytes:
``length u64 | kind u8 | body checksum 16 bytes | head checksum 16 bytes``) and ``length``
bytes of body. The body checksum is BLAKE2b-128 of length, kind and body; the head checksum,
BLAKE2b-128 of the 25 bytes before it, is checked before the length is believed. The first
record is ``HEADER`` (JSON: which prefix, round, stage, batch sizes, k (the analyzer), key and
round manifest digest the journal belongs to); then ``INPUTS`` records (``count u32`` then
``length u32 | bytes`` per input) and, for a hop, at most one ``CLOSED`` (``json length u32 | JSON | item_length u32 |
count u32 | messages``).

What a crash can leave, and what is refused. Records are only ever appended, and a record is
acknowledged only once it is fsync'd, so a crash can leave at most one incomplete record, the
last, and nothing in it was acknowledged. A last record is provably torn, and only then cut
off, when the file ends inside its fixed head (fewer than 41 bytes left), or its head checksum
passes and the file ends before its body does: nothing valid can follow either. The bytes cut
are kept aside, byte for byte, in ``<journal>.torn-<offset>`` (mode 0600; ``.torn-<offset>.<n>``
if that name holds other bytes) before the journal is cut, and the recovery logs how many bytes
went where. Everything else is refused (JournalError naming the file, the byte offset and what
failed), never dropped: a head whose checksum fails, wherever it is (a flipped bit in a length
would otherwise make the acknowledged records after it look like a torn tail), and a complete
record whose body fails its checksum, even the last one. A journal torn while it was created (a
prefix of the magic and header this stage would write) holds nothing acknowledged and starts
afresh. A journal of the first format (``shuffledp-hop-journal/1``, no magic and no head
checksum) is refused with a message saying so, never read with the new rules.

Appends go through the journal's own writer thread
(:class:`~shuffledp.protocol.journal_writer.JournalWriter`): each returns a future resolved once
the record is fsync'd, and :meth:`HopJournal.close` waits for every queued append before it
releases the lock and the file descriptor.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import struct
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.end_statement import MAX_PEELERS, peeler_sender, signer_stage
from shuffledp.protocol.frames import FrameAssembler
from shuffledp.protocol.journal_writer import JournalWriter
from shuffledp.protocol.record import MAX_K, MAX_ROUND_ID, require_manifest_digest
from shuffledp.protocol.screen import Mapper
from shuffledp.protocol.topics import validate_prefix
from shuffledp.validation import require_int

__all__ = [
    "FEED_CHUNK",
    "MAGIC",
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

logger = logging.getLogger("shuffledp.journal")

FORMAT = "shuffledp-hop-journal/2"
MAGIC = FORMAT.encode() + b"\n"
"""The first bytes of every journal file: the format, readable with ``head -1``."""
FORMAT_STEM = b"shuffledp-hop-journal/"
KIND_HEADER = 1
KIND_INPUTS = 2
KIND_CLOSED = 3
RECORD_HEAD = struct.Struct(">QB16s16s")
"""length u64 | kind u8 | body checksum | head checksum: 41 bytes before every record body."""
HEAD_CHECKED = struct.Struct(">QB16s")
"""The part of the head its checksum covers (everything before it)."""
V1_HEAD = struct.Struct(">QB16s")
"""The head of a record in the first format (``shuffledp-hop-journal/1``): only recognised, to
refuse such a file with a message that says what it is."""
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
    ``manifest_digest``: the 32-byte digest of the round manifest the stage runs under (its
    journal is refused under another manifest: the frames in it would not verify or count).
    """

    prefix: str
    round_id: int
    hop_index: int
    n_hops: int
    input_length: int
    expected_size: int
    min_batch: int | None
    key_id: str
    manifest_digest: bytes
    k: int | None = None
    worker: int | None = None
    """Peeler ``worker`` of a hop of several processes (stage ``hop-I-pP``,
    shuffler/workers.py), or None for a one-process hop or the analyzer."""

    def __post_init__(self) -> None:
        validate_prefix(self.prefix)
        if self.worker is not None:
            require_int("--worker", self.worker, 0, MAX_PEELERS - 1)
        require_manifest_digest(self.manifest_digest)
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
            if self.worker is not None:
                raise InvalidParameterError(
                    f"the analyzer's journal has no worker (peelers are a hop's), got {self.worker!r}"
                )
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
        manifest_digest: bytes,
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
            manifest_digest=manifest_digest,
            k=k,
        )

    @property
    def is_analyzer(self) -> bool:
        return self.hop_index == self.n_hops

    @property
    def stage(self) -> str:
        """``hop-<i>``, a peeler's ``hop-<i>-p<P>``, or ``analyzer`` (as ``stage_name``)."""
        if self.is_analyzer:
            return "analyzer"
        if self.worker is not None:
            return signer_stage(peeler_sender(self.hop_index, self.worker))
        return f"hop-{self.hop_index}"

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
            "manifest": bytes(self.manifest_digest).hex(),
        }
        if self.is_analyzer:  # a hop's header stays as it was (journals already written)
            fields["k"] = self.k
        if self.worker is not None:
            fields["worker"] = self.worker
        return fields


@dataclass(frozen=True, slots=True, kw_only=True)
class ClosedBatch:
    """What the hop released: ``messages`` in their published order (each ``item_length``
    bytes), ``refused`` (why nothing was released, or None), ``log`` (this hop's round log) and
    ``stages`` (every stage's log so far, this one included), ``chain`` (the signed statements
    the upstream's END carried, hex: the hop signs its END again with them after a restart)."""

    messages: list[bytes]
    item_length: int
    refused: str | None
    log: dict[str, Any]
    stages: dict[str, Any]
    chain: tuple[str, ...] = ()

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


def _body_checksum(kind: int, body: bytes | memoryview) -> bytes:
    digest = hashlib.blake2b(digest_size=CHECKSUM_BYTES, person=b"sdp-journal-body")
    digest.update(struct.pack(">QB", len(body), kind))
    digest.update(body)
    return digest.digest()


def _head_checksum(checked: bytes | memoryview) -> bytes:
    return hashlib.blake2b(checked, digest_size=CHECKSUM_BYTES, person=b"sdp-journal-head").digest()


def encode_record(kind: int, body: bytes) -> bytes:
    """One record: its head (length, kind, body checksum, head checksum), then its body."""
    checked = HEAD_CHECKED.pack(len(body), kind, _body_checksum(kind, body))
    return checked + _head_checksum(checked) + body


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
        {
            "refused": batch.refused,
            "log": batch.log,
            "stages": batch.stages,
            "chain": list(batch.chain),
        },
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
            chain=tuple(str(entry) for entry in meta.get("chain") or ()),
        )
    except (struct.error, UnicodeDecodeError, ValueError, TypeError, RecursionError):
        return None


ADVICE = (
    "nothing is cut, since acknowledged reports may be in or after it; keep the file for "
    "inspection, or move it away to start the round afresh (what it holds is then lost)"
)


def complete_records(path: Path, data: bytes) -> Iterator[tuple[int, int, memoryview, int]]:
    """(start offset, kind, body, end offset) of each complete and intact record after the
    magic, in order, up to a provably torn last record if there is one (module docstring): the
    file ends inside its fixed head, or inside its body with its head checksum passing. A head
    that fails its checksum, or a complete body that fails its own, wherever it is: JournalError
    naming the offset."""
    offset = len(MAGIC)
    view = memoryview(data)  # record bodies are views: a journal is not copied while read
    while len(data) - offset >= RECORD_HEAD.size:
        length, kind, body_checksum, head_checksum = RECORD_HEAD.unpack_from(data, offset)
        if _head_checksum(view[offset : offset + HEAD_CHECKED.size]) != head_checksum:
            raise JournalError(
                f"{path}: the journal is corrupt at byte {offset}: the head of the record there "
                f"fails its checksum, so its length ({length} as read) cannot be trusted, with "
                f"{len(data) - offset} bytes from there to the end of the file; {ADVICE}"
            )
        start = offset + RECORD_HEAD.size
        end = start + length
        if end > len(data):
            return  # torn: an intact head, and the file ends inside its body
        body = view[start:end]
        if _body_checksum(kind, body) != body_checksum:
            raise JournalError(
                f"{path}: the journal is corrupt at byte {offset}: the record there is "
                f"complete ({length} bytes of body) but its body fails its checksum, with "
                f"{len(data) - end} bytes after it; {ADVICE}"
            )
        yield offset, kind, body, end
        offset = end


def _check_magic(path: Path, data: bytes) -> None:
    """JournalError unless ``data`` begins with :data:`MAGIC`; the message says whether it is
    a journal of another format (the first one recognised by its header record)."""
    if data.startswith(MAGIC):
        return
    if data.startswith(FORMAT_STEM):
        other = data[: data.find(b"\n")].decode(errors="replace") if b"\n" in data else "?"
        raise JournalError(
            f"{path}: a journal of format {other!r}, and this shuffledp reads {FORMAT!r}: "
            f"finish its round with the shuffledp that wrote it, or move it away to start the "
            f"round afresh (what it holds is then lost)"
        )
    if _is_first_format(data):
        raise JournalError(
            f"{path}: a journal of the first format 'shuffledp-hop-journal/1' (no head "
            f"checksums: a corrupt length would read as a torn tail), and this shuffledp reads "
            f"only {FORMAT!r}: finish its round with the shuffledp that wrote it, or move it "
            f"away to start the round afresh (what it holds is then lost)"
        )
    raise JournalError(
        f"{path}: not a journal of format {FORMAT!r} (it does not begin with {MAGIC!r})"
    )


def _is_first_format(data: bytes) -> bool:
    """Whether ``data`` begins with the HEADER record of a ``shuffledp-hop-journal/1`` file."""
    if len(data) < V1_HEAD.size:
        return False
    length, kind, _ = V1_HEAD.unpack_from(data)
    if kind != KIND_HEADER or V1_HEAD.size + length > len(data):
        return False
    try:
        header = json.loads(data[V1_HEAD.size : V1_HEAD.size + length].decode())
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    return isinstance(header, dict) and header.get("format") == "shuffledp-hop-journal/1"


def _header_record(identity: JournalIdentity) -> bytes:
    return encode_record(
        KIND_HEADER, json.dumps(identity.as_json(), separators=(",", ":")).encode()
    )


def _fresh_file(identity: JournalIdentity) -> bytes:
    """What a new journal file holds: the magic and the header record."""
    return MAGIC + _header_record(identity)


def read_journal(path: str | os.PathLike[str], identity: JournalIdentity) -> JournalContents:
    """The contents of the journal at ``path`` (see the module docstring).

    An empty file, or one whose magic or header record is torn (a crash while it was created,
    before anything was acknowledged), reads as an empty journal; a provably torn last record
    is left out (``dropped_bytes``; this only reads, :meth:`HopJournal.open` sets it aside).
    Raises JournalError if the file cannot be read, is corrupt (a head or a complete body that
    fails its checksum: the message names the byte offset), is not a journal of this format (one
    of the first format is named as such), or belongs to another prefix, round, stage, batch
    size, k or key (the message names the first field that differs).
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise JournalError(f"{path}: cannot read the journal: {exc}") from exc
    return _parse(path, data, identity)


def _parse(path: Path, data: bytes, identity: JournalIdentity) -> JournalContents:
    fresh = _fresh_file(identity)
    if len(data) < len(fresh) and fresh.startswith(data):
        # Empty, or torn while its magic and header were written: nothing acknowledged yet.
        return JournalContents(valid_bytes=0, dropped_bytes=len(data))
    _check_magic(path, data)
    records = complete_records(path, data)
    first = next(records, None)
    if first is None:
        raise JournalError(
            f"{path}: the journal's header record is incomplete and is not the one this "
            f"{identity.stage} would write (another stage's or settings' journal, torn while it "
            f"was created); move it away to start the round afresh"
        )
    _, kind, body, valid = first
    _check_header(path, kind, body, identity)
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


def _check_header(path: Path, kind: int, body: memoryview, identity: JournalIdentity) -> None:
    """JournalError unless the first record is this stage's HEADER (the message names the
    first field that differs)."""
    header: Any = None
    if kind == KIND_HEADER:
        with contextlib.suppress(UnicodeDecodeError, ValueError, RecursionError):
            header = json.loads(bytes(body).decode())
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise JournalError(f"{path}: not a journal of format {FORMAT!r} (its header record)")
    for name, value in identity.as_json().items():
        if header.get(name) != value:
            raise JournalError(
                f"{path}: the journal belongs to {name} = {header.get(name)!r}, this "
                f"{identity.stage} has {name} = {value!r}; run it with the settings and key "
                f"that wrote it, or remove the file to start the round afresh (what it holds "
                f"is then lost)"
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
    sets a provably torn last record aside (:attr:`torn_file`) before cutting it off.
    ``submit_inputs`` and ``submit_closed`` queue a record to the journal's writer thread and
    return a future resolved once it is on disk (fsync); ``append_inputs`` and
    ``append_closed`` wait for it. ``close`` waits for every queued record, then releases the
    lock and keeps the file; ``remove`` waits the same way, then deletes it (the round is
    forwarded). Every OS failure is raised as JournalError naming the file. ``syncs``,
    ``bytes_written`` and ``sync_seconds`` (write + fsync time) measure what journaling cost
    this run.
    """

    def __init__(
        self,
        path: Path,
        fd: int,
        identity: JournalIdentity,
        contents: JournalContents,
        torn_file: Path | None = None,
    ):
        self.path = path
        self._fd: int | None = fd
        self.identity = identity
        self.contents = contents
        self.torn_file = torn_file
        self._closed_written = contents.closed is not None
        self._lock = threading.Lock()  # the descriptor, against close and remove at once
        self._writer = JournalWriter(fd, path, error=JournalError, name=f"journal-{path.name}")

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
            contents, torn_file = _recover(path, fd, identity)
        except JournalError:
            os.close(fd)
            raise
        except OSError as exc:
            os.close(fd)
            raise JournalError(f"{path}: cannot use the journal: {exc}") from exc
        return cls(path, fd, identity, contents, torn_file)

    @property
    def has_closed(self) -> bool:
        return self._closed_written

    @property
    def syncs(self) -> int:
        return self._writer.syncs

    @property
    def bytes_written(self) -> int:
        return self._writer.bytes_written

    @property
    def sync_seconds(self) -> float:
        return self._writer.sync_seconds

    def journaled_form(self, payloads: Iterable[bytes]) -> list[bytes]:
        """``payloads`` as they are journaled: a hop-0 input of the wrong length becomes b""
        (module docstring); frames are kept whole."""
        if self.identity.hop_index > 0:
            return [bytes(p) for p in payloads]
        length = self.identity.input_length
        return [bytes(p) if len(p) == length else b"" for p in payloads]

    def submit_inputs(self, payloads: Iterable[bytes]) -> Future[int]:
        """Queue one burst of inputs (journaled form); the future resolves to the bytes written
        once they are fsync'd. ``payloads`` is read now; encoding and checksumming happen on
        the writer thread."""
        if self._closed_written:
            raise JournalError(f"{self.path}: the batch is closed, no input may be appended")
        burst = list(payloads)
        return self._writer.submit(
            lambda: encode_record(KIND_INPUTS, encode_inputs(self.journaled_form(burst)))
        )

    def submit_closed(self, batch: ClosedBatch) -> Future[int]:
        """Queue the released batch (at most once, and never by the analyzer); no input may be
        queued after it."""
        if self.identity.is_analyzer:
            raise JournalError(f"{self.path}: the analyzer journals no released batch")
        if self._closed_written:
            raise JournalError(f"{self.path}: the batch is already recorded as closed")
        written = self._writer.submit(lambda: encode_record(KIND_CLOSED, encode_closed(batch)))
        self._closed_written = True
        return written

    def append_inputs(self, payloads: Iterable[bytes]) -> int:
        """:meth:`submit_inputs` and wait: returns once the burst is on disk."""
        return self.submit_inputs(payloads).result()

    def append_closed(self, batch: ClosedBatch) -> int:
        """:meth:`submit_closed` and wait: returns once the batch is on disk."""
        return self.submit_closed(batch).result()

    def remove(self) -> None:
        """Wait for the queued records, then delete the journal (its round is forwarded, or its
        report published) and release it. A ``.torn-*`` file set aside is kept."""
        self._writer.stop()
        with self._lock:
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
        """Wait for the queued records, then release the journal and keep the file (a
        restarted stage continues from it). Idempotent."""
        self._writer.stop()
        with self._lock:
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


def _recover(path: Path, fd: int, identity: JournalIdentity) -> tuple[JournalContents, Path | None]:
    """Read the locked journal ``fd``; start it afresh if it is new (or torn while created),
    or set a provably torn last record aside and cut it off. Returns what it holds and where
    the torn bytes went (None if nothing was cut)."""
    size = os.fstat(fd).st_size
    data = os.pread(fd, size, 0) if size else b""
    if len(data) != size:
        raise JournalError(f"{path}: read {len(data)} of the journal's {size} bytes")
    contents = _parse(path, data, identity)
    torn_file: Path | None = None
    if contents.valid_bytes == 0:
        # New, or torn while its magic and header were written: what is there is a prefix of
        # what is written now, so nothing is lost.
        fresh = _fresh_file(identity)
        os.pwrite(fd, fresh, 0)
        os.fsync(fd)
        _fsync_directory(path.parent)
        contents = JournalContents(valid_bytes=len(fresh), dropped_bytes=contents.dropped_bytes)
    elif contents.dropped_bytes:
        torn_file = _set_aside(path, data[contents.valid_bytes :], contents.valid_bytes)
        os.ftruncate(fd, contents.valid_bytes)
        os.fsync(fd)
        logger.warning(
            "%s: a torn last record (a crash mid-append: never acknowledged) was cut off at byte "
            "%d; its %d bytes are kept in %s",
            path,
            contents.valid_bytes,
            contents.dropped_bytes,
            torn_file,
        )
    os.lseek(fd, 0, os.SEEK_END)
    return contents, torn_file


def _set_aside(path: Path, torn: bytes, offset: int) -> Path:
    """Write ``torn`` (cut from ``path`` at ``offset``) to ``<path>.torn-<offset>`` (0600,
    fsync'd with its directory entry) and return where it went. A file of that name holding the
    same bytes (a recovery that crashed before it cut the journal) is reused; one holding other
    bytes is kept, and ``.<n>`` is appended to the name."""
    for attempt in range(1, 1000):
        suffix = f".torn-{offset}" if attempt == 1 else f".torn-{offset}.{attempt}"
        target = path.with_name(path.name + suffix)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            fd = os.open(target, flags, FILE_MODE)
        except FileExistsError:
            if _holds(target, torn):
                return target
            continue
        try:
            view = memoryview(torn)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        _fsync_directory(path.parent)
        return target
    raise JournalError(f"{path}: 999 files {path.name}.torn-{offset}.* exist already")


def _holds(target: Path, expected: bytes) -> bool:
    """Whether the regular file ``target`` (never followed if a symlink) holds ``expected``."""
    try:
        fd = os.open(target, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        return os.fstat(fd).st_size == len(expected) and os.pread(fd, len(expected), 0) == expected
    finally:
        os.close(fd)


def _fsync_directory(directory: Path) -> None:
    """Make a file's creation or removal durable (its directory entry)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
