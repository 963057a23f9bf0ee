"""Speed and memory of the accountant: prints figures, asserts nothing.

Targets, whole process on a 2-core machine:
  tight delta(eps) at n = 1e6          <= 100 ms of compute
  eps(delta) at n = 1e6               <= 0.5 s
  tight at n = 1e8                     <= 5 s
  memory O(sqrt(n)) per call, not O(n^2)
Beyond a few thousand users (1/n) E[(sum G)_+] comes from gsum_fast's Fourier bracket, whose
work does not grow with n (docs/accounting.md, "Speed"); the figures say how the targets fare.
Anchors: the published clone-bound code takes 5-30 s per eps(delta) at n = 1e6 and the
variation-ratio code about 20 s.

Run: .venv/bin/python bench/accountant.py [--quick]
"""

from __future__ import annotations

import argparse
import functools
import resource
import statistics
import time
import tracemalloc
from collections.abc import Callable

from shuffledp.accountant import (
    Bound,
    Clones,
    KRRClones,
    OptimalBlanket,
    ShuffledKRR,
    SingleBin,
    StrongAdversary,
    Tight,
    WangKRR,
    eps_for_delta,
)


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(median seconds, peak traced MiB of one call)."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return statistics.median(times), peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    repeat = 1 if args.quick else 3
    bounds: list[Bound] = [
        OptimalBlanket(),
        StrongAdversary(),
        Clones(),
        KRRClones(),
        WangKRR(),
        SingleBin(800_000),
        Tight(),
    ]
    mech = ShuffledKRR(n=10**6, k=15, eps0=4.0)
    print("n = 1e6, k = 15, eps0 = 4 (CPU seconds of this process, median of", repeat, "runs)")
    print(
        f"{'bound':18} {'delta(0.05)':>12} {'ms':>9} {'MiB':>7}   {'eps(1e-6)':>10} {'s':>7} {'MiB':>7}"
    )
    for bound in bounds:
        t_d, m_d = timed(functools.partial(bound.delta, mech, 0.05), repeat)
        t_e, m_e = timed(functools.partial(eps_for_delta, bound, mech, 1e-6), repeat)
        d = bound.delta(mech, 0.05).delta
        e = eps_for_delta(bound, mech, 1e-6).eps
        print(
            f"{bound.name:18} {d:12.4e} {t_d * 1e3:9.1f} {m_d:7.1f}   {e:10.6f} {t_e:7.3f} {m_e:7.1f}"
        )
    big = ShuffledKRR(n=10**7, k=15, eps0=4.0)
    t_t, m_t = timed(lambda: Tight().delta(big, 0.02), repeat)
    r = Tight().delta(big, 0.02)
    print(
        f"\ntight delta(0.02) at n = 1e7: [{r.delta_lower:.4e}, {r.delta_upper:.4e}] "
        f"in {t_t:.3f} s, peak {m_t:.1f} MiB traced"
    )
    t_te, m_te = timed(lambda: eps_for_delta(Tight(), big, 1e-6), 1)
    er = eps_for_delta(Tight(), big, 1e-6)
    print(
        f"tight eps(1e-6) at n = 1e7: [{er.eps_lower:.6f}, {er.eps_upper:.6f}] in {t_te:.3f} s, "
        f"peak {m_te:.1f} MiB traced"
    )
    huge = ShuffledKRR(n=10**8, k=15, eps0=4.0)
    t_h, m_h = timed(lambda: Tight().delta(huge, 0.003), repeat)
    rh = Tight().delta(huge, 0.003)
    print(
        f"tight delta(0.003) at n = 1e8: [{rh.delta_lower:.4e}, {rh.delta_upper:.4e}] "
        f"in {t_h:.3f} s, peak {m_h:.1f} MiB traced"
    )
    t_he, m_he = timed(lambda: eps_for_delta(Tight(), huge, 1e-6), 1)
    erh = eps_for_delta(Tight(), huge, 1e-6)
    print(
        f"tight eps(1e-6) at n = 1e8: [{erh.eps_lower:.6f}, {erh.eps_upper:.6f}] in {t_he:.3f} s, "
        f"peak {m_he:.1f} MiB traced"
    )
    print("\nmemory per call vs n (clones delta(0.05)): O(sqrt(n)) expected")
    for n in [10**4, 10**5, 10**6, 10**7, 10**8]:
        m = ShuffledKRR(n=n, k=15, eps0=4.0)
        t, mib = timed(functools.partial(Clones().delta, m, 0.05), 1)
        print(f"  n = {n:>9}: {t * 1e3:8.1f} ms, peak {mib:8.2f} MiB")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nwhole-process peak RSS: {rss:.0f} MiB")
    print(
        "anchors: published clone-bound code 5-30 s per eps(delta) at n = 1e6; variation-ratio ~20 s"
    )


if __name__ == "__main__":
    main()
