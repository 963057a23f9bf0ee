"""Repeaters: how ``context.repeat(fn, items, label=...)`` runs an experiment's repetitions.

* :class:`LocalRepeater` (the default): a pool of local processes
  (``concurrent.futures.ProcessPoolExecutor``, ``--workers``, default the number of cores,
  started by a fork server), one pool kept for the whole command so worker start-up (imports
  of numpy, scipy, diffprivlib: 1-2 s) is paid once. ``workers=1`` runs in the calling process
  instead (no pickling, no start-up).
* :class:`DaskRepeater` (``--dask ADDRESS``): the items become tasks on a Dask distributed
  cluster (``distributed.Client(address)``); every worker needs shuffledp installed.

Both return the results in the order of the items, whatever order they finish in, and show a
rich progress bar on stderr unless ``quiet`` or stderr is not a terminal. An exception in any
repetition stops the rest and is raised in the caller.

Seeds: :func:`repetition_seed` derives an independent seed per repetition from ``--seed`` with
``np.random.SeedSequence`` (spawn keys, so the streams are independent and a repetition's seed
does not depend on how many others there are); without ``--seed`` every repetition draws from
the OS CSPRNG.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np

from shuffledp.simulations.experiments.base import ExperimentError
from shuffledp.validation import require_int

__all__ = [
    "DaskRepeater",
    "LocalRepeater",
    "progress_bar",
    "repetition_seed",
]

T = TypeVar("T")
R = TypeVar("R")

#: Seconds to wait for a Dask scheduler before saying it is unreachable.
DASK_CONNECT_TIMEOUT = 10.0


def repetition_seed(seed: int | None, *path: int) -> int | None:
    """The seed of the repetition at ``path`` (e.g. (grid index, run)) of a run seeded with
    ``seed``: None stays None (OS CSPRNG); an int gives a 63-bit seed from
    ``SeedSequence(seed, spawn_key=path)``, independent of every other path's stream."""
    if seed is None:
        return None
    require_int("seed", seed, 0)
    for index, part in enumerate(path):
        require_int(f"path[{index}]", part, 0)
    state = np.random.SeedSequence(seed, spawn_key=tuple(path)).generate_state(1, dtype=np.uint64)
    return int(state[0]) >> 1


@contextlib.contextmanager
def progress_bar(total: int, label: str, *, quiet: bool = False) -> Iterator[Callable[[], None]]:
    """A rich progress bar on stderr for ``total`` steps; yields ``advance()``. Nothing is shown
    when ``quiet`` or when stderr is not a terminal (logs and CI stay clean)."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = Console(stderr=True)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=quiet or not console.is_terminal,
    )
    with progress:
        task = progress.add_task(label, total=total)

        def advance() -> None:
            progress.advance(task)

        yield advance


class LocalRepeater:
    """Repetitions in local processes (see the module docstring). Use as a context manager, or
    call :meth:`close`, to stop the pool's processes."""

    def __init__(self, workers: int | None = None, *, quiet: bool = False) -> None:
        count = workers if workers is not None else (os.cpu_count() or 1)
        require_int("workers", count, 1, 1024)
        self.workers = count
        self.quiet = quiet
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None

    def __enter__(self) -> LocalRepeater:
        return self

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.terminate()

    def close(self) -> None:
        """Stop the worker processes once their current repetitions end (pending ones are
        cancelled)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def terminate(self) -> None:
        """Stop at once (an error or Ctrl-C): cancel pending repetitions and end the worker
        processes without waiting for the running ones."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        # ProcessPoolExecutor has no public way to stop running work before Python 3.14
        # (terminate_workers); its process table is the only handle on the workers.
        processes = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            if process.is_alive():
                process.terminate()
        for process in processes:
            process.join(timeout=5.0)

    def __call__(self, fn: Callable[[T], R], items: Sequence[T], *, label: str) -> list[R]:
        items = list(items)
        if not items:
            return []
        if self.workers == 1:
            results: list[R] = []
            with progress_bar(len(items), label, quiet=self.quiet) as advance:
                for item in items:
                    results.append(fn(item))
                    advance()
            return results
        if self._pool is None:
            # forkserver, not fork: forking a process that runs threads (a progress bar, a
            # Dask client, an asyncio helper) can copy a held lock into the child and hang it.
            self._pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context("forkserver")
            )
        futures = self._submit_all(fn, items)
        index_of = {future: index for index, future in enumerate(futures)}
        slots: list[Any] = [None] * len(items)
        try:
            with progress_bar(len(items), label, quiet=self.quiet) as advance:
                for future in concurrent.futures.as_completed(futures):
                    slots[index_of[future]] = future.result()
                    advance()
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        return slots

    def _submit_all(self, fn: Callable[[T], R], items: Sequence[T]) -> list[Any]:
        """Every item submitted to the pool; a TMPDIR too long for the fork server's Unix
        socket (TMPDIR/pymp-XXXXXXXX/listener-XXXXXXXX, at most 107 bytes on Linux) is named
        in one line instead of the bare 'AF_UNIX path too long'."""
        assert self._pool is not None
        try:
            return [self._pool.submit(fn, item) for item in items]
        except OSError as exc:
            if "AF_UNIX path too long" not in str(exc):
                raise
            raise ExperimentError(
                f"--workers {self.workers}: the worker pool's socket goes under TMPDIR "
                f"({tempfile.gettempdir()}, {len(tempfile.gettempdir())} characters), too long "
                "for a Unix socket path (107 bytes): set TMPDIR to a shorter folder or use "
                "--workers 1"
            ) from None


class DaskRepeater:
    """Repetitions as tasks on a Dask distributed cluster at ``address`` (e.g.
    ``tcp://10.0.0.5:8786``). ExperimentError (one line) when dask is not installed or the
    scheduler cannot be reached within ``timeout`` seconds."""

    def __init__(
        self, address: str, *, quiet: bool = False, timeout: float = DASK_CONNECT_TIMEOUT
    ) -> None:
        try:
            import distributed
        except ImportError as exc:
            raise ExperimentError(
                "--dask needs dask's distributed scheduler, which is not installed: "
                "pip install 'shuffledp[dask]'"
            ) from exc
        self.address = address
        self.quiet = quiet
        try:
            api: Any = distributed  # untyped library: its calls are Any here
            self._client: Any = api.Client(address, timeout=timeout, set_as_default=False)
        except (OSError, ValueError, TimeoutError) as exc:
            message = " ".join(str(exc).split()) or type(exc).__name__
            raise ExperimentError(
                f"cannot reach the Dask scheduler at {address!r}: {message}"
            ) from exc

    def __enter__(self) -> DaskRepeater:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def terminate(self) -> None:
        """The same as :meth:`close`: a failed or interrupted call already cancelled its
        tasks on the cluster."""
        self.close()

    def close(self) -> None:
        """Disconnect from the scheduler (the cluster keeps running)."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def __call__(self, fn: Callable[[T], R], items: Sequence[T], *, label: str) -> list[R]:
        import distributed

        api: Any = distributed
        items = list(items)
        if not items:
            return []
        if self._client is None:
            raise ExperimentError("the Dask repeater is closed")
        # pure=False: identical items (e.g. unseeded repetitions) are separate random draws,
        # never one cached result.
        futures = self._client.map(fn, items, pure=False)
        try:
            with progress_bar(len(items), label, quiet=self.quiet) as advance:
                for _ in api.as_completed(futures, loop=self._client.loop):
                    advance()
            results: list[R] = self._client.gather(futures)
        except BaseException:
            self._client.cancel(futures)
            raise
        return list(results)
