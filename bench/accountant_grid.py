"""The tight bracket on the issue's grid: prints figures, asserts nothing.

For n in {1e2, 1e3, 1e4, 1e5, 1e6}, k in {2, 3, 10, 15, 100}, eps0 in {0.5, 1, 2, 4, 8}:
delta_upper / delta_lower at eps in {0.1, 0.5, 1} (where delta_upper >= 1e-300 and eps < eps0),
and eps_upper / eps_lower at delta = 1e-6, with the CPU seconds of each.

Run: .venv/bin/python bench/accountant_grid.py [--min-n N] [--max-n N] [--no-eps]
"""

from __future__ import annotations

import argparse
import time

from shuffledp.accountant import ShuffledKRR, Tight, eps_for_delta

NS = [10**2, 10**3, 10**4, 10**5, 10**6]
KS = [2, 3, 10, 15, 100]
EPS0S = [0.5, 1.0, 2.0, 4.0, 8.0]
EPSS = [0.1, 0.5, 1.0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-n", type=float, default=1e6, help="largest n (default 1e6)")
    parser.add_argument("--min-n", type=float, default=1e2, help="smallest n (default 1e2)")
    parser.add_argument("--no-eps", action="store_true", help="skip eps(1e-6)")
    parser.add_argument(
        "--k", type=int, action="append", help=f"only this k (repeatable; default {KS})"
    )
    args = parser.parse_args()
    print("n k eps0 | eps delta_lower delta_upper ratio s | eps(1e-6) lower upper ratio s")
    for n in [n for n in NS if args.min_n <= n <= args.max_n]:
        for k in args.k or KS:
            for eps0 in EPS0S:
                mech = ShuffledKRR(n=n, k=k, eps0=eps0)
                cells = []
                for eps in [e for e in EPSS if e < eps0]:
                    start = time.process_time()
                    r = Tight().delta(mech, eps)
                    spent = time.process_time() - start
                    if r.delta_upper >= 1e-300:
                        cells.append(
                            f"{eps} {r.delta_lower:.4e} {r.delta_upper:.4e} "
                            f"{r.extra['ratio']:.4g} {spent:.2f}"
                        )
                line = f"{n} {k} {eps0} | " + " ; ".join(cells)
                if not args.no_eps:
                    start = time.process_time()
                    e = eps_for_delta(Tight(), mech, 1e-6)
                    spent = time.process_time() - start
                    line += (
                        f" | {e.eps_lower:.6g} {e.eps_upper:.6g} {e.extra['ratio']:.6g} {spent:.2f}"
                    )
                print(line, flush=True)


if __name__ == "__main__":
    main()
