"""Takagi and Liew's FFT for the blanket divergence, against the accountant: prints figures.

S. Takagi, S. P. Liew, "Analysis of Shuffling Beyond Pure Local Differential Privacy", arXiv
2601.19154 (2026), compute the privacy blanket bound of Balle et al. (their "blanket divergence")
at finite n by an FFT, with a rigorously controlled relative error, in time near-linear in n
(their Theorem 4.2: concentration bounds control the FFT's truncation). This is a clean-room
implementation of that kind of algorithm for k-RR, written from the paper's stated method (only
its abstract and a summary of its results could be read here, not the algorithm's section: the
choices below are ours and say so). For neighbours x0, x1 and y uniform on the k values (k-RR's
blanket), the amplification variable is l(y) = k (R_x0(y) - e^eps R_x1(y)) and

    D = E[(l(Y_1) + ... + l(Y_M))_+] / (n gamma),   M ~ Bin(n, gamma),   gamma = k pb,

which is exactly what ``optimal-blanket`` (accountant/bounds/blanket.py) computes, in the
i.i.d. form (1/n) E[(G_1 + ... + G_n)_+] with G = l(Y) w.p. gamma, else 0.

The algorithm (``blanket_fft``):

1. Lattice. Round l's three values up to multiples of a step h (an upper bound: the sum only
   grows, and x -> x_+ is non-decreasing) and, separately, down (a lower bound).
2. Tilt. Solve E_t[J] = 0 for the lattice law tilted by e^(t J) (t = theta h), so that the
   mass of the sum J near 0, where (h J)_+ picks up D, is resolved by the FFT to a relative
   precision: E[(h J)_+] = Z(t)^n E_t[h J e^(-t J); J > 0], Z the per-draw normaliser.
3. FFT. The law of J = sum of n tilted draws on a window [-A, B] from one inverse real FFT of
   the characteristic function to the power n (phases reduced modulo N in integers).
4. Error. Aliasing only adds mass (so the windowed sum is an upper bound as it stands) and, for
   the lower bound, is at most the tilted mass outside the window, bounded by Chernoff (the
   concentration bounds); the mass beyond B weighs at most 1/(e theta); the FFT's rounding is at
   most (8 n + 5 log2 N + 50) ulp per cell. The answer is [lower, upper] with the relative error
   upper / lower - 1 certified; h is chosen for a target eta and halved until it is met (or the
   grid reaches MAX_POINTS, then the achieved error is reported).

The cost is the grid: N ~ c n gamma / eta points (h ~ eta / (theta n gamma), window ~ sd(S)):
near-linear in n, as stated.

Run: .venv/bin/python bench/takagi_liew.py [--max-n N] [--eta ETA] [--quick]
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.fft
from scipy.optimize import brentq, minimize_scalar
from scipy.special import logsumexp

from shuffledp.accountant import OptimalBlanket, ShuffledKRR, Tight, eps_for_delta

ULP = 2.0**-52
#: Largest FFT grid (points); the complex128 half-spectrum of 2^22 points is 32 MiB (about
#: 150 MiB of temporaries in all).
MAX_POINTS = 2**22
#: Most lattice steps tried (each is two FFTs, or a coarsening when the grid is too large).
MAX_TRIES = 8
#: Target relative error (upper / lower - 1) of the bracket.
DEFAULT_ETA = 1e-2


@dataclass(frozen=True)
class Law:
    """One draw of the i.i.d. form: values (scaled by 1 / (k pb E0 Ee)) and probabilities."""

    values: np.ndarray  # the three non-zero values of l(Y) B, scaled
    probs: np.ndarray  # their probabilities pb, pb, (k - 2) pb
    log_scale: float  # log(E0 Ee): D = e^log_scale E[(sum)_+] / n


@dataclass(frozen=True)
class TLResult:
    """Bracket on the blanket divergence by the FFT, and what it cost."""

    lower: float
    upper: float
    points: int  # FFT grid size of the last (finest) evaluation
    seconds: float

    @property
    def rel_error(self) -> float:
        return math.inf if self.lower <= 0.0 else self.upper / self.lower - 1.0


def krr_law(k: int, eps0: float, eps: float) -> Law:
    """The amplification variable of k-RR, formed without cancellation (each value divided by
    k pb E0 Ee): l(x0) = E0 - Ee, l(x1) = 1 - E0 Ee, l(other) = 1 - Ee, in units of k pb."""
    pb = math.exp(-eps0) / (1.0 + (k - 1) * math.exp(-eps0))
    values = np.array(
        [
            -math.exp(-eps) * math.expm1(eps - eps0),
            math.expm1(-(eps + eps0)),
            math.exp(-eps0) * math.expm1(-eps),
        ]
    )
    probs = np.array([pb, pb, (k - 2) * pb])
    return Law(values, probs, eps0 + eps)


def lattice(law: Law, h: float, up: bool) -> np.ndarray:
    """The values rounded up (or down) to multiples of h, as integers."""
    scaled = law.values / h
    return (np.ceil(scaled) if up else np.floor(scaled)).astype(np.int64)


def log_terms(law: Law, j: np.ndarray, t: float) -> np.ndarray:
    """log of q_i e^(t j_i) for the three values and the zero atom (last)."""
    q0 = 1.0 - float(law.probs.sum())
    return np.append(
        np.log(law.probs, where=law.probs > 0, out=np.full(3, -np.inf)) + t * j,
        math.log(q0) if q0 > 0 else -np.inf,
    )


def saddle(law: Law, j: np.ndarray) -> float:
    """t > 0 with sum_i q_i j_i e^(t j_i) = 0 (the tilted mean is 0)."""

    def gap(t: float) -> float:
        terms = log_terms(law, j, t)[:3]
        pos, neg = j > 0, (j < 0) & np.isfinite(terms)
        return float(
            logsumexp(terms[pos] + np.log(j[pos])) - logsumexp(terms[neg] + np.log(-j[neg]))
        )

    hi = 1.0 / float(np.max(np.abs(j)))
    while gap(hi) < 0.0:
        hi *= 2.0
    return float(brentq(gap, 0.0, hi, xtol=1e-15 * hi, rtol=1e-14))


def chernoff_log_tail(log_r: np.ndarray, j: np.ndarray, n: int, b: float) -> float:
    """log of a bound on P(sum of n draws of law r on values j >= b), b > n E[j] (Chernoff,
    minimised numerically over lambda: every lambda > 0 gives a valid bound)."""
    scale = float(np.max(np.abs(j)))

    def bound(lam: float) -> float:
        return n * float(logsumexp(log_r + lam * j / scale)) - lam * b / scale

    best = minimize_scalar(bound, bounds=(1e-12, 700.0), method="bounded")
    return min(0.0, float(best.fun))


@dataclass(frozen=True)
class Tilted:
    """The lattice law tilted by e^(t j): values j (three and 0), log probabilities, sd of J."""

    j: np.ndarray
    log_r: np.ndarray
    t: float
    log_z: float
    sd: float


def tilted(law: Law, j3: np.ndarray, n: int) -> Tilted:
    t = saddle(law, j3)
    terms = log_terms(law, j3, t)
    log_z = float(logsumexp(terms))
    j = np.append(j3, 0)
    log_r = terms - log_z
    sd = math.sqrt(n * float(np.sum(np.exp(log_r) * j.astype(np.float64) ** 2)))
    return Tilted(j, log_r, t, log_z, sd)


def window(tl: Tilted, n: int, c: float) -> tuple[int, int, float, float]:
    """(A, B, log P(J > B), log P(J < -A)) for the window [-A, B] = c sd about the tilted
    mean 0; the two tails bounded by Chernoff."""
    a = b = math.ceil(c * tl.sd) + 1
    right = chernoff_log_tail(tl.log_r, tl.j.astype(np.float64), n, b + 1)
    left = chernoff_log_tail(tl.log_r, -tl.j.astype(np.float64), n, a + 1)
    return a, b, right, left


def law_of_sum(tl: Tilted, n: int, points: int) -> np.ndarray:
    """The (aliased) law of J modulo ``points`` by one inverse real FFT of phi^n; the phase of
    t_m j = 2 pi (m j mod N) / N is reduced in integers (no loss for large j)."""
    m = np.arange(points // 2 + 1, dtype=np.int64)
    phi = np.zeros(m.size, dtype=np.complex128)
    for jv, lr in zip(tl.j, tl.log_r, strict=True):
        if np.isfinite(lr):
            # conj(phi(t_m)): numpy's inverse FFT has kernel e^(+i t r), so it returns the law
            # at r only from the conjugate characteristic function.
            phase = (m * int(jv)) % points * (-2.0 * np.pi / points)
            phi += math.exp(lr) * np.exp(1j * phase)
    with np.errstate(divide="ignore"):
        spectrum = np.exp(n * np.log(phi))
    pmf: np.ndarray = scipy.fft.irfft(spectrum, points)
    return pmf


class GridTooLargeError(Exception):
    """The window at this step needs more than MAX_POINTS points (carries the count)."""

    def __init__(self, points: int) -> None:
        super().__init__(points)
        self.points = points


def one_side(law: Law, n: int, h: float, up: bool) -> tuple[float, int]:
    """A bound on log D from the lattice rounded up (upper bound) or down (lower bound), and
    the grid size used. -inf where the lower side's positive value rounds to 0."""
    j3 = lattice(law, h, up)
    if j3[0] <= 0:
        return -math.inf, 0
    tl = tilted(law, j3, n)
    c = 6.0
    while True:
        a, b, log_right, log_left = window(tl, n, c)
        points = scipy.fft.next_fast_len(a + b + 1, real=True)
        if points > MAX_POINTS:
            raise GridTooLargeError(points)
        pmf = law_of_sum(tl, n, points)[1 : b + 1]
        jj = np.arange(1, b + 1, dtype=np.float64)
        w = h * jj * np.exp(-tl.t * jj)
        w_max = h / (math.e * tl.t)  # max of h J e^(-t J): 1 / (e theta)
        fft_err = (8.0 * n + 5.0 * math.log2(points) + 50.0) * ULP * float(w.sum())
        core = float(w @ pmf)
        tails = w_max * (math.exp(log_right) + math.exp(log_left))
        if tails <= 1e-3 * core or c > 40.0:
            break
        c *= 1.3  # the window's outside mass is not yet negligible: widen it
    total = core + fft_err + tails if up else core - fft_err - tails
    if total <= 0.0:
        return (math.inf if up else -math.inf), points
    # log Z, n log Z: each term's exponent to a few ulp, times n (relative slack of the result).
    slack = 8.0 * ULP * (n * (abs(tl.log_z) + float(np.max(np.abs(tl.t * tl.j)))) + 10.0)
    log_d = law.log_scale + n * tl.log_z + math.log(total) - math.log(n)
    return log_d + (slack if up else -slack), points


def first_step(law: Law, n: int, eta: float) -> float:
    """h from the target: up and down lattices differ by at most h per non-zero draw, a factor
    of about e^(theta h m) with m the tilted number of non-zero draws; so h = eta / (theta m)."""
    fine = law.values[0] / 2**20
    tl = tilted(law, lattice(law, fine, True), n)
    theta = tl.t / fine
    m = n * (1.0 - math.exp(tl.log_r[-1]))
    return float(min(0.8 * eta / (theta * m), float(law.values[0]) / 8.0))


def blanket_fft(n: int, k: int, eps0: float, eps: float, eta: float = DEFAULT_ETA) -> TLResult:
    """The blanket divergence of shuffled k-RR at (n, eps0, eps) as a certified bracket; where
    the target eta would need more than MAX_POINTS points, the step is coarsened to fit and the
    achieved relative error (larger) is what the result carries."""
    if not 0.0 < eps < eps0:
        raise ValueError(f"--eps must be in (0, eps0), got {eps} with eps0 = {eps0}")
    start = time.process_time()
    law = krr_law(k, eps0, eps)
    h = first_step(law, n, eta)
    log_up, log_low, points = 0.0, -math.inf, 0
    for _ in range(MAX_TRIES):
        try:
            log_up, points = one_side(law, n, h, True)
            log_low, _ = one_side(law, n, h, False)
        except GridTooLargeError as exc:
            h *= 1.05 * exc.points / MAX_POINTS
            continue
        if log_up - log_low <= math.log1p(eta) or 2 * points > MAX_POINTS:
            break
        if not math.isfinite(log_low):
            h = min(h / 2.0, law.values[0] / 8.0)
            continue
        h /= 2.0
    lower = math.exp(log_low) if math.isfinite(log_low) else 0.0
    upper = math.exp(min(log_up, 0.0))
    return TLResult(lower, upper, points, time.process_time() - start)


NS = [10**2, 10**3, 10**4, 10**5]
KS = [2, 3, 15]
EPS0S = [1.0, 2.0, 4.0]
#: eps is optimal-blanket's eps(delta) at these deltas (upper end of its eps bracket).
DELTAS = [1e-6, 1e-10, 1e-20, 1e-30]


def ours(mech: ShuffledKRR, eps: float) -> tuple[float, float, float, float, float]:
    """(optimal-blanket upper, its CPU s, tight lower, tight upper, tight CPU s)."""
    start = time.process_time()
    blanket = OptimalBlanket().bracket(mech, eps).upper
    blanket_s = time.process_time() - start
    start = time.process_time()
    tight = Tight().delta(mech, eps)
    tight_s = time.process_time() - start
    return blanket, blanket_s, tight.delta_lower, tight.delta_upper, tight_s


def row(n: int, k: int, eps0: float, delta: float, eta: float) -> str:
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    eps = eps_for_delta(OptimalBlanket(), mech, delta).eps_upper
    if eps >= eps0:
        return f"{n} {k} {eps0:g} delta {delta:g}: needs eps = eps0 (no cell)"
    tl = blanket_fft(n, k, eps0, eps, eta)
    blanket, blanket_s, lower, upper, tight_s = ours(mech, eps)
    flags = []
    if tl.upper < upper:
        flags.append("TL<tight-upper")
    if tl.upper < lower:
        flags.append("TL<LOWER(bug)")
    if not tl.lower <= blanket * (1 + 1e-9):
        flags.append("blanket-outside-TL")
    return (
        f"{n} {k} {eps0:g} {eps:.6g} | {tl.upper:.5e} {tl.rel_error:.1e} {tl.points} "
        f"{tl.seconds:.3f} | {blanket:.5e} {tl.upper / blanket:.5f} {blanket_s:.3f} | "
        f"{lower:.4e} {upper:.4e} {upper / lower if lower > 0 else math.inf:.4g} {tight_s:.3f}"
        + (" | " + " ".join(flags) if flags else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-n", type=float, default=1e2, help="smallest n (default 1e2)")
    parser.add_argument("--max-n", type=float, default=1e5, help="largest n (default 1e5)")
    parser.add_argument("--eta", type=float, default=DEFAULT_ETA, help="target relative error")
    parser.add_argument("--k", type=int, action="append", help=f"only this k (default {KS})")
    args = parser.parse_args()
    print(
        "n k eps0 eps | TL upper, certified rel. error, FFT points, CPU s | optimal-blanket "
        "upper, TL / it, CPU s | tight lower, upper, ratio, CPU s"
    )
    for n in [n for n in NS if args.min_n <= n <= args.max_n]:
        for k in args.k or KS:
            for eps0 in EPS0S:
                for delta in DELTAS:
                    print(row(n, k, eps0, delta, args.eta), flush=True)


if __name__ == "__main__":
    main()
