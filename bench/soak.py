"""Soak: many rounds back to back on one Mosquitto, with accounts, ACLs and client authentication.

Usage::

    .venv/bin/python bench/soak.py                      # 10 rounds of n = 100,000, 3 hops
    .venv/bin/python bench/soak.py --rounds 3 --n 5000  # a short check

One key directory (`keys init`: accounts, topic ACLs, client keys enrolling exactly the clients
each process hosts) and one Mosquitto enforcing it serve every round, as a deployment would;
each round launches the clients, hops and analyzer as separate processes
(:class:`~shuffledp.simulations.pipeline.simulate.PipelineSession`, the code of `shuffledp simulate`).

Printed per round: reports received and lost (n - n_received, target 0), duplicates (every
stage's `duplicate` and `duplicate-frame` rejections, target 0), every other rejection,
round time and throughput, and the peak resident memory (VmHWM, sampled every 0.1 s) of every
process by role, with Mosquitto's current and peak RSS (one process for the whole soak: its
peak must not climb round after round). The summary gives each role's smallest and largest
peak over the rounds (target: flat, i.e. the spread is noise, not growth).
Figures are printed, never asserted (issue 5, "Load").
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pipeline import PeakMemory  # type: ignore[import-not-found]  # bench/pipeline.py, by path

from shuffledp.brokers.mosquitto import MosquittoBroker
from shuffledp.randomness import SystemRandom
from shuffledp.security.access import init_access
from shuffledp.security.keys import init_key_directory
from shuffledp.simulations.data.datasets import synthetic_values
from shuffledp.simulations.pipeline.simulate import (
    PipelineSession,
    SimulationOptions,
    clients_per_process,
)

DUPLICATE_REASONS = ("duplicate", "duplicate-frame")


def _rss_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss = re.search(r"VmRSS:\s+(\d+) kB", status)
    hwm = re.search(r"VmHWM:\s+(\d+) kB", status)
    return (
        int(rss.group(1)) / 1024 if rss else float("nan"),
        int(hwm.group(1)) / 1024 if hwm else float("nan"),
    )


def _mosquitto_pid() -> int:
    """The pid of the Mosquitto child this script started."""
    import psutil

    for child in psutil.Process().children(recursive=True):
        if "mosquitto" in child.name():
            return int(child.pid)
    raise RuntimeError("no mosquitto child process found")


def _stage_rejections(report: dict[str, Any]) -> dict[str, int]:
    """Every stage's rejections (messages and frames) summed by reason, nonzero only."""
    total: dict[str, int] = {}
    for log in report.get("stages", {}).values():
        if not isinstance(log, dict):
            continue
        for key in ("rejected", "frames_rejected"):
            for reason, count in (log.get(key) or {}).items():
                total[reason] = total.get(reason, 0) + int(count)
    for reason, count in report.get("rejected", {}).items():  # the analyzer's own
        if reason not in total:
            total[reason] = int(count)
    return {reason: count for reason, count in total.items() if count}


async def soak(
    args: argparse.Namespace, keys: Path, url: str, broker_pid: int
) -> list[dict[str, Any]]:
    options = SimulationOptions(
        n=args.n,
        hops=args.hops,
        broker=url,
        keys=keys,
        client_processes=args.client_processes,
        min_batch=args.n,
    )
    rows: list[dict[str, Any]] = []
    rng = SystemRandom()
    async with PipelineSession(options) as session:
        for round_id in range(1, args.rounds + 1):
            values = synthetic_values(args.n, options.k, rng)
            started = time.monotonic()
            with PeakMemory() as memory:
                report = await session.run_round(
                    values, round_id=round_id, dataset_label="synthetic (soak)"
                )
            wall = time.monotonic() - started
            rss, hwm = _rss_mib(broker_pid)
            rejected = _stage_rejections(report)
            round_seconds = float(report["timings"]["round_seconds"])
            row = {
                "round": round_id,
                "received": report["n_received"],
                "lost": args.n - report["n_received"],
                "duplicates": sum(rejected.pop(r, 0) for r in DUPLICATE_REASONS),
                "other_rejections": rejected,
                "wall": wall,
                "round_seconds": round_seconds,
                "throughput": args.n / round_seconds,
                "peaks": {
                    k: v for k, v in memory.peaks.items() if k not in ("launcher", "mosquitto")
                },
                "mosquitto_rss": rss,
                "mosquitto_hwm": hwm,
            }
            rows.append(row)
            peaks = " ".join(f"{k}={v:.0f}" for k, v in sorted(row["peaks"].items()))
            print(
                f"round {round_id:2d}: received {row['received']:,} lost {row['lost']} "
                f"duplicates {row['duplicates']} other {row['other_rejections'] or 0} | "
                f"{round_seconds:6.1f} s, {row['throughput']:,.0f}/s | peak MiB {peaks} | "
                f"mosquitto rss {rss:.1f} peak {hwm:.1f}",
                flush=True,
            )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--hops", type=int, default=3)
    parser.add_argument("--client-processes", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="shuffledp-soak-") as tmp:
        keys = Path(tmp) / "keys"
        init_key_directory(keys, hops=args.hops)
        init_access(
            keys,
            hops=args.hops,
            client_processes=args.client_processes,
            clients_per_process=clients_per_process(args.n, args.client_processes),
            prefix="soak",
        )
        print(
            f"soak: {args.rounds} rounds of n = {args.n:,}, {args.hops} hops, "
            f"{args.client_processes} client processes, one Mosquitto enforcing accounts, ACLs "
            "and client authentication",
            flush=True,
        )
        with MosquittoBroker(access_dir=keys / "access") as broker:
            pid = _mosquitto_pid()
            rows = asyncio.run(soak(args, keys, broker.url, pid))
    lost = sum(r["lost"] for r in rows)
    duplicates = sum(r["duplicates"] for r in rows)
    print(f"\ntotal lost {lost} (target 0), duplicates {duplicates} (target 0)")
    tp = [r["throughput"] for r in rows]
    print(f"throughput per round: min {min(tp):,.0f}/s, max {max(tp):,.0f}/s")
    roles = sorted({role for r in rows for role in r["peaks"]})
    for role in roles:
        values = [r["peaks"][role] for r in rows if role in r["peaks"]]
        print(
            f"peak MiB {role:10s}: min {min(values):7.1f} max {max(values):7.1f} "
            f"(first {values[0]:.1f}, last {values[-1]:.1f})"
        )
    after = ", ".join(f"{row['mosquitto_rss']:.1f}" for row in rows)
    print(f"mosquitto RSS after each round: {after} MiB")
    return 0 if lost == 0 and duplicates == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
