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

k = 2 (--k2): tight's bracket is the certificate of max_a F(a) (family.k2_worst_case), exact
to 1e-9 where it finishes; the section prints its ratio and time for n in {1e4, 1e5, 1e6}, eps0 in
{0.5, 1, 2, 4, 8} and eps in {0.1, 0.5, 1} below eps0 (where delta_upper >= 1e-300), and eps(1e-6).

Every a of F(a) (--family, k >= 3, n <= 200): the cost of family_counts' pass over every a (the
laws at a new (n, k, eps0), then one more eps) and of tight where it needs them, with the best a
against the ends.

Run: .venv/bin/python bench/accountant.py [--quick] [--k2 [--k2-min-n N] [--k2-max-n N]] [--family]
"""

from __future__ import annotations

import argparse
import functools
import resource
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import TypeVar

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
from shuffledp.accountant.tight import bracket_ratio

T = TypeVar("T")


def timed(fn: Callable[[], T], repeat: int) -> tuple[float, float, T]:
    """(median seconds, peak traced MiB of one call, the result of the traced call)."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    tracemalloc.start()
    result = fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return statistics.median(times), peak / 2**20, result


def print_tight(label: str, mech: ShuffledKRR, eps: float, repeat: int) -> None:
    """tight's delta(eps) and eps(1e-6) at ``mech``, with their CPU time and traced peak."""
    t_d, m_d, r = timed(lambda: Tight().delta(mech, eps), repeat)
    print(
        f"tight delta({eps:g}) at n = {label}: [{r.delta_lower:.4e}, {r.delta_upper:.4e}] "
        f"in {t_d:.3f} s, peak {m_d:.1f} MiB traced"
    )
    t_e, m_e, e = timed(lambda: eps_for_delta(Tight(), mech, 1e-6), 1)
    print(
        f"tight eps(1e-6) at n = {label}: [{e.eps_lower:.6f}, {e.eps_upper:.6f}] in {t_e:.3f} s, "
        f"peak {m_e:.1f} MiB traced"
    )


def print_tight_grid(n: int) -> None:
    """tight over k in {3, 10, 15, 100} x eps0 in {0.5, 1, 2, 4, 8} at ``n``: the slowest
    eps(1e-6) and the slowest delta(eps) at eps = 0.5 and 0.8 of eps(1e-6) (where delta is in
    the range users ask for), the largest ratios, and the largest traced peak."""
    slow_eps = slow_delta = eps_ratio = delta_ratio = peak = 0.0
    for k in (3, 10, 15, 100):
        for eps0 in (0.5, 1.0, 2.0, 4.0, 8.0):
            mech = ShuffledKRR(n=n, k=k, eps0=eps0)
            t_e, m_e, e = timed(functools.partial(eps_for_delta, Tight(), mech, 1e-6), 1)
            slow_eps, peak = max(slow_eps, t_e), max(peak, m_e)
            eps_ratio = max(eps_ratio, e.eps_upper / e.eps_lower)
            for share in (0.5, 0.8):
                eps = e.eps_upper * share
                t_d, m_d, d = timed(functools.partial(Tight().delta, mech, eps), 1)
                slow_delta, peak = max(slow_delta, t_d), max(peak, m_d)
                if d.delta_upper >= 1e-20:
                    delta_ratio = max(delta_ratio, d.delta_upper / d.delta_lower)
    print(
        f"tight over k x eps0 at n = {n:.0e}: slowest delta(eps) {slow_delta * 1e3:.1f} ms, "
        f"slowest eps(1e-6) {slow_eps:.3f} s, largest ratios delta {delta_ratio:.6f} "
        f"eps {eps_ratio:.6f}, peak {peak:.1f} MiB traced"
    )


def print_k2(min_n: float, max_n: float) -> None:
    """k = 2: tight's delta(eps) (the certificate) and eps(1e-6), ratio and CPU seconds each;
    then delta at 0.8 eps(1e-6), where F(a) is flattest (the slowest certificates)."""
    print(
        "k = 2: n eps0 | eps delta_lower ratio-1 s ... | eps(1e-6) lower upper ratio-1 s (wall)"
        " | delta(0.8 eps) ratio-1 s"
    )
    for n in [n for n in (10**4, 10**5, 10**6, 10**7, 10**8) if min_n <= n <= max_n]:
        for eps0 in (0.5, 1.0, 2.0, 4.0, 8.0):
            mech = ShuffledKRR(n=n, k=2, eps0=eps0)
            cells = []
            for eps in [e for e in (0.1, 0.5, 1.0) if e < eps0]:
                t_d, _, r = timed(functools.partial(Tight().delta, mech, eps), 1)
                if r.delta_upper >= 1e-300:
                    gap = bracket_ratio(r.delta_lower, r.delta_upper) - 1.0  # inf: lower 0
                    cells.append(f"{eps} {r.delta_lower:.4e} {gap:.1e} {t_d:.2f}")
            wall, t_e = time.perf_counter(), time.process_time()
            e = eps_for_delta(Tight(), mech, 1e-6)  # one call, untraced: CPU and wall seconds
            wall, t_e = time.perf_counter() - wall, time.process_time() - t_e
            t_f = time.process_time()
            f = Tight().delta(mech, 0.8 * e.eps)
            t_f = time.process_time() - t_f
            flat = bracket_ratio(f.delta_lower, f.delta_upper) - 1.0
            print(
                f"{n:.0e} {eps0} | " + " ; ".join(cells) + f" | {e.eps_lower:.6g} "
                f"{e.eps_upper:.6g} {e.eps_upper / e.eps_lower - 1.0:.1e} {t_e:.2f} "
                f"(wall {wall:.2f}) | {flat:.1e} {t_f:.3f}",
                flush=True,
            )


def print_family() -> None:
    """family_counts.family_all: CPU seconds of the first eps (laws included) and of a second,
    peak traced MiB of the first, the best a and its gain over max(F(0), F(n - 1)); tight's
    delta(eps) from cold caches. One run each (the machine's load shows in the figures)."""
    from shuffledp.accountant.engines import family_counts

    def cold() -> None:
        family_counts._laws.cache_clear()
        family_counts._all_family.cache_clear()

    print("every a of F(a): n k eps0 eps | first s, next s, MiB | best a, best / ends | tight s")
    for n, k, eps0, eps in [
        (30, 4, 0.5, 0.4),
        (100, 10, 2.0, 1.0),
        (100, 100, 0.5, 0.1),
        (150, 3, 4.0, 3.2),
        (200, 10, 2.0, 1.0),
    ]:
        mech = ShuffledKRR(n=n, k=k, eps0=eps0)
        cold()
        start = time.process_time()
        every = family_counts.family_all(mech, eps)
        first = time.process_time() - start
        start = time.process_time()
        family_counts.family_all(mech, eps * 0.99)
        second = time.process_time() - start
        cold()
        tracemalloc.start()
        family_counts.family_all(mech, eps)
        mib = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        best = max(range(n), key=lambda a: every[a].lower)
        gain = every[best].lower / max(every[0].lower, every[n - 1].lower)
        cold()
        start = time.process_time()
        Tight().delta(mech, eps)
        t_tight = time.process_time() - start
        print(
            f"  {n} {k} {eps0} {eps} | {first:.3f} {second:.3f} {mib:.0f} | "
            f"{best} {gain:.4f} | {t_tight:.3f}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--k2", action="store_true", help="only the k = 2 section")
    parser.add_argument("--k2-max-n", type=float, default=1e6, help="largest n of --k2")
    parser.add_argument("--k2-min-n", type=float, default=1e4, help="smallest n of --k2")
    parser.add_argument("--family", action="store_true", help="only every a of F(a)")
    args = parser.parse_args()
    if args.family:
        print_family()
        return
    if args.k2:
        print_k2(args.k2_min_n, args.k2_max_n)
        return
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
        t_d, m_d, d = timed(functools.partial(bound.delta, mech, 0.05), repeat)
        t_e, m_e, e = timed(functools.partial(eps_for_delta, bound, mech, 1e-6), repeat)
        print(
            f"{bound.name:18} {d.delta:12.4e} {t_d * 1e3:9.1f} {m_d:7.1f}   "
            f"{e.eps:10.6f} {t_e:7.3f} {m_e:7.1f}"
        )
    print()
    print_tight("1e7", ShuffledKRR(n=10**7, k=15, eps0=4.0), 0.02, repeat)
    print_tight("1e8", ShuffledKRR(n=10**8, k=15, eps0=4.0), 0.003, repeat)
    for n in (10**6, 10**8):
        print_tight_grid(n)
    print("\nmemory per call vs n (clones delta(0.05)): O(sqrt(n)) expected")
    for n in [10**4, 10**5, 10**6, 10**7, 10**8]:
        m = ShuffledKRR(n=n, k=15, eps0=4.0)
        t, mib, _ = timed(functools.partial(Clones().delta, m, 0.05), 1)
        print(f"  n = {n:>9}: {t * 1e3:8.1f} ms, peak {mib:8.2f} MiB")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nwhole-process peak RSS: {rss:.0f} MiB")
    print(
        "anchors: published clone-bound code 5-30 s per eps(delta) at n = 1e6; variation-ratio ~20 s"
    )


if __name__ == "__main__":
    main()
