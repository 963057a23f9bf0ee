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
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nacl.public import PrivateKey

from shuffledp.accountant.mechanism import InvalidParameterError, require_int, require_positive
from shuffledp.protocol.frames import FrameAssembler, encode_batch, encode_end
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
from shuffledp.protocol.transport import Transport, publish_all
from shuffledp.randomness import RandomSource, SystemRandom
from shuffledp.shuffler.hop import BatchTooSmall, HopRound

__all__ = ["HopResult", "HopSettings", "run_hop", "stage_name"]

logger = logging.getLogger("shuffledp.hop")

PROGRESS_INTERVAL = 0.5
"""Seconds between progress messages while a stage works."""
OFFER_CHUNK = 4096
"""Messages peeled per worker-thread call (peeling runs off the event loop, which must keep
answering the broker's keep-alives during a large batch)."""


def stage_name(hop_index: int, n_hops: int) -> str:
    """ "hop-I" for a hop, "analyzer" for stage index n_hops."""
    return "analyzer" if hop_index == n_hops else f"hop-{hop_index}"


@dataclass(frozen=True, slots=True, kw_only=True)
class HopSettings:
    """One hop's parameters for one round (validated on construction).

    ``expected_size``: the round's batch size (the number of clients); ``min_batch`` in
    [1, expected_size]: below it the hop refuses to release; ``deadline`` > 0: when collection
    stops if the batch is not complete (``closing_time``: for hop 0 seconds after ``ready``, for
    a later hop seconds after the upstream's first frame); ``ready_timeout`` > 0: seconds to wait for the
    downstream's ``ready`` before giving up.
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
    rng: RandomSource | None = None,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
) -> HopResult:
    """Run hop ``settings.hop_index`` for one round (module docstring). Returns its result;
    raises NotReadyError if the downstream never announced ready (nothing was published then),
    InvalidParameterError for bad settings or key."""
    if not isinstance(settings, HopSettings):
        raise InvalidParameterError(f"settings must be HopSettings, got {type(settings).__name__}")
    source: RandomSource = rng if rng is not None else SystemRandom()
    hop = HopRound(
        hop_index=settings.hop_index,
        n_hops=settings.n_hops,
        round_id=settings.round_id,
        private_key=private_key,
        expected_size=settings.expected_size,
        min_batch=settings.min_batch,
        rng=source,
    )
    async with peel_pool(settings.stage) as mapper:
        return await _run_hop(transport, settings, hop, source, mapper, on_progress)


async def _run_hop(
    transport: Transport,
    settings: HopSettings,
    hop: HopRound,
    source: RandomSource,
    mapper: Mapper,
    on_progress: Callable[[dict[str, Any]], None] | None,
) -> HopResult:
    stage = settings.stage
    ingress, egress = settings.ingress, settings.egress  # built once: topics validate the prefix
    downstream_status = status_topic(settings.prefix, settings.round_id, settings.downstream)
    assembler = FrameAssembler(settings.round_id) if settings.hop_index > 0 else None
    log: dict[str, Any] = {"stage": stage, "randomness": source.name}
    downstream_ready = False
    upstream_aborted: str | None = None

    def note_status(payload: bytes) -> None:
        nonlocal downstream_ready
        body = decode_json(payload)  # an empty payload: the status was cleared, the stage left
        downstream_ready = body is not None and body.get("state") in READY_STATES

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

        # --- collect ---------------------------------------------------------------------
        first_arrival: float | None = None
        while True:
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
            if message.topic == downstream_status:
                note_status(message.payload)
                continue
            if message.topic != ingress:
                continue
            if first_arrival is None:
                first_arrival = time.monotonic()
            if assembler is None:
                # Hop 0: one message per client. Take every message that has already arrived
                # and offer them together (one thread hop and parallel peeling for a burst).
                burst = [message, *inbox.drain(OFFER_CHUNK - 1)]
                payloads = []
                for item in burst:
                    if item.topic == ingress:
                        payloads.append(item.payload)
                    elif item.topic == downstream_status:
                        note_status(item.payload)
                if len(payloads) < 64:
                    hop.offer_many(payloads)
                else:
                    await asyncio.to_thread(hop.offer_many, payloads, mapper=mapper)
                if hop.is_full:
                    break
                continue
            items = list(assembler.add(message.payload))
            for start in range(0, len(items), OFFER_CHUNK):
                chunk = items[start : start + OFFER_CHUNK]
                await asyncio.to_thread(hop.offer_many, chunk, mapper=mapper)
            if assembler.complete:
                aborted = (assembler.log or {}).get("aborted")
                if aborted:
                    upstream_aborted = str(aborted)
                break
        collected = time.monotonic()
        await progress()

        # --- close -----------------------------------------------------------------------
        stages: dict[str, Any] = {}
        if assembler is not None:
            stages.update((assembler.log or {}).get("stages", {}))
            log["frames_rejected"] = dict(assembler.rejected)
            log["upstream_complete"] = assembler.complete
        log["timed_out"] = timed_out
        refused: str | None = None
        messages: list[bytes] = []
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
            if message is not None and message.topic == downstream_status:
                note_status(message.payload)

        item_length = message_length(settings.hop_index + 1, settings.n_hops)
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
        state = "refused" if refused else "done"
        await publish_state(transport, settings.prefix, settings.round_id, stage, state, log=log)
    if refused:
        logger.warning("%s round %d refused: %s", stage, settings.round_id, refused)
    logger.info(
        "%s round %d: accepted %d, forwarded %d, rejected %s%s",
        stage,
        settings.round_id,
        hop.accepted,
        len(messages),
        hop.rejected,
        " (deadline)" if timed_out else "",
    )
    return HopResult(log=log, refused=refused, stages=stages)
