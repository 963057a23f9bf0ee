"""`shuffledp experiment NAME|all --out DIR`: reproduce a figure or table of the evaluation.

Each experiment writes CSV files, PNG figures and a markdown summary into DIR (``all``: one
sub-folder per experiment) and the command prints the files and the summary's path. Errors are
one line on stderr with a non-zero exit: 2 for bad usage (unknown name, bad --runs), 1 when an
experiment could not run (missing data, unreachable Dask scheduler, a failed pipeline round).
``all`` without check-in data runs the other experiments and lists the skipped ones at the end
(``--strict``: an error before anything runs).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import Any

from shuffledp.cli.argtypes import integer
from shuffledp.cli.help import add_command
from shuffledp.cli.paths import check_input_file, check_output_dir
from shuffledp.errors import InvalidParameterError

__all__ = ["add_parser", "run"]

ALL = "all"


def add_parser(subparsers: Any) -> None:
    from shuffledp.simulations.experiments.registry import EXPERIMENTS

    names = "\n".join(f"  {name:<18} {text}" for name, (_, text) in EXPERIMENTS.items())
    p = add_command(
        subparsers,
        "experiment",
        help="reproduce a figure or table of the evaluation (CSV, PNG, markdown summary)",
        description="Run one experiment of the evaluation, or all of them, and write its CSV "
        "files, PNG figures and a markdown summary into --out.\n\nexperiments:\n"
        f"{names}\n  {ALL:<18} every experiment above, each into its own sub-folder of --out",
        examples=[
            "shuffledp experiment table-2 --out /tmp/shuffledp-results --quick",
            "shuffledp experiment fig-2 --out /tmp/shuffledp-results --runs 20 --seed 1",
            "shuffledp experiment all --out /tmp/shuffledp-results --quick --pipeline",
        ],
    )
    p.add_argument("name", metavar="NAME", help=f"an experiment name (listed above) or {ALL!r}")
    p.add_argument(
        "--out",
        required=True,
        type=Path,
        metavar="DIR",
        help="output folder (created if missing; checked writable before anything runs)",
    )
    p.add_argument(
        "--quick", action="store_true", help="a small grid that finishes in seconds (CI)"
    )
    p.add_argument(
        "--runs",
        type=integer(1),
        metavar="COUNT",
        help="repetitions per point (default: per experiment, fewer --quick)",
    )
    p.add_argument(
        "--seed",
        type=integer(0),
        metavar="SEED",
        help="make every repetition reproducible (independent streams derived from it with "
        "numpy's SeedSequence); default: the OS CSPRNG",
    )
    _add_where_arguments(p)
    p.add_argument(
        "--data-dir",
        type=Path,
        metavar="DIR",
        help="folder holding the check-in slices gowalla-sf-latlon.csv and "
        "gowalla-paris-latlon.csv (default: the file of `shuffledp data fetch gowalla`, else "
        "../shared/data next to the repository)",
    )
    p.add_argument(
        "--dataset",
        type=Path,
        metavar="FILE",
        help="fig-3 ... fig-7, table-6: a check-in file to use instead of the slice in "
        "--data-dir (SNAP, plain or .gz: one report per user, their most recent check-in in "
        "the region; or lat,lon CSV: one per row)",
    )
    _add_reporting_arguments(p)
    p.set_defaults(func=run)


def _add_reporting_arguments(p: argparse.ArgumentParser) -> None:
    """What the command says while it runs, and whether a skipped experiment is an error."""
    p.add_argument("--quiet", action="store_true", help="no progress bars on stderr")
    p.add_argument(
        "--strict",
        action="store_true",
        help=f"with {ALL!r}: an experiment that cannot run here (no check-in data) is an error "
        "(exit status 1, before anything runs); default: run every other experiment and list "
        "the skipped ones, and why, at the end (exit status 0 if all that ran succeeded)",
    )


def _add_where_arguments(p: argparse.ArgumentParser) -> None:
    """Where the repetitions run: this machine's cores, the real pipeline, or a Dask cluster."""
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--pipeline",
        action="store_true",
        help="run the rounds through the real pipeline (Mosquitto if installed, else the "
        "embedded broker; onion encryption, "
        "3 hops, separate processes) instead of the fast in-process path; one round after "
        "the other, so it is slow (about 5 s per round of 2,000 reports, ~2,700 reports/s "
        "beyond): use it with --quick or a few --runs",
    )
    where.add_argument(
        "--dask",
        metavar="ADDRESS",
        help="send the repetitions to a Dask distributed scheduler (e.g. tcp://host:8786; "
        "needs pip install 'shuffledp[dask]' here and shuffledp on every worker)",
    )
    p.add_argument(
        "--workers",
        type=integer(1),
        metavar="COUNT",
        help="local worker processes (default: the number of cores)",
    )


def _error(message: str, code: int) -> int:
    print(f"shuffledp experiment: error: {' '.join(message.split())}", file=sys.stderr)
    return code


def _check_args(args: argparse.Namespace, names: list[str]) -> tuple[list[str], dict[str, str]]:
    """The experiments to run and those ``all`` skips (name: why); InvalidParameterError (exit
    status 2) for bad input, before any experiment starts."""
    if args.name == ALL:
        selected = list(names)
    elif args.name in names:
        selected = [args.name]
    else:
        raise InvalidParameterError(
            f"unknown experiment {args.name!r}; choose one of: {', '.join([*names, ALL])}"
        )
    from shuffledp.simulations.experiments.gowalla_data import GOWALLA_EXPERIMENTS

    if args.dataset is not None:
        check_input_file("--dataset", args.dataset)
        if not all(name in GOWALLA_EXPERIMENTS for name in selected):
            raise InvalidParameterError(
                f"--dataset applies to the Gowalla experiments only ({', '.join(GOWALLA_EXPERIMENTS)})"
            )
    if args.data_dir is not None and not args.data_dir.is_dir():
        raise InvalidParameterError(
            f"--data-dir must be an existing folder, got {str(args.data_dir)!r}"
        )
    check_output_dir("--out", args.out)
    skipped = _check_data(args, selected)
    return [name for name in selected if name not in skipped], skipped


def _check_data(args: argparse.Namespace, selected: list[str]) -> dict[str, str]:
    """Find every check-in file now, before any experiment starts: a missing one is one line
    naming `shuffledp data fetch gowalla` (DataMissingError, exit status 2), not a failure after
    the experiments before it have run. ``all`` skips the experiments that need check-ins
    instead (returned: name -> why), unless --strict: then the line says that nothing ran and
    names the experiments that need no check-ins (they run by name)."""
    from shuffledp.simulations.data.fetch import DataMissingError
    from shuffledp.simulations.experiments.base import ExperimentError
    from shuffledp.simulations.experiments.gowalla_data import (
        GOWALLA_EXPERIMENTS,
        SETUPS,
        check_data,
    )

    if not any(name in GOWALLA_EXPERIMENTS for name in selected):
        return {}
    try:
        check_data(tuple(SETUPS.values()), args.dataset, args.data_dir)
    except (DataMissingError, ExperimentError) as exc:
        if args.name != ALL:
            raise
        if not args.strict:
            return {name: str(exc) for name in selected if name in GOWALLA_EXPERIMENTS}
        others = [name for name in selected if name not in GOWALLA_EXPERIMENTS]
        raise (DataMissingError if isinstance(exc, DataMissingError) else ExperimentError)(
            f"nothing was run: {', '.join(GOWALLA_EXPERIMENTS)} need check-in data ({exc}); "
            f"the others run by name ({', '.join(others)}) or without --strict"
        ) from None
    return {}


def run(args: argparse.Namespace) -> int:
    from shuffledp.simulations.experiments.base import ExperimentError
    from shuffledp.simulations.experiments.registry import EXPERIMENTS, load_experiment
    from shuffledp.simulations.experiments.runner import DaskRepeater, LocalRepeater
    from shuffledp.simulations.pipeline.simulate import SimulationError

    selected, skipped = _check_args(args, list(EXPERIMENTS))
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # e.g. under /proc, which looks writable to root
        raise InvalidParameterError(
            f"--out {args.out}: cannot create it ({exc.strerror})"
        ) from None

    failures = 0
    try:
        repeater: LocalRepeater | DaskRepeater = (
            DaskRepeater(args.dask, quiet=args.quiet)
            if args.dask
            else LocalRepeater(args.workers, quiet=args.quiet)
        )
    except ExperimentError as exc:
        return _error(str(exc), 1)
    started = time.perf_counter()
    with repeater:
        for name in selected:
            context = _context(args, name, repeater)
            experiment_started = time.perf_counter()
            try:
                experiment = load_experiment(name)
                output = experiment(context)
            except KeyboardInterrupt:
                # Stopping the workers takes a moment; a second Ctrl-C must not interrupt it.
                # (That a caught Ctrl-C keeps status 130 under `python -m` is
                # cli.main.forget_caught_interrupt's job.)
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                repeater.terminate()
                return _error(f"{name}: interrupted; every worker process was stopped", 130)
            except ModuleNotFoundError as exc:
                failures += 1
                _error(f"{name}: not available in this installation ({exc})", 1)
                continue
            except (
                ExperimentError,
                InvalidParameterError,
                SimulationError,
                OSError,
            ) as exc:
                failures += 1
                _error(f"{name}: {exc}", 1)
                continue
            _print_output(name, output, time.perf_counter() - experiment_started)
    if args.name == ALL:
        _print_all_summary(len(selected) - failures, len(selected), skipped, started)
    return 1 if failures else 0


def _print_all_summary(done: int, ran: int, skipped: dict[str, str], started: float) -> None:
    """``all: 5 of 5 experiments in ...``; then the skipped ones and why, on stdout and (so that
    a redirected output does not hide it) as one line on stderr."""
    print(
        f"all: {done} of {ran} experiments in "
        f"{_duration(time.perf_counter() - started)} (wall clock)"
        + (f"; {len(skipped)} skipped" if skipped else "")
    )
    by_reason: dict[str, list[str]] = {}
    for name, reason in skipped.items():
        by_reason.setdefault(reason, []).append(name)
    for reason, names in by_reason.items():
        print(f"skipped: {', '.join(names)}: {reason}")
        print(
            f"shuffledp experiment: warning: skipped {', '.join(names)} ({reason}); --strict "
            "makes this an error",
            file=sys.stderr,
        )


def _context(args: argparse.Namespace, name: str, repeater: Any) -> Any:
    """The :class:`ExperimentContext` of experiment ``name`` (``all``: its own sub-folder)."""
    from shuffledp.simulations.experiments.base import ExperimentContext

    out = args.out / name if args.name == ALL else args.out
    out.mkdir(parents=True, exist_ok=True)
    return ExperimentContext(
        out=out,
        quick=args.quick,
        runs=args.runs,
        seed=args.seed,
        pipeline=args.pipeline,
        repeat=repeater,
        data_dir=args.data_dir,
        quiet=args.quiet,
        options={} if args.dataset is None else {"dataset": args.dataset},
    )


def _print_output(name: str, output: Any, seconds: float) -> None:
    """``name: 12.3 s``, then every file written, then the summary's path."""
    print(f"{name}: {_duration(seconds)}")
    for path in output.files:
        print(f"  {path}")
    summaries = [path for path in output.files if path.suffix == ".md"]
    if summaries:
        print(f"  summary: {summaries[0]}")


def _duration(seconds: float) -> str:
    """``42.1 s`` below a minute, ``12 min 05 s`` from there."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"
