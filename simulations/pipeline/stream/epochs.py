"""Epochs: fixed UTC-aligned windows of time, and the grouping of time-ordered events into them.

Epochs are windows of ``length`` seconds (``--epoch 7d``; units h, d, w), aligned in UTC to the
origin :data:`EPOCH_ORIGIN` = Monday 1970-01-05 00:00:00 UTC: epoch number
``e = floor((t - origin) / length)`` covers [origin + e length, origin + (e + 1) length). Hourly
and daily epochs thus start on the hour and at midnight UTC, weekly ones on Mondays. A check-in
exactly on a boundary belongs to the later epoch. The stream's epoch 0 is the window of its
first check-in; epochs are numbered from there, and a round's id is its stream epoch number.

Events must come in time order: one older than the current epoch's start is *late*, dropped
and counted; the current epoch closes when an event of a later epoch arrives, or when the input
ends. A run of epochs with no event at all closes as one :class:`EmptyEpochs`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from shuffledp.errors import InvalidParameterError
from shuffledp.simulations.pipeline.stream.events import InputCounts, StreamEvent
from shuffledp.validation import require_int

__all__ = [
    "EPOCH_ORIGIN",
    "EPOCH_UNITS",
    "MAX_EPOCH_SECONDS",
    "EmptyEpochs",
    "Epoch",
    "EpochAssembler",
    "epoch_number",
    "iso_time",
    "parse_epoch_length",
]

#: Epoch origin: Monday 1970-01-05 00:00:00 UTC, in Unix seconds (4 days after the Unix epoch,
#: a Thursday), so that weekly epochs start on Mondays; a multiple of an hour and of a day.
EPOCH_ORIGIN = 4 * 86_400

#: Seconds per unit of ``--epoch``.
EPOCH_UNITS = {"h": 3_600, "d": 86_400, "w": 604_800}

#: Longest epoch accepted (10 years), to catch unit mistakes.
MAX_EPOCH_SECONDS = 3_650 * 86_400

#: How many late check-ins are kept as examples for the summary.
LATE_EXAMPLES = 5


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


def iso_time(time_s: int) -> str:
    """Unix seconds as the records write them: ``2010-03-01T00:00:00Z`` (UTC)."""
    return datetime.fromtimestamp(time_s, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
    older than the current epoch is late: dropped and counted in ``counts``.

    Each active user's report is the cell of its *latest* check-in of the epoch (for equal
    times, the first one read).
    """

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
            self._count_late(event)
            return closed
        elif absolute > self._current:
            closed.append(self._close())
            if absolute > self._current + 1:
                closed.append(self._gap(self._current + 1, absolute - 1))
            self._current = absolute
        self._checkins += 1
        previous = self._reports.get(event.user)
        if previous is None or event.time > previous[0]:
            self._reports[event.user] = (event.time, event.cell)
        return closed

    def finish(self) -> list[Epoch | EmptyEpochs]:
        return [] if self._current is None else [self._close()]

    def _count_late(self, event: StreamEvent) -> None:
        self.counts.late += 1
        if len(self.counts.late_examples) < LATE_EXAMPLES:
            self.counts.late_examples.append(f"user {event.user} at {iso_time(event.time)}")

    def _gap(self, first: int, last: int) -> EmptyEpochs:
        """Absolute epochs first..last, none with a check-in, numbered from the stream's start."""
        assert self._origin is not None
        return EmptyEpochs(
            first=first - self._origin,
            last=last - self._origin,
            start=self._bounds(first)[0],
            end=self._bounds(last)[1],
        )

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
