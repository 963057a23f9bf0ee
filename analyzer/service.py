"""The analyzer as a service: one round over a transport (AnalyzerRound, the pure core, run by a
:class:`~shuffledp.protocol.stage.Stage`).

``await run_analyzer(transport, settings, private_key)``:

1. subscribe to the analyzer's topic, announce ``ready``;
2. reassemble the last hop's frames and offer every message to
   :class:`~shuffledp.analyzer.round.AnalyzerRound` (peel, validate, count; rejections counted
   by reason), until the batch is complete or the deadline passes;
3. verify the chain of signed END statements the last hop's END carries, every hop's with its
   key from the manifest (:mod:`~shuffledp.protocol.end_chain`): one that does not verify or
   add up refuses the round, in ``error``, naming the hop where it breaks;
4. build the report (:func:`~shuffledp.analyzer.report.build_report`): the guarantee is computed
   for the reports actually counted; ``rejected`` sums every stage's rejections by reason,
   ``stages`` holds each hop's round log from its verified statement; publish it (JSON,
   retained) on the report topic and announce ``done``. If a hop refused the round, the report
   says so in ``error`` and holds no histogram. The report's ``delivery``
   (:func:`~shuffledp.analyzer.delivery.account_delivery`) compares every leg of the round;
   genuine reports lost refuse the round the same way (the loss's one line in ``error``) unless
   ``accept_loss``, which publishes the smaller round with a ``warning`` saying so.

Written once (:mod:`~shuffledp.analyzer.published`): the analyzer subscribes to the report
topic before its ingress; a report already retained there ends collection at once and is never
published over: the same outcome re-derived is returned as published, another one raises
ReportExistsError (exit status 6).

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
from dataclasses import dataclass, field
from typing import Any

from nacl.public import PrivateKey
from nacl.signing import VerifyKey

from shuffledp.accountant.mechanism import check_range, require_delta, require_eps
from shuffledp.analyzer.delivery import account_delivery
from shuffledp.analyzer.published import ReportWatch, first_report
from shuffledp.analyzer.records import AnalyzerTimings, Delivery, PublishedReport
from shuffledp.analyzer.report import build_report, merge_rejected
from shuffledp.analyzer.round import AnalyzerRound
from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.delivery import screened
from shuffledp.protocol.end_chain import check_sums, verify_chain
from shuffledp.protocol.end_statement import StatementError
from shuffledp.protocol.frames import FrameAssembler, require_verify_key
from shuffledp.protocol.journal import HopJournal, JournalIdentity, feed_inputs, replay
from shuffledp.protocol.record import MAX_K, MAX_ROUND_ID, require_manifest_digest
from shuffledp.protocol.runtime import peel_pool
from shuffledp.protocol.screen import Mapper
from shuffledp.protocol.stage import CollectClock, Stage
from shuffledp.protocol.topics import analyzer_topic, report_topic, validate_prefix
from shuffledp.protocol.transport import Transport, require_journaling
from shuffledp.validation import require_int, require_positive

__all__ = ["AnalyzerSettings", "run_analyzer"]

logger = logging.getLogger("shuffledp.analyzer")

FRAME_BURST = 16
"""Frames (up to 256 KiB each) taken, journaled and acknowledged together (as a hop does)."""
STAGE = "analyzer"
MAX_PENDING = 100_000
"""At most this many messages already received are looked through before publishing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AnalyzerSettings:
    """The analyzer's parameters for one round (validated on construction): k, eps0 of the
    clients' k-RR, ``n_expected`` clients, ``n_hops``, ``deadline`` (seconds after the last hop's first
    frame arrived; see ``closing_time``), and
    the guarantee asked for: eps at ``target_delta`` (default) or the delta bracket at ``eps``.
    ``accept_loss`` (``--accept-loss``): publish the round even if fewer than ``n_expected``
    reports were counted (the report says so); without it such a round is refused with the
    loss's one line (``delivery.message``) and no histogram.

    What binds the analyzer to its round (from the round manifest): ``manifest_digest`` (32
    bytes: every record and frame must say it) and ``hop_verify_keys`` (every hop's Ed25519
    verify key, hop 0 first: the last hop's frames and END must verify with the last one, and
    every hop's signed statement in the END's chain with its own)."""

    prefix: str
    round_id: int
    k: int
    eps0: float
    n_hops: int
    n_expected: int
    deadline: float
    manifest_digest: bytes
    hop_verify_keys: tuple[VerifyKey, ...] = field(repr=False)
    target_delta: float = 1e-6
    eps: float | None = None
    accept_loss: bool = False
    colluders: int = 0
    """C of the round manifest: clients whose reports the adversary is assumed to know; the
    guarantee is computed for the reports counted minus C."""

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
        if not isinstance(self.accept_loss, bool):
            raise InvalidParameterError(
                f"--accept-loss must be True or False, got {self.accept_loss!r}"
            )
        require_int("colluders", self.colluders, 0, self.n_expected - 1)
        require_manifest_digest(self.manifest_digest)
        keys = self.hop_verify_keys
        if not isinstance(keys, tuple) or len(keys) != self.n_hops:
            raise InvalidParameterError(
                f"hop_verify_keys must be a tuple of n_hops = {self.n_hops} verify keys (one "
                f"per hop, from the manifest), got {type(keys).__name__} of "
                f"{len(keys) if isinstance(keys, tuple) else '?'}"
            )
        for index, key in enumerate(keys):
            require_verify_key(key, f"hop_verify_keys[{index}] (hop-{index}'s signing key)")

    @property
    def upstream_verify_key(self) -> VerifyKey:
        """The last hop's verify key (its frames are the analyzer's input)."""
        return self.hop_verify_keys[-1]

    def frame_assembler(self) -> FrameAssembler:
        """The assembler of the last hop's frames."""
        return FrameAssembler(
            self.round_id, self.manifest_digest, self.n_hops - 1, self.upstream_verify_key
        )


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
        round_id=settings.round_id,
        k=settings.k,
        n_hops=settings.n_hops,
        private_key=private_key,
        manifest_digest=settings.manifest_digest,
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
            manifest_digest=settings.manifest_digest,
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


@dataclass(slots=True, kw_only=True)
class _AnalyzerIntake:
    """What the analyzer does with a burst of the last hop's frames (a :class:`Intake`):
    reassemble them and offer their messages to AnalyzerRound; with a journal, the burst is
    journaled while it is offered (in parallel threads)."""

    settings: AnalyzerSettings
    analyzer: AnalyzerRound
    assembler: FrameAssembler
    journal: HopJournal | None
    mapper: Mapper
    ingress: str
    watch: ReportWatch
    burst: int = FRAME_BURST

    def complete(self) -> bool:
        """The last hop's batch is complete, or the round's report is already published (a
        rerun: nothing it collects could be published, analyzer/published.py)."""
        return self.assembler.complete or self.watch.existing is not None

    def counts(self) -> dict[str, Any]:
        return {
            "accepted": self.analyzer.n_received,
            "rejected": sum(self.analyzer.rejected.values()),
            "expected": self.settings.n_expected,
        }

    async def take(self, payloads: list[bytes]) -> None:
        analyzer, assembler, mapper = self.analyzer, self.assembler, self.mapper
        if self.journal is None:
            await asyncio.to_thread(feed_inputs, analyzer, assembler, payloads, mapper=mapper)
        else:  # journaled by the journal's writer thread while it is offered
            written = asyncio.wrap_future(self.journal.submit_inputs(payloads))
            await asyncio.gather(
                asyncio.to_thread(feed_inputs, analyzer, assembler, payloads, mapper=mapper),
                written,
            )


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
    assembler = settings.frame_assembler()
    async with (
        peel_pool(STAGE) as mapper,
        Stage(transport, prefix=settings.prefix, round_id=settings.round_id, name=STAGE) as stage,
    ):
        intake = _AnalyzerIntake(
            settings=settings,
            analyzer=analyzer,
            assembler=assembler,
            journal=journal,
            mapper=mapper,
            ingress=analyzer_topic(settings.prefix, settings.round_id),
            watch=ReportWatch(report_topic(settings.prefix, settings.round_id)),
        )
        stage.aside = intake.watch
        timed_out, collect_seconds = await _collect(stage, intake)
        hops, broken = _verified_hops(intake)
        stages, rejected = _stages(intake, hops, timed_out, collect_seconds)
        report = _report(
            settings,
            intake,
            stages,
            rejected,
            timed_out,
            collect_seconds,
            broken=broken,
            randomness_name=randomness_name,
            true_histogram=true_histogram,
            baseline_rng=baseline_rng,
        )
        report = await _publish(stage, intake, report)
    logger.info(
        "analyzer round %d: received %d of %d expected, rejected %s",
        settings.round_id,
        analyzer.n_received,
        settings.n_expected,
        rejected,
    )
    return report


async def _collect(stage: Stage, intake: _AnalyzerIntake) -> tuple[bool, float]:
    """Replay the journal (if any), announce ready and collect (Stage.collect) until the last
    hop's batch is complete or the deadline: (whether the deadline closed it, seconds from
    ready)."""
    analyzer, assembler, journal = intake.analyzer, intake.assembler, intake.journal
    if journal is not None:
        await asyncio.to_thread(replay, journal.contents, analyzer, assembler, mapper=intake.mapper)
    # The report topic first: a retained report there comes before the ingress's SUBACK.
    await stage.subscribe(intake.watch.topic)
    await stage.subscribe(intake.ingress)
    started = await stage.announce_ready()
    clock = CollectClock(
        stage_index=intake.settings.n_hops,
        deadline=intake.settings.deadline,
        ready_at=started,
        first_arrival=started if assembler.frames_received else None,  # resumed
    )
    timed_out = await stage.collect(intake, clock)
    collect_seconds = time.monotonic() - started
    await stage.progress(**intake.counts())
    return timed_out, collect_seconds


async def _publish(stage: Stage, intake: _AnalyzerIntake, report: dict[str, Any]) -> dict[str, Any]:
    """The report on the report topic (retained), the journal removed, then ``done`` (or
    ``refused``); returns the round's published report. Written once: if the topic already
    holds a report, nothing is published, and that report is returned if ``report`` is the
    same outcome, else ReportExistsError (analyzer/published.py; the journal is then kept)."""
    # Whatever has already arrived (a retained report comes before the ingress's SUBACK) is
    # looked at, also when collection ended at once (a journal that held the whole batch).
    for _ in range(MAX_PENDING):
        if await stage.next_message(0) is None:
            break
    if intake.watch.existing is not None:
        report = first_report(intake.watch.existing, report, stage.round_id)
    else:
        await stage.transport.publish(
            intake.watch.topic, json.dumps(report, allow_nan=False).encode(), retain=True
        )
    if intake.journal is not None:
        await asyncio.to_thread(intake.journal.remove)  # published: nothing left to recover
    state = "refused" if "error" in report else "done"
    await stage.announce(state, received=report.get("n_received"))
    return report


def _verified_hops(intake: _AnalyzerIntake) -> tuple[dict[str, Any], str | None]:
    """Each hop's round log from its signed statement in the last hop's END, once the whole
    chain verifies and adds up (protocol/end_chain.py), else no hop's log and the one line
    that says where the chain breaks. No END at all: no hop's log (the batch never came)."""
    settings, end = intake.settings, intake.assembler.statement
    if end is None:
        return {}, None
    try:
        statements = verify_chain(
            end,
            verify_keys=settings.hop_verify_keys,
            manifest_digest=settings.manifest_digest,
            round_id=settings.round_id,
        )
        check_sums(
            statements,
            expected=settings.n_expected,
            analyzer_accepted=intake.analyzer.n_received,
            analyzer_rejected=intake.analyzer.rejected,
        )
    except StatementError as exc:
        return {}, str(exc)
    return {s.stage: dict(s.stages[s.stage]) for s in statements}, None


def _stages(
    intake: _AnalyzerIntake, hops: dict[str, Any], timed_out: bool, collect_seconds: float
) -> tuple[dict[str, Any], dict[str, int]]:
    """Every stage's round log (the hops' verified ones, ``hops``, then the analyzer's own) and
    the rejections of every stage by reason."""
    analyzer, assembler, journal = intake.analyzer, intake.assembler, intake.journal
    stages: dict[str, Any] = dict(hops)
    own_log = {
        "stage": STAGE,
        "received": analyzer.n_received,
        "rejected": analyzer.rejected,
        "frames_rejected": dict(assembler.rejected),
        "timed_out": timed_out,
        "upstream_complete": assembler.complete,
        "collect_seconds": round(collect_seconds, 6),
    }
    if journal is not None:
        own_log["journal"] = {
            "resumed_inputs": journal.contents.inputs,
            "dropped_bytes": journal.contents.dropped_bytes,
            "syncs": journal.syncs,
            "bytes": journal.bytes_written,
            "sync_seconds": round(journal.sync_seconds, 6),
        }
    stages[STAGE] = own_log
    rejected = merge_rejected(
        *(log.get("rejected", {}) for log in stages.values() if isinstance(log, dict)),
        *(log.get("frames_rejected", {}) for log in stages.values() if isinstance(log, dict)),
    )
    return stages, rejected


def _report(
    settings: AnalyzerSettings,
    intake: _AnalyzerIntake,
    stages: dict[str, Any],
    rejected: dict[str, int],
    timed_out: bool,
    collect_seconds: float,
    *,
    broken: str | None,
    randomness_name: str | None,
    true_histogram: Any,
    baseline_rng: Any,
) -> dict[str, Any]:
    """The round's published report as JSON (PublishedReport: build_report's Report with the
    stages' logs, the refusal or the deadline's warning, and the analyzer's timing). A chain of
    statements that does not verify (``broken``) refuses the round before anything else."""
    analyzer = intake.analyzer
    delivery = account_delivery(
        expected=settings.n_expected,
        stages=stages,
        n_hops=settings.n_hops,
        received=analyzer.n_received,
        rejected=screened(analyzer.rejected),
        accept_loss=settings.accept_loss,
    )
    error = _error(intake, delivery, broken)
    if randomness_name is None:
        names = {
            name: log.get("randomness")
            for name, log in stages.items()
            if isinstance(log, dict) and log.get("randomness")
        }
        randomness_name = "; ".join(f"{k}: {v}" for k, v in names.items()) or "unknown"
        randomness_name += "; clients: not reported to the analyzer"
    histogram = analyzer.histogram()
    report = build_report(
        round_id=settings.round_id,
        k=settings.k,
        eps0=settings.eps0,
        histogram=histogram * 0 if error is not None else histogram,
        n_expected=settings.n_expected,
        rejected=rejected,
        target_delta=settings.target_delta,
        eps=settings.eps,
        true_histogram=true_histogram,
        baseline_rng=baseline_rng,
        randomness_name=randomness_name,
        colluders=settings.colluders,
    )
    return PublishedReport(
        report=report,
        stages=stages,
        timings=AnalyzerTimings(analyzer_collect_seconds=round(collect_seconds, 6)),
        error=error,
        warning=None if error is not None else _warning(settings, delivery, timed_out, analyzer),
        delivery=delivery,
        manifest=settings.manifest_digest.hex(),
    ).to_json()


def _error(intake: _AnalyzerIntake, delivery: Delivery, broken: str | None) -> str | None:
    """Why the round is refused, if it is: a chain that does not verify first, then a loss not
    accepted (a smaller round is never published unknowingly), then the last hop's refusal."""
    said = "the round was refused: "
    if broken is not None:
        return said + broken
    if delivery.lost and not delivery.loss_accepted:
        return f"{said}{delivery.message}"
    aborted = intake.assembler.statement.aborted if intake.assembler.statement else None
    return said + aborted if aborted else None


def _warning(
    settings: AnalyzerSettings, delivery: Delivery, timed_out: bool, analyzer: AnalyzerRound
) -> str | None:
    """What a published report must say about itself: a loss accepted, or a deadline."""
    if delivery.loss_accepted:
        return (
            f"{delivery.message}; published with --accept-loss: the report covers the "
            f"{analyzer.n_received:,} reports counted, not the {settings.n_expected:,} expected"
        )
    if timed_out:
        return (
            f"the analyzer's deadline ({settings.deadline} s) passed before the last hop's "
            f"batch was complete; the report covers the {analyzer.n_received} reports counted"
        )
    return None
