"""Public data files downloaded once and cached: ``shuffledp data fetch gowalla``.

One file so far, :data:`GOWALLA`: the SNAP Gowalla check-ins
(``loc-gowalla_totalCheckins.txt.gz``, the format of :mod:`shuffledp.simulations.data.checkins`).

- **Where**: :func:`cache_dir`: ``--dir``, else ``$SHUFFLEDP_CACHE_DIR``, else
  ``$XDG_CACHE_HOME/shuffledp``, else ``~/.cache/shuffledp``. The file keeps its published name.
- **Download**: into ``NAME.part`` beside it; an interrupted download (network error, a body
  cut short) leaves the ``.part`` file, and the next run asks for the rest only (HTTP ``Range:
  bytes=OFFSET-``). A server that ignores the range (200) restarts the file from byte 0; one
  that answers 416 for a ``.part`` file already complete finishes it. The complete file is
  checked, flushed to disk and renamed into place (atomic on one file system): the final name
  never holds a partial file.
- **Record**: ``NAME.json`` beside the file (:class:`FileRecord`): its SHA-256, MD5, size, URL
  and time. SNAP publishes no checksum, so the SHA-256 is *trusted on first use*: recorded from
  the first complete download, after the file has matched the size and MD5 that the DataRec
  library pins for it (``sisinflab/DataRec``, ``datarec/datasets/gowalla/gowalla_checkins.py``:
  105,470,044 bytes, MD5 ``8ebd5ed2dd376d8982987c49429cb9f9``).
- **Every later use** (:func:`verify_cached`, which experiments call) re-reads the file and
  compares its size and SHA-256 with the record: a mismatch is :class:`IntegrityError` naming
  both values, never a silent download over the file. A file without a record (copied in by
  hand) is adopted by ``fetch``: checked against the pinned values, then recorded.

Downloads use :mod:`urllib.request` from the standard library: pooch, the obvious library,
downloads into a temporary file and starts over after an interruption (no HTTP Range resume),
and would bring requests and tqdm along; the resume logic here is about a hundred lines.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import Message
from http.client import HTTPException
from pathlib import Path
from typing import IO, Any, Literal

from shuffledp.errors import InvalidParameterError, OperationalError

__all__ = [
    "CACHE_ENV",
    "DATASETS",
    "GOWALLA",
    "DataMissingError",
    "FetchError",
    "FetchResult",
    "FileRecord",
    "IntegrityError",
    "RemoteFile",
    "cache_dir",
    "fetch",
    "fetch_command",
    "record_path",
    "verify_cached",
]

CACHE_ENV = "SHUFFLEDP_CACHE_DIR"
"""Environment variable naming the cache folder (below ``--dir``, above the XDG default)."""

Progress = Callable[[int, int | None], None]
"""Called with (bytes in the ``.part`` file, total size or None when the server does not say)."""

_CHUNK = 1 << 20
_HEX = re.compile(r"[0-9a-f]+")
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")
_UNSATISFIED_RANGE = re.compile(r"bytes\s+\*/(\d+)")


def _check_hex(field: str, value: str | None, length: int) -> None:
    if value is not None and (len(value) != length or _HEX.fullmatch(value) is None):
        raise InvalidParameterError(
            f"{field} must be {length} lowercase hexadecimal digits, got {value!r}"
        )


class FetchError(OperationalError):
    """A download failed (unreachable server, HTTP error, body cut short); one line, naming the
    URL, what was kept (a ``.part`` file to resume from, or nothing) and what to do."""


class DataMissingError(InvalidParameterError):
    """Check-in data a command needs is not there (no fetched file, no slice in ``--data-dir``,
    no ``--dataset`` file): bad input like a missing file (exit status 2), one line saying how
    to get it (``shuffledp data fetch gowalla``, ``--data-dir``)."""


class IntegrityError(FetchError):
    """A file does not match its record or the pinned values: the message names the expected
    and the actual value."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteFile:
    """A public file that ``shuffledp data fetch NAME`` downloads. ``size``, ``md5``,
    ``sha256``: published values the download must match (None: nothing published), and
    ``pinned_by`` says who published them."""

    name: str
    url: str
    filename: str
    description: str
    size: int | None = None
    md5: str | None = None
    sha256: str | None = None
    pinned_by: str = ""

    def __post_init__(self) -> None:
        if not self.url.startswith(("https://", "http://")):
            raise InvalidParameterError(f"a data file's URL must be http(s), got {self.url!r}")
        if not self.filename or Path(self.filename).name != self.filename:
            raise InvalidParameterError(
                f"a data file's name must be a bare file name, got {self.filename!r}"
            )
        _check_hex("md5", self.md5, 32)
        _check_hex("sha256", self.sha256, 64)


GOWALLA = RemoteFile(
    name="gowalla",
    url="https://snap.stanford.edu/data/loc-gowalla_totalCheckins.txt.gz",
    filename="loc-gowalla_totalCheckins.txt.gz",
    description="SNAP Gowalla check-ins (Cho, Myers and Leskovec, KDD 2011), 6,442,890 lines",
    size=105_470_044,
    md5="8ebd5ed2dd376d8982987c49429cb9f9",
    pinned_by="the DataRec library (sisinflab/DataRec); SNAP publishes no checksum",
)
DATASETS: dict[str, RemoteFile] = {GOWALLA.name: GOWALLA}
"""``shuffledp data fetch NAME``: the names and their files."""


def fetch_command(name: str = GOWALLA.name) -> str:
    """The command that downloads ``name`` (for messages)."""
    return f"shuffledp data fetch {name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class FileRecord:
    """What ``NAME.json`` beside a cached file says about it (JSON: :meth:`to_json`)."""

    name: str
    url: str
    file: str
    size: int
    sha256: str
    md5: str
    fetched: str
    """When the record was written, ISO 8601 UTC."""
    trust: Literal["first-use", "published"]
    """``published``: the SHA-256 was given by the file's publisher; ``first-use``: recorded
    from the first download (and checked on every use after it)."""

    def __post_init__(self) -> None:
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 0:
            raise InvalidParameterError(
                f"a record's size must be an integer >= 0, got {self.size!r}"
            )
        _check_hex("sha256", self.sha256, 64)
        _check_hex("md5", self.md5, 32)
        if self.trust not in ("first-use", "published"):
            raise InvalidParameterError(
                f"a record's trust must be first-use or published, got {self.trust!r}"
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "url": self.url,
            "file": self.file,
            "size": self.size,
            "sha256": self.sha256,
            "md5": self.md5,
            "fetched": self.fetched,
            "trust": self.trust,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FileRecord:
        expected = {"name", "url", "file", "size", "sha256", "md5", "fetched", "trust"}
        if not isinstance(data, Mapping) or set(data) != expected:
            got = sorted(data) if isinstance(data, Mapping) else type(data).__name__
            raise InvalidParameterError(
                f"a file record needs the keys {sorted(expected)}, got {got}"
            )
        for key in expected - {"size"}:
            if not isinstance(data[key], str):
                raise InvalidParameterError(f"a file record's {key} must be a string")
        return cls(**dict(data))


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchResult:
    """``status``: ``downloaded``, ``present`` (cached and matching its record) or ``adopted``
    (a file found without a record, checked and recorded); ``resumed_from``: the byte offset the
    download continued from (0: from the start)."""

    path: Path
    record: FileRecord
    status: Literal["downloaded", "present", "adopted"]
    resumed_from: int = 0


# --- where ------------------------------------------------------------------------------------


def cache_dir(given: Path | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """The cache folder: ``given`` (``--dir``), ``$SHUFFLEDP_CACHE_DIR``,
    ``$XDG_CACHE_HOME/shuffledp`` (an absolute XDG path only, as its specification says), or
    ``~/.cache/shuffledp``."""
    env = os.environ if environ is None else environ
    if given is not None:
        return Path(given).expanduser()
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV]).expanduser()
    xdg = env.get("XDG_CACHE_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "shuffledp"
    home = env.get("HOME")
    return (Path(home) if home else Path.home()) / ".cache" / "shuffledp"


def record_path(path: Path) -> Path:
    """The record (``NAME.json``) beside a cached file."""
    return path.with_name(path.name + ".json")


def _part_path(path: Path) -> Path:
    return path.with_name(path.name + ".part")


# --- checking ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Digest:
    size: int
    sha256: str
    md5: str


def _digest(path: Path, *, md5: bool = True) -> _Digest:
    """Size, SHA-256 and (unless ``md5`` is False: "" then) MD5 of the file, read in chunks."""
    sha, other, size = hashlib.sha256(), hashlib.md5(usedforsecurity=False), 0
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            sha.update(chunk)
            if md5:
                other.update(chunk)
            size += len(chunk)
    return _Digest(size, sha.hexdigest(), other.hexdigest() if md5 else "")


def _read_record(path: Path) -> FileRecord:
    where = record_path(path)
    try:
        return FileRecord.from_json(json.loads(where.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise IntegrityError(
            f"the record {where} cannot be read ({exc}); delete it and run the fetch again"
        ) from None


def _compare(what: str, expected: object, actual: object, source: str, path: Path) -> None:
    if expected is not None and expected != actual:
        raise IntegrityError(
            f"{path}: {what} is {actual}, expected {expected} ({source}); the file was changed "
            "or damaged"
        )


def verify_cached(remote: RemoteFile, folder: Path | None = None) -> Path | None:
    """The cached file of ``remote`` in ``folder`` (default :func:`cache_dir`) after checking
    its size and SHA-256 against its record; None if it is not there. IntegrityError (naming
    both values) if it does not match, or if it has no record (``fetch`` checks and records it)."""
    path = cache_dir(folder) / remote.filename
    if not path.is_file():
        return None
    if not record_path(path).is_file():
        raise IntegrityError(
            f"{path} has no record of its SHA-256 ({record_path(path).name}); run "
            f"`{fetch_command(remote.name)} --dir {path.parent}` to check the file and record it"
        )
    record = _read_record(path)
    size = path.stat().st_size
    _compare("the size", f"{record.size:,} bytes", f"{size:,} bytes", "its record", path)
    digest = _digest(path, md5=False)
    _compare("the SHA-256", record.sha256, digest.sha256, f"its record of {record.fetched}", path)
    return path


def _check_pins(
    remote: RemoteFile, digest: _Digest, path: Path, earlier: FileRecord | None
) -> None:
    source = f"published by {remote.pinned_by}" if remote.pinned_by else "published"
    if remote.size is not None:
        _compare("the size", f"{remote.size:,} bytes", f"{digest.size:,} bytes", source, path)
    _compare("the MD5", remote.md5, digest.md5, source, path)
    _compare("the SHA-256", remote.sha256, digest.sha256, source, path)
    if earlier is not None:  # the record of an earlier download whose file has gone
        _compare("the SHA-256", earlier.sha256, digest.sha256, f"recorded {earlier.fetched}", path)


def _write_record(remote: RemoteFile, path: Path, digest: _Digest) -> FileRecord:
    record = FileRecord(
        name=remote.name,
        url=remote.url,
        file=path.name,
        size=digest.size,
        sha256=digest.sha256,
        md5=digest.md5,
        fetched=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        trust="published" if remote.sha256 is not None else "first-use",
    )
    where = record_path(path)
    temporary = where.with_name(where.name + ".tmp")
    temporary.write_text(json.dumps(record.to_json(), indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, where)
    return record


# --- fetching ---------------------------------------------------------------------------------


def fetch(
    remote: RemoteFile,
    folder: Path | None = None,
    *,
    progress: Progress | None = None,
    timeout: float = 60.0,
) -> FetchResult:
    """Download ``remote`` into ``folder`` (default :func:`cache_dir`) unless it is there,
    resuming a ``.part`` file, check it and record it (module docstring). A cached file is
    checked against its record instead (IntegrityError on a mismatch, nothing downloaded).
    FetchError (one line) when the download fails: the final name then holds nothing."""
    folder = cache_dir(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FetchError(
            f"cannot create the cache folder {folder}: {exc.strerror or exc}"
        ) from None
    path = folder / remote.filename
    if path.is_file():
        if record_path(path).is_file():
            verify_cached(remote, folder)
            return FetchResult(path=path, record=_read_record(path), status="present")
        digest = _digest(path)
        _check_pins(remote, digest, path, None)
        return FetchResult(path=path, record=_write_record(remote, path, digest), status="adopted")
    earlier = _read_record(path) if record_path(path).is_file() else None
    part = _part_path(path)
    resumed = _download(remote, part, progress=progress, timeout=timeout)
    digest = _digest(part)
    try:
        _check_pins(remote, digest, part, earlier)
    except IntegrityError as exc:
        part.unlink(missing_ok=True)
        raise IntegrityError(f"{exc}; the download was deleted") from None
    os.replace(part, path)
    return FetchResult(
        path=path,
        record=_write_record(remote, path, digest),
        status="downloaded",
        resumed_from=resumed,
    )


def _kept(part: Path, size: int) -> str:
    if size:
        return f"the {size:,} bytes in {part} are kept: run the command again to resume"
    return "nothing was saved"


def _download(remote: RemoteFile, part: Path, *, progress: Progress | None, timeout: float) -> int:
    """Bring ``part`` to the whole file; the offset it continued from."""
    offset = part.stat().st_size if part.is_file() else 0
    response = _open(remote.url, offset, part, timeout)
    with response:
        start, total = _start_and_total(response, offset, remote.url, part)
        if start is None:  # 416: the .part file already holds the whole file
            return offset
        if remote.size is not None and total is not None and total != remote.size:
            raise FetchError(
                f"{remote.url}: the server announces {total:,} bytes, expected {remote.size:,} "
                f"(published by {remote.pinned_by}); {_kept(part, offset)}"
            )
        _copy(response, part, start, total, remote.url, progress)
    return start


def _open(url: str, offset: int, part: Path, timeout: float) -> Any:
    headers = {"User-Agent": "shuffledp", "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    request = urllib.request.Request(url, headers=headers)
    try:
        return urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:
            return exc  # a response too: its Content-Range says the file's size
        exc.close()
        raise FetchError(f"{url}: HTTP {exc.code} {exc.reason}; {_kept(part, offset)}") from None
    except (urllib.error.URLError, HTTPException, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise FetchError(f"cannot download {url}: {reason}; {_kept(part, offset)}") from None


def _header(response: Any, name: str) -> str:
    headers: Message = response.headers
    return str(headers.get(name, "") or "")


def _start_and_total(
    response: Any, offset: int, url: str, part: Path
) -> tuple[int | None, int | None]:
    """(where the body starts in the file, the file's size or None); start None: nothing to
    read (416 for a complete ``.part`` file)."""
    status = int(getattr(response, "status", None) or response.code)
    if status == 416:
        match = _UNSATISFIED_RANGE.fullmatch(_header(response, "Content-Range").strip())
        if match is not None and int(match.group(1)) == offset:
            return None, offset
        part.unlink(missing_ok=True)
        raise FetchError(
            f"{url}: the server refuses to continue from byte {offset:,} of {part} (HTTP 416: "
            "the file there is shorter); the partial file was deleted: run the command again"
        )
    if status == 206:
        match = _CONTENT_RANGE.fullmatch(_header(response, "Content-Range").strip())
        if match is None or int(match.group(1)) != offset:
            raise FetchError(
                f"{url}: asked for the bytes from {offset:,}, got Content-Range "
                f"{_header(response, 'Content-Range')!r}; {_kept(part, offset)}"
            )
        return offset, None if match.group(3) == "*" else int(match.group(3))
    if status == 200:  # a fresh download, or a server that ignores ranges: start over
        length = _header(response, "Content-Length")
        return 0, int(length) if length.isdigit() else None
    raise FetchError(f"{url}: unexpected HTTP {status}; {_kept(part, offset)}")


def _copy(
    response: IO[bytes],
    part: Path,
    start: int,
    total: int | None,
    url: str,
    progress: Progress | None,
) -> None:
    done = start
    of = f" of {total:,}" if total is not None else ""
    with part.open("ab" if start else "wb") as out:
        if progress is not None:
            progress(done, total)
        try:
            while chunk := response.read(_CHUNK):
                out.write(chunk)
                done += len(chunk)
                if progress is not None:
                    progress(done, total)
        except (HTTPException, OSError) as exc:  # IncompleteRead, a reset, a timeout
            out.flush()
            raise FetchError(
                f"{url}: the download stopped at {done:,}{of} bytes ({exc!r}); {_kept(part, done)}"
            ) from None
        out.flush()
        os.fsync(out.fileno())
    if total is not None and done < total:
        raise FetchError(
            f"{url}: the server closed the connection at {done:,}{of} bytes; {_kept(part, done)}"
        )
    if total is not None and done > total:
        part.unlink()
        raise FetchError(f"{url}: the server sent {done:,} bytes{of}; the download was deleted")
