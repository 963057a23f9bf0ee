"""Browser client figures (issue 27): what a report costs in the browser against Python, and a
live round with thousands of clients in one headless Chromium page.

Usage::

    .venv/bin/python bench/browser.py                      # n = 20,000, 5,000 in the browser
    .venv/bin/python bench/browser.py --n 4000 --browser-clients 1000 --seal-count 500

What it prints, on this machine (needs node, chromium, websockify and `npm ci` in clients/js):

- seal cost per report (k-RR, the record, the onion of H + 1 sealed boxes, the client envelope;
  no network), microseconds, median of 3 runs of ``--seal-count`` reports: Python
  (make_client_messages, PyNaCl), the JavaScript client in Node, and in headless Chromium
  (libsodium-wrappers' WebAssembly, WebCrypto's HMAC), one thread each;
- ``shuffledp simulate --n N --browser-clients B``: reports counted of n, the round's wall
  time, each client process's sending (seal + publish, from hop 0 ready to everything sent)
  and its reports per second, the browser page's among them, and the browser's peak memory
  (PSS of all of Chromium's processes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import time
from typing import Any

from nacl.public import PrivateKey

from shuffledp.clients.client import make_client_messages
from shuffledp.protocol.client_auth import ProcessCredentials
from shuffledp.simulations.pipeline.browser import find_tools
from shuffledp.simulations.pipeline.simulate import SimulationOptions, run_simulation


def python_seal_us(count: int, hops: int) -> float:
    """Median over 3 runs of the Python client's seal cost per report (microseconds)."""
    keys = [PrivateKey.generate().public_key for _ in range(hops + 1)]
    process = ProcessCredentials(process=0, key=bytes(32))
    credentials = [process.credential(i) for i in range(count)]
    values = [i % 15 for i in range(count)]
    runs = []
    for _ in range(3):
        started = time.perf_counter()
        make_client_messages(
            values,
            k=15,
            eps0=4.0,
            round_id=1,
            manifest_digest=bytes(32),
            hop_public_keys=keys[:hops],
            analyzer_public_key=keys[hops],
            credentials=credentials,
        )
        runs.append((time.perf_counter() - started) * 1e6 / count)
    return statistics.median(runs)


def js_seal_us(count: int, hops: int) -> dict[str, Any]:
    tools = find_tools()
    script = str(tools.js_dir / "bin" / "bench-seal.mjs")
    done = subprocess.run(
        [tools.node, script, str(count), str(hops), tools.chromium],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def live_round(n: int, browser_clients: int, processes: int) -> None:
    states: dict[str, dict[str, Any]] = {}

    def seen(_counts: dict[str, Any], stage_states: dict[str, dict[str, Any]]) -> None:
        states.update({k: v for k, v in stage_states.items() if k.startswith("clients-")})

    options = SimulationOptions(
        n=n, browser_clients=browser_clients, client_processes=processes, hops=3
    )
    started = time.monotonic()
    log = asyncio.run(run_simulation(options, on_progress=seen))
    wall = time.monotonic() - started
    browser = log["simulation"]["browser"]
    broker = log["simulation"]["broker"].split(" (")[0]
    print(f"\nsimulate --n {n:,} --browser-clients {browser_clients:,} --client-processes")
    print(f"{processes} (H = 3; {broker}):")
    print(f"  counted {log['n_received']:,} of {n:,}; wall time {wall:.1f} s (launch to report")
    print(f"  {log['timings']['round_seconds']:.1f} s)")
    for name, state in sorted(states.items()):
        sent, seconds = int(state.get("sent", 0)), float(state.get("seconds", 0.0))
        where = "browser" if name == f"clients-{processes}" else "Python"
        rate = sent / seconds if seconds else float("nan")
        print(f"  {name} ({where}): sent {sent:,} in {seconds:.2f} s: {rate:,.0f} reports/s")
    print(f"  browser: {browser['runtime']}")
    print(
        f"  browser's peak memory (PSS, all its processes): {browser['peak_memory_bytes'] / 2**20:.0f} MiB"
    )
    print(
        f"  hop 0 confirmed {browser['confirmed_by_hop_0']:,} of the browser's {browser['sent']:,}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--browser-clients", type=int, default=5_000)
    parser.add_argument("--client-processes", type=int, default=2)
    parser.add_argument("--seal-count", type=int, default=1000)
    parser.add_argument("--hops", type=int, default=3)
    args = parser.parse_args()
    python_us = python_seal_us(args.seal_count, args.hops)
    js = js_seal_us(args.seal_count, args.hops)
    print(f"seal cost per report, H = {args.hops} (median of 3 runs of {args.seal_count:,}):")
    print(f"  Python (PyNaCl):          {python_us:7.0f} us")
    print(f"  JavaScript in Node:       {js['node_us']:7.0f} us")
    print(f"  JavaScript in {js['browser']}: {js['browser_us']:7.0f} us")
    live_round(args.n, args.browser_clients, args.client_processes)


if __name__ == "__main__":
    main()
