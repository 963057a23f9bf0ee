"""`shuffledp data fetch NAME [--dir DIR]`: download a public data file once, check it, cache it.

The work is :mod:`shuffledp.simulations.data.fetch`; this module shows a progress bar (rich, on
stderr, only on a terminal and without ``--quiet``) and prints where the file is and how it was
checked. A failed download is one line on stderr and exit status 1; the final file name never
holds a partial file.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shuffledp.cli.help import add_command
from shuffledp.errors import InvalidParameterError

if TYPE_CHECKING:
    from shuffledp.simulations.data.fetch import FileRecord, RemoteFile

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Any) -> None:
    """Register `data` (with its required nested subcommand `fetch`) on ``subparsers``."""
    from shuffledp.simulations.data.fetch import CACHE_ENV

    p = add_command(
        subparsers,
        "data",
        help="download and cache the public data files of the evaluation",
        description="Public data files, downloaded once into a cache folder and checked on "
        "every use.",
        examples=[
            "shuffledp data fetch gowalla",
            "shuffledp data fetch gowalla --dir /data/shuffledp",
        ],
    )
    data_sub = p.add_subparsers(dest="data_command", metavar="COMMAND", required=True)
    fetch = add_command(
        data_sub,
        "fetch",
        help="download a data file (resumes), record its SHA-256 and size, cache it",
        description="Download NAME into the cache folder: --dir, else $"
        f"{CACHE_ENV}, else $XDG_CACHE_HOME/shuffledp, else ~/.cache/shuffledp. An "
        "interrupted download resumes from its .part file; the complete file must match the "
        "published size and MD5, and its SHA-256 and size are recorded beside it (FILE.json; "
        "SNAP publishes no SHA-256, so it is trusted on first use) and checked on every later "
        "use. A cached file is checked, never downloaded again.\n\nnames:\n"
        "  gowalla   SNAP's loc-gowalla_totalCheckins.txt.gz (105 MB), read by\n"
        "            shuffledp experiment fig-3 ... fig-7 and table-6",
        examples=[
            "shuffledp data fetch gowalla",
            "shuffledp data fetch gowalla --dir /data/shuffledp --quiet",
        ],
    )
    fetch.add_argument("name", metavar="NAME", choices=["gowalla"], help="the file: gowalla")
    fetch.add_argument(
        "--dir",
        type=Path,
        metavar="DIR",
        help=f"the cache folder (created if missing; default ${CACHE_ENV}, else the XDG cache)",
    )
    fetch.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    fetch.set_defaults(func=run)


@contextlib.contextmanager
def _progress_bar(label: str, *, quiet: bool) -> Iterator[Callable[[int, int | None], None]]:
    """A download bar on stderr (bytes, speed, time left); nothing when ``quiet`` or when
    stderr is not a terminal. Yields the ``progress(done, total)`` callback."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    console = Console(stderr=True)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=quiet or not console.is_terminal,
    )
    with progress:
        task = progress.add_task(label, total=None)

        def update(done: int, total: int | None) -> None:
            progress.update(task, completed=done, total=total)

        yield update


def run(args: argparse.Namespace) -> int:
    from shuffledp.simulations.data.fetch import DATASETS, cache_dir, fetch

    remote = DATASETS[args.name]
    folder = cache_dir(args.dir)
    if folder.exists() and not folder.is_dir():
        raise InvalidParameterError(f"--dir {folder}: is a file, a folder is needed")
    try:
        with _progress_bar(remote.filename, quiet=args.quiet) as progress:
            result = fetch(remote, folder, progress=progress)
    except KeyboardInterrupt:
        part = folder / f"{remote.filename}.part"
        kept = f"{part} is kept: run the command again to resume" if part.is_file() else ""
        print(f"shuffledp data fetch: interrupted; {kept or 'nothing was saved'}", file=sys.stderr)
        return 130
    record = result.record
    if result.status == "present":
        print(f"{remote.name}: already cached at {result.path}")
        print(f"  size {record.size:,} bytes and SHA-256 {record.sha256} match its record")
        _print_where_read(folder, result.path)
        return 0
    if result.status == "adopted":
        print(f"{remote.name}: found {result.path} without a record; checked and recorded it")
    else:
        resumed = f", resumed at byte {result.resumed_from:,}" if result.resumed_from else ""
        print(f"{remote.name}: downloaded {remote.url}{resumed}")
        print(f"  into {result.path}")
    _print_checks(remote, record, result.path)
    _print_where_read(folder, result.path)
    return 0


def _print_where_read(folder: Path, path: Path) -> None:
    """A file fetched outside the default cache is not where the experiments look: say how."""
    from shuffledp.simulations.data.fetch import CACHE_ENV, cache_dir

    if folder.resolve() != cache_dir().resolve():
        print(
            f"  not the default cache ({cache_dir()}): the experiments read it with "
            f"--dataset {path}, or with {CACHE_ENV}={folder} set"
        )


def _print_checks(remote: RemoteFile, record: FileRecord, path: Path) -> None:
    """What the file was checked against, how far its SHA-256 is trusted, where it is recorded."""
    from shuffledp.simulations.data.fetch import record_path

    if remote.size is not None or remote.md5 is not None:
        print(
            f"  size {record.size:,} bytes and MD5 {record.md5} match the values published by "
            f"{remote.pinned_by}"
        )
    if record.trust == "published":
        print(f"  SHA-256 {record.sha256} matches the published value")
    else:
        print(
            f"  SHA-256 {record.sha256}: no published value to compare with, so it is trusted "
            "on first use: recorded now, checked on every later use"
        )
    print(f"  record: {record_path(path)}")
