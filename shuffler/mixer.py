"""The mixer of a hop of W peelers (shuffler/workers.py has the design; docs/hop-workers.md the
proof that its output order is uniform).

``await run_mixer(transport, settings, workers, private_key)`` runs stage ``hop-j``: it opens
every sealed frame its peelers send, checks it against the peeler's key and sender number, and
spreads the items over bucket files (:class:`~shuffledp.shuffler.external_shuffle.
BucketShuffle`); once every peeler's END is in (or at the deadline) it accounts for each peeler,
and releases the batch in one uniformly random order as the hop's signed frames and END
statement, exactly as a one-process hop does (its downstream cannot tell the difference), or
refuses the round naming the peeler where reports went missing.

With ``state_dir`` the mixer's store is its journal (:class:`~shuffledp.shuffler.mix_journal.
MixJournal`, SQLite in WAL mode; the transport acknowledges manually over a persistent
session): a burst of sealed frames is acknowledged only once its items, the frames they came in
and the counters are committed together. Restarted with the same arguments after a SIGKILL, the
mixer restores each peeler's assembler from the journal (the frames it holds, so a frame sent
again is a ``duplicate-frame``; the ENDs it took, checked again) and collects the rest; once it
has accounted for its peelers it commits that decision, and each bucket's permutation before the
bucket's first item leaves, so a mixer restarted mid-release publishes exactly the same frames
again. The journal is removed once the hop's END is out.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from nacl.exceptions import CryptoError
from nacl.public import PrivateKey, SealedBox

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.delivery import leg_name, loss_line
from shuffledp.protocol.end_statement import EndStatement
from shuffledp.protocol.frames import (
    FRAME_BYTES,
    HEADER,
    KIND_DATA,
    FrameAssembler,
    FrameSigner,
    encode_end,
)
from shuffledp.protocol.journal import JournalIdentity
from shuffledp.protocol.onion import message_length
from shuffledp.protocol.runtime import NotReadyError, clear_state, publish_state
from shuffledp.protocol.stage import CollectClock, Stage
from shuffledp.protocol.topics import mix_topic, peeler_topic, status_topic
from shuffledp.protocol.transport import Message, Transport, publish_all, require_journaling
from shuffledp.randomness import RandomLike, RandomSource, as_random_source
from shuffledp.shuffler.external_shuffle import BucketShuffle, bucket_count
from shuffledp.shuffler.hop import HOP_REJECTION_REASONS
from shuffledp.shuffler.mix_journal import MixJournal, mix_journal_name
from shuffledp.shuffler.service import HopResult, HopSettings
from shuffledp.shuffler.workers import (
    MAX_WORKERS,
    mixer_ready_stage,
    peeler_sender,
    peeler_stage,
)
from shuffledp.validation import require_int

__all__ = ["run_mixer"]

UNSEALABLE = "unsealable-frame"
"""A message on the mix topic that does not open with the hop's key (not from a peeler)."""


@dataclass(slots=True)
class _PeelerWatch:
    """The peelers' statuses (an :class:`~shuffledp.protocol.stage.Aside`): who is ready."""

    topics: dict[str, str]
    ready: set[str] = field(default_factory=set)

    def wants(self, topic: str) -> bool:
        return topic in self.topics

    def note(self, message: Message) -> None:
        try:
            state = json.loads(message.payload).get("state")
        except (ValueError, AttributeError):
            return
        if state == "ready":
            self.ready.add(self.topics[message.topic])

    async def tick(self) -> None:
        return None


class _Store(Protocol):
    """Where the mixer spreads its items: a BucketShuffle, or its journal (MixJournal)."""

    @property
    def count(self) -> int: ...

    @property
    def buckets(self) -> int: ...

    def add_many(self, items: Sequence[bytes]) -> None: ...

    def release(self) -> Iterator[bytes]: ...

    def close(self) -> None: ...


@dataclass(slots=True, kw_only=True)
class _MixIntake:
    """Open, check and spread what the peelers send (an Intake); with a journal, each burst is
    committed before Stage.collect acknowledges it."""

    ingress: str
    box: SealedBox[PrivateKey]
    assemblers: dict[int, FrameAssembler]
    store: _Store
    journal: MixJournal | None = None
    burst: int = 16
    unsealable: int = 0

    def complete(self) -> bool:
        return all(a.complete for a in self.assemblers.values())

    def counts(self) -> dict[str, Any]:
        return {"accepted": self.store.count}

    async def take(self, payloads: list[bytes]) -> None:
        await asyncio.to_thread(self._take, payloads)

    def _take(self, payloads: list[bytes]) -> None:
        for sealed in payloads:
            try:
                frame = self.box.decrypt(sealed)
            except CryptoError:
                self.unsealable += 1
                continue
            sender = HEADER.unpack_from(frame)[3] if len(frame) >= HEADER.size else -1
            assembler = self.assemblers.get(sender)
            if assembler is None:
                self.unsealable += 1
                continue
            self._add(sender, assembler, frame)
        if self.journal is not None:
            self.journal.commit(self.unsealable)

    def _add(self, sender: int, assembler: FrameAssembler, frame: bytes) -> None:
        frames, ended = assembler.frames_received, assembler.statement is not None
        items = list(assembler.add(frame))
        if items:
            self.store.add_many(items)
        if self.journal is None:
            return
        if assembler.frames_received > frames:
            self.journal.note_data(sender, HEADER.unpack_from(frame)[6], len(items))
        if not ended and assembler.statement is not None:
            self.journal.note_end(sender, frame)

    def restore(self, journal: MixJournal) -> None:
        """Each peeler's assembler as it was when the journal was last committed."""
        for sender, seq, count in journal.frames():
            self.assemblers[sender].restore(seq, count)
        for sender, frame in journal.ends():
            list(self.assemblers[sender].add(frame))
        self.unsealable = journal.unsealable


async def run_mixer(
    transport: Transport,
    settings: HopSettings,
    workers: int,
    private_key: PrivateKey,
    *,
    rng: RandomLike = None,
    scratch: str | None = None,
    state_dir: str | os.PathLike[str] | None = None,
) -> HopResult:
    """Run the mixer of hop ``settings.hop_index`` for one round (module docstring); bucket
    files under ``scratch`` (the system's temporary folder if None), or, with ``state_dir``,
    the journal there (resumed if an earlier run left one; JournalError if it belongs to other
    settings or is in use)."""
    if not isinstance(settings, HopSettings):
        raise InvalidParameterError(f"settings must be HopSettings, got {type(settings).__name__}")
    require_int("--hop-workers", workers, 2, MAX_WORKERS, bound=f"[2, {MAX_WORKERS}]")
    source: RandomSource = as_random_source(rng)
    j = settings.hop_index
    verify = settings.signing_key.verify_key
    assemblers = {
        peeler_sender(j, p): FrameAssembler(
            settings.round_id, settings.manifest_digest, peeler_sender(j, p), verify
        )
        for p in range(workers)
    }
    item_length = message_length(j + 1, settings.n_hops)
    buckets = bucket_count(settings.expected_size)
    journal: MixJournal | None = None
    store: _Store
    if state_dir is None:
        store = BucketShuffle(
            item_length=item_length, buckets=buckets, directory=scratch, rng=source
        )
    else:
        require_journaling(transport)
        identity = _journal_identity(settings, workers, private_key)
        journal = await asyncio.to_thread(
            MixJournal.open,
            state_dir,
            mix_journal_name(settings.stage, settings.prefix, settings.round_id),
            identity,
            item_length=item_length,
            buckets=buckets,
            rng=source,
        )
        store = journal
    try:
        intake = _MixIntake(
            ingress=mix_topic(settings.prefix, settings.round_id, j),
            box=SealedBox(private_key),
            assemblers=assemblers,
            store=store,
            journal=journal,
        )
        if journal is not None:
            await asyncio.to_thread(intake.restore, journal)
        return await _run_mixer(transport, settings, workers, intake, source)
    finally:
        store.close()


def _journal_identity(
    settings: HopSettings, workers: int, private_key: PrivateKey
) -> dict[str, Any]:
    """What the mixer's journal belongs to (refused under anything else)."""
    return {
        "stage": settings.stage,
        "prefix": settings.prefix,
        "round_id": settings.round_id,
        "hop_index": settings.hop_index,
        "n_hops": settings.n_hops,
        "hop_workers": workers,
        "expected_size": settings.expected_size,
        "min_batch": settings.min_batch,
        "key_id": JournalIdentity.key_id_of(bytes(private_key.public_key)),
        "manifest": settings.manifest_digest.hex(),
    }


async def _await_peelers(
    stage: Stage, settings: HopSettings, workers: int, watch: _PeelerWatch
) -> None:
    deadline = time.monotonic() + settings.ready_timeout
    while len(watch.ready) < workers:
        left = deadline - time.monotonic()
        if left <= 0:
            missing = sorted(set(watch.topics.values()) - watch.ready)
            line = f"{settings.stage}: peelers {', '.join(missing)} never announced ready"
            await stage.announce("failed", error=line)
            raise NotReadyError(line)
        await stage.next_message(min(left, 0.5))


async def _run_mixer(
    transport: Transport,
    settings: HopSettings,
    workers: int,
    intake: _MixIntake,
    source: RandomSource,
) -> HopResult:
    j, prefix, round_id = settings.hop_index, settings.prefix, settings.round_id
    topics = {
        status_topic(prefix, round_id, peeler_stage(j, p)): peeler_stage(j, p)
        for p in range(workers)
    }
    watch = _PeelerWatch(topics)
    journal = intake.journal
    decided = journal.closed if journal is not None else None
    async with Stage(
        transport,
        prefix=prefix,
        round_id=round_id,
        name=settings.stage,
        downstream=settings.downstream,
    ) as stage:
        stage.aside = watch
        await stage.subscribe(intake.ingress)
        for topic in topics:
            await stage.subscribe(topic)
        own = mixer_ready_stage(j)
        await publish_state(transport, prefix, round_id, own, "ready")
        try:
            if decided is None:
                log, release = await _collect(stage, settings, workers, intake, watch, source)
            else:  # accounted for before the restart: release the same batch again
                log, release = dict(decided["log"]), _Release.from_json(decided["release"])
                await stage.announce_ready()
            if journal is not None:
                log["journal"] = {
                    "resumed_items": journal.resumed_items,
                    "resumed_closed": decided is not None,
                    "commits": journal.commits,
                }
            await _forward(stage, settings, workers, intake, release, log)
            if journal is not None:
                await asyncio.to_thread(journal.remove)  # the hop's END is out
        finally:
            await clear_state(transport, prefix, round_id, own)
    return HopResult(log=log, refused=release.refused, stages={settings.stage: log})


async def _collect(
    stage: Stage,
    settings: HopSettings,
    workers: int,
    intake: _MixIntake,
    watch: _PeelerWatch,
    source: RandomSource,
) -> tuple[dict[str, Any], _Release]:
    """Await the peelers' ready (not again after a restart that holds their frames: they may
    be done and gone), collect, account for each peeler; with a journal, commit the decision."""
    journal = intake.journal
    if journal is None or not journal.peelers_ready:
        await _await_peelers(stage, settings, workers, watch)
        if journal is not None:
            await asyncio.to_thread(journal.mark_peelers_ready)
    started = await stage.announce_ready()
    clock = CollectClock(
        stage_index=settings.hop_index,
        deadline=settings.deadline,
        ready_at=started,
        first_arrival=None,
    )
    timed_out = await stage.collect(intake, clock)
    collected = time.monotonic()
    log: dict[str, Any] = {
        "stage": settings.stage,
        "randomness": source.name,
        "hop_workers": workers,
        "timed_out": timed_out,
        "collect_seconds": round(collected - started, 6),
        "buckets": intake.store.buckets,
    }
    release = _account(settings, workers, intake, log)
    if journal is not None:
        decision = {"log": log, "release": release.to_json()}
        await asyncio.to_thread(journal.close_round, decision)
    return log, release


@dataclass(slots=True)
class _Release:
    refused: str | None
    accepted: int
    rejected: dict[str, int]
    upstream_end: str | None
    chain: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "chain": list(self.chain)}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> _Release:
        return cls(
            refused=value["refused"],
            accepted=int(value["accepted"]),
            rejected={str(k): int(v) for k, v in value["rejected"].items()},
            upstream_end=value["upstream_end"],
            chain=tuple(str(c) for c in value["chain"]),
        )


def _account(
    settings: HopSettings, workers: int, intake: _MixIntake, log: dict[str, Any]
) -> _Release:
    """Each peeler's END against what came from it; the hop's counts (module docstring)."""
    j = settings.hop_index
    rejected = dict.fromkeys(HOP_REJECTION_REASONS, 0)
    worker_logs: dict[str, Any] = {}
    losses: list[str] = []
    upstream_ends: set[str | None] = set()
    chains: set[tuple[str, ...]] = set()
    refused: str | None = None
    for p in range(workers):
        name, assembler = peeler_stage(j, p), intake.assemblers[peeler_sender(j, p)]
        statement = assembler.statement
        if statement is None:
            losses.append(f"{name}'s END never reached {settings.stage}")
            worker_logs[name] = {"end": False, "received": assembler.messages_received}
            continue
        peeler_log = dict(statement.stages.get(name, {}))
        worker_logs[name] = peeler_log
        for reason, count in statement.rejected.items():
            rejected[reason] = rejected.get(reason, 0) + count
        short = statement.forwarded - assembler.messages_received
        if short > 0:
            where = leg_name(name, settings.stage)
            losses.append(loss_line(short, statement.forwarded, where))
        if peeler_log.get("loss"):
            losses.append(str(peeler_log["loss"]))
        if statement.aborted is not None:
            refused = statement.aborted
        upstream_ends.add(statement.upstream_end)
        chains.add(statement.chain[:-1])
    log["workers"] = worker_logs
    log["frames_unsealable"] = intake.unsealable
    if len(upstream_ends) > 1 or len(chains) > 1:
        losses.append("the peelers took different upstream END statements")
    if refused is None and not losses and intake.store.count < settings.min_batch:
        refused = (
            f"{settings.stage} of round {settings.round_id} must hold at least min_batch = "
            f"{settings.min_batch} messages to release its batch, it accepted "
            f"{intake.store.count}; nothing is released"
        )
    if losses:
        log["loss"] = "; ".join(losses)
        log["loss_accepted"] = settings.accept_loss
        if refused is None and not settings.accept_loss:
            refused = log["loss"]
    log["lost"] = sum(int(w.get("lost", 0)) for w in worker_logs.values())
    upstream_end = next(iter(upstream_ends)) if len(upstream_ends) == 1 else None
    chain = next(iter(chains)) if len(chains) == 1 else ()
    return _Release(refused, intake.store.count, rejected, upstream_end, chain)


def _frames(
    items: Iterable[bytes], signer: FrameSigner, item_length: int
) -> Iterator[tuple[int, bytes]]:
    """(count, signed data frame) of ``items``, full frames but the last, numbered from 0."""
    per_frame = max(1, FRAME_BYTES // item_length)
    chunk: list[bytes] = []
    seq = 0
    for item in items:
        chunk.append(item)
        if len(chunk) == per_frame:
            yield len(chunk), signer.frame(KIND_DATA, seq, len(chunk), item_length, b"".join(chunk))
            seq, chunk = seq + 1, []
    if chunk:
        yield len(chunk), signer.frame(KIND_DATA, seq, len(chunk), item_length, b"".join(chunk))


def _data_topic(settings: HopSettings, workers: int, seq: int) -> str:
    """Where data frame ``seq`` goes: the next hop's peeler ``seq mod W`` (each peeler receives
    only its share: the broker carries each frame once), or the analyzer."""
    if settings.hop_index + 1 == settings.n_hops:
        return settings.egress
    return peeler_topic(settings.prefix, settings.round_id, settings.hop_index + 1, seq % workers)


async def _forward(
    stage: Stage,
    settings: HopSettings,
    workers: int,
    intake: _MixIntake,
    release: _Release,
    log: dict[str, Any],
) -> None:
    """Await the downstream, publish the permuted batch (one bucket in memory at a time) and
    the hop's END statement, announce done or refused."""
    await stage.await_downstream(
        settings.ready_timeout,
        who=f"{settings.stage} of round {settings.round_id}: {settings.downstream}",
    )
    started = time.monotonic()
    item_length = message_length(settings.hop_index + 1, settings.n_hops)
    signer = settings.frame_signer()
    frames = forwarded = 0
    if release.refused is None:
        produced = _frames(intake.store.release(), signer, item_length)
        while True:
            batch = await asyncio.to_thread(_next_frames, produced, 16)
            if not batch:
                break
            await publish_all(
                stage.transport,
                ((_data_topic(settings, workers, frames + i), f) for i, (_, f) in enumerate(batch)),
            )
            frames += len(batch)
            forwarded += sum(count for count, _ in batch)
    accepted = release.accepted
    log.update(accepted=accepted, rejected=release.rejected, forwarded=forwarded)
    log["forward_seconds"] = round(time.monotonic() - started, 6)
    statement = EndStatement(
        stage=settings.stage,
        accepted=accepted,
        forwarded=forwarded,
        frames=frames,
        rejected=release.rejected,
        aborted=release.refused,
        upstream_end=release.upstream_end,
        stages={settings.stage: log},
    )
    end = encode_end(
        signer=signer, item_length=item_length, statement=statement, upstream_chain=release.chain
    )
    ends = {_data_topic(settings, workers, p) for p in range(workers)}
    for topic in sorted(ends):  # every peeler of the next hop reads the END
        await stage.transport.publish(topic, end)
    await stage.announce("refused" if release.refused else "done", log=log)


def _next_frames(produced: Iterator[tuple[int, bytes]], limit: int) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    for entry in produced:
        out.append(entry)
        if len(out) == limit:
            break
    return out
