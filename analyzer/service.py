"""The analyzer as a service: one round over a transport (thin asyncio shell over AnalyzerRound).

``await run_analyzer(transport, settings, private_key)``:

1. subscribe to the analyzer's topic, announce ``ready``;
2. reassemble the last hop's frames and offer every message to
   :class:`~shuffledp.analyzer.round.AnalyzerRound` (peel, validate, count; rejections counted
   by reason), until the batch is complete or the deadline passes;
3. build the report (:func:`~shuffledp.analyzer.report.build_report`): the guarantee is computed
   for the reports actually counted; ``rejected`` sums every stage's rejections by reason,
   ``stages`` holds each hop's round log; publish it (JSON, retained) on the report topic and
   announce ``done``. If a hop refused the round, the report says so in ``error`` and holds no
   histogram.

Surviving a crash (``state_dir``; Mosquitto, as for a hop: see
:mod:`~shuffledp.shuffler.service`): the analyzer keeps a journal of the last hop's frames
(:mod:`~shuffledp.protocol.journal`, the hops' record format) and acknowledges each burst of
frames only once it is on disk. Restarted with the same arguments after a SIGKILL, it feeds the
journaled frames through the same code as live ones
(:func:`~shuffledp.protocol.journal.feed_inputs`: the frame assembler, then AnalyzerRound), so
its counts and rejections are back exactly, and a frame the broker delivers again (journaled,
not yet acknowledged when it died) is a ``duplicate-frame``, never counted twice. Nothing of the
report needs journaling: it is computed from the counts (``baseline_rng`` aside, simulations
only). The journal is removed once the report is published. The transport must acknowledge
manually over a persistent session with a client id stable across restarts
(``MqttTransport(manual_ack=True, persistent_session=True)``). A restarted analyzer that had
frames already counts its deadline from its new ``ready``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from nacl.public import PrivateKey

from shuffledp.accountant.mechanism import check_range, require_delta, require_eps
from shuffledp.analyzer.records import AnalyzerTimings, PublishedReport
from shuffledp.analyzer.report import build_report, merge_rejected
from shuffledp.analyzer.round import AnalyzerRound
from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.frames import FrameAssembler
from shuffledp.protocol.journal import HopJournal, JournalIdentity, feed_inputs, replay
from shuffledp.protocol.record import MAX_K, MAX_ROUND_ID
from shuffledp.protocol.runtime import (
    Inbox,
    closing_time,
    peel_pool,
    publish_progress,
    publish_state,
    retained_status,
)
from shuffledp.protocol.topics import analyzer_topic, report_topic, validate_prefix
from shuffledp.protocol.transport import (
    AcknowledgingTransport,
    Message,
    Transport,
    require_journaling,
)
from shuffledp.validation import require_int, require_positive

__all__ = ["AnalyzerSettings", "run_analyzer"]

logger = logging.getLogger("shuffledp.analyzer")

PROGRESS_INTERVAL = 0.5
FRAME_BURST = 16
"""Frames (up to 256 KiB each) taken, journaled and acknowledged together (as a hop does)."""
STAGE = "analyzer"


@dataclass(frozen=True, slots=True, kw_only=True)
class AnalyzerSettings:
    """The analyzer's parameters for one round (validated on construction): k, eps0 of the
    clients' k-RR, ``n_expected`` clients, ``n_hops``, ``deadline`` (seconds after the last hop's first
    frame arrived; see ``closing_time``), and
    the guarantee asked for: eps at ``target_delta`` (default) or the delta bracket at ``eps``."""

    prefix: str
    round_id: int
    k: int
    eps0: float
    n_hops: int
    n_expected: int
    deadline: float
    target_delta: float = 1e-6
    eps: float | None = None

    def __post_init__(self) -> None:
        validate_prefix(self.prefix)
        require_int("round_id", self.round_id, 0, MAX_ROUND_ID)
        require_int("k", self.k, 2, MAX_K)
        require_positive("eps0", self.eps0)
        require_int("n_hops", self.n_hops, 1)
        require_int("n_expected", self.n_expected, 1)
        # The accountant's range, checked before the round runs (not when the report is built).
        check_range(self.n_expected, self.eps0)
        require_positive("deadline", self.deadline)
        require_delta(self.target_delta)
        if self.eps is not None:
            require_eps(self.eps)


async def run_analyzer(
    transport: Transport,
    settings: AnalyzerSettings,
    private_key: PrivateKey,
    *,
    randomness_name: str | None = None,
    true_histogram: Any = None,
    baseline_rng: Any = None,
    state_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Run the analyzer for one round (module docstring); returns the published report as
    JSON (``PublishedReport.to_json()``, docs/report-schema.md; ``PublishedReport.from_json``
    reads it back).

    ``randomness_name`` is what the report says drove the randomness (default: what the hops
    reported, clients unknown to the analyzer). ``true_histogram`` (simulations only) adds the
    utility section. ``state_dir``: keep a journal there and acknowledge frames only once
    journaled, resuming from an earlier run's journal (module docstring; InvalidParameterError
    unless the transport acknowledges manually over a persistent session; JournalError if the
    journal belongs to other settings or key, is in use by another process or cannot be
    written).
    """
    if not isinstance(settings, AnalyzerSettings):
        raise InvalidParameterError(
            f"settings must be AnalyzerSettings, got {type(settings).__name__}"
        )
    analyzer = AnalyzerRound(
        round_id=settings.round_id, k=settings.k, n_hops=settings.n_hops, private_key=private_key
    )
    journal: HopJournal | None = None
    if state_dir is not None:
        require_journaling(transport)
        identity = JournalIdentity.for_analyzer(
            prefix=settings.prefix,
            round_id=settings.round_id,
            n_hops=settings.n_hops,
            k=settings.k,
            input_length=analyzer.input_length,
            expected_size=settings.n_expected,
            key_id=JournalIdentity.key_id_of(bytes(private_key.public_key)),
        )
        journal = await asyncio.to_thread(HopJournal.open, state_dir, identity)
    try:
        return await _run_analyzer(
            transport,
            settings,
            analyzer,
            journal,
            randomness_name=randomness_name,
            true_histogram=true_histogram,
            baseline_rng=baseline_rng,
        )
    finally:
        if journal is not None:
            journal.close()


async def _run_analyzer(
    transport: Transport,
    settings: AnalyzerSettings,
    analyzer: AnalyzerRound,
    journal: HopJournal | None,
    *,
    randomness_name: str | None,
    true_histogram: Any,
    baseline_rng: Any,
) -> dict[str, Any]:
    ingress = analyzer_topic(settings.prefix, settings.round_id)
    assembler = FrameAssembler(settings.round_id)
    acknowledging = transport if isinstance(transport, AcknowledgingTransport) else None
    journal_log: dict[str, Any] = {}
    if journal is not None:
        journal_log = {
            "resumed_inputs": journal.contents.inputs,
            "dropped_bytes": journal.contents.dropped_bytes,
        }

    def settle(messages: Iterable[Message]) -> None:
        """Acknowledge ``messages`` (journaled, or not to be kept): every message is settled,
        else the broker's window of unacknowledged messages fills up and it stops delivering."""
        if acknowledging is not None:
            for message in messages:
                acknowledging.ack(message)

    async with (
        Inbox(transport, name="analyzer-inbox") as inbox,
        peel_pool(STAGE) as mapper,
        retained_status(transport, settings.prefix, settings.round_id, STAGE),
    ):
        if journal is not None:
            await asyncio.to_thread(replay, journal.contents, analyzer, assembler, mapper=mapper)
        await transport.subscribe(ingress)
        await publish_state(transport, settings.prefix, settings.round_id, STAGE, "ready")
        started = time.monotonic()
        next_progress = started + PROGRESS_INTERVAL
        timed_out = False

        async def progress() -> None:
            await publish_progress(
                transport,
                settings.prefix,
                settings.round_id,
                STAGE,
                accepted=analyzer.n_received,
                rejected=sum(analyzer.rejected.values()),
                expected=settings.n_expected,
            )

        first_arrival: float | None = None
        if assembler.frames_received:  # resumed from the journal
            first_arrival = started
        while not assembler.complete:
            now = time.monotonic()
            close_at = closing_time(
                stage_index=settings.n_hops,
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
            # Every frame that has already arrived, fed and journaled together (one fsync).
            frames: list[Message] = []
            others: list[Message] = []
            for item in [message, *inbox.drain(FRAME_BURST - 1)]:
                (frames if item.topic == ingress else others).append(item)
            settle(others)
            if not frames:
                continue
            if first_arrival is None:
                first_arrival = time.monotonic()
            payloads = [frame.payload for frame in frames]
            if journal is None:
                await asyncio.to_thread(feed_inputs, analyzer, assembler, payloads, mapper=mapper)
            else:
                await asyncio.gather(
                    asyncio.to_thread(feed_inputs, analyzer, assembler, payloads, mapper=mapper),
                    asyncio.to_thread(journal.append_inputs, payloads),
                )
            settle(frames)
        collected = time.monotonic()
        await progress()

        upstream = assembler.log or {}
        stages: dict[str, Any] = dict(upstream.get("stages", {}))
        own_log = {
            "stage": STAGE,
            "received": analyzer.n_received,
            "rejected": analyzer.rejected,
            "frames_rejected": dict(assembler.rejected),
            "timed_out": timed_out,
            "upstream_complete": assembler.complete,
            "collect_seconds": round(collected - started, 6),
        }
        if journal is not None:
            journal_log.update(
                syncs=journal.syncs,
                bytes=journal.bytes_written,
                sync_seconds=round(journal.sync_seconds, 6),
            )
            own_log["journal"] = journal_log
        stages[STAGE] = own_log
        rejected = merge_rejected(
            *(log.get("rejected", {}) for log in stages.values() if isinstance(log, dict)),
            *(log.get("frames_rejected", {}) for log in stages.values() if isinstance(log, dict)),
        )
        if randomness_name is None:
            names = {
                name: log.get("randomness")
                for name, log in stages.items()
                if isinstance(log, dict) and log.get("randomness")
            }
            randomness_name = "; ".join(f"{k}: {v}" for k, v in names.items()) or "unknown"
            randomness_name += "; clients: not reported to the analyzer"
        aborted = upstream.get("aborted")
        report = build_report(
            round_id=settings.round_id,
            k=settings.k,
            eps0=settings.eps0,
            histogram=analyzer.histogram(),
            n_expected=settings.n_expected,
            rejected=rejected,
            target_delta=settings.target_delta,
            eps=settings.eps,
            true_histogram=true_histogram,
            baseline_rng=baseline_rng,
            randomness_name=randomness_name,
        )
        published = PublishedReport(
            report=report,
            stages=stages,
            timings=AnalyzerTimings(analyzer_collect_seconds=round(collected - started, 6)),
            error=f"the round was refused: {aborted}" if aborted else None,
            warning=(
                f"the analyzer's deadline ({settings.deadline} s) passed before the last hop's "
                f"batch was complete; the report covers the {analyzer.n_received} reports counted"
                if timed_out and not aborted
                else None
            ),
        ).to_json()
        await transport.publish(
            report_topic(settings.prefix, settings.round_id),
            json.dumps(published, allow_nan=False).encode(),
            retain=True,
        )
        if journal is not None:
            await asyncio.to_thread(journal.remove)  # published: nothing left to recover
        await publish_state(
            transport,
            settings.prefix,
            settings.round_id,
            STAGE,
            "refused" if aborted else "done",
            received=analyzer.n_received,
        )
    logger.info(
        "analyzer round %d: received %d of %d expected, rejected %s",
        settings.round_id,
        analyzer.n_received,
        settings.n_expected,
        rejected,
    )
    return published
