"""The stream runner: one pipeline round per epoch, each user's account kept across them.

In each epoch every active user (a check-in inside the region during the epoch) that is not cut
off by the budget (:mod:`.budget`) reports once: the cell of its latest check-in of the epoch
(:mod:`.epochs`; as ``shuffledp simulate``'s one report per user). The round runs through a
round runner (the command's is
:meth:`~shuffledp.simulations.pipeline.simulate.PipelineSession.run_round`: separate processes
over MQTT). An epoch with fewer reporting users than ``min_users`` is skipped (a record says
why; nothing is sent, nobody is charged). A run of epochs with no check-in at all is one
``empty`` record. Each record (:mod:`.records`) goes to ``on_record`` as soon as it is known;
:meth:`StreamRunner.run` returns the summary.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from shuffledp.accountant.mechanism import require_delta
from shuffledp.errors import OperationalError
from shuffledp.simulations.data.regions import Region
from shuffledp.simulations.pipeline.records import RoundLog
from shuffledp.simulations.pipeline.stream.budget import Budget, Plan, plan_reporters
from shuffledp.simulations.pipeline.stream.epochs import (
    EmptyEpochs,
    Epoch,
    EpochAssembler,
    iso_time,
)
from shuffledp.simulations.pipeline.stream.events import InputCounts, StreamEvent
from shuffledp.simulations.pipeline.stream.ledger import STREAM_DISCRETIZATION, UserLedger
from shuffledp.simulations.pipeline.stream.records import (
    CompositionInfo,
    EmptyEpochsRecord,
    EpochRecord,
    StreamRecord,
    StreamSummary,
    WorstUser,
)
from shuffledp.validation import require_int, require_positive

__all__ = ["RoundRunner", "StreamRoundRefusedError", "StreamRunner", "StreamSettings"]

#: Runs one round: (true values, round id, dataset label) -> the round log as JSON
#: (``RoundLog.to_json()``, what PipelineSession.run_round returns); the runner reads it back
#: into a :class:`~shuffledp.simulations.pipeline.records.RoundLog` (:func:`read_round_log`).
RoundRunner = Callable[[npt.NDArray[np.int64], int, str], Awaitable[dict[str, Any]]]

#: Skip reasons counted in the summary's ``skipped_by_reason``.
SKIP_BELOW_MIN = "below --min-users"
SKIP_REFUSED = "refused"


class StreamRoundRefusedError(OperationalError):
    """A round runner's way to say the round was refused and nothing was published."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamSettings:
    """What the stream does with its epochs (validated on construction)."""

    region: Region
    epoch_seconds: int
    eps0: float = 4.0
    target_delta: float = 1e-6
    budget: Budget | None = None
    min_users: int = 2
    max_epochs: int | None = None
    discretization: float = STREAM_DISCRETIZATION
    source_label: str = "stream"

    def __post_init__(self) -> None:
        require_int("epoch length (s)", self.epoch_seconds, 1)
        require_positive("eps0", self.eps0)
        require_delta(self.target_delta)
        require_int("min_users", self.min_users, 2)
        if self.max_epochs is not None:
            require_int("max_epochs", self.max_epochs, 1)
        require_positive("discretization", self.discretization)


def read_round_log(report: dict[str, Any]) -> RoundLog:
    """The one place the round runner's JSON becomes a typed record (a malformed log is an
    InvalidParameterError naming the key)."""
    return RoundLog.from_json(report)


@dataclass(slots=True)
class _Tally:
    """The summary's running counts."""

    epochs_seen: int = 0
    epochs_run: int = 0
    epochs_skipped: int = 0
    epochs_empty: int = 0
    epochs_failed: int = 0
    budget_cut_offs: int = 0
    over_budget_after_round: int = 0
    checkins: int = 0


class StreamRunner:
    """Runs epochs through a round runner and keeps every user's account.

    ``await runner.run(events)`` processes time-ordered events (a sorted file, or standard
    input as it arrives: late ones are dropped), calls ``on_record`` with each epoch's record
    (:class:`EpochRecord` or :class:`EmptyEpochsRecord`) as soon as it is known, and returns
    the :class:`StreamSummary`.
    """

    def __init__(
        self,
        settings: StreamSettings,
        round_runner: RoundRunner,
        *,
        counts: InputCounts | None = None,
        on_record: Callable[[StreamRecord], None] | None = None,
        refused: tuple[type[BaseException], ...] = (StreamRoundRefusedError,),
        failed: tuple[type[BaseException], ...] = (),
    ) -> None:
        self.settings = settings
        self.round_runner = round_runner
        self.counts = counts if counts is not None else InputCounts()
        self.on_record = on_record
        self.refused = refused
        self.failed = failed
        self.ledger = UserLedger(
            k=settings.region.k, eps0=settings.eps0, discretization=settings.discretization
        )
        self.stopped_early = False
        self._tally = _Tally()
        self._skip_reasons: dict[str, int] = {}
        self._users: set[str] = set()

    @property
    def epochs_seen(self) -> int:
        return self._tally.epochs_seen

    async def run(self, events: Iterable[StreamEvent]) -> StreamSummary:
        started = time.monotonic()
        assembler = EpochAssembler(self.settings.epoch_seconds, self.counts)
        for event in events:
            for closed in assembler.push(event):
                if not await self._handle(closed):
                    break
            if self.stopped_early:
                break
        else:
            for closed in assembler.finish():
                if not await self._handle(closed):
                    break
        return self.summary(time.monotonic() - started)

    async def _handle(self, closed: Epoch | EmptyEpochs) -> bool:
        """Process one closed item; False once --max-epochs is reached."""
        limit = self.settings.max_epochs
        if isinstance(closed, EmptyEpochs):
            record = self._empty(closed)
            if record is None:
                self.stopped_early = True
                return False
            self._emit(record)
        else:
            if limit is not None and closed.index >= limit:
                self.stopped_early = True
                return False
            self._tally.epochs_seen += 1
            self._emit(await self._run_epoch(closed))
        if limit is not None and self._tally.epochs_seen >= limit:
            self.stopped_early = True
            return False
        return True

    def _empty(self, closed: EmptyEpochs) -> EmptyEpochsRecord | None:
        """The record of a run of empty epochs, cut at --max-epochs (None: none left)."""
        limit = self.settings.max_epochs
        last = closed.last if limit is None else min(closed.last, limit - 1)
        count = last - closed.first + 1
        if count <= 0:
            return None
        self._tally.epochs_seen += count
        self._tally.epochs_empty += count
        return EmptyEpochsRecord(
            first_epoch=closed.first,
            last_epoch=last,
            start=iso_time(closed.start),
            end=iso_time(closed.start + count * self.settings.epoch_seconds),
        )

    def _emit(self, record: StreamRecord) -> None:
        if self.on_record is not None:
            self.on_record(record)

    def plan(self, active: list[str]) -> Plan:
        """Who reports among the epoch's active users (:func:`.budget.plan_reporters`)."""
        settings = self.settings
        return plan_reporters(self.ledger, active, settings.budget, settings.min_users)

    async def _run_epoch(self, epoch: Epoch) -> EpochRecord:
        settings, ledger = self.settings, self.ledger
        active = sorted(epoch.reports)
        self._users.update(active)
        self._tally.checkins += epoch.checkins
        plan = self.plan(active)
        ledger.exhausted.update(plan.cut)
        self._tally.budget_cut_offs += len(plan.cut)
        enough = len(plan.reporters) >= settings.min_users
        head: dict[str, Any] = {
            "epoch": epoch.index,
            "start": iso_time(epoch.start),
            "end": iso_time(epoch.end),
            "checkins": epoch.checkins,
            "users_active": len(active),
            "cut_off": len(plan.cut),
            "budget_exhausted": len(plan.cut) + len(plan.exhausted),
            "users_reporting": len(plan.reporters) if enough else 0,
        }
        if not enough:
            reason = (
                f"{len(plan.reporters)} users can report, below the minimum of "
                f"{settings.min_users}"
                + (" after budget cut-offs" if plan.cut or plan.exhausted else "")
            )
            return self._skip(head, reason, SKIP_BELOW_MIN)
        return await self._round(epoch, plan.reporters, head)

    async def _round(self, epoch: Epoch, reporters: list[str], head: dict[str, Any]) -> EpochRecord:
        """Run the epoch's round for ``reporters`` and charge them."""
        ledger = self.ledger
        values = np.array([epoch.reports[user][1] for user in reporters], dtype=np.int64)
        label = (
            f"{self.settings.source_label}: epoch {epoch.index} [{head['start']}, "
            f"{head['end']}), latest check-in per user in {self.settings.region.name}"
        )
        try:
            log = read_round_log(await self.round_runner(values, epoch.index, label))
        except self.refused as exc:
            return self._skip(head, f"round refused, nothing published: {exc}", SKIP_REFUSED)
        except self.failed as exc:
            # The reports were sent: charge each as a lone k-RR report (.ledger's docstring).
            for user in reporters:
                ledger.charge(user, epoch.index, 1)
            ledger.prune()
            self._tally.epochs_failed += 1
            return EpochRecord(**head, status="failed", error=str(exc), charged_n=1)
        # More than were sent cannot be to anyone's benefit: charge at most what was sent.
        charged = min(log.report.n_received, len(reporters))
        over = self._charge(reporters, epoch.index, charged)
        self._tally.epochs_run += 1
        self._tally.over_budget_after_round += over
        return EpochRecord(
            **head, status="run", charged_n=charged, over_budget_after_round=over, round_log=log
        )

    def _charge(self, reporters: list[str], epoch: int, charged: int) -> int:
        """Charge each reporter a round of ``charged``; with lost reports, recheck the budget.
        The number of reporters over budget after the round (now cut off)."""
        settings, ledger = self.settings, self.ledger
        over = 0
        if charged >= 1:
            for user in reporters:
                ledger.charge(user, epoch, charged)
            budget = settings.budget
            if budget is not None and charged < len(reporters):
                for user in reporters:
                    if ledger.user_delta(user, budget.eps) > budget.delta:
                        over += 1
                        ledger.exhausted.add(user)
        ledger.prune()
        return over

    def _skip(self, head: dict[str, Any], reason: str, key: str) -> EpochRecord:
        self.ledger.prune()
        self._tally.epochs_skipped += 1
        self._skip_reasons[key] = self._skip_reasons.get(key, 0) + 1
        return EpochRecord(**head, status="skipped", reason=reason)

    def summary(self, seconds: float) -> StreamSummary:
        settings, ledger, tally = self.settings, self.ledger, self._tally
        return StreamSummary(
            epochs=tally.epochs_seen,
            epochs_run=tally.epochs_run,
            epochs_skipped=tally.epochs_skipped,
            epochs_empty=tally.epochs_empty,
            epochs_failed=tally.epochs_failed,
            budget_cut_offs=tally.budget_cut_offs,
            over_budget_after_round=tally.over_budget_after_round,
            skipped_by_reason=dict(self._skip_reasons),
            stopped_at_max_epochs=self.stopped_early,
            checkins_in_epochs=tally.checkins,
            outside_region=self.counts.outside_region,
            late=self.counts.late,
            late_examples=tuple(self.counts.late_examples),
            users=len(self._users),
            users_reported=sum(1 for user in self._users if ledger.history.get(user)),
            users_cut_off=len(ledger.exhausted),
            budget=settings.budget,
            worst_user=self.worst_user(),
            composition=self.composition(),
            region=settings.region.describe(),
            epoch_seconds=settings.epoch_seconds,
            eps0=settings.eps0,
            k=settings.region.k,
            seconds=round(seconds, 3),
        )

    def worst_user(self) -> WorstUser | None:
        """The weakest composed guarantee: eps at the budget's delta (or --delta without one)."""
        settings = self.settings
        delta_target = settings.budget.delta if settings.budget else settings.target_delta
        worst = self.ledger.worst(delta_target, settings.budget)
        if worst is None:
            return None
        finite = math.isfinite(worst.eps)
        return WorstUser(
            eps=worst.eps if finite else None,
            delta=worst.delta_target,
            delta_at_budget_eps=worst.delta_at_budget,
            rounds=worst.rounds,
            epochs=worst.epochs,
            round_sizes=worst.sizes,
            users_with_this_history=worst.users,
            bound=worst.pair,
            note=None if finite else f"no finite eps reaches delta = {delta_target:g}",
        )

    def composition(self) -> CompositionInfo:
        ledger = self.ledger
        return CompositionInfo(
            discretization=self.settings.discretization,
            families=tuple(family.name for family in ledger.families),
            fallbacks=ledger.fallback_notes(),
            compositions=ledger.compositions,
            stored_peak_mib=round(ledger.peak_bytes / 2**20, 1),
            evictions=ledger.evictions,
            accountant_seconds=round(ledger.seconds, 3),
        )
