"""The stream's input: check-ins inside the region as time-ordered events (user, time, cell).

A file is read whole (only the rows inside the region are kept, compactly), then sorted by time
(stable, so equal times keep file order): SNAP files are newest-first per user, not globally
sorted. Standard input (``-``) is consumed as it arrives and must come in time order; what is
late is decided when events are grouped into epochs (:mod:`.epochs`). Rows without a user or a
time (lat,lon CSV files) cannot form a stream: a clear error (:class:`StreamError`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from shuffledp.errors import OperationalError
from shuffledp.simulations.data.regions import Region

if TYPE_CHECKING:
    from shuffledp.simulations.data.checkins import CheckInArrays

__all__ = [
    "CheckInLike",
    "InputCounts",
    "StreamError",
    "StreamEvent",
    "events_from_arrays",
    "events_from_checkins",
    "sorted_events",
]

#: What a stream needs of its input, for the errors that say it is not there.
NEEDS_SNAP = "a stream needs SNAP rows, user<TAB>time<TAB>lat<TAB>lon<TAB>location"


class StreamError(OperationalError):
    """The input cannot form a stream (e.g. rows without time); the message says why."""


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
                f"the input has rows without a user or a time (a lat,lon CSV file?): {NEEDS_SNAP}"
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
            f"{arrays.stats.source} has no users or times ({arrays.stats.format} rows): "
            f"{NEEDS_SNAP}"
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
