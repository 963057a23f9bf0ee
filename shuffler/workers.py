"""A hop as a trust domain of several processes: W peelers and one mixer (docs/hop-workers.md);
this module is the peelers and what both roles share, shuffler/mixer.py the mixer.

Hop ``j`` with ``workers = W >= 2`` runs W **peelers** (stage ``hop-j-pP``) and one **mixer**
(stage ``hop-j``, what the rest of the cascade sees as the hop: its status, its signed frames and
END statement, its place in the chain). They all hold the hop's keys (the manifest's, shared in
the trust domain).

- **Partition.** Hop 0's peeler ``P`` reads ``.../hop/0/w/P`` (``peeler_topic``): each client
  process sends there (simulate gives client process ``c`` to peeler ``c mod W``, a range of
  client ids per peeler, which every broker supports). At a later hop, the upstream mixer sends
  its data frame ``s`` to peeler ``s mod W``'s topic (``.../hop/I/w/P``) and its END to every
  peeler's, so the broker carries each frame once; peeler ``P`` takes the frames numbered
  ``P mod W`` (:class:`ShareAssembler`, which also passes over any other frame unverified).
- **Peelers** check and peel exactly as a one-process hop (:class:`~shuffledp.shuffler.hop.
  HopRound`: length, duplicates, batch-full, authentication, decryption), permute nothing and
  stream their output to the mixer as they go: frames signed with the hop's signing key under
  the peeler's own sender number (:func:`peeler_sender`), each then sealed (libsodium sealed
  box) to the hop's public key, on ``.../hop/j/mix``: the broker learns the size and time of
  each sealed frame and nothing else. A peeler's memory holds one frame and the part of its
  seen-set kept in memory (bounded: protocol/seen_set.py). Last, a peeler sends its signed END
  statement (its counts and its own log, and the upstream's chain), sealed the same way.
- **The mixer** opens each sealed frame, checks it (:class:`~shuffledp.protocol.frames.
  FrameAssembler`, one per peeler) and spreads its items over bucket files at random
  (:class:`~shuffledp.shuffler.external_shuffle.BucketShuffle`); once every peeler's END is in
  and adds up, it releases the batch in one uniformly random order, as signed frames and the
  hop's END statement, exactly as a one-process hop would. Its statement adds the peelers' counts
  (accepted, rejected by reason) and carries each peeler's log under ``workers``; a peeler whose
  END never came, or whose frames fall short of what its END says, refuses the round with the
  loss's one line naming that peeler (unless ``accept_loss``).

Readiness: the mixer subscribes, announces ``hop-j-mix`` ready (what the peelers await before
announcing their own ``ready``), waits for every peeler's ``ready``, then announces ``hop-j``
ready (what the upstream awaits). Nothing leaves the trust domain before the mixer's release,
which starts only when every peeler has ended: the output order is independent of every
arrival time the broker sees (docs/hop-workers.md proves it uniform).

Crashes (``state_dir``, Mosquitto: manual acknowledgement over a persistent session, as a
one-process hop). A peeler keeps the one-process hop's journal (:mod:`~shuffledp.protocol.
journal`, its own file ``hop-I-pP-round-...``): each burst of inputs is on disk before it is
acknowledged. Restarted with the same arguments, it replays the journal through the same checks
(the same accepted messages in the same order, seen-set, counts and, at hop 0, the clients that
reported and so the receipts), then sends its output again from frame 0: peeling is
deterministic and frames are cut at fixed multiples of ``per_frame``, so every frame it sends
again is the same signed frame, which the mixer drops by number (``duplicate-frame``). The
journal is removed once the peeler is done. The mixer's own journal is shuffler/mix_journal.py.
Without ``state_dir`` a peeler that dies leaves the mixer without its END, and the mixer
refuses the round at its deadline naming that peeler.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from nacl.public import PrivateKey, PublicKey, SealedBox

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.client_auth import ClientVerifier
from shuffledp.protocol.delivery import leg_name, loss_line, screened
from shuffledp.protocol.end_statement import (
    MAX_PEELERS,
    EndStatement,
    peeler_sender,
    signer_stage,
)
from shuffledp.protocol.frames import (
    FRAME_BYTES,
    HEADER,
    KIND_DATA,
    FrameAssembler,
    FrameSigner,
    encode_end,
)
from shuffledp.protocol.journal import HopJournal, JournalIdentity, feed_inputs, replay
from shuffledp.protocol.onion import message_length
from shuffledp.protocol.runtime import peel_pool
from shuffledp.protocol.stage import CollectClock, Stage
from shuffledp.protocol.topics import mix_topic, peeler_topic
from shuffledp.protocol.transport import Transport, require_journaling
from shuffledp.shuffler.hop import HopRound
from shuffledp.shuffler.receipts import ReceiptDesk
from shuffledp.shuffler.service import FRAME_BURST, OFFER_CHUNK, HopResult, HopSettings
from shuffledp.validation import require_int

__all__ = [
    "MAX_WORKERS",
    "PeelerSettings",
    "ShareAssembler",
    "mixer_ready_stage",
    "peeler_sender",
    "peeler_stage",
    "run_peeler",
]

logger = logging.getLogger("shuffledp.hop")

MAX_WORKERS = MAX_PEELERS


def _check_workers(workers: int, worker: int | None = None) -> None:
    require_int("--hop-workers", workers, 2, MAX_WORKERS, bound=f"[2, {MAX_WORKERS}]")
    if worker is not None:
        require_int("--worker", worker, 0, workers - 1, bound="[0, --hop-workers - 1]")


def peeler_stage(hop_index: int, worker: int) -> str:
    """``hop-J-pP``: the stage (status, process) name of peeler P of hop J."""
    return signer_stage(peeler_sender(hop_index, worker))


def mixer_ready_stage(hop_index: int) -> str:
    """``hop-J-mix``: the status the mixer announces when it listens to its peelers."""
    return f"hop-{hop_index}-mix"


@dataclass(slots=True)
class ShareAssembler(FrameAssembler):
    """A FrameAssembler that takes only the data frames numbered ``worker`` mod ``workers``
    (and the END): a later hop's peeler's share of its upstream's batch. Complete once the
    END is in and every frame of the share has arrived."""

    workers: int = 1
    worker: int = 0
    per_frame: int = 1
    """Messages in every data frame but the last (the upstream fills its frames)."""
    others: int = 0
    """Data frames of other peelers seen and passed over."""

    def add(self, payload: bytes | bytearray | memoryview) -> Iterator[bytes]:
        if len(payload) >= HEADER.size:
            fields = HEADER.unpack_from(bytes(payload[: HEADER.size]))
            kind, seq = fields[2], fields[6]
            if kind == KIND_DATA and seq % self.workers != self.worker:
                self.others += 1
                return iter(())
        return FrameAssembler.add(self, payload)

    def share(self) -> tuple[int, int] | None:
        """(frames, messages) of this peeler's share, once the END says the batch's size."""
        frames, total = self.expected_frames, self.expected_messages
        if frames is None or total is None:
            return None
        mine = [s for s in range(self.worker, frames, self.workers)]
        last = total - self.per_frame * (frames - 1)
        return len(mine), sum(last if s == frames - 1 else self.per_frame for s in mine)

    @property
    def share_complete(self) -> bool:
        share = self.share()
        return share is not None and self.messages_received >= share[1]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Sealer:
    """Signs frames as one peeler (FrameSigner) and seals them to the hop's public key."""

    signer: FrameSigner
    box: SealedBox[PublicKey] = field(repr=False)
    item_length: int

    def data(self, seq: int, items: list[bytes]) -> bytes:
        body = b"".join(items)
        frame = self.signer.frame(KIND_DATA, seq, len(items), self.item_length, body)
        return bytes(self.box.encrypt(frame))


@dataclass(slots=True, kw_only=True)
class _PeelIntake:
    """What a peeler does with a burst: peel (HopRound), then stream full frames to the
    mixer (an :class:`~shuffledp.protocol.stage.Intake`)."""

    settings: HopSettings
    hop: HopRound
    assembler: ShareAssembler | None
    sealer: _Sealer
    transport: Transport
    mapper: Any
    ingress: str
    per_frame: int
    burst: int = OFFER_CHUNK  # as a one-process hop: client messages, or FRAME_BURST frames
    journal: HopJournal | None = None
    frames: int = 0
    forwarded: int = 0
    pending: list[bytes] = field(default_factory=list)

    def complete(self) -> bool:
        if self.assembler is None:
            return self.hop.is_full
        return self.assembler.share_complete

    def counts(self) -> dict[str, Any]:
        return {"accepted": self.hop.accepted, "rejected": sum(self.hop.rejected.values())}

    async def take(self, payloads: list[bytes]) -> None:
        feeding = asyncio.to_thread(
            feed_inputs, self.hop, self.assembler, payloads, mapper=self.mapper
        )
        if self.journal is None:
            await feeding
        else:  # on disk (the journal's writer thread) before Stage.collect acknowledges it
            await asyncio.gather(feeding, asyncio.wrap_future(self.journal.submit_inputs(payloads)))
        self.pending.extend(self.hop.drain())
        await self.flush(final=False)

    async def flush(self, *, final: bool) -> None:
        """Send every full frame held (and, if ``final``, the rest)."""
        topic = mix_topic(self.settings.prefix, self.settings.round_id, self.settings.hop_index)
        while len(self.pending) >= self.per_frame or (final and self.pending):
            items, self.pending = self.pending[: self.per_frame], self.pending[self.per_frame :]
            sealed = await asyncio.to_thread(self.sealer.data, self.frames, items)
            await self.transport.publish(topic, sealed)
            self.frames += 1
            self.forwarded += len(items)


@dataclass(frozen=True, slots=True, kw_only=True)
class PeelerSettings:
    """Peeler ``worker`` of ``workers`` of the hop ``hop`` (its expected_size: this peeler's
    share at hop 0, the hop's batch at a later hop)."""

    hop: HopSettings
    workers: int
    worker: int

    def __post_init__(self) -> None:
        if not isinstance(self.hop, HopSettings):
            raise InvalidParameterError(f"hop must be HopSettings, got {type(self.hop).__name__}")
        _check_workers(self.workers, self.worker)

    @property
    def stage(self) -> str:
        return peeler_stage(self.hop.hop_index, self.worker)

    @property
    def ingress(self) -> str:
        """``.../hop/I/w/P``: hop 0's clients of this share, or a later hop's share of its
        upstream mixer's data frames and its END."""
        hop = self.hop
        return peeler_topic(hop.prefix, hop.round_id, hop.hop_index, self.worker)

    def assembler(self) -> ShareAssembler | None:
        hop = self.hop
        if hop.upstream_verify_key is None:
            return None
        item = message_length(hop.hop_index, hop.n_hops)
        return ShareAssembler(
            hop.round_id,
            hop.manifest_digest,
            hop.hop_index - 1,
            hop.upstream_verify_key,
            workers=self.workers,
            worker=self.worker,
            per_frame=max(1, FRAME_BYTES // item),
        )


def _peeler_round(
    settings: PeelerSettings, private_key: PrivateKey, verifier: ClientVerifier | None
) -> HopRound:
    """The peeler's checks and peeling (a HopRound that never refuses: the mixer decides)."""
    hs = settings.hop
    return HopRound(
        hop_index=hs.hop_index,
        n_hops=hs.n_hops,
        round_id=hs.round_id,
        private_key=private_key,
        expected_size=hs.expected_size,
        min_batch=1,
        verifier=verifier,
        client_share=(settings.workers, settings.worker) if verifier is not None else None,
    )


async def run_peeler(
    transport: Transport,
    settings: PeelerSettings,
    private_key: PrivateKey,
    *,
    verifier: ClientVerifier | None = None,
    state_dir: str | os.PathLike[str] | None = None,
) -> HopResult:
    """Run one peeler for one round (module docstring); its result (``refused`` is always
    None: a peeler reports, the mixer decides). ``state_dir``: journal there and resume from an
    earlier run's journal (the transport must acknowledge manually over a persistent session;
    JournalError if the journal is another stage's or in use)."""
    if not isinstance(settings, PeelerSettings):
        raise InvalidParameterError(
            f"settings must be PeelerSettings, got {type(settings).__name__}"
        )
    hs = settings.hop
    hop = _peeler_round(settings, private_key, verifier)
    item_length = message_length(hs.hop_index + 1, hs.n_hops)
    signer = FrameSigner(
        manifest_digest=hs.manifest_digest,
        round_id=hs.round_id,
        sender=peeler_sender(hs.hop_index, settings.worker),
        signing_key=hs.signing_key,
    )
    sealer = _Sealer(signer=signer, box=SealedBox(private_key.public_key), item_length=item_length)
    journal = None
    if state_dir is not None:
        require_journaling(transport)
        identity = _journal_identity(settings, hop, private_key)
        journal = await asyncio.to_thread(HopJournal.open, state_dir, identity)
    try:
        async with peel_pool(settings.stage) as mapper:
            intake = _PeelIntake(
                settings=hs,
                hop=hop,
                assembler=settings.assembler(),
                sealer=sealer,
                transport=transport,
                mapper=mapper,
                ingress=settings.ingress,
                per_frame=max(1, FRAME_BYTES // item_length),
                burst=OFFER_CHUNK if hs.hop_index == 0 else FRAME_BURST,
                journal=journal,
            )
            if journal is not None:
                await asyncio.to_thread(
                    replay, journal.contents, hop, intake.assembler, mapper=mapper
                )
                intake.pending.extend(hop.drain())  # sent again from frame 0 (_run_peeler)
            return await _run_peeler(transport, settings, intake, signer)
    finally:
        if journal is not None:
            journal.close()


def _journal_identity(
    settings: PeelerSettings, hop: HopRound, private_key: PrivateKey
) -> JournalIdentity:
    """What this peeler's journal belongs to (its own file: ``worker`` names the peeler)."""
    hs = settings.hop
    return JournalIdentity(
        prefix=hs.prefix,
        round_id=hs.round_id,
        hop_index=hs.hop_index,
        n_hops=hs.n_hops,
        input_length=hop.input_length,
        expected_size=hs.expected_size,
        min_batch=1,
        key_id=JournalIdentity.key_id_of(bytes(private_key.public_key)),
        manifest_digest=hs.manifest_digest,
        worker=settings.worker,
    )


async def _run_peeler(
    transport: Transport, settings: PeelerSettings, intake: _PeelIntake, signer: FrameSigner
) -> HopResult:
    hs, name = settings.hop, settings.stage
    mixer = mixer_ready_stage(hs.hop_index)
    async with Stage(
        transport, prefix=hs.prefix, round_id=hs.round_id, name=name, downstream=mixer
    ) as stage:
        desk = _desk(transport, settings, intake.hop)
        if desk is not None:
            stage.aside = desk
            await stage.subscribe(desk.filter)
        await stage.subscribe(intake.ingress)
        await stage.await_downstream(hs.ready_timeout, who=f"{name}: its mixer {mixer}")
        await intake.flush(final=False)  # what a journal's replay peeled (module docstring)
        started = await stage.announce_ready()
        clock = CollectClock(
            stage_index=hs.hop_index, deadline=hs.deadline, ready_at=started, first_arrival=None
        )
        timed_out = await stage.collect(intake, clock)
        await intake.flush(final=True)
        if desk is not None:
            desk.close()
        log = _peeler_log(settings, intake, timed_out)
        if intake.journal is not None:
            log["journal"] = {"resumed_inputs": intake.journal.contents.inputs}
        if desk is not None:
            log.update(desk.log())
        statement, chain = _peeler_statement(settings, intake, log)
        end = encode_end(
            signer=signer,
            item_length=intake.sealer.item_length,
            statement=statement,
            upstream_chain=chain,
        )
        topic = mix_topic(hs.prefix, hs.round_id, hs.hop_index)
        await transport.publish(topic, bytes(intake.sealer.box.encrypt(end)))
        if desk is not None and desk.answers:
            # Every client process of this peeler gets its final receipt before it is done.
            settled = await stage.serve(desk.settled, hs.linger)
            log.update(receipts_sent=desk.receipts_sent, receipts_settled=settled)
        if intake.journal is not None:
            await asyncio.to_thread(intake.journal.remove)  # its END is out: nothing to resume
        await stage.announce("done", log=log)
    return HopResult(log=log, refused=None, stages={name: log})


def _desk(transport: Transport, settings: PeelerSettings, hop: HopRound) -> ReceiptDesk | None:
    """Hop 0's peeler answers the claims of its own client processes (receipts with client
    authentication; without, it only notes what they say they sent)."""
    hs = settings.hop
    if hs.hop_index != 0:
        return None
    return ReceiptDesk(
        transport,
        prefix=hs.prefix,
        round_id=hs.round_id,
        hop=hop,
        roster=hop.roster,
        expected_size=hs.expected_size,
        share=(settings.workers, settings.worker),
    )


def _peeler_log(settings: PeelerSettings, intake: _PeelIntake, timed_out: bool) -> dict[str, Any]:
    """The peeler's counts and what it should have had (``lost`` if short)."""
    hop, assembler = intake.hop, intake.assembler
    log: dict[str, Any] = {
        "stage": settings.stage,
        "accepted": hop.accepted,
        "rejected": hop.rejected,
        "forwarded": intake.forwarded,
        "timed_out": timed_out,
    }
    if assembler is None:
        should = settings.hop.expected_size
        accounted = 0
    else:
        share = assembler.share()
        should = share[1] if share is not None else 0
        accounted = screened(hop.rejected)
        log["upstream_end"] = assembler.statement_digest
        log["frames_rejected"] = dict(assembler.rejected)
        if share is None:
            upstream = f"hop-{settings.hop.hop_index - 1}"
            log["loss"] = f"{upstream}'s END never reached {settings.stage}"
    log["should_have"] = should
    lost = max(0, should - hop.accepted - accounted)
    if lost:
        log["lost"] = lost
        log.setdefault(
            "loss",
            loss_line(lost, should, leg_name(_upstream_of(settings), settings.stage)),
        )
    return log


def _upstream_of(settings: PeelerSettings) -> str:
    j = settings.hop.hop_index
    return "clients" if j == 0 else f"hop-{j - 1}"


def _peeler_statement(
    settings: PeelerSettings, intake: _PeelIntake, log: dict[str, Any]
) -> tuple[EndStatement, tuple[str, ...]]:
    """The peeler's END statement and the upstream chain it carries on."""
    assembler = intake.assembler
    upstream = assembler.statement if assembler is not None else None
    aborted = None
    if upstream is not None and upstream.aborted is not None:
        aborted = f"upstream refused the round: {upstream.aborted}"
    accepted = intake.forwarded if aborted is None else 0
    own = {**log, "accepted": accepted}
    statement = EndStatement(
        stage=settings.stage,
        accepted=accepted,
        forwarded=intake.forwarded if aborted is None else 0,
        frames=intake.frames if aborted is None else 0,
        rejected=dict(intake.hop.rejected),
        aborted=aborted,
        upstream_end=assembler.statement_digest if assembler is not None else None,
        stages={settings.stage: own},
    )
    return statement, (upstream.chain if upstream is not None else ())
