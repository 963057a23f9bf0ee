"""`shuffledp data fetch`: downloads from a loopback HTTP server (a thread of this process on
127.0.0.1 that honours Range and counts the bytes it sends), resumes, records and checks the
SHA-256 and size, refuses damaged files; experiments find the cached file or stop before any
work with one line naming the fetch command."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from shuffledp.cli import data as data_cli
from shuffledp.cli import main
from shuffledp.errors import InvalidParameterError
from shuffledp.randomness import SeededRandom
from shuffledp.simulations.data import fetch as fetch_module
from shuffledp.simulations.data.datasets import parse_dataset_spec, resolve_dataset
from shuffledp.simulations.data.fetch import (
    CACHE_ENV,
    GOWALLA,
    DataMissingError,
    FetchError,
    FileRecord,
    IntegrityError,
    RemoteFile,
    cache_dir,
    fetch,
    record_path,
    verify_cached,
)
from shuffledp.simulations.data.regions import PRESETS
from shuffledp.simulations.experiments import gowalla_data as gu
from shuffledp.simulations.experiments.base import ExperimentError

NAME = GOWALLA.filename


def _snap_body(lines: int = 3000) -> bytes:
    """A gzip SNAP file of ``lines`` check-ins in central Paris, 200 users (deterministic)."""
    rows = []
    for i in range(lines):
        lat = 48.83 + (i * 7919 % 1000) / 1000 * 0.045
        lon = 2.29 + (i * 104729 % 1000) / 1000 * 0.095
        rows.append(
            f"u{i % 200}\t2010-{1 + i % 12:02d}-10T10:{i % 60:02d}:00Z\t{lat:.6f}\t{lon:.6f}\tL{i}"
        )
    return gzip.compress(("\n".join(rows) + "\n").encode(), mtime=0)


BODY = _snap_body()


@dataclass
class Served:
    """What the server sends and what it saw. ``status``: answer every request with this
    error; ``cut_after``: close the next response after this many body bytes (its
    Content-Length still announces all of them); ``ignore_range``: answer ranges with 200."""

    body: bytes
    status: int | None = None
    cut_after: int | None = None
    ignore_range: bool = False
    ranges: list[str | None] = field(default_factory=list)
    sent: list[int] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        served = self.server.served
        asked = self.headers.get("Range")
        served.ranges.append(asked)
        if served.status is not None:
            served.sent.append(0)  # counted first: the client may be done before this returns
            self.send_error(served.status)
            return
        body, start = served.body, 0
        match = re.fullmatch(r"bytes=(\d+)-", asked or "")
        if match is not None and not served.ignore_range:
            start = int(match.group(1))
            if start >= len(body):
                served.sent.append(0)
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        chunk = body[start:]
        self.send_header("Content-Length", str(len(chunk)))
        if served.cut_after is not None:
            chunk, served.cut_after = chunk[: served.cut_after], None
            self.close_connection = True
        served.sent.append(len(chunk))
        self.end_headers()
        self.wfile.write(chunk)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    served: Served


@pytest.fixture
def server() -> Iterator[tuple[Served, str]]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.served = Served(body=BODY)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield httpd.served, f"http://127.0.0.1:{httpd.server_address[1]}/{NAME}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def _remote(url: str, **pins: object) -> RemoteFile:
    return RemoteFile(name="gowalla", url=url, filename=NAME, description="test", **pins)  # type: ignore[arg-type]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- downloading ------------------------------------------------------------------------------


def test_the_file_arrives_byte_for_byte_with_its_record(
    server: tuple[Served, str], tmp_path: Path
) -> None:
    served, url = server
    seen: list[tuple[int, int | None]] = []
    result = fetch(_remote(url), tmp_path, progress=lambda done, total: seen.append((done, total)))
    assert result.status == "downloaded" and result.resumed_from == 0
    assert result.path == tmp_path / NAME and result.path.read_bytes() == BODY
    record = json.loads(record_path(result.path).read_text())
    assert record["sha256"] == _sha(BODY) and record["size"] == len(BODY)
    assert record["md5"] == hashlib.md5(BODY).hexdigest() and record["trust"] == "first-use"
    assert FileRecord.from_json(record) == result.record
    assert not (tmp_path / f"{NAME}.part").exists()
    assert served.ranges == [None] and served.sent == [len(BODY)]
    assert seen[0] == (0, len(BODY)) and seen[-1] == (len(BODY), len(BODY))
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)


def test_published_pins_that_match_are_checked_and_said(
    server: tuple[Served, str], tmp_path: Path
) -> None:
    _, url = server
    pins = {"size": len(BODY), "md5": hashlib.md5(BODY).hexdigest(), "sha256": _sha(BODY)}
    result = fetch(_remote(url, **pins), tmp_path)
    assert result.record.trust == "published" and result.path.read_bytes() == BODY


def test_an_interrupted_download_resumes_from_the_part_file(
    server: tuple[Served, str], tmp_path: Path
) -> None:
    served, url = server
    served.cut_after = 5000
    with pytest.raises(FetchError, match=r"5,000 of [\d,]+ bytes.*run the command again to resume"):
        fetch(_remote(url), tmp_path)
    part = tmp_path / f"{NAME}.part"
    assert part.read_bytes() == BODY[:5000]
    assert not (tmp_path / NAME).exists() and not record_path(tmp_path / NAME).exists()
    result = fetch(_remote(url), tmp_path)
    assert served.ranges == [None, "bytes=5000-"]
    assert served.sent == [5000, len(BODY) - 5000]  # the second request starts at the offset
    assert result.resumed_from == 5000 and result.path.read_bytes() == BODY
    assert result.record.sha256 == _sha(BODY) and not part.exists()


def test_a_server_that_ignores_the_range_restarts_the_file(
    server: tuple[Served, str], tmp_path: Path
) -> None:
    served, url = server
    (tmp_path / f"{NAME}.part").write_bytes(b"x" * 100)  # not even the file's start
    served.ignore_range = True
    result = fetch(_remote(url), tmp_path)
    assert served.ranges == ["bytes=100-"] and served.sent == [len(BODY)]
    assert result.resumed_from == 0 and result.path.read_bytes() == BODY


def test_a_complete_part_file_is_finished_without_downloading_again(
    server: tuple[Served, str], tmp_path: Path
) -> None:
    served, url = server
    (tmp_path / f"{NAME}.part").write_bytes(BODY)
    result = fetch(_remote(url), tmp_path)
    assert served.sent == [0]  # a 416 answer, no body
    assert result.path.read_bytes() == BODY and result.record.sha256 == _sha(BODY)


@pytest.mark.parametrize("status", [404, 500])
def test_an_http_error_keeps_nothing(
    server: tuple[Served, str], tmp_path: Path, status: int
) -> None:
    served, url = server
    served.status = status
    with pytest.raises(FetchError, match=rf"HTTP {status} .*nothing was saved"):
        fetch(_remote(url), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_wrong_size_announced_by_the_server_downloads_nothing(
    server: tuple[Served, str], tmp_path: Path
) -> None:
    _, url = server
    expected = len(BODY) + 1
    with pytest.raises(FetchError, match=f"announces {len(BODY):,} bytes, expected {expected:,}"):
        fetch(_remote(url, size=expected), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_download_that_does_not_match_the_published_md5_is_deleted(
    server: tuple[Served, str], tmp_path: Path
) -> None:
    _, url = server
    wrong = "0" * 32
    actual = hashlib.md5(BODY).hexdigest()
    with pytest.raises(IntegrityError, match=f"MD5 is {actual}, expected {wrong}.*deleted"):
        fetch(_remote(url, md5=wrong), tmp_path)
    assert list(tmp_path.iterdir()) == []


# --- checking the cached file -----------------------------------------------------------------


def test_a_corrupted_cached_file_is_refused_naming_both_sha256(
    server: tuple[Served, str], tmp_path: Path
) -> None:
    served, url = server
    path = fetch(_remote(url), tmp_path).path
    damaged = bytearray(BODY)
    damaged[100] ^= 0xFF
    path.write_bytes(bytes(damaged))
    pattern = f"SHA-256 is {_sha(bytes(damaged))}, expected {_sha(BODY)}"
    with pytest.raises(IntegrityError, match=pattern):
        verify_cached(GOWALLA, tmp_path)
    with pytest.raises(IntegrityError, match=pattern):  # fetch refuses too: no download over it
        fetch(_remote(url), tmp_path)
    assert served.sent == [len(BODY)] and path.read_bytes() == bytes(damaged)
    path.write_bytes(BODY[:-1])
    with pytest.raises(
        IntegrityError, match=f"size is {len(BODY) - 1:,} bytes, expected {len(BODY):,}"
    ):
        verify_cached(GOWALLA, tmp_path)


def test_a_cached_file_is_checked_and_not_downloaded_again(
    server: tuple[Served, str], tmp_path: Path
) -> None:
    served, url = server
    fetch(_remote(url), tmp_path)
    assert verify_cached(GOWALLA, tmp_path) == tmp_path / NAME
    assert fetch(_remote(url), tmp_path).status == "present"
    assert served.sent == [len(BODY)]


def test_a_file_without_a_record_is_refused_then_adopted_by_fetch(
    server: tuple[Served, str], tmp_path: Path
) -> None:
    served, url = server
    (tmp_path / NAME).write_bytes(BODY)
    with pytest.raises(IntegrityError, match=r"has no record.*shuffledp data fetch gowalla"):
        verify_cached(GOWALLA, tmp_path)
    with pytest.raises(IntegrityError, match="size is"):  # checked against the pins first
        fetch(_remote(url, size=len(BODY) + 1), tmp_path)
    result = fetch(_remote(url, size=len(BODY)), tmp_path)
    assert result.status == "adopted" and result.record.sha256 == _sha(BODY)
    assert served.sent == [] and verify_cached(GOWALLA, tmp_path) == tmp_path / NAME


def test_a_lost_file_is_downloaded_again_and_must_match_its_old_record(
    server: tuple[Served, str], tmp_path: Path
) -> None:
    served, url = server
    path = fetch(_remote(url), tmp_path).path
    path.unlink()
    served.body = BODY[:-10] + b"0123456789"  # the server now serves something else
    with pytest.raises(IntegrityError, match=f"expected {_sha(BODY)} \\(recorded"):
        fetch(_remote(url), tmp_path)
    assert not path.exists() and not (tmp_path / f"{NAME}.part").exists()


# --- where, and the record ----------------------------------------------------------------------


def test_the_cache_folder_follows_dir_then_the_variable_then_xdg_then_home(tmp_path: Path) -> None:
    env = {"HOME": "/home/a", "XDG_CACHE_HOME": "/xdg", CACHE_ENV: "/env"}
    assert cache_dir(tmp_path, env) == tmp_path
    assert cache_dir(None, env) == Path("/env")
    assert cache_dir(None, {**env, CACHE_ENV: ""}) == Path("/xdg/shuffledp")
    relative = {"HOME": "/home/a", "XDG_CACHE_HOME": "relative/path"}  # ignored (XDG spec)
    assert cache_dir(None, relative) == Path("/home/a/.cache/shuffledp")
    assert cache_dir(None, {"HOME": "/home/a"}) == Path("/home/a/.cache/shuffledp")


def test_records_round_trip_and_refuse_bad_values() -> None:
    record = FileRecord(
        name="gowalla",
        url="https://example.org/f.gz",
        file="f.gz",
        size=10,
        sha256="a" * 64,
        md5="b" * 32,
        fetched="2026-11-24T22:00:00Z",
        trust="first-use",
    )
    assert FileRecord.from_json(json.loads(json.dumps(record.to_json()))) == record
    with pytest.raises(InvalidParameterError, match="sha256 must be 64 lowercase hexadecimal"):
        replace(record, sha256="A" * 64)
    with pytest.raises(InvalidParameterError, match="size must be an integer >= 0, got -1"):
        replace(record, size=-1)
    with pytest.raises(InvalidParameterError, match="needs the keys"):
        FileRecord.from_json({**record.to_json(), "extra": 1})


def test_the_gowalla_pins_are_the_published_ones() -> None:
    """The size and MD5 the DataRec library pins for SNAP's file (module docstring)."""
    assert GOWALLA.url == "https://snap.stanford.edu/data/loc-gowalla_totalCheckins.txt.gz"
    assert GOWALLA.size == 105_470_044 and GOWALLA.md5 == "8ebd5ed2dd376d8982987c49429cb9f9"
    assert GOWALLA.sha256 is None  # none published: trusted on first use


# --- the command --------------------------------------------------------------------------------


def test_the_command_downloads_and_says_how_the_file_was_checked(
    server: tuple[Served, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, url = server
    monkeypatch.setitem(fetch_module.DATASETS, "gowalla", _remote(url))
    assert main(["data", "fetch", "gowalla", "--dir", str(tmp_path), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / NAME).read_bytes() == BODY
    assert f"SHA-256 {_sha(BODY)}: no published value" in out and "trusted on first use" in out
    assert main(["data", "fetch", "gowalla", "--dir", str(tmp_path), "--quiet"]) == 0
    assert "already cached" in capsys.readouterr().out


def test_a_file_fetched_outside_the_default_cache_says_how_experiments_read_it(
    server: tuple[Served, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--dir elsewhere: the experiments look in the default cache, so the command names
    --dataset and the variable; fetched into the default cache it says nothing of the kind."""
    _, url = server
    monkeypatch.setitem(fetch_module.DATASETS, "gowalla", _remote(url))
    default, elsewhere = tmp_path / "default", tmp_path / "elsewhere"
    monkeypatch.setenv(CACHE_ENV, str(default))
    assert main(["data", "fetch", "gowalla", "--dir", str(elsewhere), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"--dataset {elsewhere / NAME}" in out and f"{CACHE_ENV}={elsewhere}" in out
    assert main(["data", "fetch", "gowalla", "--dir", str(elsewhere), "--quiet"]) == 0
    assert f"--dataset {elsewhere / NAME}" in capsys.readouterr().out  # also when cached
    assert main(["data", "fetch", "gowalla", "--dir", str(default), "--quiet"]) == 0
    assert "--dataset" not in capsys.readouterr().out


@pytest.mark.parametrize("failure", ["404", "500", "truncated"])
def test_a_failed_download_is_one_line_exit_1_and_no_file_in_place(
    server: tuple[Served, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    failure: str,
) -> None:
    served, url = server
    if failure == "truncated":
        served.cut_after = 1234
    else:
        served.status = int(failure)
    monkeypatch.setitem(fetch_module.DATASETS, "gowalla", _remote(url))
    code = main(["data", "fetch", "gowalla", "--dir", str(tmp_path), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1
    assert err.startswith("shuffledp data fetch: error: ") and url in err
    assert not (tmp_path / NAME).exists() and not record_path(tmp_path / NAME).exists()
    part = tmp_path / f"{NAME}.part"
    if failure == "truncated":  # kept to resume from, under its own name
        assert "1,234 of" in err and part.read_bytes() == BODY[:1234]
    else:
        assert f"HTTP {failure}" in err and not part.exists()


def test_a_dir_that_is_a_file_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    assert main(["data", "fetch", "gowalla", "--dir", str(afile)]) == 2
    assert "--dir" in capsys.readouterr().err


# --- experiments find the file --------------------------------------------------------------------


@pytest.fixture
def no_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache (the variable) and no sibling shared/data slices."""
    cache = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(cache))
    monkeypatch.setattr(gu, "_default_data_dir", lambda: tmp_path / "no-shared-data")
    return cache


def test_experiments_without_data_stop_before_any_work(
    no_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    # --strict: a skipped experiment is an error (without it `all` runs the others, see
    # test_gowalla_data.py)
    code = main(["experiment", "all", "--quick", "--out", str(out), "--quiet", "--strict"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == "" and captured.err.count("\n") == 1
    assert "run `shuffledp data fetch gowalla`" in captured.err
    assert str(no_data) in captured.err
    assert not out.exists()  # not even the first experiment (table-2) ran


def test_experiments_find_the_cached_file(
    server: tuple[Served, str], no_data: Path, tmp_path: Path
) -> None:
    _, url = server
    path = fetch(_remote(url)).path  # into $SHUFFLEDP_CACHE_DIR
    assert path == no_data / NAME
    assert gu.find_dataset(gu.PARIS, None, None) == path
    population = gu.load_population(path, PRESETS["paris"])
    assert population.has_users and population.n == 200  # one report per user
    given = tmp_path / "given.txt"
    given.write_text("")
    assert gu.find_dataset(gu.PARIS, given, None) == given  # --dataset still wins
    path.write_bytes(BODY[:500] + bytes([BODY[500] ^ 1]) + BODY[501:])
    with pytest.raises(ExperimentError, match=f"gowalla-paris: .*expected {_sha(BODY)}"):
        gu.find_dataset(gu.PARIS, None, None)


def test_ctrl_c_keeps_the_part_file_and_the_next_run_resumes(
    server: tuple[Served, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    served, url = server
    monkeypatch.setitem(fetch_module.DATASETS, "gowalla", _remote(url))

    @contextlib.contextmanager
    def interrupting_bar(label: str, *, quiet: bool) -> Iterator[Callable[[int, int | None], None]]:
        def progress(done: int, total: int | None) -> None:
            if done > 0:  # after the first chunk was written
                raise KeyboardInterrupt

        yield progress

    monkeypatch.setattr(data_cli, "_progress_bar", interrupting_bar)
    assert main(["data", "fetch", "gowalla", "--dir", str(tmp_path)]) == 130
    err = capsys.readouterr().err
    part = tmp_path / f"{NAME}.part"
    assert err.count("\n") == 1 and f"{part} is kept" in err
    kept = part.stat().st_size
    assert 0 < kept <= len(BODY) and part.read_bytes() == BODY[:kept]
    assert not (tmp_path / NAME).exists()
    monkeypatch.undo()
    result = fetch(_remote(url), tmp_path)
    assert result.path.read_bytes() == BODY and served.ranges[-1] == f"bytes={kept}-"


def test_simulate_dataset_gowalla_reads_the_fetched_file(
    server: tuple[Served, str],
    no_data: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--dataset gowalla`` (no path): the cached file, checked; without it one line naming
    the fetch command, exit 2, before any work (no key folder, no broker, no process)."""
    with pytest.raises(DataMissingError, match=r"run that command first") as caught:
        parse_dataset_spec("gowalla")
    assert "`shuffledp data fetch gowalla`" in str(caught.value) and str(no_data) in str(
        caught.value
    )
    code = main(["simulate", "--dataset", "gowalla", "--region", "paris", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "shuffledp data fetch gowalla" in err
    _, url = server
    path = fetch(_remote(url)).path
    assert parse_dataset_spec("gowalla").path == str(path)
    dataset = resolve_dataset(
        "gowalla", n=None, k=None, region=PRESETS["paris"], rng=SeededRandom(1)
    )
    assert dataset.n == 200 and dataset.details["path"] == str(path)  # one report per user
    path.write_bytes(BODY[:500] + bytes([BODY[500] ^ 1]) + BODY[501:])
    with pytest.raises(IntegrityError, match=f"expected {_sha(BODY)}"):
        parse_dataset_spec("gowalla")
