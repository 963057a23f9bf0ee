"""The check-in loader (simulations.checkins).

- known answers on the shared Gowalla slices (docs/data-and-streams.md): the Paris SNAP slice has
  17,496 rows; inside the Paris box 11,190 check-ins by 1,026 users from 2009-09-22 to
  2010-10-22, 182 of 192 cells non-empty, top cell 4.8 %; the SF lat,lon file 123,026 rows,
  348 of 408 cells non-empty, top cell 8.1 %; the Paris lat,lon file 10,991 rows. The same
  SNAP slice gzipped, from standard input, or as a stream gives identical arrays;
- the one-report-per-user rule (most recent check-in inside the region) against an independent
  pure-Python computation on the Paris slice, and on crafted files (ties, order, outside rows);
- every rejection reason with a crafted line (overlong lines too, within and across read
  chunks); a file mixing good, bad and blank lines (CRLF)
  keeps exactly the good rows; rows == accepted + rejected; example line numbers;
- headers, format detection and its error, explicit formats, one pass only, truncated and
  corrupt gzip files (the rows before the damage kept, the damage reported), text streams.
"""

from __future__ import annotations

import gzip
import io
import sys
import zlib
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from shuffledp.errors import InvalidParameterError
from shuffledp.simulations.data.checkins import (
    MAX_LINE_BYTES,
    REASONS,
    CheckIn,
    CheckInArrays,
    CheckInReader,
    CheckInReadError,
    checkins_in_region,
    load_checkin_arrays,
)
from shuffledp.simulations.data.regions import PRESETS, Region
from tests.paths import SHARED_DATA

DATA = SHARED_DATA
PARIS_SNAP = DATA / "gowalla-paris-checkins.txt"
SF_LATLON = DATA / "gowalla-sf-latlon.csv"
PARIS_LATLON = DATA / "gowalla-paris-latlon.csv"
PARIS = PRESETS["paris"]
SF = PRESETS["sf"]

GOOD_SNAP = "7\t2010-07-25T11:40:18Z\t48.86\t2.33\t1500177"
GOOD_LATLON = "48.86,2.33"


def read_all(source: object, **kwargs: str) -> tuple[list[CheckIn], CheckInReader]:
    reader = CheckInReader(source, **kwargs)  # type: ignore[arg-type]
    return list(reader), reader


def write(tmp_path: Path, data: str | bytes, name: str = "checkins.txt") -> Path:
    path = tmp_path / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def top_share_percent(arrays: CheckInArrays) -> float:
    counts = arrays.cell_counts()
    return round(100.0 * int(counts.max()) / int(counts.sum()), 1)


# --- known answers on the shared data ---------------------------------------------------------


@pytest.mark.shared_data
def test_paris_snap_slice_known_answers() -> None:
    reader = CheckInReader(PARIS_SNAP)
    arrays = load_checkin_arrays(reader, PARIS)
    stats = reader.stats
    assert stats.format == "snap"
    assert (stats.rows, stats.accepted, stats.rejected_total) == (17_496, 17_496, 0)
    assert stats.summary() == "17,496 rows: 17,496 accepted, 0 rejected"
    assert len(arrays) == 11_190 and arrays.outside == 17_496 - 11_190
    assert arrays.n_users == 1_026 and len(set(arrays.user.tolist())) == 1_026
    first = datetime.fromtimestamp(int(arrays.time.min()), UTC)
    last = datetime.fromtimestamp(int(arrays.time.max()), UTC)
    assert first.date().isoformat() == "2009-09-22"
    assert last.date().isoformat() == "2010-10-22"
    counts = arrays.cell_counts()
    assert counts.size == 192 and int(counts.sum()) == 11_190
    assert int((counts > 0).sum()) == 182
    assert top_share_percent(arrays) == 4.8


@pytest.mark.slow
@pytest.mark.shared_data
def test_sf_latlon_known_answers() -> None:
    reader = CheckInReader(SF_LATLON)
    arrays = load_checkin_arrays(reader, SF)
    assert reader.stats.format == "latlon" and reader.stats.header is None
    assert (reader.stats.rows, reader.stats.accepted) == (123_026, 123_026)
    # The file holds only check-ins inside the SF box (docs/data-and-streams.md), so none is outside.
    assert (len(arrays), arrays.outside) == (123_026, 0)
    assert not arrays.has_users and not arrays.has_times
    assert set(arrays.user.tolist()) == {-1} and set(arrays.time.tolist()) == {-1}
    counts = arrays.cell_counts()
    assert counts.size == 408 and int((counts > 0).sum()) == 348
    assert top_share_percent(arrays) == 8.1
    # Each row is one user: the per-user cells are the rows' cells, in file order.
    assert np.array_equal(arrays.most_recent_cells(), arrays.cell)


@pytest.mark.shared_data
def test_paris_latlon_rows() -> None:
    rows, reader = read_all(PARIS_LATLON)
    assert len(rows) == 10_991 and reader.stats.rows == 10_991
    assert all(r.user is None and r.time is None and r.location is None for r in rows)


def _independent_most_recent(path: Path, region: Region) -> dict[str, tuple[str, int]]:
    """user -> (time text, cell) of the latest check-in inside the region; equal times: the
    first in the file. Plain string handling; ISO times compare as text."""
    latest: dict[str, tuple[str, int]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        user, stamp, lat, lon, _ = line.split("\t")
        cell = region.cell_of(float(lat), float(lon))
        if cell is None:
            continue
        if user not in latest or stamp > latest[user][0]:
            latest[user] = (stamp, cell)
    return latest


@pytest.mark.shared_data
def test_most_recent_cells_of_the_paris_slice_match_an_independent_computation() -> None:
    arrays = load_checkin_arrays(CheckInReader(PARIS_SNAP), PARIS)
    expected = _independent_most_recent(PARIS_SNAP, PARIS)
    got = arrays.most_recent_cells()
    assert got.size == len(expected) == 1_026
    by_name = dict(zip(arrays.user_names, got.tolist(), strict=True))
    assert by_name == {user: cell for user, (_, cell) in expected.items()}


@pytest.mark.slow
@pytest.mark.shared_data
def test_gzip_stdin_and_streams_give_identical_arrays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = load_checkin_arrays(CheckInReader(PARIS_SNAP), PARIS)
    data = PARIS_SNAP.read_bytes()
    compressed = gzip.compress(data)
    gz_path = write(tmp_path, compressed, "paris.txt.gz")
    no_suffix = write(tmp_path, compressed, "paris-compressed")  # recognised by its magic bytes
    sources: list[object] = [
        gz_path,
        str(no_suffix),
        io.BytesIO(compressed),
        io.BytesIO(data),
        io.StringIO(data.decode("utf-8")),
    ]
    for source in sources:
        reader = CheckInReader(source)  # type: ignore[arg-type]
        other = load_checkin_arrays(reader, PARIS)
        assert reader.stats.rows == 17_496 and reader.stats.truncated is None
        for name in ("user", "time", "cell"):
            assert np.array_equal(getattr(other, name), getattr(plain, name)), (source, name)
        assert other.user_names == plain.user_names and other.outside == plain.outside
    for payload in (data, compressed):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(payload)))
        reader = CheckInReader("-")
        other = load_checkin_arrays(reader, PARIS)
        assert reader.stats.source == "<stdin>" and reader.stats.rows == 17_496
        assert np.array_equal(other.cell, plain.cell)


# --- rejection reasons ------------------------------------------------------------------------

SNAP_CASES = [
    ("7\t2010-07-25T11:40:18Z\t48.86\t2.33", "wrong-field-count"),
    (GOOD_SNAP + "\textra", "wrong-field-count"),
    ("7 2010-07-25T11:40:18Z 48.86 2.33 1500177", "wrong-field-count"),
    ("\t2010-07-25T11:40:18Z\t48.86\t2.33\t1", "bad-user"),
    ("a b\t2010-07-25T11:40:18Z\t48.86\t2.33\t1", "bad-user"),
    ("7\t2010-07-25 11:40:18\t48.86\t2.33\t1", "bad-time"),
    ("7\t2010-07-25T11:40:18\t48.86\t2.33\t1", "bad-time"),
    ("7\t2010-07-25T11:40:18+01:00\t48.86\t2.33\t1", "bad-time"),
    ("7\t2010-02-30T11:40:18Z\t48.86\t2.33\t1", "bad-time"),
    ("7\t2010-07-25T24:00:00Z\t48.86\t2.33\t1", "bad-time"),
    ("7\t\t48.86\t2.33\t1", "bad-time"),
    ("7\t2010-07-25T11:40:18Z\tabc\t2.33\t1", "bad-latitude"),
    ("7\t2010-07-25T11:40:18Z\tnan\t2.33\t1", "bad-latitude"),
    ("7\t2010-07-25T11:40:18Z\t-inf\t2.33\t1", "bad-latitude"),
    ("7\t2010-07-25T11:40:18Z\t1e400\t2.33\t1", "bad-latitude"),
    ("7\t2010-07-25T11:40:18Z\t4_8.86\t2.33\t1", "bad-latitude"),
    ("7\t2010-07-25T11:40:18Z\t\t2.33\t1", "bad-latitude"),
    ("7\t2010-07-25T11:40:18Z\t90.0001\t2.33\t1", "latitude-out-of-range"),
    ("7\t2010-07-25T11:40:18Z\t-91\t2.33\t1", "latitude-out-of-range"),
    ("7\t2010-07-25T11:40:18Z\t48.86\tx\t1", "bad-longitude"),
    ("7\t2010-07-25T11:40:18Z\t48.86\tNaN\t1", "bad-longitude"),
    ("7\t2010-07-25T11:40:18Z\t48.86\t180.5\t1", "longitude-out-of-range"),
    ("7\t2010-07-25T11:40:18Z\t48.86\t-200\t1", "longitude-out-of-range"),
    ("7\t2010-07-25T11:40:18Z\t48.86\t2.33\t", "bad-location"),
    ("7\t2010-07-25T11:40:18Z\t48.86\t2.33\t1 2", "bad-location"),
]
LATLON_CASES = [
    ("48.86,2.33,1", "wrong-field-count"),
    ("48.86", "wrong-field-count"),
    ("48.86;2.33", "wrong-field-count"),
    ("x,2.33", "bad-latitude"),
    ('"48.86",2.33', "bad-latitude"),
    ("lat,lon", "bad-latitude"),  # a header only counts as one on the first non-blank line
    ("95,2.33", "latitude-out-of-range"),
    ("48.86,", "bad-longitude"),
    ("48.86,inf", "bad-longitude"),
    ("48.86,180.01", "longitude-out-of-range"),
]


@pytest.mark.parametrize(
    ("good", "bad", "reason"),
    [(GOOD_SNAP, line, reason) for line, reason in SNAP_CASES]
    + [(GOOD_LATLON, line, reason) for line, reason in LATLON_CASES],
)
def test_each_rejection_reason(good: str, bad: str, reason: str) -> None:
    assert reason in REASONS
    rows, reader = read_all(io.StringIO(f"{good}\n{bad}\n{good}\n"))
    stats = reader.stats
    assert len(rows) == 2 and stats.accepted == 2
    assert dict(stats.rejected) == {reason: 1}
    assert stats.examples == {reason: [2]}
    assert stats.rows == 3


@pytest.mark.parametrize("good", [GOOD_SNAP, GOOD_LATLON])
def test_undecodable_bytes_are_counted_and_reading_goes_on(good: str, tmp_path: Path) -> None:
    data = f"{good}\n".encode() + b"\xff\xfe" + good[2:].encode() + b"\n" + f"{good}\n".encode()
    rows, reader = read_all(write(tmp_path, data))
    assert len(rows) == 2
    assert dict(reader.stats.rejected) == {"not-utf8": 1}
    assert reader.stats.examples == {"not-utf8": [2]}
    # The same bytes through a text stream opened with errors="surrogateescape".
    text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="surrogateescape")
    rows, reader = read_all(text)
    assert len(rows) == 2 and dict(reader.stats.rejected) == {"not-utf8": 1}
    # A strict text stream cannot go past the bad bytes: a clear error, not a traceback.
    strict = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    with pytest.raises(CheckInReadError, match="undecodable bytes"):
        list(CheckInReader(strict))


def test_boundary_coordinates_and_null_island_are_accepted() -> None:
    lines = [
        "1\t2010-07-25T11:40:18Z\t90\t180\tA",
        "2\t2010-07-25T11:40:18Z\t-90.0\t-180.000\tB",
        "3\t2010-07-25T11:40:18Z\t0.0\t0.0\tC",
        "4\t2010-07-25T11:40:18Z\t+1e1\t.5\tD",
    ]
    rows, reader = read_all(io.StringIO("\n".join(lines)))
    assert reader.stats.rejected_total == 0
    assert [(r.lat, r.lon) for r in rows] == [(90, 180), (-90, -180), (0, 0), (10, 0.5)]
    assert rows[0] == CheckIn("1", datetime(2010, 7, 25, 11, 40, 18, tzinfo=UTC), 90, 180, "A")
    assert rows[0].time is not None and rows[0].time.utcoffset() is not None
    rows, reader = read_all(io.StringIO("0,0\n-90,180\n"))
    assert [(r.lat, r.lon) for r in rows] == [(0, 0), (-90, 180)]
    arrays = load_checkin_arrays(CheckInReader(io.StringIO("0,0\n")), PARIS)
    assert (len(arrays), arrays.outside) == (0, 1)  # valid, and outside the region


def test_mixed_file_keeps_every_good_row(tmp_path: Path) -> None:
    good_lines = [
        f"{user}\t2010-0{1 + user % 9}-1{user % 10}T0{user % 10}:00:00Z\t48.8{user}\t2.3{user}\t{900 + user}"
        for user in range(40)
    ]
    bad_lines = [line for line, _ in SNAP_CASES]
    expected_reasons: dict[str, int] = defaultdict(int)
    for _, reason in SNAP_CASES:
        expected_reasons[reason] += 1
    mixed: list[str] = []
    expected_lines: dict[str, list[int]] = defaultdict(list)
    bad_iter = iter(SNAP_CASES)
    for index, good in enumerate(good_lines):
        mixed.append(good)
        if index % 3 == 0:
            mixed.append("   ")  # blank: skipped, not a row
        case = next(bad_iter, None)
        if case is not None:
            mixed.append(case[0])
            expected_lines[case[1]].append(len(mixed))
    data = "\r\n".join(mixed) + "\r\n"
    rows, reader = read_all(write(tmp_path, data))
    stats = reader.stats
    expected_rows, _ = read_all(io.StringIO("\n".join(good_lines)))
    assert rows == expected_rows and len(rows) == len(good_lines)
    assert dict(stats.rejected) == dict(expected_reasons)
    assert stats.rows == len(good_lines) + len(bad_lines)
    assert stats.rows == stats.accepted + stats.rejected_total
    assert stats.lines == len(mixed)
    assert stats.examples == {r: lines[:5] for r, lines in expected_lines.items()}


def test_blank_lines_crlf_and_missing_final_newline() -> None:
    data = f"\n  \n{GOOD_SNAP}\r\n\t\r\n\r\n{GOOD_SNAP}"
    rows, reader = read_all(io.BytesIO(data.encode()))
    assert len(rows) == 2 and reader.stats.rows == 2 and reader.stats.lines == 6
    assert rows[0].location == "1500177"  # no "\r" left on the last field


@pytest.mark.parametrize("length", [MAX_LINE_BYTES + 1, 3 << 20])  # in one chunk, across chunks
def test_overlong_lines_are_rejected_not_held(length: int, tmp_path: Path) -> None:
    long_line = "9" * length
    data = f"{GOOD_LATLON}\n{long_line}\n{GOOD_LATLON}\n{long_line}"
    rows, reader = read_all(write(tmp_path, data))
    assert len(rows) == 2
    assert dict(reader.stats.rejected) == {"line-too-long": 2}
    assert reader.stats.examples == {"line-too-long": [2, 4]}
    rows, reader = read_all(io.StringIO(data))
    assert len(rows) == 2 and reader.stats.examples == {"line-too-long": [2, 4]}
    # A line of exactly the limit is read (and here rejected for what it says).
    _, reader = read_all(io.StringIO(f"{GOOD_LATLON}\n{'0' * (MAX_LINE_BYTES - 4)}95,1\n"))
    assert dict(reader.stats.rejected) == {"latitude-out-of-range": 1}


def test_byte_order_mark_is_ignored(tmp_path: Path) -> None:
    for first, second in (
        ("lat,lon", GOOD_LATLON),
        (GOOD_LATLON, GOOD_LATLON),
        (GOOD_SNAP, GOOD_SNAP),
    ):
        rows, reader = read_all(write(tmp_path, f"\ufeff{first}\n{second}\n".encode()))
        assert reader.stats.rejected_total == 0
        assert len(rows) == (1 if first == "lat,lon" else 2)


def test_examples_keep_the_first_five_line_numbers() -> None:
    data = "\n".join([GOOD_LATLON] + ["x,1"] * 8)
    _, reader = read_all(io.StringIO(data))
    assert reader.stats.rejected == {"bad-latitude": 8}
    assert reader.stats.examples == {"bad-latitude": [2, 3, 4, 5, 6]}


def test_summary_line() -> None:
    data = "\n".join([GOOD_LATLON, "x,1", "1,2,3", "y,2", GOOD_LATLON, "95,1"])
    _, reader = read_all(io.StringIO(data))
    assert reader.stats.summary() == (
        "6 rows: 2 accepted, 4 rejected "
        "(bad-latitude 2, latitude-out-of-range 1, wrong-field-count 1)"
    )
    _, reader = read_all(io.StringIO("Latitude , Longitude\n" + GOOD_LATLON))
    assert reader.stats.summary() == (
        "1 rows: 1 accepted, 0 rejected; header line 'Latitude , Longitude' skipped"
    )


# --- formats, headers, sources ----------------------------------------------------------------


@pytest.mark.parametrize(
    "header", ["lat,lon", "latitude,longitude", "LAT, LON", " Latitude,Longitude "]
)
def test_latlon_header_is_recognised_not_counted(header: str) -> None:
    rows, reader = read_all(io.StringIO(f"\n{header}\n{GOOD_LATLON}\n1,2\n"))
    assert len(rows) == 2
    assert reader.stats.header == header.strip()
    assert reader.stats.rows == 2 and reader.stats.rejected_total == 0


@pytest.mark.parametrize("first", ["hello world", "1;2", "1,2,3", "# comment", "a|b|c"])
def test_unrecognisable_first_line_is_an_error_naming_both_formats(first: str) -> None:
    with pytest.raises(CheckInReadError) as caught:
        list(CheckInReader(io.StringIO(f"\n{first}\n{GOOD_LATLON}\n")))
    message = str(caught.value)
    assert "SNAP" in message and "lat,lon" in message and repr(first) in message


def test_a_binary_file_is_named_by_its_first_bytes_not_garbled_characters(
    tmp_path: Path,
) -> None:
    junk = bytes([0x03, 0x23, 0x45, 0xA7, 0x43, 0xE9, 0x06, 0x5F]) * 4 + b"\n"
    with pytest.raises(CheckInReadError) as caught:
        list(CheckInReader(write(tmp_path, junk)))
    message = str(caught.value)
    assert (
        "(not text: a binary or compressed file? its first bytes are "
        "03 23 45 a7 43 e9 06 5f 03 23 45 a7 43 e9 06 5f)"
    ) in message
    assert message.isprintable()


def test_explicit_formats() -> None:
    rows, reader = read_all(io.StringIO(f"{GOOD_SNAP}\n{GOOD_SNAP}\n"), format="latlon")
    assert rows == [] and reader.stats.rejected == {"wrong-field-count": 2}
    rows, reader = read_all(io.StringIO(f"{GOOD_LATLON}\n"), format="snap")
    assert rows == [] and reader.stats.rejected == {"wrong-field-count": 1}
    rows, reader = read_all(io.StringIO("1,2,3\n4,5\n"), format="latlon")  # no detection needed
    assert len(rows) == 1 and reader.stats.rejected == {"wrong-field-count": 1}
    with pytest.raises(InvalidParameterError, match="format must be one of auto, snap, latlon"):
        CheckInReader(io.StringIO(""), format="csv")


def test_empty_source_reads_nothing() -> None:
    rows, reader = read_all(io.StringIO("\n \n"))
    assert rows == [] and reader.stats.format is None and reader.stats.rows == 0


def test_a_reader_makes_one_pass() -> None:
    reader = CheckInReader(io.StringIO(GOOD_LATLON))
    assert len(list(reader)) == 1
    with pytest.raises(RuntimeError, match="reads its source once"):
        iter(reader)


def test_unreadable_sources_are_clear_errors(tmp_path: Path) -> None:
    missing = tmp_path / "missing.txt"
    with pytest.raises(
        CheckInReadError,
        match=r"cannot read the check-in file .*missing\.txt.*`shuffledp data fetch gowalla`",
    ):
        list(CheckInReader(missing))
    with pytest.raises(CheckInReadError, match="cannot read the check-in file"):
        list(CheckInReader(tmp_path))
    with pytest.raises(InvalidParameterError, match="must not be empty"):
        CheckInReader("")
    with pytest.raises(InvalidParameterError, match="source must be a path"):
        CheckInReader(42)  # type: ignore[arg-type]


def _gzip_prefix(compressed: bytes) -> bytes:
    """The bytes zlib can decompress from a (possibly truncated) gzip stream."""
    return zlib.decompressobj(wbits=31).decompress(compressed)


@pytest.mark.slow
@pytest.mark.shared_data
@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.93])
def test_truncated_gzip_keeps_what_was_read_and_says_so(fraction: float, tmp_path: Path) -> None:
    data = PARIS_SNAP.read_bytes()
    full_rows, _ = read_all(io.BytesIO(data))
    compressed = gzip.compress(data)
    cut = int(len(compressed) * fraction)
    path = write(tmp_path, compressed[:cut], "cut.txt.gz")
    rows, reader = read_all(path)
    stats = reader.stats
    prefix = _gzip_prefix(compressed[:cut])
    complete = prefix.count(b"\n")
    partial = not prefix.endswith(b"\n") and bool(prefix.rsplit(b"\n", 1)[-1].strip())
    assert rows == full_rows[:complete]  # every complete line kept, each exactly as in the file
    assert dict(stats.rejected) == ({"truncated": 1} if partial else {})
    assert stats.rows == stats.accepted + stats.rejected_total == complete + partial
    assert stats.truncated is not None
    assert str(path) in stats.truncated and "truncated gzip" in stats.truncated
    assert f"after {complete:,} complete lines" in stats.truncated
    assert stats.truncated in stats.summary()
    assert 0 < complete < 17_496


def test_corrupt_gzip_is_reported_not_raised(tmp_path: Path) -> None:
    data = "".join(f"{GOOD_LATLON}\n" for _ in range(2000)).encode()
    compressed = bytearray(gzip.compress(data))
    compressed[-6] ^= 0xFF  # inside the CRC-32 trailer: the data is intact, the check fails
    rows, reader = read_all(write(tmp_path, bytes(compressed), "bad.gz"))
    assert len(rows) == 2000
    assert reader.stats.truncated is not None and "corrupt gzip data" in reader.stats.truncated


# --- regions and arrays -----------------------------------------------------------------------

BOX = Region(name="box", lat_min=0.0, lat_max=2.0, lon_min=0.0, lon_max=2.0, columns=2, rows=2)
# Cells of BOX: (0.5, 0.5) -> 0, (0.5, 1.5) -> 1, (1.5, 0.5) -> 2, (1.5, 1.5) -> 3.


def snap_line(user: str, stamp: str, lat: float, lon: float) -> str:
    return f"{user}\t{stamp}\t{lat}\t{lon}\tL"


def test_most_recent_rule_on_a_crafted_file() -> None:
    lines = [
        snap_line("a", "2010-01-01T00:00:00Z", 0.5, 0.5),  # a: older
        snap_line("b", "2010-01-05T00:00:00Z", 1.5, 1.5),  # b: tie at the latest time, first
        snap_line("a", "2010-03-01T00:00:00Z", 1.5, 0.5),  # a: the most recent inside
        snap_line("a", "2010-09-01T00:00:00Z", 5.0, 5.0),  # a: more recent, but outside
        snap_line("b", "2010-01-05T00:00:00Z", 0.5, 1.5),  # b: same time, later in the file
        snap_line("c", "2009-01-01T00:00:00Z", 9.0, 9.0),  # c: never inside
        snap_line("d", "2011-01-01T00:00:00Z", 0.5, 1.5),
        snap_line("a", "2010-02-01T00:00:00Z", 0.5, 1.5),  # a: not in time order in the file
    ]
    arrays = load_checkin_arrays(CheckInReader(io.StringIO("\n".join(lines))), BOX)
    assert arrays.user_names == ("a", "b", "d")
    assert arrays.user.tolist() == [0, 1, 0, 1, 2, 0]
    assert arrays.cell.tolist() == [0, 3, 2, 1, 1, 1]
    assert arrays.outside == 2 and len(arrays) == 6 and arrays.n_users == 3
    assert arrays.most_recent_cells().tolist() == [2, 3, 1]
    assert arrays.cell_counts().tolist() == [1, 3, 1, 1]
    ordered = arrays.by_time()
    assert ordered.time.tolist() == sorted(arrays.time.tolist())
    # Stable: the two check-ins of b at the same time keep their file order (cells 3 then 1).
    same = ordered.time == int(datetime(2010, 1, 5, tzinfo=UTC).timestamp())
    assert ordered.cell[same].tolist() == [3, 1]
    assert int(ordered.time[0]) == int(datetime(2010, 1, 1, tzinfo=UTC).timestamp())


def test_checkins_in_region_streams_pairs_and_counts() -> None:
    rows, _ = read_all(io.StringIO("0.5,0.5\n3,3\n1.5,0.5\n2,2\n-1,0\n"))
    inside = checkins_in_region(rows, BOX)
    pairs = [(c.lat, c.lon, cell) for c, cell in inside]
    assert pairs == [(0.5, 0.5, 0), (1.5, 0.5, 2), (2.0, 2.0, 3)]
    assert (inside.inside, inside.outside) == (3, 2)


def test_load_arrays_from_a_plain_iterable() -> None:
    checkins = [
        CheckIn("u", datetime(2010, 1, 1, tzinfo=UTC), 0.5, 0.5, "x"),
        CheckIn("v", datetime(2010, 1, 2, tzinfo=UTC), 1.5, 1.5, "y"),
        CheckIn("u", datetime(2010, 1, 3, tzinfo=UTC), 9.0, 9.0, "z"),
    ]
    arrays = load_checkin_arrays(checkins, BOX)
    assert arrays.user_names == ("u", "v") and arrays.outside == 1
    assert arrays.time.tolist() == [1262304000, 1262390400]  # 2010-01-01 and -02, 00:00 UTC
    assert arrays.most_recent_cells().tolist() == [0, 3]
    assert arrays.stats.rows == 3 and arrays.stats.accepted == 3
