"""Pipeline figures: the crypto bound, end-to-end throughput and per-process peak memory.

Usage::

    .venv/bin/python bench/pipeline.py                    # n = 100,000 on Mosquitto and embedded
    .venv/bin/python bench/pipeline.py --n 20000 --broker embedded
    .venv/bin/python bench/pipeline.py --million          # also n = 1,000,000 on Mosquitto
    .venv/bin/python bench/pipeline.py --broker mosquitto --n 20000 200000 --hop-workers 1 2 4 --json

``--hop-workers W ...``: each hop as W peelers and a mixer (docs/hop-workers.md; 1: one process
per hop); ``--json``: one JSON object per run on stdout (n, hop_workers, wall_s,
reports_per_s, crypto_bound_per_s, percent_of_bound, cpu_us_per_report, lost, peak_rss_mib by
role: ``hop-I`` a one-process hop or a mixer, ``hop-I-pP`` a peeler) instead of the table.

What it measures, in this run, on this machine:

- the crypto bound: the CPU cost of one report's sealed boxes (H+1 seals at the client, H+1
  opens downstream, at the real message sizes) on one core, and the reports/s that all cores
  could sustain doing nothing else (cores / cost);
- for each broker and n: a full `shuffledp simulate` round (separate processes: clients, H hops,
  analyzer; Mosquitto started on a free loopback port with the shipped configuration plus the
  run's accounts and ACLs, as `simulate --broker mosquitto` does; every component logs in and
  hop 0 checks every client authenticator), its wall
  time, the throughput n / round time (from launching the processes to the report) and its ratio
  to the crypto bound, loss (n - n_received) and rejections;
- the peak resident memory of every process (VmHWM from /proc/PID/status, read every 0.1 s
  while it runs, which is a high-water mark and so misses nothing between samples), by role.

Targets (issue 3; printed next to the figures, never asserted in tests): throughput >= 50 % of
the crypto bound, n = 100,000 with 3 hops in <= 40 s wall, n = 1,000,000 with every process
<= 2 GB peak.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any

from nacl.public import SealedBox

from shuffledp.protocol.onion import generate_keypair, message_length
from shuffledp.protocol.record import RECORD_SIZE
from shuffledp.simulations.pipeline.broker_choice import EMBEDDED, MOSQUITTO
from shuffledp.simulations.pipeline.simulate import SimulationOptions, run_simulation


def crypto_cost_per_report(hops: int, repeats: int = 3000) -> tuple[float, float, float]:
    """(seal seconds, open seconds, total) per report with ``hops`` hops, one core, medians of 3."""
    keys = [generate_keypair() for _ in range(hops + 1)]
    seal_total = 0.0
    open_total = 0.0
    for stage in range(hops + 1):  # stage H is the analyzer; its input is the record + 1 layer
        plaintext = os.urandom(message_length(stage, hops) - 48)
        box_out = SealedBox(keys[stage].public)
        ciphertext = box_out.encrypt(plaintext)
        box_in = SealedBox(keys[stage].private)
        seals, opens = [], []
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(repeats):
                box_out.encrypt(plaintext)
            seals.append((time.perf_counter() - start) / repeats)
            start = time.perf_counter()
            for _ in range(repeats):
                box_in.decrypt(ciphertext)
            opens.append((time.perf_counter() - start) / repeats)
        seal_total += sorted(seals)[1]
        open_total += sorted(opens)[1]
    return seal_total, open_total, seal_total + open_total


_ROLE = re.compile(r"shuffledp (hop|analyzer|clients|broker)\b(.*)")


def _role(cmdline: list[str]) -> str | None:
    text = " ".join(cmdline)
    if "mosquitto" in text and "-c" in cmdline:
        return "mosquitto"
    match = _ROLE.search(text.replace("-m shuffledp", "shuffledp"))
    if match is None:
        return None
    kind, rest = match.groups()
    if kind == "hop":
        index = re.search(r"--index (\d+)", rest)
        worker = re.search(r"--worker (\d+)", rest)
        hop = f"hop-{index.group(1) if index else '?'}"
        return f"{hop}-p{worker.group(1)}" if worker else hop
    if kind == "clients":
        name = re.search(r"--name (\S+)", rest)
        return name.group(1) if name else "clients"
    return kind


class PeakMemory:
    """Samples VmHWM of every descendant process every 0.1 s; peaks by role, in MiB."""

    def __init__(self) -> None:
        self.peaks: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        self.peaks["launcher"] = usage.ru_maxrss / 1024
        self.cpu["launcher"] = usage.ru_utime + usage.ru_stime

    def _run(self) -> None:
        import psutil

        me = psutil.Process()
        while not self._stop.is_set():
            for child in me.children(recursive=True):
                try:
                    role = _role(child.cmdline())
                    if role is None:
                        continue
                    status = Path(f"/proc/{child.pid}/status").read_text()
                    times = child.cpu_times()
                    self.cpu[role] = max(self.cpu.get(role, 0.0), times.user + times.system)
                except (psutil.Error, OSError):
                    continue
                found = re.search(r"VmHWM:\s+(\d+) kB", status)
                if found:
                    mib = int(found.group(1)) / 1024
                    self.peaks[role] = max(self.peaks.get(role, 0.0), mib)
            self._stop.wait(0.1)


def run_once(
    n: int, hops: int, broker: str, client_processes: int, hop_workers: int = 1
) -> dict[str, Any]:
    async def go(url: str) -> dict[str, Any]:
        options = SimulationOptions(
            n=n,
            hops=hops,
            broker=url,
            client_processes=client_processes,
            min_batch=n,
            hop_workers=hop_workers,
        )
        return await run_simulation(options)

    start = time.perf_counter()
    with PeakMemory() as memory:
        # "mosquitto": the session starts a Mosquitto that enforces the run's accounts and
        # ACLs, as every component logs in and hop 0 checks client authenticators.
        report = asyncio.run(go(MOSQUITTO if broker == "mosquitto" else EMBEDDED))
    wall = time.perf_counter() - start
    return {"report": report, "wall": wall, "peaks": memory.peaks, "cpu": memory.cpu}


def json_record(n: int, workers: int, result: dict[str, Any], bound: float) -> dict[str, Any]:
    """One run's figures (module docstring)."""
    report = result["report"]
    round_seconds = report["timings"]["round_seconds"]
    rate = n / round_seconds
    cpu = sum(v for k, v in result["cpu"].items() if k != "launcher")
    return {
        "n": n,
        "hop_workers": workers,
        "wall_s": round(result["wall"], 2),
        "round_s": round(round_seconds, 2),
        "reports_per_s": round(rate, 1),
        "crypto_bound_per_s": round(bound, 1),
        "percent_of_bound": round(100 * rate / bound, 1),
        "cpu_s": {k: round(v, 2) for k, v in sorted(result["cpu"].items())},
        "cpu_us_per_report": round(1e6 * cpu / n, 1),
        "lost": n - int(report["n_received"]),
        "rejected": sum(report["rejected"].values()),
        "error": report.get("error"),
        "peak_rss_mib": {k: round(v, 1) for k, v in sorted(result["peaks"].items())},
    }


def json_runs(args: argparse.Namespace) -> int:
    """--json: every (n, W) on the chosen broker, one JSON line each."""
    cores = os.cpu_count() or 1
    bound = cores / crypto_cost_per_report(args.hops)[2]
    broker = "mosquitto" if args.broker == "both" else args.broker
    for n in args.n:
        for workers in args.hop_workers:
            processes = max(args.client_processes, workers)
            result = run_once(n, args.hops, broker, processes, workers)
            print(json.dumps(json_record(n, workers, result, bound)), flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[100_000])
    parser.add_argument("--hops", type=int, default=3)
    parser.add_argument("--broker", choices=["mosquitto", "embedded", "both"], default="both")
    parser.add_argument("--client-processes", type=int, default=2)
    parser.add_argument("--million", action="store_true", help="also n = 1,000,000 on Mosquitto")
    parser.add_argument("--hop-workers", type=int, nargs="+", default=[1], metavar="W")
    parser.add_argument("--json", action="store_true", help="one JSON object per run")
    args = parser.parse_args()
    if args.json:
        return json_runs(args)

    cores = os.cpu_count() or 1
    seal, opened, total = crypto_cost_per_report(args.hops)
    bound = cores / total
    print(
        f"machine: {cores} cores, Python {sys.version.split()[0]}; record {RECORD_SIZE} B, "
        f"{args.hops} hops"
    )
    print(
        f"crypto per report (one core): seals {seal * 1e6:.0f} us + opens {opened * 1e6:.0f} us "
        f"= {total * 1e6:.0f} us -> bound {bound:,.0f} reports/s on {cores} cores"
    )
    print()
    runs = []
    brokers = ["mosquitto", "embedded"] if args.broker == "both" else [args.broker]
    for broker in brokers:
        for n in args.n:
            runs.append((broker, n))
    if args.million:
        runs.append(("mosquitto", 1_000_000))
    header = (
        f"{'broker':<10} {'n':>9} {'wall s':>8} {'round s':>8} {'reports/s':>10} "
        f"{'% bound':>8} {'lost':>5} {'rejected':>8}  peak RSS MiB by process"
    )
    print(header)
    for broker, n in runs:
        result = run_once(n, args.hops, broker, args.client_processes)
        report = result["report"]
        round_seconds = report["timings"]["round_seconds"]
        rate = n / round_seconds
        rejected = sum(report["rejected"].values())
        peaks = ", ".join(f"{k} {v:.0f}" for k, v in sorted(result["peaks"].items()))
        print(
            f"{broker:<10} {n:>9,} {result['wall']:>8.1f} {round_seconds:>8.1f} {rate:>10,.0f} "
            f"{100 * rate / bound:>7.0f}% {n - report['n_received']:>5} {rejected:>8}  {peaks}",
            flush=True,
        )
        stages = report.get("stages", {})
        detail = ", ".join(
            f"{name} {log.get('collect_seconds', 0):.1f}+{log.get('forward_seconds', 0):.1f}"
            for name, log in stages.items()
        )
        cpu = result["cpu"]
        print(
            f"{'':<10} CPU s by process (sampled every 0.1 s): "
            + ", ".join(f"{k} {v:.1f}" for k, v in sorted(cpu.items()))
            + f"; total {sum(cpu.values()):.1f} = {1e6 * sum(cpu.values()) / n:.0f} us/report"
        )
        print(
            f"{'':<10} stages (collect+forward s, from ready): {detail}; clients sending "
            f"{report['timings']['clients_send_seconds']:.1f} s"
        )
    print()
    print(
        "targets: throughput >= 50 % of the crypto bound; n = 100,000 in <= 40 s wall; "
        "n = 1,000,000 with every process <= 2048 MiB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
