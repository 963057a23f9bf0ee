"""Composition over R rounds (``account --rounds``): time, peak memory and the bracket.

For R in {10, 100, 1000} x n in {1e3, 1e6, 1e9} x k in {2, 10} (eps0 = 1, delta = 1e-6), each
cell in a fresh process (so peak RSS is that cell's): wall time, peak resident memory (the
process's ru_maxrss, imports included, about 120 MiB), eps_lower, eps_upper and their ratio.
A cell that takes longer than --timeout seconds is reported as such. Asserts nothing.

Run: .venv/bin/python bench/composition.py [--rounds 10 100] [--n 1e3 1e6] [--k 2 10]
     [--eps0 1] [--timeout 600]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

CELL = """
import json, resource, sys, time
from shuffledp.accountant import ShuffledKRR
from shuffledp.accountant.composition.composition_bracket import compose_bracket
n, k, eps0, rounds = int(float(sys.argv[1])), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
start = time.perf_counter()
r = compose_bracket(ShuffledKRR(n=n, k=k, eps0=eps0), rounds, delta=1e-6)
print(json.dumps({"seconds": time.perf_counter() - start, "lower": r.lower, "upper": r.upper,
                  "ratio": r.ratio, "lower_from": r.lower_from, "step": r.step,
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run_cell(n: str, k: int, eps0: float, rounds: int, timeout: float) -> dict[str, object]:
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-c", CELL, n, str(k), str(eps0), str(rounds)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:g} s"}
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        return {"error": lines[-1] if lines else f"exit {done.returncode}"}
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    result["wall"] = time.perf_counter() - start
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--n", nargs="+", default=["1e3", "1e6", "1e9"])
    parser.add_argument("--k", type=int, nargs="+", default=[2, 10])
    parser.add_argument("--eps0", type=float, default=1.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    print(f"eps0 = {args.eps0:g}, delta = 1e-6")
    print(
        f"{'R':>5} {'n':>5} {'k':>3} {'time s':>8} {'RSS MiB':>8} {'eps_lower':>11} "
        f"{'eps_upper':>11} {'ratio':>8}  lower end"
    )
    for rounds in args.rounds:
        for n in args.n:
            for k in args.k:
                cell = run_cell(n, k, args.eps0, rounds, args.timeout)
                if "error" in cell:
                    print(f"{rounds:>5} {n:>5} {k:>3}  {cell['error']}", flush=True)
                    continue
                print(
                    f"{rounds:>5} {n:>5} {k:>3} {cell['seconds']:>8.1f} {cell['rss_mib']:>8.0f} "
                    f"{cell['lower']:>11.6g} {cell['upper']:>11.6g} {cell['ratio']:>8.5f}  "
                    f"{cell['lower_from']}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
