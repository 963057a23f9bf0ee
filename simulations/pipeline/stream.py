"""`shuffledp stream`: replay check-ins over time as epochs, one pipeline round per epoch, with
each user's privacy composed over the rounds it took part in.

Epochs
    Fixed windows of ``length`` seconds (``--epoch 7d``; units h, d, w), aligned in UTC to the
    origin :data:`EPOCH_ORIGIN` = Monday 1970-01-05 00:00:00 UTC: epoch number
    ``e = floor((t - origin) / length)`` covers [origin + e length, origin + (e + 1) length).
    Hourly and daily epochs thus start on the hour and at midnight UTC, weekly ones on Mondays.
    A check-in exactly on a boundary belongs to the later epoch. The stream's epoch 0 is the
    window of its first check-in; epochs are numbered from there, and a round's id is its
    stream epoch number.

Order
    A file is read whole (only the rows inside the region are kept, compactly), then sorted by
    time (stable, so equal times keep file order): SNAP files are newest-first per user, not
    globally sorted. Standard input (``-``) is consumed as it arrives and must come in time
    order: a check-in older than the current epoch's start is *late*, dropped and counted; the
    current epoch closes when a check-in of a later epoch arrives, or when the input ends.
    Rows without a user or a time (lat,lon CSV files) cannot form a stream: a clear error.

Reports
    In each epoch every active user (a check-in inside the region during the epoch) that is not
    cut off by the budget reports once: the cell of its *latest* check-in of the epoch (for
    equal times, the first one read; as ``shuffledp simulate``'s one report per user). The round runs through
    :meth:`~shuffledp.simulations.pipeline.simulate.PipelineSession.run_round` (separate processes over
    MQTT). An epoch with fewer reporting users than ``min_users`` is skipped (a record says why;
    nothing is sent, nobody is charged). A run of epochs with no check-in at all is one
    ``empty`` record.

Privacy of a user
    Round e is the mechanism ``ShuffledKRR(n_e, k, eps0)`` with n_e the reports the analyzer
    received. A user's guarantee is the composition of the rounds it reported in, with
    dp-accounting privacy-loss distributions (PLDs) of each bound family's dominating pair
    (:func:`shuffledp.accountant.composition.compose_rounds`; minimum over the families). A
    round that failed after its reports were sent is charged as a lone k-RR report (n = 1, the
    local eps0 guarantee, which holds whatever happened downstream).

Budget ``(EPS, DELTA)``
    Before a round, a user whose composed delta at EPS, with this round added, would exceed
    DELTA does not report and stops for good (counted as cut off). The round's n depends on who
    reports, and a smaller n is a weaker round (the pair of n - 1 others is a post-processing of
    that of n others, so delta is non-increasing in n): the check uses n = the number of users
    still eligible and is repeated with the smaller n until nobody else drops out, so every
    reporter passes at the n it is sent with. Only lost reports make the received n smaller;
    then every reporter is rechecked after the round and those over budget are reported
    (``over_budget_after_round``).

Cost
    Users with the same multiset of round sizes have the same composition (composition is
    commutative), so composed PLDs are memoised by the sorted tuple of a user's round sizes and
    built incrementally (previous composition + this round) with
    :class:`~shuffledp.accountant.composition.FastPLD` (dp-accounting's arithmetic, its tail
    search vectorised); an entry is dropped as soon as no user holds it, and beyond
    :data:`LEDGER_MAX_BYTES` the least recently used are dropped and rebuilt from the round
    sizes when needed. The cost is one composition per family per distinct new history, not
    per user. The grid ``discretization`` (default :data:`STREAM_DISCRETIZATION`) trades
    precision for speed: every round's losses are rounded *up* to the grid (safe side), so after
    r rounds the composed delta at eps is at most the exact composed delta of the pairs at
    eps - r * discretization.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from shuffledp.accountant.mechanism import ShuffledKRR, require_delta
from shuffledp.errors import InvalidParameterError, OperationalError
from shuffledp.simulations.data.regions import Region
from shuffledp.validation import require_int, require_positive

if TYPE_CHECKING:
    from shuffledp.accountant.composition import FamilyPLD
    from shuffledp.simulations.data.checkins import CheckInArrays

__all__ = [
    "EPOCH_ORIGIN",
    "STREAM_DISCRETIZATION",
    "Budget",
    "EmptyEpochs",
    "Epoch",
    "EpochAssembler",
    "InputCounts",
    "StreamError",
    "StreamEvent",
    "StreamRoundRefusedError",
    "StreamRunner",
    "StreamSettings",
    "UserLedger",
    "epoch_number",
    "events_from_arrays",
    "events_from_checkins",
    "parse_budget",
    "parse_epoch_length",
    "sorted_events",
]

#: Epoch origin: Monday 1970-01-05 00:00:00 UTC, in Unix seconds (4 days after the Unix epoch,
#: a Thursday), so that weekly epochs start on Mondays; a multiple of an hour and of a day.
EPOCH_ORIGIN = 4 * 86_400

#: Seconds per unit of ``--epoch``.
EPOCH_UNITS = {"h": 3_600, "d": 86_400, "w": 604_800}

#: Privacy-loss grid of the per-user composition: 1e-3 (dp-accounting's default is 1e-4). After
#: r rounds the composed eps is overstated by at most r * grid; measured on 10 rounds of
#: n ~ 1,000, k = 192, eps0 = 1: eps(1e-6) = 0.5770 at 1e-4, 0.5815 at 1e-3 (+0.8 %), 0.6276 at
#: 1e-2 (+8.8 %). On the Paris slice (1,026 users, 57 weekly epochs, eps0 = 4, no budget) the
#: accounting took 14 s and kept at most 400 MiB at 1e-3, 2.8 s and 40 MiB at 1e-2 (the worst
#: user's eps: 90.413 and 90.415).
STREAM_DISCRETIZATION = 1e-3

#: Memory the per-user composition may keep between epochs (least recently used histories are
#: dropped beyond it and rebuilt when their user comes back).
LEDGER_MAX_BYTES = 512 * 2**20

#: Longest epoch accepted (10 years), to catch unit mistakes.
MAX_EPOCH_SECONDS = 3_650 * 86_400


class StreamError(OperationalError):
    """The input cannot form a stream (e.g. rows without time); the message says why."""


def parse_epoch_length(text: str) -> int:
    """``--epoch``: a positive integer and a unit, h (hours), d (days) or w (weeks), e.g.
    ``7d``, ``12h``, ``2w``; the length in seconds."""
    match = re.fullmatch(r"\s*(\d+)\s*([hdw])\s*", str(text).lower())
    if match is None:
        raise InvalidParameterError(
            f"--epoch must be a positive integer and a unit h, d or w (e.g. 7d, 12h, 2w), "
            f"got {text!r}"
        )
    seconds = int(match.group(1)) * EPOCH_UNITS[match.group(2)]
    if not 0 < seconds <= MAX_EPOCH_SECONDS:
        raise InvalidParameterError(
            f"--epoch must be between 1h and {MAX_EPOCH_SECONDS // 86_400}d, got {text!r}"
        )
    return seconds


def epoch_number(time_s: int, length: int) -> int:
    """The absolute epoch (from :data:`EPOCH_ORIGIN`) holding Unix time ``time_s``."""
    return (time_s - EPOCH_ORIGIN) // length


def _iso(time_s: int) -> str:
    return datetime.fromtimestamp(time_s, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """Each user's total budget: its composed delta at ``eps`` must stay <= ``delta``."""

    eps: float
    delta: float

    def __post_init__(self) -> None:
        require_positive("--budget EPS", self.eps)
        value = self.delta
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
            raise InvalidParameterError(f"--budget DELTA must be in (0, 1), got {value!r}")


def parse_budget(text: str) -> Budget:
    """``--budget EPS,DELTA`` (e.g. ``3,1e-5``)."""
    parts = [part.strip() for part in str(text).split(",")]
    if len(parts) != 2:
        raise InvalidParameterError(f"--budget must be EPS,DELTA (e.g. 3,1e-5), got {text!r}")
    try:
        eps, delta = float(parts[0]), float(parts[1])
    except ValueError:
        raise InvalidParameterError(
            f"--budget has a value that is not a number: {text!r}"
        ) from None
    if not math.isfinite(eps):
        raise InvalidParameterError(f"--budget EPS must be finite, got {parts[0]!r}")
    return Budget(eps=eps, delta=delta)


# ----------------------------------------------------------------------------------------------
# Input: check-ins -> events (user, time, cell) -> epochs


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One check-in inside the region: user, Unix time (s), cell."""

    user: str
    time: int
    cell: int


class CheckInLike(Protocol):
    """What the stream reads of a check-in (shuffledp.simulations.data.checkins.CheckIn)."""

    @property
    def user(self) -> str | None: ...
    @property
    def time(self) -> datetime | None: ...
    @property
    def lat(self) -> float: ...
    @property
    def lon(self) -> float: ...


@dataclass(slots=True)
class InputCounts:
    """What became of the check-ins: outside the region, or late (older than the current
    epoch, standard input only)."""

    outside_region: int = 0
    late: int = 0
    late_examples: list[str] = field(default_factory=list)


def events_from_checkins(
    rows: Iterable[CheckInLike], region: Region, counts: InputCounts
) -> Iterator[StreamEvent]:
    """The check-ins inside ``region`` as events, in input order; those outside are counted.
    StreamError at the first row without a user or a time (a lat,lon CSV file)."""
    for row in rows:
        if row.user is None or row.time is None:
            raise StreamError(
                "the input has rows without a user or a time (a lat,lon CSV file?): a stream "
                "needs SNAP rows, user<TAB>time<TAB>lat<TAB>lon<TAB>location"
            )
        if not region.contains(row.lat, row.lon):
            counts.outside_region += 1
            continue
        cell = region.cell_of(row.lat, row.lon)
        if cell is None:  # not finite: the reader rejects those already
            counts.outside_region += 1
            continue
        yield StreamEvent(row.user, int(row.time.timestamp()), cell)


def events_from_arrays(arrays: CheckInArrays) -> Iterator[StreamEvent]:
    """The events of a loaded region (:func:`~shuffledp.simulations.data.checkins.load_checkin_arrays`)
    sorted by time (stable). StreamError for a file without users or times (lat,lon CSV)."""
    if len(arrays) and not (arrays.has_users and arrays.has_times):
        raise StreamError(
            f"{arrays.stats.source} has no users or times ({arrays.stats.format} rows): a stream "
            "needs SNAP rows, user<TAB>time<TAB>lat<TAB>lon<TAB>location"
        )
    ordered = arrays.by_time()
    names = ordered.user_names
    for user, time_s, cell in zip(
        ordered.user.tolist(), ordered.time.tolist(), ordered.cell.tolist(), strict=True
    ):
        yield StreamEvent(names[user], time_s, cell)


def sorted_events(events: Iterable[StreamEvent]) -> list[StreamEvent]:
    """All events sorted by time; stable, so equal times keep input order."""
    return sorted(events, key=lambda event: event.time)


@dataclass(frozen=True, slots=True, kw_only=True)
class Epoch:
    """One closed epoch: ``index`` from the stream's first epoch, [start, end) in Unix seconds,
    each active user's report (time, cell of its latest check-in), check-ins counted."""

    index: int
    start: int
    end: int
    reports: dict[str, tuple[int, int]]
    checkins: int


@dataclass(frozen=True, slots=True, kw_only=True)
class EmptyEpochs:
    """A run of consecutive epochs without any check-in in the region."""

    first: int
    last: int
    start: int
    end: int


class EpochAssembler:
    """Groups time-ordered events into epochs: :meth:`push` each event, then :meth:`finish`;
    both return what they closed (an Epoch, preceded by an EmptyEpochs for a gap). An event
    older than the current epoch is late: dropped and counted in ``counts``."""

    def __init__(self, length: int, counts: InputCounts) -> None:
        require_int("epoch length (s)", length, 1)
        self.length = length
        self.counts = counts
        self._origin: int | None = None  # absolute epoch number of stream epoch 0
        self._current: int | None = None
        self._reports: dict[str, tuple[int, int]] = {}
        self._checkins = 0

    def _bounds(self, absolute: int) -> tuple[int, int]:
        start = EPOCH_ORIGIN + absolute * self.length
        return start, start + self.length

    def push(self, event: StreamEvent) -> list[Epoch | EmptyEpochs]:
        absolute = epoch_number(event.time, self.length)
        closed: list[Epoch | EmptyEpochs] = []
        if self._current is None:
            self._origin = self._current = absolute
        elif absolute < self._current:
            self.counts.late += 1
            if len(self.counts.late_examples) < 5:
                self.counts.late_examples.append(f"user {event.user} at {_iso(event.time)}")
            return closed
        elif absolute > self._current:
            closed.append(self._close())
            if absolute > self._current + 1:
                assert self._origin is not None
                first, last = self._current + 1, absolute - 1
                closed.append(
                    EmptyEpochs(
                        first=first - self._origin,
                        last=last - self._origin,
                        start=self._bounds(first)[0],
                        end=self._bounds(last)[1],
                    )
                )
            self._current = absolute
        self._checkins += 1
        previous = self._reports.get(event.user)
        if previous is None or event.time > previous[0]:
            self._reports[event.user] = (event.time, event.cell)
        return closed

    def finish(self) -> list[Epoch | EmptyEpochs]:
        return [] if self._current is None else [self._close()]

    def _close(self) -> Epoch:
        assert self._current is not None and self._origin is not None
        start, end = self._bounds(self._current)
        epoch = Epoch(
            index=self._current - self._origin,
            start=start,
            end=end,
            reports=self._reports,
            checkins=self._checkins,
        )
        self._reports, self._checkins = {}, 0
        return epoch


# ----------------------------------------------------------------------------------------------
# Per-user accounting


@dataclass(frozen=True, slots=True, kw_only=True)
class WorstHistory:
    """The weakest guarantee among users: ``eps`` at ``delta_target`` (and ``delta_at_budget``,
    the delta at the budget's eps), the round sizes of that history in epoch order for one user
    holding it (``epochs``, ``sizes``), and how many users share the same multiset of sizes."""

    eps: float
    delta_target: float
    delta_at_budget: float | None
    rounds: int
    epochs: tuple[int, ...]
    sizes: tuple[int, ...]
    users: int
    pair: str


class UserLedger:
    """Each user's rounds and the composed guarantee (module docstring, "Privacy", "Cost").

    A round of size n >= 2 is ShuffledKRR(n, k, eps0); n = 1 is one k-RR report alone.
    """

    def __init__(
        self,
        *,
        k: int,
        eps0: float,
        discretization: float = STREAM_DISCRETIZATION,
        max_bytes: int = LEDGER_MAX_BYTES,
    ) -> None:
        from shuffledp.accountant.composition import default_families

        ShuffledKRR(n=2, k=k, eps0=eps0)  # validates k and eps0
        require_positive("discretization", discretization)
        require_int("max_bytes", max_bytes, 0)
        self.k, self.eps0, self.discretization = k, float(eps0), float(discretization)
        self.max_bytes = max_bytes
        self.families = default_families()
        self._round_cache: dict[int, tuple[FamilyPLD, ...]] = {}
        #: sorted round sizes -> per-family composed PLD (None: saturated), least recently used
        #: first
        self._composed: OrderedDict[tuple[int, ...], tuple[FamilyPLD, ...]] = OrderedDict()
        self._bytes: dict[tuple[int, ...], int] = {}
        #: key -> number of users whose history it is
        self._holders: Counter[tuple[int, ...]] = Counter()
        #: user -> sorted round sizes (the memo key)
        self.keys: dict[str, tuple[int, ...]] = {}
        #: user -> [(stream epoch, n)] in epoch order
        self.history: dict[str, list[tuple[int, int]]] = {}
        self.exhausted: set[str] = set()
        self.seconds = 0.0
        self.compositions = 0
        self.evictions = 0
        self.peak_bytes = 0

    def round_plds(self, n: int) -> tuple[FamilyPLD, ...]:
        """One PLD per family for a round of n reports."""
        from shuffledp.accountant.composition import local_krr_pld, pair_fast_pld

        require_int("round size", n, 1)
        if n not in self._round_cache:
            if n == 1:
                local = local_krr_pld(self.k, self.eps0, self.discretization)
                self._round_cache[n] = tuple(local for _ in self.families)
            else:
                mech = ShuffledKRR(n=n, k=self.k, eps0=self.eps0)
                self._round_cache[n] = tuple(
                    pair_fast_pld(family, mech, self.discretization) for family in self.families
                )
        return self._round_cache[n]

    def composed(
        self, key: tuple[int, ...], n: int
    ) -> tuple[tuple[int, ...], tuple[FamilyPLD, ...]]:
        """The history ``key`` plus a round of n: its key and per-family composed PLDs."""
        from shuffledp.accountant.composition import compose_family

        child = tuple(sorted((*key, n)))
        cached = self._composed.get(child)
        if cached is not None:
            self._composed.move_to_end(child)
            return child, cached
        round_plds = self.round_plds(n)
        if not key:
            result = round_plds
        else:
            parent = self._composed.get(key)
            if parent is None:  # pruned or never built: rebuild from the root
                _, parent = self._rebuild(key)
            result = tuple(compose_family(a, b) for a, b in zip(parent, round_plds, strict=True))
            self.compositions += len(result)
        self._composed[child] = result
        self._bytes[child] = sum(0 if pld is None else pld.nbytes for pld in result)
        return child, result

    def _plds_of(self, key: tuple[int, ...]) -> tuple[FamilyPLD, ...]:
        """A held history's composed PLDs: stored, or rebuilt (then the rebuild's intermediate
        steps are dropped again)."""
        plds = self._composed.get(key)
        if plds is None:
            _, plds = self._rebuild(key)
            self.prune()
        return plds

    def _rebuild(self, key: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[FamilyPLD, ...]]:
        current: tuple[int, ...] = ()
        plds: tuple[FamilyPLD, ...] = ()
        for n in key:
            current, plds = self.composed(current, n)
        return current, plds

    def delta_at(self, plds: Sequence[FamilyPLD], eps: float) -> tuple[float, str]:
        """min over families of the composed delta at eps, and the family that gave it."""
        from shuffledp.accountant.composition import family_delta

        values = [family_delta(pld, eps) for pld in plds]
        best = int(np.argmin(values))
        return values[best], self.families[best].name

    def eps_at(self, plds: Sequence[FamilyPLD], delta: float) -> tuple[float, str]:
        """min over families of the composed eps at delta, and the family that gave it."""
        from shuffledp.accountant.composition import family_eps

        values = [family_eps(pld, delta) for pld in plds]
        best = int(np.argmin(values))
        return values[best], self.families[best].name

    def delta_after(self, user: str, n: int, eps: float) -> float:
        """The user's composed delta at eps if it also took part in a round of n."""
        started = time.perf_counter()
        _, plds = self.composed(self.keys.get(user, ()), n)
        value = self.delta_at(plds, eps)[0]
        self.seconds += time.perf_counter() - started
        return value

    def charge(self, user: str, epoch: int, n: int) -> None:
        """Record that the user took part in stream epoch ``epoch``'s round of n."""
        started = time.perf_counter()
        previous = self.keys.get(user, ())
        key, _ = self.composed(previous, n)
        self.keys[user] = key
        self._holders[key] += 1
        if previous:
            self._holders[previous] -= 1
            if self._holders[previous] <= 0:
                # Nobody holds it any more (the others of this round already have the child).
                del self._holders[previous]
                self._forget(previous)
        self.history.setdefault(user, []).append((epoch, n))
        self.seconds += time.perf_counter() - started

    def _forget(self, key: tuple[int, ...]) -> None:
        if key in self._composed:
            del self._composed[key]
            del self._bytes[key]

    def user_delta(self, user: str, eps: float) -> float:
        """The user's composed delta at eps over the rounds it took part in (0 for none)."""
        key = self.keys.get(user, ())
        if not key:
            return 0.0
        started = time.perf_counter()
        value = self.delta_at(self._plds_of(key), eps)[0]
        self.seconds += time.perf_counter() - started
        return value

    def prune(self) -> None:
        """Forget composed PLDs no user's history is, then the least recently used ones while
        they hold more than ``max_bytes`` (rebuilt from the rounds if needed again)."""
        for key in [key for key in self._composed if key not in self._holders]:
            self._forget(key)
        total = sum(self._bytes.values())
        self.peak_bytes = max(self.peak_bytes, total)
        while total > self.max_bytes and self._composed:
            key, _ = self._composed.popitem(last=False)
            total -= self._bytes.pop(key)
            self.evictions += 1

    @property
    def stored_histories(self) -> int:
        return len(self._composed)

    def worst(self, delta_target: float, budget: Budget | None) -> WorstHistory | None:
        """The history with the largest composed eps at ``delta_target`` (ties: the larger
        delta at the budget's eps), or None when nobody reported."""
        started = time.perf_counter()
        holders: dict[tuple[int, ...], list[str]] = {}
        for user, key in self.keys.items():
            holders.setdefault(key, []).append(user)
        best: tuple[float, float, tuple[int, ...], str] | None = None
        for key in holders:
            plds = self._plds_of(key)
            eps, pair = self.eps_at(plds, delta_target)
            at_budget = self.delta_at(plds, budget.eps)[0] if budget is not None else -1.0
            candidate = (eps, at_budget, key, pair)
            if best is None or (candidate[0], candidate[1]) > (best[0], best[1]):
                best = candidate
        self.seconds += time.perf_counter() - started
        if best is None:
            return None
        eps, at_budget, key, pair = best
        example = min(holders[key], key=lambda user: self.history[user])
        rounds = self.history[example]
        return WorstHistory(
            eps=eps,
            delta_target=delta_target,
            delta_at_budget=None if budget is None else at_budget,
            rounds=len(key),
            epochs=tuple(epoch for epoch, _ in rounds),
            sizes=tuple(n for _, n in rounds),
            users=len(holders[key]),
            pair=pair,
        )


# ----------------------------------------------------------------------------------------------
# The stream


#: Runs one round: (true values, round id, dataset label) -> the report (PipelineSession's).
RoundRunner = Callable[[npt.NDArray[np.int64], int, str], Awaitable[dict[str, Any]]]


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


class StreamRunner:
    """Runs epochs through a round runner and keeps every user's account.

    ``await runner.run(events)`` processes time-ordered events (a sorted file, or standard
    input as it arrives: late ones are dropped), calls ``on_record`` with each epoch's record
    as soon as it is known, and returns the summary record.
    """

    def __init__(
        self,
        settings: StreamSettings,
        round_runner: RoundRunner,
        *,
        counts: InputCounts | None = None,
        on_record: Callable[[dict[str, Any]], None] | None = None,
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
        self.epochs_seen = 0
        self.stopped_early = False
        self._tally: dict[str, int] = {
            "epochs_run": 0,
            "epochs_skipped": 0,
            "epochs_empty": 0,
            "epochs_failed": 0,
            "budget_cut_offs": 0,
            "over_budget_after_round": 0,
        }
        self._skip_reasons: dict[str, int] = {}
        self._users: set[str] = set()
        self._checkins = 0

    async def run(self, events: Iterable[StreamEvent]) -> dict[str, Any]:
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
            last = closed.last
            if limit is not None:
                last = min(last, limit - 1)
            count = last - closed.first + 1
            if count <= 0:
                self.stopped_early = True
                return False
            self.epochs_seen += count
            self._tally["epochs_empty"] += count
            end = closed.start + count * self.settings.epoch_seconds
            self._emit(
                {
                    "type": "empty",
                    "first_epoch": closed.first,
                    "last_epoch": last,
                    "epochs": count,
                    "start": _iso(closed.start),
                    "end": _iso(end),
                    "status": "skipped",
                    "reason": "no check-in in the region",
                }
            )
        else:
            if limit is not None and closed.index >= limit:
                self.stopped_early = True
                return False
            self.epochs_seen += 1
            self._emit(await self._run_epoch(closed))
        if limit is not None and self.epochs_seen >= limit:
            self.stopped_early = True
            return False
        return True

    def _emit(self, record: dict[str, Any]) -> None:
        if self.on_record is not None:
            self.on_record(record)

    def plan(self, active: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
        """(reporters, newly cut off, already exhausted) among the epoch's active users.

        The fixed point of module docstring "Budget": check everyone eligible at n = their
        number, drop those over budget, recheck the rest at the smaller n, until stable.
        """
        ledger, budget = self.ledger, self.settings.budget
        exhausted = [user for user in active if user in ledger.exhausted]
        eligible = [user for user in active if user not in ledger.exhausted]
        if budget is None:
            return eligible, [], exhausted
        cut: list[str] = []
        reporters = eligible
        while len(reporters) >= self.settings.min_users:
            n = len(reporters)
            passing = [u for u in reporters if ledger.delta_after(u, n, budget.eps) <= budget.delta]
            if len(passing) == n:
                break
            kept = set(passing)
            cut.extend(user for user in reporters if user not in kept)
            reporters = passing
        return reporters, cut, exhausted

    async def _run_epoch(self, epoch: Epoch) -> dict[str, Any]:
        settings, ledger = self.settings, self.ledger
        active = sorted(epoch.reports)
        self._users.update(active)
        self._checkins += epoch.checkins
        record: dict[str, Any] = {
            "type": "epoch",
            "epoch": epoch.index,
            "start": _iso(epoch.start),
            "end": _iso(epoch.end),
            "checkins": epoch.checkins,
            "users_active": len(active),
        }
        reporters, cut, exhausted = self.plan(active)
        for user in cut:
            ledger.exhausted.add(user)
        self._tally["budget_cut_offs"] += len(cut)
        record["cut_off"] = len(cut)
        record["budget_exhausted"] = len(cut) + len(exhausted)
        record["users_reporting"] = len(reporters) if len(reporters) >= settings.min_users else 0
        if len(reporters) < settings.min_users:
            reason = (
                f"{len(reporters)} users can report, below the minimum of {settings.min_users}"
                + (" after budget cut-offs" if cut or exhausted else "")
            )
            return self._skip(record, reason, "below --min-users")
        values = np.array([epoch.reports[user][1] for user in reporters], dtype=np.int64)
        label = (
            f"{settings.source_label}: epoch {epoch.index} [{record['start']}, {record['end']}), "
            f"latest check-in per user in {settings.region.name}"
        )
        try:
            report = await self.round_runner(values, epoch.index, label)
        except self.refused as exc:
            return self._skip(record, f"round refused, nothing published: {exc}", "refused")
        except self.failed as exc:
            # The reports were sent: charge each as a lone k-RR report (module docstring).
            for user in reporters:
                ledger.charge(user, epoch.index, 1)
            ledger.prune()
            self._tally["epochs_failed"] += 1
            record.update(status="failed", error=str(exc), charged_n=1)
            return record
        n_received = int(report["n_received"])
        # More than were sent cannot be to anyone's benefit: charge at most what was sent.
        charged = min(n_received, len(reporters))
        over = 0
        if charged >= 1:
            for user in reporters:
                ledger.charge(user, epoch.index, charged)
            if settings.budget is not None and charged < len(reporters):
                for user in reporters:
                    if ledger.user_delta(user, settings.budget.eps) > settings.budget.delta:
                        over += 1
                        ledger.exhausted.add(user)
        ledger.prune()
        self._tally["epochs_run"] += 1
        self._tally["over_budget_after_round"] += over
        record.update(report)
        record["status"] = "run"
        record["charged_n"] = charged
        record["over_budget_after_round"] = over
        record["top_cells"] = _top_cells(report)
        return record

    def _skip(self, record: dict[str, Any], reason: str, key: str) -> dict[str, Any]:
        self.ledger.prune()
        self._tally["epochs_skipped"] += 1
        self._skip_reasons[key] = self._skip_reasons.get(key, 0) + 1
        record.update(status="skipped", reason=reason)
        return record

    def summary(self, seconds: float) -> dict[str, Any]:
        settings, ledger = self.settings, self.ledger
        delta_target = settings.budget.delta if settings.budget else settings.target_delta
        worst = ledger.worst(delta_target, settings.budget)
        worst_out: dict[str, Any] | None = None
        if worst is not None:
            worst_out = {
                "eps": _finite_or_none(worst.eps),
                "delta": worst.delta_target,
                "delta_at_budget_eps": worst.delta_at_budget,
                "rounds": worst.rounds,
                "epochs": list(worst.epochs),
                "round_sizes": list(worst.sizes),
                "users_with_this_history": worst.users,
                "bound": worst.pair,
            }
            if not math.isfinite(worst.eps):
                worst_out["note"] = f"no finite eps reaches delta = {delta_target:g}"
        reported = sum(1 for user in self._users if ledger.history.get(user))
        return {
            "type": "summary",
            "epochs": self.epochs_seen,
            **self._tally,
            "skipped_by_reason": dict(self._skip_reasons),
            "stopped_at_max_epochs": self.stopped_early,
            "checkins_in_epochs": self._checkins,
            "outside_region": self.counts.outside_region,
            "late": self.counts.late,
            "late_examples": list(self.counts.late_examples),
            "users": len(self._users),
            "users_reported": reported,
            "users_cut_off": len(ledger.exhausted),
            "budget": None
            if settings.budget is None
            else {"eps": settings.budget.eps, "delta": settings.budget.delta},
            "worst_user": worst_out,
            "composition": {
                "method": "dp-accounting PLDs of each bound family's dominating pair, one per "
                "round, composed; minimum over families (pessimistic rounding)",
                "discretization": settings.discretization,
                "families": [family.name for family in ledger.families],
                "compositions": ledger.compositions,
                "stored_peak_mib": round(ledger.peak_bytes / 2**20, 1),
                "evictions": ledger.evictions,
                "accountant_seconds": round(ledger.seconds, 3),
            },
            "region": settings.region.describe(),
            "epoch_seconds": settings.epoch_seconds,
            "eps0": settings.eps0,
            "k": settings.region.k,
            "seconds": round(seconds, 3),
        }


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _top_cells(report: dict[str, Any], count: int = 3) -> dict[str, list[int]]:
    """The ``count`` largest cells of the estimate and of the true histogram."""
    out: dict[str, list[int]] = {}
    estimate = (report.get("estimate") or {}).get("counts")
    if estimate:
        out["estimate"] = [int(i) for i in np.argsort(-np.asarray(estimate), kind="stable")[:count]]
    truth = report.get("true_histogram")
    if truth:
        out["true"] = [int(i) for i in np.argsort(-np.asarray(truth), kind="stable")[:count]]
    return out
