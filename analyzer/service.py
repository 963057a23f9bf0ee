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
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from nacl.public import PrivateKey

from shuffledp.accountant.mechanism import (
    InvalidParameterError,
    require_delta,
    require_eps,
    require_int,
    require_positive,
)
from shuffledp.analyzer.report import build_report, merge_rejected
from shuffledp.analyzer.round import AnalyzerRound
from shuffledp.protocol.frames import FrameAssembler
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
from shuffledp.protocol.transport import Transport

__all__ = ["AnalyzerSettings", "run_analyzer"]

logger = logging.getLogger("shuffledp.analyzer")

PROGRESS_INTERVAL = 0.5
OFFER_CHUNK = 4096
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
) -> dict[str, Any]:
    """Run the analyzer for one round (module docstring); returns the published report.

    ``randomness_name`` is what the report says drove the randomness (default: what the hops
    reported, clients unknown to the analyzer). ``true_histogram`` (simulations only) adds the
    utility section.
    """
    if not isinstance(settings, AnalyzerSettings):
        raise InvalidParameterError(
            f"settings must be AnalyzerSettings, got {type(settings).__name__}"
        )
    analyzer = AnalyzerRound(
        round_id=settings.round_id, k=settings.k, n_hops=settings.n_hops, private_key=private_key
    )
    ingress = analyzer_topic(settings.prefix, settings.round_id)
    assembler = FrameAssembler(settings.round_id)
    async with (
        Inbox(transport, name="analyzer-inbox") as inbox,
        peel_pool(STAGE) as mapper,
        retained_status(transport, settings.prefix, settings.round_id, STAGE),
    ):
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
            if message is None or message.topic != ingress:
                continue
            if first_arrival is None:
                first_arrival = time.monotonic()
            items = list(assembler.add(message.payload))
            for start in range(0, len(items), OFFER_CHUNK):
                await asyncio.to_thread(
                    analyzer.offer_many, items[start : start + OFFER_CHUNK], mapper=mapper
                )
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
        report["stages"] = stages
        if aborted:
            report["error"] = f"the round was refused: {aborted}"
        elif timed_out:
            report["warning"] = (
                f"the analyzer's deadline ({settings.deadline} s) passed before the last hop's "
                f"batch was complete; the report covers the {analyzer.n_received} reports counted"
            )
        report["timings"] = {"analyzer_collect_seconds": round(collected - started, 6)}
        await transport.publish(
            report_topic(settings.prefix, settings.round_id),
            json.dumps(report, allow_nan=False).encode(),
            retain=True,
        )
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
    return report
