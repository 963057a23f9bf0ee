"""k = 3 at n = 100: the exact worst case against the F(a) family and optimal-blanket; prints
figures, asserts nothing.

For eps0 in {0.5, 1, 2, 4, 8}, at eps in {0.1, 0.5, 1} below eps0 and at tight's eps(1e-6): the
exhaustive worst case (k3_exhaustive, every dataset of the others), max_a F(a) (the datasets
with nobody on x1, from the same enumeration), the best dataset outside F, optimal-blanket's
upper end, the counts of the worst dataset, and tight's ratio. With --costs: CPU seconds of one
enumeration at n = 50, 100, 150, 200 (K3_MAX_N does not apply here).

Run: .venv/bin/python bench/accountant_k3.py [--n N] [--costs]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

from shuffledp.accountant import ShuffledKRR, Tight, eps_for_delta
from shuffledp.accountant.bounds.blanket import OptimalBlanket
from shuffledp.accountant.worst_case.k3_exhaustive import enumerate_datasets

EPS0S = [0.5, 1.0, 2.0, 4.0, 8.0]
EPSS = [0.1, 0.5, 1.0]
COST_NS = [50, 100, 150, 200]


@dataclass
class Best:
    """The largest lower end among some datasets, their largest upper end, and its counts."""

    lower: float = -1.0
    upper: float = 0.0
    counts: tuple[int, int, int] = (0, 0, 0)

    def add(self, counts: tuple[int, int, int], lower: float, upper: float) -> None:
        if lower > self.lower:
            self.lower, self.counts = lower, counts
        self.upper = max(self.upper, upper)


def survey(mech: ShuffledKRR, eps: float) -> tuple[Best, Best, Best]:
    """(every dataset, the F(a) datasets, the others) at eps, by one enumeration."""
    every, family, rest = Best(), Best(), Best()
    for counts, _, lower, upper in enumerate_datasets(mech, eps, max_n=mech.n):
        every.add(counts, lower, upper)
        (family if counts[1] == 0 else rest).add(counts, lower, upper)
    return every, family, rest


def row(mech: ShuffledKRR, eps: float, label: str) -> None:
    start = time.process_time()
    every, family, rest = survey(mech, eps)
    seconds = time.process_time() - start
    blanket = OptimalBlanket().bracket(mech, eps).upper
    tight = Tight().delta(mech, eps)
    in_f = "F" if every.counts[1] == 0 else "NOT F"
    print(
        f"{mech.eps0:4g} {label:>10} | [{every.lower:.10e}, {every.upper:.10e}] "
        f"{every.counts} {in_f} | F max {family.lower:.10e} (a={family.counts[0]}) "
        f"worst/F - 1 = {every.upper / family.lower - 1:.1e} | best outside F "
        f"{rest.lower:.4e} {rest.counts} ({rest.lower / family.lower:.6f} of F) | "
        f"blanket {blanket:.4e} (x{blanket / every.lower:.4f}) | tight ratio "
        f"{float(tight.extra['ratio']):.12f} | {seconds:.2f} s"
    )


def costs() -> None:
    for n in COST_NS:
        mech = ShuffledKRR(n=n, k=3, eps0=1.0)
        start = time.process_time()
        for _ in enumerate_datasets(mech, 0.5, max_n=n):
            pass
        print(f"n = {n}: one enumeration {time.process_time() - start:.2f} CPU s", flush=True)
    mech = ShuffledKRR(n=100, k=3, eps0=1.0)
    start = time.process_time()
    Tight().delta(mech, 0.4)
    print(f"tight delta(0.4), n = 100: {time.process_time() - start:.2f} CPU s")
    start = time.process_time()
    eps_for_delta(Tight(), ShuffledKRR(n=100, k=3, eps0=2.0), 1e-6)
    print(f"tight eps(1e-6), n = 100, eps0 = 2: {time.process_time() - start:.2f} CPU s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="number of users (default 100)")
    parser.add_argument("--costs", action="store_true", help="time one enumeration per n")
    args = parser.parse_args()
    if args.costs:
        costs()
        return
    print(
        "eps0 eps | exhaustive [lower, upper] worst counts (c0, c1, c2) | max_a F(a) | "
        "best dataset with c1 > 0 | optimal-blanket | tight | CPU s of the enumeration"
    )
    for eps0 in EPS0S:
        mech = ShuffledKRR(n=args.n, k=3, eps0=eps0)
        for eps in [e for e in EPSS if e < eps0]:
            row(mech, eps, f"{eps:g}")
        at = eps_for_delta(Tight(), mech, 1e-6)
        print(
            f"{eps0:4g} eps(1e-6) = [{at.eps_lower:.10f}, {at.eps_upper:.10f}] "
            f"from {at.extra['upper_from']} / {at.extra['lower_from']}"
        )
        row(mech, at.eps_upper, f"{at.eps_upper:.6f}")


if __name__ == "__main__":
    main()
