"""A shuffler hop as a service: one round over a transport (HopRound, the pure core, run by a
:class:`~shuffledp.protocol.stage.Stage`: collect, await the downstream's ready, settle).

``await run_hop(transport, settings, private_key)``:

1. subscribe to the hop's ingress topic and to its downstream's status, announce ``ready``;
2. collect: hop 0 offers every client message to :class:`~shuffledp.shuffler.hop.HopRound`
   (length, duplicates, batch-full, decryption; rejections counted by reason); a later hop
   reassembles its upstream's frames (:class:`~shuffledp.protocol.frames.FrameAssembler`) and
   offers their messages. Collection ends when the batch is full (hop 0: ``expected_size``
   accepted), when the upstream's batch is complete (later hops), or at the deadline, whichever
   is first (:func:`~shuffledp.protocol.runtime.closing_time`: hop 0 ``deadline`` seconds after
   ``ready``; a later hop ``deadline`` seconds after its upstream's first frame arrived);
3. close: peel and permute (done by HopRound); below ``min_batch`` the hop refuses to release,
   says why, and tells its downstream (an END frame marked ``aborted``), so nobody waits for a
   batch that will not come;
4. wait for the downstream's ``ready``, publish the permuted batch as frames and the END frame
   carrying this hop's signed statement (its round log) and the chain of every hop's signed
   statement so far (:mod:`~shuffledp.protocol.end_chain`), announce ``done``.

End-to-end delivery and accounting: hop 0 answers the client processes' claims with receipts
(:class:`~shuffledp.shuffler.receipts.ReceiptDesk`, while collecting and, after its batch is
out, until every process has its final receipt or ``linger`` seconds). At close every hop
compares what it should have (hop 0: ``expected_size``; a later hop: its upstream's forwarded
count) with what it accepted and rejected; a shortfall refuses the round with the loss's one
line (``lost N of M reports between clients and hop-0``) unless ``accept_loss``. Past its
deadline a hop still takes what was delivered (Stage.collect drains) before it closes.

The round log of a hop (in the END frame, the status and the process's log): accepted, rejected
by reason, forwarded, whether the deadline closed the round, the randomness used, timings.

Surviving a crash (``state_dir``; Mosquitto, see below): the hop keeps a journal
(:mod:`~shuffledp.protocol.journal`) and acknowledges each burst of inputs (client messages or
upstream frames) only after the burst is on disk, so what the broker forgot is in the journal and
what is not in the journal the broker delivers again. Before publishing anything downstream it
journals the released batch. Restarted with the same arguments after a SIGKILL, it replays the
journal (the same accepted messages, seen-set and counts; a redelivered message is then a
``duplicate``), announces ``ready`` again and continues; if the batch had been released, it
publishes exactly the same frames again. The journal is removed once the END frame is out. The
transport must acknowledge manually over a persistent session with a client id stable across
restarts (``MqttTransport(manual_ack=True, persistent_session=True)``); the embedded amqtt broker
redelivers nothing after a reconnect, so this holds on Mosquitto only. A restarted hop's deadline
counts from its new ``ready``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nacl.public import PrivateKey
from nacl.signing import SigningKey, VerifyKey

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.client_auth import ClientRoster, ClientVerifier
from shuffledp.protocol.delivery import leg_name, loss_line, loss_reasons, screened
from shuffledp.protocol.end_statement import EndStatement
from shuffledp.protocol.frames import (
    FrameAssembler,
    FrameSigner,
    encode_batch,
    encode_end,
    require_signing_key,
    require_verify_key,
)
from shuffledp.protocol.journal import (
    ClosedBatch,
    HopJournal,
    JournalIdentity,
    feed_inputs,
    replay,
)
from shuffledp.protocol.onion import message_length
from shuffledp.protocol.record import MAX_ROUND_ID, require_manifest_digest
from shuffledp.protocol.runtime import peel_pool
from shuffledp.protocol.screen import Mapper
from shuffledp.protocol.stage import CollectClock, Stage
from shuffledp.protocol.topics import analyzer_topic, ingress_topic, validate_prefix
from shuffledp.protocol.transport import Transport, publish_all, require_journaling
from shuffledp.randomness import RandomLike, RandomSource, as_random_source
from shuffledp.shuffler.hop import BatchTooSmall, HopRound
from shuffledp.shuffler.receipts import ReceiptDesk
from shuffledp.validation import require_int, require_positive

__all__ = ["HopResult", "HopSettings", "run_hop", "stage_name"]

logger = logging.getLogger("shuffledp.hop")

OFFER_CHUNK = 4096
"""Messages peeled per worker-thread call (peeling runs off the event loop, which must keep
answering the broker's keep-alives during a large batch)."""
FRAME_BURST = 16
"""Upstream frames (up to 256 KiB each) taken, journaled and acknowledged together."""


def stage_name(hop_index: int, n_hops: int) -> str:
    """ "hop-I" for a hop, "analyzer" for stage index n_hops."""
    return "analyzer" if hop_index == n_hops else f"hop-{hop_index}"


@dataclass(frozen=True, slots=True, kw_only=True)
class HopSettings:
    """One hop's parameters for one round (validated on construction).

    ``expected_size``: the round's batch size (the number of clients); ``min_batch`` in
    [1, expected_size]: below it the hop refuses to release; ``deadline`` > 0: when collection
    stops if the batch is not complete (``closing_time``: for hop 0 seconds after ``ready``, for
    a later hop seconds after the upstream's first frame); ``ready_timeout`` > 0: seconds to
    wait for the downstream's ``ready`` before giving up. ``accept_loss`` (``--accept-loss``):
    release a batch smaller than what this hop should have (hop 0: ``expected_size``; a later
    hop: what its upstream forwarded) instead of refusing the round with the loss's one line;
    ``linger`` > 0: seconds hop 0 keeps answering claims after its batch is out, until every
    client process has its final receipt.

    What binds the hop to its round (from the round manifest): ``manifest_digest`` (32 bytes,
    the manifest's identity: every frame says it), ``signing_key`` (this hop's Ed25519 key: it
    signs every frame and its END statement), ``upstream_verify_key`` (the verify key of hop
    ``hop_index - 1``, whose frames this hop takes; None at hop 0, which takes client messages).
    """

    prefix: str
    round_id: int
    hop_index: int
    n_hops: int
    expected_size: int
    min_batch: int
    deadline: float
    manifest_digest: bytes
    signing_key: SigningKey = field(repr=False)
    upstream_verify_key: VerifyKey | None
    ready_timeout: float = 60.0
    accept_loss: bool = False
    linger: float = 10.0

    def __post_init__(self) -> None:
        validate_prefix(self.prefix)
        require_int("round_id", self.round_id, 0, MAX_ROUND_ID)
        require_int("n_hops", self.n_hops, 1)
        require_int("hop_index", self.hop_index, 0, self.n_hops - 1, bound="[0, n_hops - 1]")
        require_int("expected_size", self.expected_size, 1)
        require_int("min_batch", self.min_batch, 1, self.expected_size, bound="[1, expected_size]")
        require_positive("deadline", self.deadline)
        require_positive("ready_timeout", self.ready_timeout)
        if not isinstance(self.accept_loss, bool):
            raise InvalidParameterError(
                f"--accept-loss must be True or False, got {self.accept_loss!r}"
            )
        require_positive("linger", self.linger)
        require_manifest_digest(self.manifest_digest)
        require_signing_key(self.signing_key)
        if self.hop_index == 0 and self.upstream_verify_key is not None:
            raise InvalidParameterError(
                "upstream_verify_key must be None at hop 0 (it takes client messages, not "
                f"frames), got {type(self.upstream_verify_key).__name__}"
            )
        if self.hop_index > 0:
            require_verify_key(
                self.upstream_verify_key,
                f"upstream_verify_key (hop-{self.hop_index - 1}'s signing key, whose frames "
                f"hop-{self.hop_index} takes)",
            )

    def frame_signer(self) -> FrameSigner:
        """This hop's signature on its frames (manifest, round, sender = hop_index)."""
        return FrameSigner(
            manifest_digest=self.manifest_digest,
            round_id=self.round_id,
            sender=self.hop_index,
            signing_key=self.signing_key,
        )

    def frame_assembler(self) -> FrameAssembler | None:
        """The assembler of the upstream hop's frames (None at hop 0)."""
        if self.upstream_verify_key is None:
            return None
        return FrameAssembler(
            self.round_id, self.manifest_digest, self.hop_index - 1, self.upstream_verify_key
        )

    @property
    def stage(self) -> str:
        return stage_name(self.hop_index, self.n_hops)

    @property
    def downstream(self) -> str:
        return stage_name(self.hop_index + 1, self.n_hops)

    @property
    def ingress(self) -> str:
        return ingress_topic(self.prefix, self.round_id, self.hop_index)

    @property
    def egress(self) -> str:
        if self.hop_index + 1 == self.n_hops:
            return analyzer_topic(self.prefix, self.round_id)
        return ingress_topic(self.prefix, self.round_id, self.hop_index + 1)


@dataclass(slots=True, kw_only=True)
class HopResult:
    """What a hop did in its round: ``log`` (this hop's round log), ``refused`` (why it
    released nothing, or None: a loss not accepted is refused with its one line), ``stages``
    (the upstream hop's log, from its END, and this one's)."""

    log: dict[str, Any]
    refused: str | None
    stages: dict[str, Any] = field(default_factory=dict)

    @property
    def lost(self) -> int:
        """Genuine reports this hop should have had and did not (``log["lost"]``)."""
        return int(self.log.get("lost", 0))

    @property
    def refused_for_loss(self) -> bool:
        """True iff the round was refused because reports were lost (no ``accept_loss``)."""
        return self.refused is not None and self.lost > 0 and not self.log.get("loss_accepted")


async def run_hop(
    transport: Transport,
    settings: HopSettings,
    private_key: PrivateKey,
    *,
    rng: RandomLike = None,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    verifier: ClientVerifier | None = None,
    state_dir: str | os.PathLike[str] | None = None,
) -> HopResult:
    """Run hop ``settings.hop_index`` for one round (module docstring). ``verifier`` (hop 0
    only): check one authentic report per enrolled client (HopRound). Returns its result;
    raises NotReadyError if the downstream never announced ready (nothing was published then),
    InvalidParameterError for bad settings or key. ``state_dir``: keep a journal there and
    acknowledge inputs only once journaled, resuming from an earlier run's journal (module
    docstring; the transport must be an AcknowledgingTransport); JournalError if the journal
    belongs to other settings, is in use by another process or cannot be written."""
    if not isinstance(settings, HopSettings):
        raise InvalidParameterError(f"settings must be HopSettings, got {type(settings).__name__}")
    source: RandomSource = as_random_source(rng)
    hop = HopRound(
        hop_index=settings.hop_index,
        n_hops=settings.n_hops,
        round_id=settings.round_id,
        private_key=private_key,
        expected_size=settings.expected_size,
        min_batch=settings.min_batch,
        rng=source,
        verifier=verifier,
    )
    assembler = settings.frame_assembler()
    journal: HopJournal | None = None
    if state_dir is not None:
        require_journaling(transport)
        identity = JournalIdentity(
            prefix=settings.prefix,
            round_id=settings.round_id,
            hop_index=settings.hop_index,
            n_hops=settings.n_hops,
            input_length=hop.input_length,
            expected_size=settings.expected_size,
            min_batch=settings.min_batch,
            key_id=JournalIdentity.key_id_of(bytes(private_key.public_key)),
            manifest_digest=settings.manifest_digest,
        )
        journal = await asyncio.to_thread(HopJournal.open, state_dir, identity)
    try:
        async with peel_pool(settings.stage) as mapper:
            if journal is not None and journal.contents.closed is None:
                await asyncio.to_thread(replay, journal.contents, hop, assembler, mapper=mapper)
            intake = _HopIntake(
                settings=settings, hop=hop, assembler=assembler, journal=journal, mapper=mapper
            )
            roster = verifier.roster if verifier is not None else None
            return await _run_hop(transport, settings, intake, source, on_progress, roster)
    finally:
        if journal is not None:
            journal.close()


@dataclass(slots=True, kw_only=True)
class _HopIntake:
    """What hop ``settings.hop_index`` does with a burst of inputs (a :class:`Intake`): hop 0
    offers client messages to HopRound, a later hop reassembles its upstream's frames first;
    with a journal, the burst is journaled while it is offered (in parallel threads)."""

    settings: HopSettings
    hop: HopRound
    assembler: FrameAssembler | None
    journal: HopJournal | None
    mapper: Mapper
    ingress: str = field(init=False)  # built once: a topic validates the prefix
    burst: int = field(init=False)

    def __post_init__(self) -> None:
        self.ingress = self.settings.ingress
        self.burst = OFFER_CHUNK if self.assembler is None else FRAME_BURST

    def complete(self) -> bool:
        """Hop 0: the batch is full; a later hop: the upstream's batch is complete."""
        return self.hop.is_full if self.assembler is None else self.assembler.complete

    def counts(self) -> dict[str, Any]:
        counts = {"accepted": self.hop.accepted, "rejected": sum(self.hop.rejected.values())}
        counts["expected"] = self.settings.expected_size
        return counts

    async def take(self, payloads: list[bytes]) -> None:
        hop, assembler, journal, mapper = self.hop, self.assembler, self.journal, self.mapper
        if journal is None and assembler is None and len(payloads) < 64:
            feed_inputs(hop, None, payloads)  # a thread hop would cost more than the peeling
        elif journal is None:
            await asyncio.to_thread(feed_inputs, hop, assembler, payloads, mapper=mapper)
        else:  # journaled by the journal's writer thread while it is offered
            written = asyncio.wrap_future(journal.submit_inputs(payloads))
            await asyncio.gather(
                asyncio.to_thread(feed_inputs, hop, assembler, payloads, mapper=mapper), written
            )

    def upstream_aborted(self) -> str | None:
        """Why the upstream refused the round (its END frame's ``aborted``), or None."""
        if self.assembler is not None and self.assembler.complete:
            aborted = (self.assembler.log or {}).get("aborted")
            if aborted:
                return str(aborted)
        return None


@dataclass(slots=True, kw_only=True)
class _Release:
    """What a hop releases downstream: the permuted ``messages`` (none if ``refused``), its
    round ``log``, the upstream's log and this one (``stages``) and the signed statements of
    the hops before it (``chain``, from the upstream's END: its END carries them on)."""

    messages: list[bytes]
    refused: str | None
    log: dict[str, Any]
    stages: dict[str, Any]
    timed_out: bool
    chain: tuple[str, ...] = ()


def _first_log(
    settings: HopSettings, hop: HopRound, source: RandomSource, journal: HopJournal | None
) -> dict[str, Any]:
    log: dict[str, Any] = {
        "stage": settings.stage,
        "randomness": source.name,
        "clients_authenticated": hop.authenticated,
    }
    if journal is not None:
        log["journal"] = {
            "resumed_inputs": journal.contents.inputs,
            "resumed_closed": journal.contents.closed is not None,
            "dropped_bytes": journal.contents.dropped_bytes,
        }
    return log


def _journal_log(log: dict[str, Any], journal: HopJournal | None) -> None:
    if journal is not None:
        log["journal"].update(
            syncs=journal.syncs,
            bytes=journal.bytes_written,
            sync_seconds=round(journal.sync_seconds, 6),
        )


async def _run_hop(
    transport: Transport,
    settings: HopSettings,
    intake: _HopIntake,
    source: RandomSource,
    on_progress: Callable[[dict[str, Any]], None] | None,
    roster: ClientRoster | None,
) -> HopResult:
    journal = intake.journal
    resumed = journal.contents.closed if journal is not None else None
    log = _first_log(settings, intake.hop, source, journal)
    async with Stage(
        transport,
        prefix=settings.prefix,
        round_id=settings.round_id,
        name=settings.stage,
        downstream=settings.downstream,
        on_progress=on_progress,
    ) as stage:
        desk = None
        if settings.hop_index == 0 and resumed is None:
            # Hop 0 answers the client processes' claims (end-to-end delivery); a hop 0
            # resumed after its release has forgotten who reported: it answers nothing.
            desk = ReceiptDesk(
                transport,
                prefix=settings.prefix,
                round_id=settings.round_id,
                hop=intake.hop,
                roster=roster,
                expected_size=settings.expected_size,
            )
            stage.aside = desk
            await stage.subscribe(desk.filter)
        await stage.subscribe(intake.ingress)
        started = await stage.announce_ready()
        log["ready_at"] = time.time()
        if resumed is None:
            timed_out = await _collect(stage, intake, started)
            collected = time.monotonic()
            await stage.progress(**intake.counts())
            if desk is not None:
                desk.close()
                log.update(desk.log())
            release = await _close(settings, intake, log, timed_out, collected - started)
        else:
            collected = time.monotonic()
            release = _resume(settings, resumed, log)
        await _forward(stage, settings, release, collected, journal, desk)
    _log_outcome(settings, release)
    return HopResult(log=release.log, refused=release.refused, stages=release.stages)


async def _collect(stage: Stage, intake: _HopIntake, started: float) -> bool:
    """Collect (Stage.collect) until the batch is complete or the deadline; True iff the
    deadline closed it."""
    assembler = intake.assembler
    clock = CollectClock(
        stage_index=intake.settings.hop_index,
        deadline=intake.settings.deadline,
        ready_at=started,
        # frames resumed from the journal: the upstream's batch has begun arriving
        first_arrival=started if assembler is not None and assembler.frames_received else None,
    )
    return await stage.collect(intake, clock)


def _resume(settings: HopSettings, resumed: ClosedBatch, log: dict[str, Any]) -> _Release:
    """Released before the restart: the same batch, order and logs again."""
    log = {**resumed.log, "journal": log["journal"]}
    return _Release(
        messages=resumed.messages,
        refused=resumed.refused,
        log=log,
        stages={**resumed.stages, settings.stage: log},
        timed_out=bool(log.get("timed_out")),
        chain=resumed.chain,
    )


async def _close(
    settings: HopSettings,
    intake: _HopIntake,
    log: dict[str, Any],
    timed_out: bool,
    collect_seconds: float,
) -> _Release:
    """Peel and permute (HopRound.close), or refuse (below min_batch, or the upstream refused);
    with a journal, the released batch is on disk before the first frame goes out."""
    hop, assembler, journal = intake.hop, intake.assembler, intake.journal
    upstream_aborted = intake.upstream_aborted()
    stages: dict[str, Any] = {}
    refused: str | None = None
    messages: list[bytes] = []
    chain: tuple[str, ...] = ()
    if assembler is not None:
        if assembler.statement is not None:
            stages.update(assembler.statement.stages)
            chain = assembler.statement.chain
        log["frames_rejected"] = dict(assembler.rejected)
        log["upstream_complete"] = assembler.complete
        log["upstream_end"] = assembler.statement_digest
    log["timed_out"] = timed_out
    if upstream_aborted is not None:
        said = "upstream refused the round: "
        refused = upstream_aborted if upstream_aborted.startswith(said) else said + upstream_aborted
    else:
        refused = _account(settings, intake, log)
    if refused is None:
        try:
            output = await asyncio.to_thread(hop.close)
            messages = output.messages
        except BatchTooSmall as exc:
            refused = str(exc)
    log.update(
        accepted=hop.accepted,
        rejected=hop.rejected,
        forwarded=len(messages),
        collect_seconds=round(collect_seconds, 6),
    )
    stages[settings.stage] = log
    if journal is not None:
        # On disk before the first frame goes out: a restart publishes these again.
        _journal_log(log, journal)
        batch = ClosedBatch(
            messages=messages,
            item_length=message_length(settings.hop_index + 1, settings.n_hops),
            refused=refused,
            log=log,
            stages=stages,
            chain=chain,
        )
        await asyncio.wrap_future(journal.submit_closed(batch))
    return _Release(
        messages=messages,
        refused=refused,
        log=log,
        stages=stages,
        timed_out=timed_out,
        chain=chain,
    )


def _account(settings: HopSettings, intake: _HopIntake, log: dict[str, Any]) -> str | None:
    """Compare what this hop should have with what it accepted (``should_have``, ``lost`` and
    ``loss`` in its log): hop 0 should have every expected report, a later hop what its
    upstream's END frame says it forwarded (the round's expected size if that never came).
    The loss's one line if the round must be refused for it (no ``accept_loss``), else None."""
    hop, assembler = intake.hop, intake.assembler
    detail = ""
    if assembler is None:
        should, source = settings.expected_size, "clients"
        if "clients_sent" in log:
            detail = f"the client processes said they sent {int(log['clients_sent']):,}"
    else:
        source = stage_name(settings.hop_index - 1, settings.n_hops)
        announced = assembler.expected_messages
        if announced is None:
            should, detail = settings.expected_size, f"{source}'s END frame never arrived"
        else:
            should = announced
    log["should_have"] = should
    # A later hop accounts for what it screened out (counted by reason), but a batch-full or
    # decryption-failed message came in its upstream's signed frames: a report lost here
    # (protocol/delivery.py). Hop 0 accounts for nothing it rejects: what it rejects is not a
    # genuine report, and every expected one is owed.
    accounted = 0 if assembler is None else screened(hop.rejected)
    lost = max(0, should - hop.accepted - accounted)
    if not lost:
        return None
    if assembler is not None and loss_reasons(hop.rejected):
        detail = "; ".join(filter(None, [detail, loss_reasons(hop.rejected)]))
    line = loss_line(lost, should, leg_name(source, settings.stage), detail)
    log.update(lost=lost, loss=line, loss_accepted=settings.accept_loss)
    return None if settings.accept_loss else line


async def _forward(
    stage: Stage,
    settings: HopSettings,
    release: _Release,
    collected: float,
    journal: HopJournal | None,
    desk: ReceiptDesk | None = None,
) -> None:
    """Once the downstream is ready: the batch as signed frames, the signed END statement (this
    hop's log; its chain: the upstream's chain and this hop's STATEMENT frame), then ``done``
    (or ``refused``)."""
    await stage.await_downstream(
        settings.ready_timeout,
        who=f"{settings.stage} of round {settings.round_id}: {settings.downstream}",
    )
    egress, messages, log = settings.egress, release.messages, release.log
    item_length = message_length(settings.hop_index + 1, settings.n_hops)
    signer = settings.frame_signer()
    frames = await asyncio.to_thread(encode_batch, messages, signer=signer, item_length=item_length)
    await publish_all(stage.transport, ((egress, frame) for frame in frames))
    log["forward_seconds"] = round(time.monotonic() - collected, 6)
    statement = EndStatement(
        stage=settings.stage,
        accepted=int(log.get("accepted", 0)),
        forwarded=len(messages),
        frames=len(frames),
        rejected=dict(log.get("rejected", {})),
        aborted=release.refused,
        upstream_end=log.get("upstream_end"),
        stages={settings.stage: log},
    )
    end = encode_end(
        signer=signer, item_length=item_length, statement=statement, upstream_chain=release.chain
    )
    await stage.transport.publish(egress, end)
    if journal is not None:
        _journal_log(log, journal)
        await asyncio.to_thread(journal.remove)  # forwarded: nothing left to recover
    if desk is not None and desk.answers:
        # Every client process gets its final receipt before hop 0 says it is done.
        settled = await stage.serve(desk.settled, settings.linger)
        log.update(receipts_sent=desk.receipts_sent, receipts_settled=settled)
    await stage.announce("refused" if release.refused else "done", log=log)


def _log_outcome(settings: HopSettings, release: _Release) -> None:
    stage, log = settings.stage, release.log
    if release.refused:
        logger.warning("%s round %d refused: %s", stage, settings.round_id, release.refused)
    logger.info(
        "%s round %d: accepted %d, forwarded %d, rejected %s%s",
        stage,
        settings.round_id,
        log.get("accepted", 0),
        len(release.messages),
        log.get("rejected", {}),
        " (deadline)" if release.timed_out else "",
    )
