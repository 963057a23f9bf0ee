"""largest-group against optimal-blanket and the lower end: prints figures, asserts nothing.

For n in {100, 200, 300}, k in {3, 10, 15, 100}, eps0 in {0.5, 1, 2, 4} and eps in {0.1, 0.5, 1}
(eps < eps0): optimal-blanket's upper end, largest-group's, tight's lower end, the two ratios
upper / lower, and the CPU seconds of largest-group.

Run: .venv/bin/python bench/largest_group.py [--n N ...]
"""

from __future__ import annotations

import argparse
import time

from shuffledp.accountant import LargestGroup, OptimalBlanket, ShuffledKRR, Tight

KS = [3, 10, 15, 100]
EPS0S = [0.5, 1.0, 2.0, 4.0]
EPSS = [0.1, 0.5, 1.0]


def row(n: int, k: int, eps0: float, eps: float) -> str:
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    blanket = OptimalBlanket().bracket(mech, eps).upper
    start = time.process_time()
    group = LargestGroup().bracket(mech, eps).upper
    seconds = time.process_time() - start
    lower = Tight().delta(mech, eps).delta_lower
    if lower <= 0.0:
        return f"{n} {k} {eps0} {eps} | {blanket:.4e} {group:.4e} | lower 0 | {seconds:.2f}"
    return (
        f"{n} {k} {eps0} {eps} | {blanket:.4e} {group:.4e} | {lower:.4e} | "
        f"{blanket / lower:.4g} {group / lower:.4g} | {seconds:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--n", type=int, action="append", help="n (repeatable; default 100 200 300)"
    )
    args = parser.parse_args()
    print("n k eps0 eps | optimal-blanket largest-group | lower | ratio blanket, group | CPU s")
    for n in args.n or [100, 200, 300]:
        for k in KS:
            for eps0 in EPS0S:
                for eps in [e for e in EPSS if e < eps0]:
                    print(row(n, k, eps0, eps), flush=True)


if __name__ == "__main__":
    main()
