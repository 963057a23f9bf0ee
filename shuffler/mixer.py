"""The mixer of a hop of W peelers (shuffler/workers.py has the design; docs/hop-workers.md the
proof that its output order is uniform).

``await run_mixer(transport, settings, workers, private_key)`` runs stage ``hop-j``: it opens
every sealed frame its peelers send, checks it against the peeler's key and sender number, and
spreads the items over bucket files (:class:`~shuffledp.shuffler.external_shuffle.
BucketShuffle`); once every peeler's END is in (or at the deadline) it accounts for each peeler,
and releases the batch in one uniformly random order as the hop's signed frames and END
statement, exactly as a one-process hop does (its downstream cannot tell the difference), or
refuses the round naming the peeler where reports went missing.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

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
from shuffledp.protocol.onion import message_length
from shuffledp.protocol.runtime import NotReadyError, clear_state, publish_state
from shuffledp.protocol.stage import CollectClock, Stage
from shuffledp.protocol.topics import mix_topic, peeler_topic, status_topic
from shuffledp.protocol.transport import Message, Transport, publish_all
from shuffledp.randomness import RandomLike, RandomSource, as_random_source
from shuffledp.shuffler.external_shuffle import BucketShuffle, bucket_count
from shuffledp.shuffler.hop import HOP_REJECTION_REASONS
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


@dataclass(slots=True, kw_only=True)
class _MixIntake:
    """Open, check and spread what the peelers send (an Intake)."""

    ingress: str
    box: SealedBox[PrivateKey]
    assemblers: dict[int, FrameAssembler]
    store: BucketShuffle
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
            items = list(assembler.add(frame))
            if items:
                self.store.add_many(items)


async def run_mixer(
    transport: Transport,
    settings: HopSettings,
    workers: int,
    private_key: PrivateKey,
    *,
    rng: RandomLike = None,
    scratch: str | None = None,
) -> HopResult:
    """Run the mixer of hop ``settings.hop_index`` for one round (module docstring); bucket
    files under ``scratch`` (the system's temporary folder if None)."""
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
    with BucketShuffle(
        item_length=item_length,
        buckets=bucket_count(settings.expected_size),
        directory=scratch,
        rng=source,
    ) as store:
        intake = _MixIntake(
            ingress=mix_topic(settings.prefix, settings.round_id, j),
            box=SealedBox(private_key),
            assemblers=assemblers,
            store=store,
        )
        return await _run_mixer(transport, settings, workers, intake, source)


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
            await _await_peelers(stage, settings, workers, watch)
            started = await stage.announce_ready()
            clock = CollectClock(
                stage_index=j, deadline=settings.deadline, ready_at=started, first_arrival=None
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
            await _forward(stage, settings, workers, intake, release, log)
        finally:
            await clear_state(transport, prefix, round_id, own)
    return HopResult(log=log, refused=release.refused, stages={settings.stage: log})


@dataclass(slots=True)
class _Release:
    refused: str | None
    accepted: int
    rejected: dict[str, int]
    upstream_end: str | None
    chain: tuple[str, ...]


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
