"""accountant/engines/k2_fft.py: F(a) for k = 2 by one FFT convolution, against k2_exact (itself checked
against 60-digit mpmath in tests/reference/test_k2_exact.py), its FFT error bound against the
error actually made, and its Chernoff tails against exact tails."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from scipy.stats import binom

from shuffledp.accountant import ShuffledKRR
from shuffledp.accountant.engines.k2_exact import EXTENDED, k2_family_value
from shuffledp.accountant.engines.k2_fft import (
    FFT_PAD,
    fft_convolve,
    k2_fft_value,
    log_chernoff_tail,
)

pytestmark = pytest.mark.skipif(not EXTENDED, reason="needs an extended long double (x86)")


@pytest.mark.parametrize(
    ("a", "big_n", "p"),
    [(2000, 10_000, 0.6), (30_000, 970_000, 0.62), (50, 100_000, 0.88), (7, 5000, 0.99)],
)
def test_fft_error_bound_holds_without_its_padding(a: int, big_n: int, p: float) -> None:
    """The measured 2-norm error of the FFT convolution (against a long double direct one) is
    below the bound even without FFT_PAD: the padding is a real margin (measured: under 1 %
    of the unpadded bound)."""
    sx, sy = np.sqrt(a * p * (1 - p)), np.sqrt(big_n * p * (1 - p))
    j = np.arange(max(0, int(a * p - 12 * sx)), min(a, int(a * p + 12 * sx)) + 1)
    m = np.arange(
        max(0, int(big_n * (1 - p) - 12 * sy)), min(big_n, int(big_n * (1 - p) + 12 * sy)) + 1
    )
    x = binom.pmf(j, a, p)
    y = binom.pmf(m, big_n, 1 - p)
    x, y = x / x.max(), y / y.max()
    z, bound = fft_convolve(x, y)
    direct = np.convolve(x.astype(np.longdouble), y.astype(np.longdouble))
    error = float(np.linalg.norm((z - direct).astype(np.float64)))
    assert error <= bound / FFT_PAD


@pytest.mark.parametrize(("a", "eps0"), [(0, 1.0), (7, 0.5), (20, 2.0), (29, 4.0)])
def test_chernoff_tails_are_above_the_exact_tails(a: int, eps0: float) -> None:
    """P(B >= s) and P(B <= s), B = Bin(a, pt) + Bin(N, pb), n = 60, by 40-digit enumeration:
    the Chernoff bound is above it at every s (and is 0 in log, the trivial 1, on the mean's
    side)."""
    n = 60
    big_n = n - 1 - a
    with mpmath.workdps(40):
        pt = 1 / (1 + mpmath.exp(-eps0))
        pb = 1 - pt
        x = [mpmath.binomial(a, j) * pt**j * pb ** (a - j) for j in range(a + 1)]
        y = [mpmath.binomial(big_n, k) * pb**k * pt ** (big_n - k) for k in range(big_n + 1)]
        pmf = [mpmath.mpf(0)] * (n)
        for j, xj in enumerate(x):
            for k, yk in enumerate(y):
                pmf[j + k] += xj * yk
        for s in range(n):
            upper = sum(pmf[s:])
            lower = sum(pmf[: s + 1])
            assert mpmath.log(upper) <= log_chernoff_tail(a, big_n, eps0, s, upper=True) + 1e-12
            assert mpmath.log(lower) <= log_chernoff_tail(a, big_n, eps0, s, upper=False) + 1e-12
    assert log_chernoff_tail(a, big_n, eps0, n, upper=True) == -np.inf


@pytest.mark.parametrize(
    ("eps0", "eps", "a_values"),
    [
        (0.5, 0.0012657977434720122, (19, 5_000, 30_000, 120_000)),
        (2.0, 0.00699973, (10, 20_000, 250_000)),
        (8.0, 0.1, (3, 40_000)),
    ],
)
def test_brackets_meet_k2_exact_at_n_1e6(
    eps0: float, eps: float, a_values: tuple[int, ...]
) -> None:
    """Both are rigorous brackets of F(a), so they must intersect; near delta = 1e-6 at n = 1e6
    the FFT's is at most 2e-5 wide (relative), enough for the certificate's far blocks."""
    mech = ShuffledKRR(n=1_000_000, k=2, eps0=eps0)
    for a in a_values:
        quick = k2_fft_value(mech, a, eps)
        exact = k2_family_value(mech, a, eps)
        assert quick is not None and exact is not None, a
        assert quick.lower <= exact.upper and exact.lower <= quick.upper, (a, quick, exact)
        if exact.lower >= 1e-9:
            assert quick.upper - quick.lower <= 2e-5 * exact.upper, (a, quick)


def test_declines_outside_its_conditions() -> None:
    """None for k != 2 and for eps >= eps0 (F(a) is then 0: the caller answers); F(a) =
    F(n - 1 - a)."""
    mech = ShuffledKRR(n=10_001, k=2, eps0=1.0)
    assert k2_fft_value(ShuffledKRR(n=10_001, k=3, eps0=1.0), 5, 0.1) is None
    assert k2_fft_value(mech, 5, 1.0) is None
    assert k2_fft_value(mech, 3000, 0.05) == k2_fft_value(mech, 10_000 - 3000, 0.05)
