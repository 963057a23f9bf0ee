"""A shuffler hop as a service: one round over a transport (thin asyncio shell over HopRound).

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
   carrying every stage's round log so far, announce ``done``.

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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from nacl.public import PrivateKey

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.client_auth import ClientVerifier
from shuffledp.protocol.frames import FrameAssembler, encode_batch, encode_end
from shuffledp.protocol.journal import (
    ClosedBatch,
    HopJournal,
    JournalIdentity,
    feed_inputs,
    replay,
)
from shuffledp.protocol.onion import message_length
from shuffledp.protocol.record import MAX_ROUND_ID
from shuffledp.protocol.runtime import (
    READY_STATES,
    Inbox,
    NotReadyError,
    closing_time,
    decode_json,
    peel_pool,
    publish_progress,
    publish_state,
    retained_status,
)
from shuffledp.protocol.screen import Mapper
from shuffledp.protocol.topics import analyzer_topic, ingress_topic, status_topic, validate_prefix
from shuffledp.protocol.transport import (
    AcknowledgingTransport,
    Message,
    Transport,
    publish_all,
    require_journaling,
)
from shuffledp.randomness import RandomLike, RandomSource, as_random_source
from shuffledp.shuffler.hop import BatchTooSmall, HopRound
from shuffledp.validation import require_int, require_positive

__all__ = ["HopResult", "HopSettings", "run_hop", "stage_name"]

logger = logging.getLogger("shuffledp.hop")

PROGRESS_INTERVAL = 0.5
"""Seconds between progress messages while a stage works."""
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
    wait for the downstream's ``ready`` before giving up.
    """

    prefix: str
    round_id: int
    hop_index: int
    n_hops: int
    expected_size: int
    min_batch: int
    deadline: float
    ready_timeout: float = 60.0

    def __post_init__(self) -> None:
        validate_prefix(self.prefix)
        require_int("round_id", self.round_id, 0, MAX_ROUND_ID)
        require_int("n_hops", self.n_hops, 1)
        require_int("hop_index", self.hop_index, 0, self.n_hops - 1, bound="[0, n_hops - 1]")
        require_int("expected_size", self.expected_size, 1)
        require_int("min_batch", self.min_batch, 1, self.expected_size, bound="[1, expected_size]")
        require_positive("deadline", self.deadline)
        require_positive("ready_timeout", self.ready_timeout)

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
    released nothing, or None), ``stages`` (every stage's log so far, this one included)."""

    log: dict[str, Any]
    refused: str | None
    stages: dict[str, Any] = field(default_factory=dict)


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
    assembler = FrameAssembler(settings.round_id) if settings.hop_index > 0 else None
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
        )
        journal = await asyncio.to_thread(HopJournal.open, state_dir, identity)
    try:
        async with peel_pool(settings.stage) as mapper:
            if journal is not None and journal.contents.closed is None:
                await asyncio.to_thread(replay, journal.contents, hop, assembler, mapper=mapper)
            return await _run_hop(
                transport, settings, hop, assembler, journal, source, mapper, on_progress
            )
    finally:
        if journal is not None:
            journal.close()


async def _run_hop(
    transport: Transport,
    settings: HopSettings,
    hop: HopRound,
    assembler: FrameAssembler | None,
    journal: HopJournal | None,
    source: RandomSource,
    mapper: Mapper,
    on_progress: Callable[[dict[str, Any]], None] | None,
) -> HopResult:
    stage = settings.stage
    ingress, egress = settings.ingress, settings.egress  # built once: topics validate the prefix
    downstream_status = status_topic(settings.prefix, settings.round_id, settings.downstream)
    item_length = message_length(settings.hop_index + 1, settings.n_hops)
    log: dict[str, Any] = {
        "stage": stage,
        "randomness": source.name,
        "clients_authenticated": hop.authenticated,
    }
    downstream_ready = False
    upstream_aborted: str | None = None
    acknowledging = transport if isinstance(transport, AcknowledgingTransport) else None
    resumed = journal.contents.closed if journal is not None else None
    if journal is not None:
        log["journal"] = {
            "resumed_inputs": journal.contents.inputs,
            "resumed_closed": resumed is not None,
            "dropped_bytes": journal.contents.dropped_bytes,
        }

    def note_status(payload: bytes) -> None:
        nonlocal downstream_ready
        body = decode_json(payload)  # an empty payload: the status was cleared, the stage left
        downstream_ready = body is not None and body.get("state") in READY_STATES

    def settle(messages: Iterable[Message]) -> None:
        """Acknowledge ``messages``: the broker may forget them (they are journaled or were not
        to be kept). Every message is settled, else the broker's window of unacknowledged
        messages fills up and it stops delivering, the downstream's status included."""
        if acknowledging is not None:
            for message in messages:
                acknowledging.ack(message)

    def collected_all() -> bool:
        """Hop 0: the batch is full; a later hop: the upstream's batch is complete."""
        return hop.is_full if assembler is None else assembler.complete

    async def take(messages: list[Message]) -> None:
        """Offer a burst of inputs and journal it (in parallel threads), then acknowledge it."""
        payloads = [message.payload for message in messages]
        if journal is None and assembler is None and len(payloads) < 64:
            feed_inputs(hop, None, payloads)  # a thread hop would cost more than the peeling
        elif journal is None:
            await asyncio.to_thread(feed_inputs, hop, assembler, payloads, mapper=mapper)
        else:
            await asyncio.gather(
                asyncio.to_thread(feed_inputs, hop, assembler, payloads, mapper=mapper),
                asyncio.to_thread(journal.append_inputs, payloads),
            )
        settle(messages)

    def journal_log() -> None:
        if journal is not None:
            log["journal"].update(
                syncs=journal.syncs,
                bytes=journal.bytes_written,
                sync_seconds=round(journal.sync_seconds, 6),
            )

    async with (
        Inbox(transport, name=f"{stage}-inbox") as inbox,
        retained_status(transport, settings.prefix, settings.round_id, stage),
    ):
        await transport.subscribe(ingress)
        await transport.subscribe(downstream_status)
        await publish_state(transport, settings.prefix, settings.round_id, stage, "ready")
        started = time.monotonic()
        log["ready_at"] = time.time()
        next_progress = started + PROGRESS_INTERVAL
        timed_out = False

        async def progress() -> None:
            counts = {"accepted": hop.accepted, "rejected": sum(hop.rejected.values())}
            counts["expected"] = settings.expected_size
            if on_progress is not None:
                on_progress(counts)
            await publish_progress(transport, settings.prefix, settings.round_id, stage, **counts)

        # --- collect (nothing to collect if the batch was released before a restart) -----
        first_arrival: float | None = None
        if assembler is not None and assembler.frames_received:  # resumed from the journal
            first_arrival = started
        while resumed is None and not collected_all():
            now = time.monotonic()
            close_at = closing_time(
                stage_index=settings.hop_index,
                ready_at=started,
                first_arrival=first_arrival,
                deadline=settings.deadline,
            )
            if now >= close_at:
                timed_out = True
                break
            if now >= next_progress:
                await progress()
                next_progress = now + PROGRESS_INTERVAL
            message = await inbox.get(min(close_at, next_progress) - now)
            if message is None:
                continue
            # Take every message that has already arrived and offer them together (one thread
            # hop, parallel peeling, one journal fsync for the burst).
            burst_limit = OFFER_CHUNK if assembler is None else FRAME_BURST
            inputs: list[Message] = []
            others: list[Message] = []
            for item in [message, *inbox.drain(burst_limit - 1)]:
                if item.topic == ingress:
                    inputs.append(item)
                else:
                    if item.topic == downstream_status:
                        note_status(item.payload)
                    others.append(item)
            settle(others)
            if not inputs:
                continue
            if first_arrival is None:
                first_arrival = time.monotonic()
            await take(inputs)
        if assembler is not None and assembler.complete:
            aborted = (assembler.log or {}).get("aborted")
            if aborted:
                upstream_aborted = str(aborted)
        collected = time.monotonic()
        if resumed is None:
            await progress()

        # --- close -----------------------------------------------------------------------
        stages: dict[str, Any] = {}
        refused: str | None = None
        messages: list[bytes] = []
        if resumed is not None:
            # Released before the restart: the same batch, order and logs again.
            messages, refused = resumed.messages, resumed.refused
            log = {**resumed.log, "journal": log["journal"]}
            stages = {**resumed.stages, stage: log}
            timed_out = bool(log.get("timed_out"))
        else:
            if assembler is not None:
                stages.update((assembler.log or {}).get("stages", {}))
                log["frames_rejected"] = dict(assembler.rejected)
                log["upstream_complete"] = assembler.complete
            log["timed_out"] = timed_out
            if upstream_aborted is not None:
                refused = f"upstream refused the round: {upstream_aborted}"
            else:
                try:
                    output = await asyncio.to_thread(hop.close)
                    messages = output.messages
                except BatchTooSmall as exc:
                    refused = str(exc)
            log.update(
                accepted=hop.accepted,
                rejected=hop.rejected,
                forwarded=len(messages),
                collect_seconds=round(collected - started, 6),
            )
            stages[stage] = log
            if journal is not None:
                # On disk before the first frame goes out: a restart publishes these again.
                journal_log()
                batch = ClosedBatch(
                    messages=messages,
                    item_length=item_length,
                    refused=refused,
                    log=log,
                    stages=stages,
                )
                await asyncio.to_thread(journal.append_closed, batch)
        end_log: dict[str, Any] = {"stages": stages, "aborted": refused}

        # --- forward ---------------------------------------------------------------------
        deadline = time.monotonic() + settings.ready_timeout
        while not downstream_ready:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                await publish_state(
                    transport,
                    settings.prefix,
                    settings.round_id,
                    stage,
                    "failed",
                    error=f"{settings.downstream} not ready",
                )
                raise NotReadyError(
                    f"{stage} of round {settings.round_id}: {settings.downstream} did not "
                    f"announce ready within {settings.ready_timeout} s (is it running, on the "
                    f"same broker, with prefix {settings.prefix!r}?)"
                )
            message = await inbox.get(remaining)
            if message is not None:
                settle([message])
                if message.topic == downstream_status:
                    note_status(message.payload)

        frames = encode_batch(messages, round_id=settings.round_id, item_length=item_length)
        await publish_all(transport, ((egress, frame) for frame in frames))
        log["forward_seconds"] = round(time.monotonic() - collected, 6)
        await transport.publish(
            egress,
            encode_end(
                round_id=settings.round_id,
                frames=len(frames),
                messages=len(messages),
                item_length=item_length,
                log=end_log,
            ),
        )
        if journal is not None:
            journal_log()
            await asyncio.to_thread(journal.remove)  # forwarded: nothing left to recover
        state = "refused" if refused else "done"
        await publish_state(transport, settings.prefix, settings.round_id, stage, state, log=log)
    if refused:
        logger.warning("%s round %d refused: %s", stage, settings.round_id, refused)
    logger.info(
        "%s round %d: accepted %d, forwarded %d, rejected %s%s",
        stage,
        settings.round_id,
        log.get("accepted", 0),
        len(messages),
        log.get("rejected", {}),
        " (deadline)" if timed_out else "",
    )
    return HopResult(log=log, refused=refused, stages=stages)
