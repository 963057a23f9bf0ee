"""Fault bench: issue 13's table, run. Every genuine report counted exactly once, or a loud failure?

Usage::

    .venv/bin/python bench/faults.py                         # every scenario, n = 20,000
    .venv/bin/python bench/faults.py --quick                 # every scenario, n = 2,000
    .venv/bin/python bench/faults.py --n 10000 --scenario plain --scenario kill-client
    .venv/bin/python bench/faults.py --quick --json          # one JSON object per row

Each scenario (shuffledp/simulations/faults/scenarios.py; docs/faults.md, "Fault bench") runs
one round as separate processes started with the command line (`shuffledp keys init`, `hop`,
`analyzer`, `clients`) on a Mosquitto of its own (a plain one, or the configuration `keys init`
writes) on a free loopback port, injects its fault, and prints one row: reports sent, counted in
the published report, rejected as duplicates, lost (and where), the analyzer's exit status (`-`:
no report) and any other component's non-zero exit, the wall time from launch to the analyzer's
exit, the peak resident memory of Mosquitto and hop 0, and the verdict: OK when counted == sent,
or when a component exits non-zero with a message naming the loss in a scenario where nothing
can repair it; FAIL otherwise (the reason is printed: silent loss, crash, ...). Figures are
printed, never asserted; the exit status is 0 if every row is OK, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
import time

from shuffledp.simulations.faults.records import FaultRow
from shuffledp.simulations.faults.runner import default_deadline, run_scenario
from shuffledp.simulations.faults.scenarios import SCENARIOS

QUICK_N = 2_000


def _exits(row: FaultRow) -> str:
    own = "-" if row.exit_status is None else str(row.exit_status)
    others = " ".join(f"{name}:{code}" for name, code in row.other_exits.items())
    return f"{own} {others}".strip()


def _mib(value: object) -> str:
    return f"{value:>6.0f}" if isinstance(value, int | float) else f"{'-':>6}"


def _line(row: FaultRow) -> str:
    peaks = row.notes.get("peak_rss_mib")
    rss = peaks if isinstance(peaks, dict) else {}
    lost = ", ".join(f"{place} {count:,}" for place, count in row.lost_at.items())
    return (
        f"{row.scenario:<16} {row.sent:>7,} {row.counted:>7,} {row.duplicates:>5,} "
        f"{row.lost:>7,} {_exits(row):<14} {row.wall_seconds:>7.1f} "
        f"{_mib(rss.get('mosquitto'))} {_mib(rss.get('hop-0'))}  {row.verdict:<4} "
        f"{row.why}" + (f" | lost: {lost}" if lost else "")
    )


HEADER = (
    f"{'scenario':<16} {'sent':>7} {'counted':>7} {'dup':>5} {'lost':>7} {'exit':<14} "
    f"{'wall s':>7} {'mosq':>6} {'hop0':>6}  verdict (RSS: peak MiB)"
)


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM as a Ctrl-C: asyncio.run then cancels the scenario, whose cleanup kills every
    process group it started (a bare SIGTERM would leave them running)."""
    raise KeyboardInterrupt


def main() -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="reports per round (default 20,000)")
    parser.add_argument(
        "--scenario",
        action="append",
        choices=list(SCENARIOS),
        help="run this scenario (repeatable; default: all)",
    )
    parser.add_argument("--quick", action="store_true", help=f"n = {QUICK_N:,}, less junk")
    parser.add_argument(
        "--deadline",
        type=float,
        help="--deadline of the hops and the analyzer (default: simulate's, 60 s + 2 ms x n)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object per row")
    args = parser.parse_args()
    # The bench's own monitor loses its connection when a scenario restarts the broker; paho
    # says so at ERROR level ("failed to receive on socket"), which is the scenario, not news.
    logging.getLogger("shuffledp.mqtt").setLevel(logging.CRITICAL)
    n = QUICK_N if args.quick else args.n
    names = args.scenario or list(SCENARIOS)
    deadline = args.deadline if args.deadline is not None else default_deadline(n)
    print(
        f"fault bench: n = {n:,}, 3 hops, 2 client processes, --deadline {deadline:g} s; "
        f"{len(names)} scenario(s)",
        file=sys.stderr,
        flush=True,
    )
    if not args.json:
        print(HEADER, flush=True)
    try:
        failed = sum(not _run_one(name, n, deadline, args) for name in names)
    except KeyboardInterrupt:
        print("fault bench: interrupted (every process it started was stopped)", file=sys.stderr)
        return 130
    return 1 if failed else 0


def _run_one(name: str, n: int, deadline: float, args: argparse.Namespace) -> bool:
    """Run scenario ``name``, print its row; True iff its verdict is OK."""
    started = time.monotonic()
    print(f"[{name}] {SCENARIOS[name].title} ...", file=sys.stderr, flush=True)
    try:
        row = asyncio.run(run_scenario(name, n=n, deadline=deadline, quick=args.quick))
    except Exception as exc:  # a scenario that cannot run is reported, the others go on
        print(f"{name:<16} could not run: {type(exc).__name__}: {exc}", flush=True)
        return False
    spent = time.monotonic() - started
    print(f"[{name}] {row.verdict} in {spent:.0f} s: {row.why}", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(row.to_json()), flush=True)
    else:
        print(_line(row), flush=True)
        if row.message:
            print(f"{'':<16} message: {row.message}", flush=True)
    return row.verdict == "OK"


if __name__ == "__main__":
    raise SystemExit(main())
