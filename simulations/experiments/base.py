"""What every experiment of ``shuffledp experiment`` receives and returns.

An experiment is a function ``run(context) -> ExperimentOutput`` registered under its name (see
:mod:`shuffledp.simulations.experiments`). It writes its CSV files, PNG figures and a short
markdown summary into ``context.out`` and lists them in its output. Repetitions go through
``context.repeat`` (parallel local processes with a progress bar, or a Dask cluster), never
through a loop of its own, so that ``--runs``, ``--dask`` and the progress bar work everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from shuffledp.errors import OperationalError

__all__ = ["ExperimentContext", "ExperimentError", "ExperimentOutput", "Repeater"]

T = TypeVar("T")
R = TypeVar("R")


class ExperimentError(OperationalError):
    """An experiment cannot run as asked (missing data file, unreachable Dask scheduler, ...);
    the message says what and why in one line (``shuffledp experiment`` prints it)."""


class Repeater(Protocol):
    """Runs ``fn(item)`` for every item, in parallel where it can, showing a progress bar
    labelled ``label``; returns the results in the order of ``items``. ``fn`` and the items
    must be picklable (top-level functions, plain data): they may run in other processes."""

    def __call__(self, fn: Callable[[T], R], items: Sequence[T], *, label: str) -> list[R]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ExperimentContext:
    """``out``: the output folder (exists). ``quick``: a small grid that finishes in CI (seconds
    to a minute). ``runs``: repetitions per point (``--runs``; None = the experiment's default,
    smaller with ``quick``). ``seed``: None = OS CSPRNG (say so in the summary); an int makes
    runs reproducible. ``pipeline``: run through the real broker pipeline instead of the fast
    in-process path. ``data_dir``: where real check-in files are looked for by default.
    ``quiet``: no progress display (``--quiet``); an experiment's own sequential loops (the
    ``--pipeline`` rounds) follow it too."""

    out: Path
    quick: bool
    runs: int | None
    seed: int | None
    pipeline: bool
    repeat: Repeater
    data_dir: Path | None = None
    options: dict[str, Any] = field(default_factory=dict)
    quiet: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ExperimentOutput:
    """The files written (CSV, PNG, the markdown summary) and the summary's text."""

    name: str
    files: tuple[Path, ...]
    summary: str
