"""`shuffledp stream` as a process over the real pipeline (embedded broker started by the
command), on the Paris check-ins: from a file and from standard input. Expected epochs come
from the file alone (plain Python); the pure parts are in tests/unit/simulations/test_stream.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from shuffledp.simulations.data.regions import PRESETS
from shuffledp.simulations.pipeline.stream import read_stream_record
from tests.paths import SHARED_DATA

PARIS_SNAP = SHARED_DATA / "gowalla-paris-checkins.txt"
EPOCH_30D = timedelta(days=30)
ORIGIN = datetime(1970, 1, 5, tzinfo=UTC)


def _paris_lines() -> list[str]:
    return PARIS_SNAP.read_text(encoding="utf-8").splitlines()


def _expected_epochs(lines: list[str], epochs: int) -> list[dict[str, Any]]:
    """Per 30-day epoch from the first in-box check-in: active users and the histogram of
    each one's latest check-in (first in file order on equal times), from the file alone."""
    region = PRESETS["paris"]
    rows = []
    for order, line in enumerate(lines):
        user, stamp, lat, lon, _ = line.split("\t")
        la, lo = float(lat), float(lon)
        if region.lat_min <= la <= region.lat_max and region.lon_min <= lo <= region.lon_max:
            when = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
            rows.append((when, order, user, la, lo))
    first = min(rows)[0]
    base = (first - ORIGIN) // EPOCH_30D
    out = []
    for index in range(epochs):
        latest: dict[str, tuple[datetime, int, float, float]] = {}
        for when, order, user, la, lo in rows:
            if (when - ORIGIN) // EPOCH_30D == base + index:
                kept = latest.get(user)
                if kept is None or (when, -order) > (kept[0], -kept[1]):
                    latest[user] = (when, order, la, lo)
        cells = [region.cell_of(la, lo) for _, _, la, lo in latest.values()]
        start = ORIGIN + (base + index) * EPOCH_30D
        out.append(
            {
                "users": len(latest),
                "histogram": np.bincount(np.array(cells, dtype=np.int64), minlength=192).tolist(),
                "start": start.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        )
    return out


def _stream(args: list[str], stdin: str | None = None) -> list[dict[str, Any]]:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "shuffledp", "stream", "--region", "paris"),
            *("--epoch", "30d", "--max-epochs", "2", "--hops", "2", "--json", *args),
        ],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    # Every line is a typed record of the stream (shuffledp/stream/1) and reads back unchanged.
    assert [read_stream_record(line).to_json() for line in lines] == lines
    return lines


def _check_epochs(lines: list[dict[str, Any]], expected: list[dict[str, Any]]) -> dict[str, Any]:
    *epochs, summary = lines
    assert [e["type"] for e in epochs] == ["epoch", "epoch"] and summary["type"] == "summary"
    for got, want in zip(epochs, expected, strict=True):
        assert got["status"] == "run" and got["start"] == want["start"]
        assert got["users_active"] == got["users_reporting"] == want["users"]
        assert got["n_received"] == want["users"] and got["privacy"]["n"] == want["users"]
        assert got["true_histogram"] == want["histogram"]
        assert sum(got["histogram"]) == want["users"] and got["k"] == 192
    assert summary["epochs"] == 2 and summary["stopped_at_max_epochs"] is True
    assert summary["worst_user"]["rounds"] >= 1
    return summary


@pytest.mark.shared_data
@pytest.mark.integration
def test_stream_paris_file_and_stdin() -> None:
    lines = _paris_lines()
    expected = _expected_epochs(lines, 2)
    assert all(e["users"] >= 2 for e in expected)
    from_file = _check_epochs(_stream(["--dataset", str(PARIS_SNAP)]), expected)
    assert from_file["input"]["rows"] == 17_496 and from_file["late"] == 0

    # Standard input in time order (stable: equal times keep file order), plus one check-in
    # inside the box from before the first epoch, sent once epoch 1 has begun: late, dropped,
    # counted.
    ordered = sorted(lines, key=lambda line: line.split("\t")[1])
    at = next(i for i, line in enumerate(ordered) if line.split("\t")[1] >= expected[1]["start"])
    late = "999999\t2009-01-01T00:00:00Z\t48.85\t2.35\t1"
    feed = "\n".join([*ordered[: at + 1], late, *ordered[at + 1 :]]) + "\n"
    from_stdin = _check_epochs(_stream(["--dataset", "-"], stdin=feed), expected)
    assert from_stdin["late"] == 1 and from_stdin["input"]["source"] == "<stdin>"
