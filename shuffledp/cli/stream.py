"""`shuffledp stream`: the command line of :mod:`shuffledp.simulations.pipeline.stream`.

``shuffledp stream --dataset PATH|- --region paris --epoch 7d [--budget EPS,DELTA] [--json]``
prints one line per epoch as soon as its round is over (with ``--json``: one JSON object per
epoch and a final ``"type": "summary"`` object, one per line: the records of
:mod:`shuffledp.simulations.pipeline.stream.records`, ``"schema": "shuffledp/stream/1"``,
docs/report-schema.md) and a summary at the end. Errors
are one line on stderr: exit 2 for bad options or an input that is missing, unreadable or
malformed; 1 when the input cannot form a stream or the pipeline cannot start (an unreachable
broker included); 1 also when the stream completed but some epoch's round failed (the summary
says which).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from shuffledp.cli.argtypes import integer, positive, probability
from shuffledp.cli.help import add_command
from shuffledp.cli.simulate import MIN_USEFUL_ROUND, warn_small_round
from shuffledp.security.keys import MAX_HOPS

if TYPE_CHECKING:  # the stream's modules load only when the command runs
    from shuffledp.simulations.data.regions import Region
    from shuffledp.simulations.pipeline.stream import StreamSettings
    from shuffledp.simulations.pipeline.stream.records import StreamRecord, StreamSummary

__all__ = ["add_parser", "format_record", "format_summary", "run"]


def add_parser(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "stream",
        help="replay check-ins over time as epochs, one pipeline round per epoch, with "
        "per-user privacy composed over the rounds",
        description="Replay a check-in stream (a SNAP file, or standard input with '-') as "
        "epochs of fixed length (UTC-aligned: weeks start on Mondays). In each epoch every "
        "active user in the region reports the cell of its latest check-in once, through a "
        "full round of the pipeline (clients, hops, analyzer as separate processes over "
        "MQTT). Each user's guarantee over the rounds it took part in is composed with "
        "dp-accounting; with --budget a user whose next report would exceed it stops "
        "reporting.",
        examples=[
            "shuffledp stream --dataset checkins.txt.gz --region paris --epoch 7d",
            "shuffledp stream --dataset checkins.txt.gz --region sf --budget 3,1e-5 --json",
            "zcat checkins.txt.gz | shuffledp stream --dataset - --box 48.8,48.9,2.25,2.42 "
            "--grid 16x12 --epoch 1d --max-epochs 10",
        ],
    )
    _add_input_arguments(p.add_argument_group("input and region"))
    _add_privacy_arguments(p.add_argument_group("privacy"))
    _add_pipeline_arguments(p.add_argument_group("pipeline"))
    output = p.add_argument_group("output")
    output.add_argument("--json", action="store_true", help="one JSON object per line")
    output.add_argument("--quiet", action="store_true", help="no progress display on stderr")
    p.set_defaults(func=run)


def _add_input_arguments(p: argparse._ArgumentGroup) -> None:
    """The check-ins, the region they are counted in, the epochs they are cut into."""
    p.add_argument(
        "--dataset",
        required=True,
        metavar="PATH|-",
        help="SNAP check-ins (user, time, lat, lon, location; plain or .gz), or '-' for "
        "standard input in time order (a live feed)",
    )
    p.add_argument("--region", metavar="NAME", help="preset region: paris or sf")
    p.add_argument(
        "--box", metavar="LAT_MIN,LAT_MAX,LON_MIN,LON_MAX", help="a custom region (needs --grid)"
    )
    p.add_argument(
        "--grid", metavar="COLUMNSxROWS", help="cells of --box, longitude steps first (e.g. 16x12)"
    )
    p.add_argument("--epoch", default="7d", metavar="LENGTH", help="epoch length: N and h, d or w")


def _add_privacy_arguments(p: argparse._ArgumentGroup) -> None:
    """Each round's guarantee, each user's budget, the composition grid."""
    p.add_argument("--eps0", type=positive, default=4.0, metavar="EPS0", help="local k-RR epsilon")
    p.add_argument(
        "--budget",
        metavar="EPS,DELTA",
        help="each user's total budget: it stops reporting once its composed delta at EPS "
        "would exceed DELTA (default: no budget)",
    )
    p.add_argument(
        "--delta", type=probability, default=1e-6, metavar="DELTA", help="each round's target delta"
    )
    p.add_argument(
        "--max-epochs",
        type=integer(1),
        metavar="COUNT",
        help="stop after this many epochs, empty ones included (default: no limit)",
    )
    p.add_argument(
        "--min-users",
        type=integer(2),
        default=2,
        metavar="COUNT",
        help="skip an epoch with fewer reporting users (2 is the smallest round; a round below "
        f"{MIN_USEFUL_ROUND} users is valid but mostly noise: a warning says so)",
    )
    p.add_argument(
        "--discretization",
        type=positive,
        metavar="STEP",
        help="privacy-loss grid of the per-user composition (default: 1e-3; 1e-2 is ~6x faster "
        "and uses ~10x less memory, and overstates eps by more)",
    )


def _add_pipeline_arguments(p: argparse._ArgumentGroup) -> None:
    """The pipeline each epoch's round runs through."""
    p.add_argument(
        "--broker",
        metavar="URL",
        default="auto",
        help="auto (the default: start Mosquitto if installed, else the embedded broker), "
        "mosquitto, embedded, or an external broker URL, e.g. mqtt://127.0.0.1:1883",
    )
    p.add_argument(
        "--hops", type=integer(1, MAX_HOPS), default=3, metavar="H", help="shuffler hops"
    )
    p.add_argument(
        "--seed",
        type=integer(0),
        metavar="SEED",
        help="seed every generator (reproducible; default: OS CSPRNG)",
    )


def run(args: argparse.Namespace) -> int:
    from shuffledp.simulations.data.checkins import CheckInReader
    from shuffledp.simulations.data.regions import region_from_options
    from shuffledp.simulations.pipeline.simulate import SimulationOptions
    from shuffledp.simulations.pipeline.stream import InputCounts
    from shuffledp.simulations.pipeline.stream.records import StreamInput

    region = region_from_options(args.region, args.box, args.grid)
    settings = _settings(args, region)
    options = SimulationOptions(
        k=region.k,
        eps0=args.eps0,
        hops=args.hops,
        broker=args.broker,
        seed=args.seed,
        target_delta=args.delta,
    )
    counts = InputCounts()
    reader = CheckInReader(args.dataset)
    # Errors reach main(): an unreadable or malformed input (CheckInReadError) exit status 2,
    # a stream that cannot form (StreamError) or a failed pipeline exit status 1.
    events, total_epochs = _events(args.dataset, reader, region, settings, counts)
    show_progress = not (args.quiet or args.json)
    printer = _Printer(args.json, settings.epoch_seconds)
    try:
        summary = asyncio.run(
            _run(settings, options, events, counts, printer, show_progress, total_epochs)
        )
    except KeyboardInterrupt:
        print(
            "shuffledp stream: interrupted; every process it started was stopped", file=sys.stderr
        )
        return 130
    stream_input = StreamInput.from_load_stats(reader.stats, counts.outside_region)
    return _finish(replace(summary, input=stream_input), args.json)


def _settings(args: argparse.Namespace, region: Region) -> StreamSettings:
    """The StreamSettings of the command's flags."""
    from shuffledp.simulations.pipeline.stream import (
        STREAM_DISCRETIZATION,
        StreamSettings,
        parse_budget,
        parse_epoch_length,
    )

    return StreamSettings(
        region=region,
        epoch_seconds=parse_epoch_length(args.epoch),
        eps0=args.eps0,
        target_delta=args.delta,
        budget=None if args.budget is None else parse_budget(args.budget),
        min_users=args.min_users,
        max_epochs=args.max_epochs,
        discretization=(
            STREAM_DISCRETIZATION if args.discretization is None else args.discretization
        ),
        source_label="<stdin>" if args.dataset == "-" else str(args.dataset),
    )


def _finish(summary: StreamSummary, as_json: bool) -> int:
    """Print the summary; exit status 1 when some epoch's round failed, else 0."""
    if as_json:
        print(json.dumps(summary.to_json(), allow_nan=False), flush=True)
    else:
        print(format_summary(summary), flush=True)
    if summary.epochs_failed:
        print(
            f"shuffledp stream: error: {summary.epochs_failed} epoch round(s) failed "
            "(see their records)",
            file=sys.stderr,
        )
        return 1
    return 0


def _events(
    dataset: str, reader: Any, region: Any, settings: Any, counts: Any
) -> tuple[Iterator[Any], int | None]:
    """The epoch events of the input, and the number of epochs when it is a file (known ahead:
    the progress bar's total); standard input is read as it comes."""
    from shuffledp.simulations.data.checkins import load_checkin_arrays
    from shuffledp.simulations.pipeline.stream import events_from_arrays, events_from_checkins

    if dataset == "-":
        return events_from_checkins(reader, region, counts), None
    arrays = load_checkin_arrays(reader, region)
    counts.outside_region = arrays.outside
    total_epochs = None
    if len(arrays) and arrays.has_times:
        first, last = int(arrays.time.min()), int(arrays.time.max())
        total_epochs = _epochs_between(first, last, settings.epoch_seconds)
        if settings.max_epochs is not None:
            total_epochs = min(total_epochs, settings.max_epochs)
    return events_from_arrays(arrays), total_epochs


def _epochs_between(first: int, last: int, length: int) -> int:
    from shuffledp.simulations.pipeline.stream import epoch_number

    return epoch_number(last, length) - epoch_number(first, length) + 1


async def _run(
    settings: Any,
    options: Any,
    events: Iterator[Any],
    counts: Any,
    printer: _Printer,
    show_progress: bool,
    total_epochs: int | None,
) -> StreamSummary:
    from shuffledp.simulations.pipeline.simulate import (
        PipelineSession,
        RoundRefusedError,
        SimulationError,
    )
    from shuffledp.simulations.pipeline.stream import StreamRunner

    progress = _Progress(total_epochs) if show_progress else None
    async with PipelineSession(options) as session:

        async def round_runner(values: Any, round_id: int, label: str) -> dict[str, Any]:
            if progress is not None:
                progress.round_started(round_id, int(values.size))
            return await session.run_round(
                values,
                round_id=round_id,
                dataset_label=label,
                on_progress=None if progress is None else progress.update,
            )

        def on_record(record: StreamRecord) -> None:
            if progress is not None:
                progress.record_done(record)
            printer.record(record)

        runner = StreamRunner(
            settings,
            round_runner,
            counts=counts,
            on_record=on_record,
            refused=(RoundRefusedError,),
            failed=(SimulationError,),
        )
        try:
            if progress is not None:
                with progress:
                    return await runner.run(events)
            return await runner.run(events)
        finally:
            printer.flush()


class _Printer:
    """Epoch records to stdout as they come: JSON lines, or table rows under one header."""

    def __init__(self, as_json: bool, epoch_seconds: int) -> None:
        self.as_json = as_json
        self.epoch_seconds = epoch_seconds
        self._header = False
        self._warned_small = False

    def record(self, record: StreamRecord) -> None:
        self._note_small_round(record)
        if self.as_json:
            print(json.dumps(record.to_json(), allow_nan=False), flush=True)
            return
        if not self._header:
            print(_HEADER, flush=True)
            self._header = True
        print(format_record(record, self.epoch_seconds), flush=True)

    def flush(self) -> None:
        sys.stdout.flush()

    def _note_small_round(self, record: StreamRecord) -> None:
        """Warn (once) when an epoch runs a round below MIN_USEFUL_ROUND users: valid, but its
        estimate is noise and it spends the users' budget."""
        from shuffledp.simulations.pipeline.stream.records import EpochRecord

        if self._warned_small or not isinstance(record, EpochRecord) or record.status != "run":
            return
        k = record.round_log.report.k if record.round_log is not None else 0
        self._warned_small = warn_small_round(
            "stream",
            record.users_reporting,
            k,
            f" (epoch {record.epoch}, maybe later ones too; --min-users {MIN_USEFUL_ROUND} "
            "skips such epochs without spending budget)",
        )


_HEADER = (
    f"{'epoch':>7} {'start':<16} {'end':<16} {'active':>6} {'report':>6} {'cut':>4} "
    f"{'n_recv':>6} {'eps':>7} {'delta':>8} {'TV(INV)':>7}  top cells: estimate | true"
)


def _when(iso: str, epoch_seconds: int) -> str:
    """An epoch boundary: the date, with the hour when epochs are not whole days."""
    return iso[:10] if epoch_seconds % 86_400 == 0 else iso[:13].replace("T", " ") + "h"


def format_record(record: StreamRecord, epoch_seconds: int) -> str:
    """One table row for an epoch record (what `shuffledp stream` prints without --json)."""
    from shuffledp.simulations.pipeline.stream.records import EmptyEpochsRecord

    start, end = _when(record.start, epoch_seconds), _when(record.end, epoch_seconds)
    if isinstance(record, EmptyEpochsRecord):
        label = (
            str(record.first_epoch)
            if record.epochs == 1
            else f"{record.first_epoch}-{record.last_epoch}"
        )
        return f"{label:>7} {start:<16} {end:<16} no check-in in the region"
    head = (
        f"{record.epoch:>7} {start:<16} {end:<16} {record.users_active:>6} "
        f"{record.users_reporting:>6} {record.budget_exhausted:>4}"
    )
    if record.status == "skipped":
        return f"{head} skipped: {record.reason}"
    if record.status == "failed":
        return f"{head} failed (charged as a lone k-RR report): {record.error}"
    assert record.round_log is not None and record.top_cells is not None
    report = record.round_log.report
    utility = report.utility
    tv = None if utility is None else utility.tv_distance.shuffle_inv
    top = record.top_cells
    row = (
        f"{head} {report.n_received:>6} {_num(report.privacy.eps, '.4g'):>7} "
        f"{_num(report.privacy.delta, '.2g'):>8} {_num(tv, '.4f'):>7}  "
        f"{','.join(map(str, top.estimate or ()))} | {','.join(map(str, top.true))}"
    )
    if record.over_budget_after_round:
        row += f"  ({record.over_budget_after_round} over budget after lost reports)"
    return row


def format_summary(summary: StreamSummary) -> str:
    """The summary as text."""
    lines = ["", _input_line(summary)]
    lines.append(
        f"epochs: {summary.epochs} ({summary.epochs_run} run, "
        f"{summary.epochs_skipped} skipped, {summary.epochs_empty} empty, "
        f"{summary.epochs_failed} failed)"
        + (" - stopped at --max-epochs" if summary.stopped_at_max_epochs else "")
    )
    budget = summary.budget
    lines.append(
        f"users: {summary.users} active, {summary.users_reported} reported at least once, "
        f"{summary.users_cut_off} cut off"
        + (f" by the budget (eps {budget.eps:g}, delta {budget.delta:g})" if budget else "")
    )
    lines.append(_worst_line(summary))
    composition = summary.composition
    lines.append(
        f"composition: dp-accounting PLDs, grid {composition.discretization:g}, "
        f"{composition.compositions} compositions in {composition.accountant_seconds} s "
        f"(stored peak {composition.stored_peak_mib} MiB); total {summary.seconds} s"
    )
    lines.extend(f"note: {fallback}" for fallback in composition.fallbacks)
    return "\n".join(lines)


def _input_line(summary: StreamSummary) -> str:
    source = summary.input
    rejected = None if source is None else dict(source.rejected)
    return (
        f"input {'?' if source is None else source.source}: "
        f"{0 if source is None else source.rows:,} rows, "
        f"{0 if source is None else source.accepted:,} accepted, rejected {rejected or 'none'}; "
        f"{summary.outside_region:,} outside the region, {summary.late:,} late"
    )


def _worst_line(summary: StreamSummary) -> str:
    worst, budget = summary.worst_user, summary.budget
    if worst is None:
        return "worst per-user guarantee: none (nobody reported)"
    text = f"worst per-user guarantee: eps = {_num(worst.eps, '.4f')} at delta = {worst.delta:g}"
    if worst.delta_at_budget_eps is not None and budget:
        text += f" (delta at eps {budget.eps:g}: {worst.delta_at_budget_eps:.3g})"
    sizes = worst.round_sizes
    shown = ", ".join(
        f"{epoch}:{n}" for epoch, n in zip(worst.epochs[:12], sizes[:12], strict=True)
    )
    more = f", ... ({len(sizes)} rounds)" if len(sizes) > 12 else ""
    return text + (
        f"; from {worst.bound}; {worst.rounds} rounds, epoch:n = {shown}{more}; "
        f"{worst.users_with_this_history} user(s) with this history"
    )


def _num(value: Any, spec: str) -> str:
    if value is None:
        return "n/a"
    return format(value, spec)


class _Progress:
    """Epochs done and the current round's stages, on stderr (rich)."""

    def __init__(self, total_epochs: int | None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self._progress = Progress(
            TextColumn("{task.description:<24}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[state]}"),
            console=Console(stderr=True),
            transient=False,
        )
        self._epochs = self._progress.add_task("epochs", total=total_epochs, state="")
        self._round = self._progress.add_task("round", total=None, state="waiting")

    def __enter__(self) -> _Progress:
        self._progress.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        if exc_type is not None and issubclass(exc_type, Exception):
            # An error (not Ctrl-C, which keeps them): erase the bars (Progress.stop would add a blank line on a non-terminal): the
            # error's one line is all that is left on the screen.
            self._progress.live.transient = True
            self._progress.live.stop()
            return
        self._progress.__exit__(None, None, None)

    def round_started(self, round_id: int, n: int) -> None:
        self._progress.update(
            self._round,
            description=f"round {round_id}",
            completed=0,
            total=n,
            state="starting",
        )

    def update(self, counts: dict[str, dict[str, Any]], states: dict[str, dict[str, Any]]) -> None:
        analyzer = counts.get("analyzer", {})
        state = str(states.get("analyzer", {}).get("state", ""))
        self._progress.update(
            self._round, completed=int(analyzer.get("accepted", 0) or 0), state=state
        )

    def record_done(self, record: StreamRecord) -> None:
        from shuffledp.simulations.pipeline.stream.records import EmptyEpochsRecord

        if isinstance(record, EmptyEpochsRecord):
            step, status = record.epochs, "skipped"
        else:
            step, status = 1, record.status
        self._progress.advance(self._epochs, step)
        self._progress.update(self._epochs, state=f"last: {status}")
