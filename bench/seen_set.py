"""Seen-set figures: what the duplicate check costs per message, and its peak memory, by n.

Usage::

    .venv/bin/python bench/seen_set.py                 # n = 1e5 and 1e6, about a minute
    .venv/bin/python bench/seen_set.py --n 100000 --in-memory 4096

Prints one JSON object per (n, kind) run, each in a fresh process (so ``peak_rss_mib``, the
process's peak resident memory, is that run's alone):

- ``kind`` ``set``: a plain Python set of digests (what the stages used before; memory grows
  with n);
- ``kind`` ``seen-set``: :class:`~shuffledp.protocol.seen_set.SeenSet` with ``--in-memory``
  digests in memory (default the stages' DEFAULT_IN_MEMORY), spilled to SQLite past that, with
  a page cache of ``--cache-kib`` KiB (default DEFAULT_CACHE_KIB).

Each run adds n distinct digests (``insert_us``: microseconds per add of a new digest, the cost
of every accepted message), then adds the same n again (``lookup_us``: per add of a digest
already there, the cost of refusing a duplicate). Digests are SHA-256 of the message number,
made on the fly (the bench holds no list of n digests); the hashing is in both figures, about
0.3 µs, as it is in the screen. ``baseline_rss_mib`` is the process's peak before the run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import subprocess
import sys
import time

from shuffledp.protocol.seen_set import DEFAULT_CACHE_KIB, DEFAULT_IN_MEMORY, SeenSet


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _digest(i: int) -> bytes:
    return hashlib.sha256(i.to_bytes(8, "little")).digest()


class _PlainSet:
    """The stages' former seen-set, behind SeenSet's add."""

    def __init__(self) -> None:
        self._seen: set[bytes] = set()

    def add(self, digest: bytes) -> bool:
        if digest in self._seen:
            return False
        self._seen.add(digest)
        return True


def run_one(n: int, kind: str, in_memory: int, cache_kib: int) -> dict[str, object]:
    """One run in this process: n inserts then n repeated adds; the figures as a dict."""
    baseline = _peak_rss_mib()
    seen: SeenSet | _PlainSet = (
        SeenSet(in_memory=in_memory, cache_kib=cache_kib) if kind == "seen-set" else _PlainSet()
    )
    start = time.perf_counter()
    new = sum(seen.add(_digest(i)) for i in range(n))
    inserted = time.perf_counter()
    repeats = sum(not seen.add(_digest(i)) for i in range(n))
    looked = time.perf_counter()
    if new != n or repeats != n:
        raise SystemExit(f"wrong answers: {new} new and {repeats} repeats of {n}")
    return {
        "n": n,
        "kind": kind,
        "in_memory": in_memory if kind == "seen-set" else None,
        "cache_kib": cache_kib if kind == "seen-set" else None,
        "insert_us": round((inserted - start) / n * 1e6, 2),
        "lookup_us": round((looked - inserted) / n * 1e6, 2),
        "peak_rss_mib": round(_peak_rss_mib(), 1),
        "baseline_rss_mib": round(baseline, 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, action="append", help="digests (repeatable)")
    parser.add_argument("--in-memory", type=int, default=DEFAULT_IN_MEMORY)
    parser.add_argument("--cache-kib", type=int, default=DEFAULT_CACHE_KIB)
    parser.add_argument("--kind", choices=("set", "seen-set"), action="append")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = args.n or [100_000, 1_000_000]
    kinds = args.kind or ["set", "seen-set"]
    if args.one:
        print(json.dumps(run_one(sizes[0], kinds[0], args.in_memory, args.cache_kib)), flush=True)
        return
    for n in sizes:
        for kind in kinds:
            command = [sys.executable, __file__, "--one", "--n", str(n), "--kind", kind]
            command += ["--in-memory", str(args.in_memory), "--cache-kib", str(args.cache_kib)]
            subprocess.run(command, check=True)


if __name__ == "__main__":
    main()
