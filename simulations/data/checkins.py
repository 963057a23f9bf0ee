"""Check-in files: the SNAP Gowalla format and plain ``lat,lon`` CSV, read line by line.

Formats (``format="auto"`` tells them apart by the first non-blank line: a tab means SNAP, one
comma means lat,lon; anything else is an error that names both):

- SNAP (Cho, Myers and Leskovec 2011, ``loc-gowalla_totalCheckins.txt.gz``), one check-in a line:
  ``user<TAB>YYYY-MM-DDTHH:MM:SSZ<TAB>latitude<TAB>longitude<TAB>location_id``, times in UTC.
  The full file is newest first per user, not sorted by time overall.
- lat,lon CSV: ``latitude,longitude`` a line, no user and no time. A first non-blank line
  ``lat,lon`` or ``latitude,longitude`` (any case) is a header: it is recorded in
  :attr:`LoadStats.header` and is neither a row nor a rejection.

A path may be plain or gzip-compressed (recognised by its first two bytes, whatever its name);
``"-"`` reads standard input (also gzip or plain); an open text or binary stream is read as it
is; a UTF-8 byte order mark at the start is ignored. Files are read in chunks and split at
``\\n`` only (a ``\\r`` before it is dropped, so CRLF files work), never loaded whole: the full
SNAP file (6.4 million lines) streams through in about 50 s. Line numbers count every line,
blank ones included.

Nothing in a data line is fatal. A line that is blank (whitespace only) is skipped and is not a
row; every other line is one row, either accepted or rejected under exactly one reason, the
first that applies in this order:

``line-too-long``            longer than 64 KiB (:data:`MAX_LINE_BYTES`), never held whole
``not-utf8``                 undecodable bytes (the rest of the file is still read)
``wrong-field-count``        not 5 tab-separated fields (SNAP) or not 2 comma-separated (CSV)
``bad-user``                 SNAP user empty or containing white space
``bad-time``                 not ``YYYY-MM-DDTHH:MM:SSZ`` or not a real date and time
``bad-latitude``             not a plain decimal number (``nan``, ``inf``, ``1_0``, "", ...)
``latitude-out-of-range``    ``|lat| > 90``
``bad-longitude``            as for the latitude
``longitude-out-of-range``   ``|lon| > 180``
``bad-location``             SNAP location id empty or containing white space
``truncated``                the incomplete last line of a truncated or corrupt gzip file

(0, 0) is a valid coordinate (SNAP has a few such rows); they fall outside every region.
A corrupt gzip file's damage may only be detected at its end (the CRC check): lines yielded
before that may hold damaged data, which the stats then report.

A truncated or corrupt gzip file is not an error: every complete line before the damage is
kept, the incomplete last line (a number cut short would look valid) is rejected as
``truncated``, and :attr:`LoadStats.truncated` says which file and the line reached; the
summary says it too. An unreadable path, a directory or a text stream that raises a decoding
error is an error (:class:`CheckInReadError`) naming the source.

Region filtering is separate (:mod:`shuffledp.simulations.data.regions`):
:func:`checkins_in_region` streams ``(check-in, cell)`` pairs, and
:func:`load_checkin_arrays` keeps a region's check-ins as compact numpy arrays
(:class:`CheckInArrays`: user codes, times, cells) with :meth:`CheckInArrays.most_recent_cells`,
the "one report per user" rule of ``shuffledp simulate``.
"""

from __future__ import annotations

import gzip
import io
import math
import os
import re
import sys
import zlib
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any, TextIO, cast

import numpy as np
import numpy.typing as npt

from shuffledp.errors import InvalidParameterError
from shuffledp.simulations.data.regions import DECIMAL_NUMBER, Region

__all__ = [
    "FORMATS",
    "MAX_LINE_BYTES",
    "REASONS",
    "CheckIn",
    "CheckInArrays",
    "CheckInReadError",
    "CheckInReader",
    "LoadStats",
    "RegionCheckIns",
    "checkins_in_region",
    "load_checkin_arrays",
]

FORMATS = ("auto", "snap", "latlon")
"""Accepted values of ``format``."""

REASONS = (
    "line-too-long",
    "not-utf8",
    "wrong-field-count",
    "bad-user",
    "bad-time",
    "bad-latitude",
    "latitude-out-of-range",
    "bad-longitude",
    "longitude-out-of-range",
    "bad-location",
    "truncated",
)
"""Every rejection reason, in the order they are checked (module docstring)."""

MAX_LINE_BYTES = 1 << 16
"""Longest line read (64 KiB; a SNAP line is about 60 bytes): a longer one is rejected as
``line-too-long`` without being held whole, so a file without line ends cannot fill memory."""

EXAMPLES_PER_REASON = 5
"""Line numbers kept per rejection reason in :attr:`LoadStats.examples`."""

_CHUNK_BYTES = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"
_SNAP_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")
_HEADERS = ("lat,lon", "latitude,longitude")
_SNAP_SHAPE = "SNAP check-ins (user<TAB>YYYY-MM-DDTHH:MM:SSZ<TAB>lat<TAB>lon<TAB>location_id)"
_LATLON_SHAPE = "lat,lon CSV (latitude,longitude per line, optional header lat,lon)"


class CheckInReadError(InvalidParameterError):
    """The source cannot be read at all (missing, unreadable, format not recognisable); the
    message names the source. Broken lines are never this: they are counted rejections."""


@dataclass(frozen=True, slots=True)
class CheckIn:
    """One accepted check-in."""

    user: str | None
    """The SNAP user id; None in lat,lon CSV files (no user column)."""
    time: datetime | None
    """Timezone-aware UTC; None in lat,lon CSV files."""
    lat: float
    lon: float
    location: str | None
    """The SNAP location id; None in lat,lon CSV files."""


@dataclass(slots=True)
class LoadStats:
    """What a :class:`CheckInReader` saw; filled while it is iterated.

    Invariant once the reader is exhausted: ``rows == accepted + sum(rejected.values())``.
    """

    source: str = ""
    """The file name, ``<stdin>`` or the stream's name, for messages."""
    format: str | None = None
    """``snap`` or ``latlon`` once known (None before the first non-blank line)."""
    rows: int = 0
    """Non-blank lines seen, the header excepted."""
    accepted: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    """Reason -> rows rejected for it (the reasons of :data:`REASONS`)."""
    examples: dict[str, list[int]] = field(default_factory=dict)
    """Reason -> the first few line numbers (1-based, counting blank lines) rejected for it."""
    lines: int = 0
    """Lines read, blank ones and the header included."""
    header: str | None = None
    """The CSV header line if the file had one."""
    truncated: str | None = None
    """Why reading stopped early (a truncated or corrupt gzip file), else None."""

    def reject(self, reason: str, line_number: int) -> None:
        self.rejected[reason] += 1
        kept = self.examples.setdefault(reason, [])
        if len(kept) < EXAMPLES_PER_REASON:
            kept.append(line_number)

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())

    def summary(self) -> str:
        """One line, e.g. ``17,496 rows: 17,490 accepted, 6 rejected (bad-latitude 4,
        wrong-field-count 2)``, plus the header and any truncation."""
        text = f"{self.rows:,} rows: {self.accepted:,} accepted, {self.rejected_total:,} rejected"
        if self.rejected_total:
            reasons = sorted(self.rejected.items(), key=lambda item: (-item[1], item[0]))
            text += " (" + ", ".join(f"{reason} {count:,}" for reason, count in reasons) + ")"
        if self.header is not None:
            text += f"; header line {self.header!r} skipped"
        if self.truncated is not None:
            text += f"; {self.truncated}"
        return text

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (reports)."""
        return {
            "source": self.source,
            "format": self.format,
            "rows": self.rows,
            "accepted": self.accepted,
            "rejected": dict(sorted(self.rejected.items())),
            "rejected_examples": {k: list(v) for k, v in sorted(self.examples.items())},
            "header": self.header,
            "truncated": self.truncated,
        }


class CheckInReader:
    """Iterate the accepted check-ins of a file or stream, in file order, counting the rest.

    ``source``: a path (plain or gzip), ``"-"`` for standard input, or an open text or binary
    stream (not closed here). ``format``: ``auto``, ``snap`` or ``latlon``. A reader makes one
    pass: iterating it a second time is an error. :attr:`stats` fills while it is iterated.
    """

    def __init__(
        self, source: str | os.PathLike[str] | TextIO | IO[bytes], *, format: str = "auto"
    ) -> None:
        if format not in FORMATS:
            raise InvalidParameterError(
                f"format must be one of {', '.join(FORMATS)}, got {format!r}"
            )
        if isinstance(source, str | os.PathLike):
            path = os.fspath(source)
            if not path:
                raise InvalidParameterError("a check-in source path must not be empty")
            name = "<stdin>" if path == "-" else path
        elif hasattr(source, "read"):
            name = str(getattr(source, "name", "<stream>"))
        else:
            raise InvalidParameterError(
                f"source must be a path, '-' or an open stream, got {type(source).__name__}"
            )
        self._source = source
        self._format = format
        self._started = False
        self.stats = LoadStats(source=name)

    def __iter__(self) -> Iterator[CheckIn]:
        if self._started:
            raise RuntimeError(f"a CheckInReader reads its source once ({self.stats.source})")
        self._started = True
        return self._read()

    # --- reading lines ------------------------------------------------------------------------

    def _read(self) -> Iterator[CheckIn]:
        stats = self.stats
        parse = None
        for number, text, problem in self._lines():
            stats.lines = number
            if number == 1 and text.startswith("\ufeff"):  # a UTF-8 byte order mark
                text = text[1:]
            if problem is None and not text.strip():
                continue
            if parse is None and problem != "line-too-long":  # the first line fixes the format
                fmt = self._format if self._format != "auto" else _detect(text, stats.source)
                stats.format = fmt
                parse = _parse_snap if fmt == "snap" else _parse_latlon
                if fmt == "latlon" and problem is None and _is_header(text):
                    stats.header = text.strip()
                    continue
            stats.rows += 1
            if problem is not None or parse is None:
                stats.reject(problem or "line-too-long", number)
                continue
            result = parse(text)
            if isinstance(result, str):
                stats.reject(result, number)
            else:
                stats.accepted += 1
                yield result

    def _lines(self) -> Iterator[tuple[int, str, str | None]]:
        """(line number, text without its line end, None or the line's problem: ``not-utf8``,
        or ``line-too-long`` with the text cut to its start)."""
        source = self._source
        if isinstance(source, str | os.PathLike):
            path = os.fspath(source)
            if path == "-":
                stdin = sys.stdin
                buffer = getattr(stdin, "buffer", None)
                if buffer is not None:
                    yield from self._binary_lines(_maybe_gunzip(buffer))
                else:  # a replaced sys.stdin (a text stream without bytes underneath)
                    yield from self._text_lines(stdin)
                return
            try:
                handle = open(path, "rb")  # noqa: SIM115 (closed in the finally below)
            except OSError as exc:
                hint = ""
                if isinstance(exc, FileNotFoundError):
                    from shuffledp.simulations.data.fetch import fetch_command

                    hint = (
                        f" (the Gowalla check-ins: `{fetch_command()}` prints where it saved them)"
                    )
                raise CheckInReadError(
                    f"cannot read the check-in file {path}: {exc.strerror or exc}{hint}"
                ) from None
            try:
                yield from self._binary_lines(_maybe_gunzip(handle))
            finally:
                handle.close()
            return
        if isinstance(source, io.TextIOBase) or not _is_binary(source):
            yield from self._text_lines(source)  # type: ignore[arg-type]
        else:
            yield from self._binary_lines(_maybe_gunzip(source))  # type: ignore[arg-type]

    def _binary_lines(self, stream: IO[bytes]) -> Iterator[tuple[int, str, str | None]]:
        number = 0
        rest = b""
        overlong = False  # inside a line longer than MAX_LINE_BYTES: skipping to its end
        damaged: str | None = None
        # read1: at most one read underneath, so a gzip error loses no data decoded before it
        # (read(size) of a GzipFile would drop a partly filled buffer on EOFError).
        read = getattr(stream, "read1", stream.read)
        while True:
            try:
                chunk = read(_CHUNK_BYTES)
            except EOFError:
                damaged = "compressed data ends early (truncated gzip file)"
                break
            except (gzip.BadGzipFile, zlib.error) as exc:
                damaged = f"corrupt gzip data ({exc})"
                break
            except OSError as exc:
                raise CheckInReadError(
                    f"cannot read {self.stats.source} after line {number}: {exc.strerror or exc}"
                ) from None
            if not chunk:
                break
            pieces = (rest + chunk).split(b"\n")
            rest = pieces.pop()
            for raw in pieces:
                number += 1
                if overlong:
                    overlong = False
                    yield number, "", "line-too-long"
                else:
                    yield (number, *_decode(raw))
            if len(rest) > MAX_LINE_BYTES:  # no line end in sight: keep memory bounded
                overlong, rest = True, b""
        if damaged is None:
            if rest or overlong:
                number += 1
                yield (number, "", "line-too-long") if overlong else (number, *_decode(rest))
            return
        message = f"{self.stats.source}: {damaged} after {number:,} complete lines"
        if rest.strip() or overlong:  # a line cut short: a number's prefix looks like a number
            number += 1
            self.stats.lines = number
            self.stats.rows += 1
            self.stats.reject("truncated", number)
            message += f"; the incomplete line {number:,} was rejected as truncated"
        self.stats.truncated = message

    def _text_lines(self, stream: TextIO) -> Iterator[tuple[int, str, str | None]]:
        number = 0
        try:
            for raw in stream:
                number += 1
                text = raw.rstrip("\n").removesuffix("\r")
                if len(text) > MAX_LINE_BYTES:
                    yield number, "", "line-too-long"
                    continue
                try:  # lone surrogates: bytes a surrogateescape stream could not decode
                    text.encode("utf-8")
                except UnicodeEncodeError:
                    yield number, text, "not-utf8"
                    continue
                yield number, text, None
        except UnicodeDecodeError as exc:
            raise CheckInReadError(
                f"{self.stats.source}: undecodable bytes after line {number:,} ({exc.reason}); "
                "pass a path or a binary stream (bad lines are then counted as not-utf8), or "
                "open the text stream with errors='surrogateescape'"
            ) from None


def _is_binary(stream: object) -> bool:
    if isinstance(stream, io.RawIOBase | io.BufferedIOBase):
        return True
    mode = getattr(stream, "mode", "")
    return isinstance(mode, str) and "b" in mode


def _maybe_gunzip(stream: IO[bytes]) -> IO[bytes]:
    """The stream itself, or a gzip reader over it if it starts with the gzip magic bytes."""
    if getattr(stream, "peek", None) is None:  # e.g. io.BytesIO: buffer it to look ahead
        stream = cast(IO[bytes], io.BufferedReader(cast(Any, stream)))
    head = bytes(cast(Any, stream).peek(2)[:2])
    if head == _GZIP_MAGIC:
        return cast(IO[bytes], gzip.GzipFile(fileobj=stream, mode="rb"))
    return stream


def _decode(raw: bytes) -> tuple[str, str | None]:
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    if len(raw) > MAX_LINE_BYTES:
        return "", "line-too-long"
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="surrogateescape"), "not-utf8"


def _detect(line: str, source: str) -> str:
    if "\t" in line:
        return "snap"
    if line.count(",") == 1:
        return "latlon"
    raise CheckInReadError(
        f"{source}: cannot tell the format from the first non-blank line {_quoted(line)}: "
        f"expected {_SNAP_SHAPE} or {_LATLON_SHAPE}"
    )


def _quoted(line: str) -> str:
    """The line quoted for a message; a line that is not text (a binary file) as its first
    bytes in hex, not as garbled characters."""
    if all(char.isprintable() or char == "\t" for char in line):
        return repr(line[:80])
    raw = line.encode("utf-8", errors="surrogateescape")[:16]
    return f"(not text: a binary or compressed file? its first bytes are {raw.hex(' ')})"


def _is_header(line: str) -> bool:
    return "".join(line.split()).lower() in _HEADERS


# --- parsing one line -------------------------------------------------------------------------


def _coordinate(text: str, limit: float, bad: str, out_of_range: str) -> float | str:
    """The coordinate, or the rejection reason."""
    text = text.strip()
    if DECIMAL_NUMBER.fullmatch(text) is None:
        return bad
    value = float(text)  # the pattern has no "nan" or "inf", but 1e400 overflows to inf
    if math.isinf(value):
        return bad
    if abs(value) > limit:
        return out_of_range
    return value


def _identifier(text: str) -> str | None:
    """A user or location id: non-empty, no white space inside."""
    text = text.strip()
    if not text or len(text.split()) != 1:
        return None
    return text


def _parse_snap(line: str) -> CheckIn | str:
    fields = line.split("\t")
    if len(fields) != 5:
        return "wrong-field-count"
    user = _identifier(fields[0])
    if user is None:
        return "bad-user"
    stamp = fields[1].strip()
    if _SNAP_TIME.fullmatch(stamp) is None:
        return "bad-time"
    try:
        time = datetime.fromisoformat(stamp)  # "...Z" is UTC (Python >= 3.11)
    except ValueError:  # e.g. February 30th, hour 24
        return "bad-time"
    lat = _coordinate(fields[2], 90.0, "bad-latitude", "latitude-out-of-range")
    if isinstance(lat, str):
        return lat
    lon = _coordinate(fields[3], 180.0, "bad-longitude", "longitude-out-of-range")
    if isinstance(lon, str):
        return lon
    location = _identifier(fields[4])
    if location is None:
        return "bad-location"
    return CheckIn(user, time, lat, lon, location)


def _parse_latlon(line: str) -> CheckIn | str:
    fields = line.split(",")
    if len(fields) != 2:
        return "wrong-field-count"
    lat = _coordinate(fields[0], 90.0, "bad-latitude", "latitude-out-of-range")
    if isinstance(lat, str):
        return lat
    lon = _coordinate(fields[1], 180.0, "bad-longitude", "longitude-out-of-range")
    if isinstance(lon, str):
        return lon
    return CheckIn(None, None, lat, lon, None)


# --- regions ----------------------------------------------------------------------------------


class RegionCheckIns:
    """The ``(check-in, cell)`` pairs of the check-ins inside a region, as they arrive (standard
    input is consumed as it comes); :attr:`inside` and :attr:`outside` count while iterating."""

    def __init__(self, checkins: Iterable[CheckIn], region: Region) -> None:
        self.region = region
        self.inside = 0
        self.outside = 0
        self._checkins = checkins

    def __iter__(self) -> Iterator[tuple[CheckIn, int]]:
        cell_of = self.region.cell_of
        for checkin in self._checkins:
            cell = cell_of(checkin.lat, checkin.lon)
            if cell is None:
                self.outside += 1
                continue
            self.inside += 1
            yield checkin, cell


def checkins_in_region(checkins: Iterable[CheckIn], region: Region) -> RegionCheckIns:
    """The check-ins inside ``region`` with their cells (:class:`RegionCheckIns`)."""
    return RegionCheckIns(checkins, region)


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckInArrays:
    """A region's check-ins as parallel arrays, in file order (one entry per check-in inside).

    ``user``: index into ``user_names`` (codes in order of first appearance), -1 for every row
    of a file without users (lat,lon CSV). ``time``: whole seconds since 1970-01-01 UTC, -1 for
    every row of a file without times. ``cell``: the region's cell. ``outside``: accepted
    check-ins that fell outside the region. ``stats``: the reader's counts.
    """

    region: Region
    user: npt.NDArray[np.int64]
    user_names: tuple[str, ...]
    time: npt.NDArray[np.int64]
    cell: npt.NDArray[np.int64]
    outside: int
    stats: LoadStats

    def __len__(self) -> int:
        return int(self.cell.size)

    @property
    def has_users(self) -> bool:
        """False for lat,lon files: there each row stands for one user."""
        return self.stats.format == "snap"

    @property
    def has_times(self) -> bool:
        return self.stats.format == "snap"

    @property
    def n_users(self) -> int:
        """Users with a check-in inside the region (rows, for a file without users)."""
        return len(self.user_names) if self.has_users else len(self)

    def cell_counts(self) -> npt.NDArray[np.int64]:
        """Check-ins per cell (length ``region.k``)."""
        return np.bincount(self.cell, minlength=self.region.k).astype(np.int64)

    def most_recent_cells(self) -> npt.NDArray[np.int64]:
        """One value per user: the cell of the user's most recent check-in inside the region
        (the latest time; of equal times, the first in file order), users in code order. For a
        file without users, every row is one user: the cells in file order."""
        if not self.has_users:
            return self.cell.copy()
        if len(self) == 0:
            return np.zeros(0, dtype=np.int64)
        # Sort by user, then newest first, then file order; the first row of each user wins.
        order = np.lexsort((np.arange(len(self)), -self.time, self.user))
        users = self.user[order]
        first = np.ones(users.size, dtype=bool)
        first[1:] = users[1:] != users[:-1]
        out: npt.NDArray[np.int64] = self.cell[order][first]
        return out

    def by_time(self) -> CheckInArrays:
        """The same check-ins sorted by time (stable: equal times keep file order)."""
        order = np.argsort(self.time, kind="stable")
        return CheckInArrays(
            region=self.region,
            user=self.user[order],
            user_names=self.user_names,
            time=self.time[order],
            cell=self.cell[order],
            outside=self.outside,
            stats=self.stats,
        )


def load_checkin_arrays(reader: CheckInReader | Iterable[CheckIn], region: Region) -> CheckInArrays:
    """Read every check-in (one pass) and keep those inside ``region`` as compact arrays.

    Memory is 24 bytes per check-in inside the region plus one string per user; rows outside
    are only counted, so the full SNAP file (6.4 million rows) loads for a city in little space.
    A plain iterable of :class:`CheckIn` works too (its stats then count only what was given).
    """
    codes: dict[str, int] = {}
    users = array("q")
    times = array("q")
    cells = array("q")
    inside = checkins_in_region(reader, region)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    for checkin, cell in inside:
        if checkin.user is None:
            users.append(-1)
        else:
            code = codes.get(checkin.user)
            if code is None:
                code = codes[checkin.user] = len(codes)
            users.append(code)
        times.append(-1 if checkin.time is None else (checkin.time - epoch) // _SECOND)
        cells.append(cell)
    if isinstance(reader, CheckInReader):
        stats = reader.stats
    else:  # a plain iterable: what it gave was all accepted
        total = inside.inside + inside.outside
        has_users = bool(codes)
        stats = LoadStats(
            source="<check-ins>",
            format="snap" if has_users else "latlon",
            rows=total,
            accepted=total,
        )
    return CheckInArrays(
        region=region,
        user=np.frombuffer(users, dtype=np.int64).copy(),
        user_names=tuple(codes),
        time=np.frombuffer(times, dtype=np.int64).copy(),
        cell=np.frombuffer(cells, dtype=np.int64).copy(),
        outside=inside.outside,
        stats=stats,
    )


_SECOND = datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)
