"""k = 2, the certificate of max_a F(a) in tight: its lower end is F(a) at the a the certificate
at this very eps found, so it does not depend on what the process computed before (it once came
from a module-level memory of the last certificate's a for (n, eps0), which differs between
eps); optimal-blanket's upper end closes a flat certificate early, validly."""

from __future__ import annotations

import pytest

from shuffledp.accountant import ShuffledKRR
from shuffledp.accountant.engines.k2_exact import EXTENDED
from shuffledp.accountant.engines.k2_waves import k2_revealed_users
from shuffledp.accountant.inversion import eps_for_delta
from shuffledp.accountant.tight import Tight, witness_dataset
from shuffledp.accountant.worst_case.family import k2_worst_case

pytestmark = pytest.mark.skipif(not EXTENDED, reason="needs an extended long double (x86)")


@pytest.mark.parametrize(
    ("n", "eps0", "eps", "other"), [(200, 0.5, 0.1, 0.2), (1000, 8.0, 0.1, 0.2)]
)
def test_lower_end_is_the_certificates_best_whatever_came_before(
    n: int, eps0: float, eps: float, other: float
) -> None:
    mech = ShuffledKRR(n=n, k=2, eps0=eps0)
    certificate, best_a = k2_worst_case(mech, eps)
    # The best a moves with eps at these points (n = 200: a = 1 at eps = 0.1, a = 0 at 0.2;
    # n = 1000, eps0 = 8: a = 324 at 0.1, a = 150 at 0.2), so a remembered a would be wrong.
    assert k2_worst_case(mech, other)[1] != best_a
    first = Tight().delta(mech, eps)
    # The certificate at eps stays cached; others for the same (n, eps0) come in between.
    Tight().delta(mech, other)
    eps_for_delta(Tight(), mech, 1e-6)
    again = Tight().delta(mech, eps)
    assert again.delta_lower == first.delta_lower == certificate.lower
    assert witness_dataset(str(again.extra["lower_from"])) == {"family": "F", "a": best_a}


@pytest.mark.parametrize("n", [100, 300])
def test_optimal_blanket_closes_a_flat_certificate_validly(n: int) -> None:
    """At eps = 0 with eps0 = 20 every F(a) is the same to 1e-10 and the certificate used to
    evaluate every a (6 s at n = 1000); optimal-blanket's upper end is then within 1e-10 of
    F(0) and closes it. The short bracket must contain the full certificate's (1e-14 wide)
    and be at most K2_CEILING_TOLERANCE wide."""
    from unittest import mock

    from shuffledp.accountant.worst_case import family

    mech = ShuffledKRR(n=n, k=2, eps0=20.0)
    short, _ = family._k2_worst_case(mech, 0.0)
    with mock.patch.object(family, "_k2_ceiling", lambda *_: float("inf")):
        full, _ = family._k2_worst_case(mech, 0.0)
    assert full.upper <= full.lower * (1 + 1e-13)
    assert short.lower <= full.upper and short.upper >= full.lower  # both contain the truth
    assert short.upper <= full.upper * (1 + family.K2_CEILING_TOLERANCE)


@pytest.mark.parametrize(
    ("block", "eps0"), [(1, 0.5), (40, 0.5), (300, 1.0), (5000, 0.3), (900, 4.0)]
)
@pytest.mark.parametrize("target", [1e-13, 1e-30])
def test_revealed_users_tail_is_above_the_exact_binomial_tail(
    block: int, eps0: float, target: float
) -> None:
    """The Chernoff tail of k2_revealed_users is a valid bound on P(Bin(block, 1 - e^-eps0) > d)
    (60-digit mpmath sum) and at most the target; d is at most the block."""
    import mpmath

    revealed, tail = k2_revealed_users(block, eps0, target)
    assert 0 <= revealed <= block
    assert tail <= target
    with mpmath.workdps(60):
        theta = -mpmath.expm1(-mpmath.mpf(eps0))
        exact = mpmath.fsum(
            mpmath.binomial(block, j) * theta**j * (1 - theta) ** (block - j)
            for j in range(revealed + 1, block + 1)
        )
    assert exact <= tail
    if revealed == block:
        assert tail == 0.0


@pytest.mark.parametrize(("n", "eps0", "eps"), [(150, 0.5, 0.1), (600, 1.0, 0.2), (400, 0.3, 0.05)])
def test_block_bound_is_above_every_f_a_of_its_block(n: int, eps0: float, eps: float) -> None:
    """The block bound (reveal about theta of the block's users, plus a Chernoff tail) is at
    least F(a) for every a of the block, F(a) computed one by one by k2_exact (checked against
    60-digit mpmath in tests/reference/test_k2_exact.py), on blocks large enough that fewer
    than all the block's users are revealed; and it is below the old bound, which revealed them
    all."""
    from shuffledp.accountant.engines.k2_exact import WorkMeter
    from shuffledp.accountant.worst_case import family

    mech = ShuffledKRR(n=n, k=2, eps0=eps0)
    half = (n - 1) // 2
    values = [family._k2_value(mech, a, eps) for a in range(half + 1)]
    best = max(v.lower for v in values)
    partial = 0
    for a1, a2 in [(0, 40), (3, 70), (10, half), (30, half), (half - 60, half)]:
        revealed, _ = k2_revealed_users(a2 - a1, eps0, best * family.K2_TOLERANCE * 1e-2)
        partial += revealed < a2 - a1
        bound = max(
            family._k2_block_bound(mech, eps, (a1, a2), best, WorkMeter(), forward)
            for forward in (True, False)
        )
        assert bound >= max(v.upper for v in values[a1 : a2 + 1])
        removed = ShuffledKRR(n=n - (a2 - a1), k=2, eps0=eps0)
        assert bound <= family._k2_value(removed, a1, eps).upper * (1 + 1e-8)  # fast: ~1e-9
    assert partial >= 2


def test_fft_block_bounds_are_above_every_f_a_of_their_blocks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Far from the ends (a1 >= K2_FFT_FROM) block bounds come from one FFT evaluation
    (accountant/engines/k2_fft.py) where the contour declines (made to, here); at n = 20,000 they are
    still at least F(a) (k2_exact) for every a of each block (every 40th a of the largest), and
    the FFT path is the one that answered."""
    from shuffledp.accountant.engines import k2_fft
    from shuffledp.accountant.engines.k2_exact import WorkMeter
    from shuffledp.accountant.worst_case import family

    mech = ShuffledKRR(n=20_000, k=2, eps0=0.5)
    eps = 0.02
    best = max(family._k2_value(mech, a, eps).lower for a in range(8))
    calls: list[int] = []

    def counted(m: ShuffledKRR, a: int, e: float, meter: WorkMeter | None = None) -> object:
        calls.append(a)
        return k2_fft.k2_fft_value(m, a, e, meter)

    monkeypatch.setattr(family, "k2_fft_value", counted)
    monkeypatch.setattr(family, "k2_direction_value", lambda *args: None)
    for a1, a2, step in [(1000, 1030, 1), (2000, 2100, 1), (4000, 9999, 40)]:
        bound = family._k2_block_bound(mech, eps, (a1, a2), best, WorkMeter(), False)
        top = max(family._k2_value(mech, a, eps).upper for a in range(a1, a2 + 1, step))
        assert bound >= top, (a1, a2, bound, top)
    assert calls == [1000, 2000, 4000]


def test_sweep_and_bisection_certify_the_same_maximum(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one-by-one certificate (where the contour declines): _K2Blocks' sweep (cut
    unevaluated blocks to the step that worked just before) and plain
    bisection (K2_FULL_WORK_MAX_N below n) both finish at n = 20,000, eps0 = 0.5 near delta =
    1e-6 with the same best F(a) and an upper end within K2_TOLERANCE of it; the sweep
    evaluates fewer blocks (a deterministic count, not a timing)."""
    from shuffledp.accountant.worst_case import family

    mech = ShuffledKRR(n=20_000, k=2, eps0=0.5)
    eps = 0.0097
    evaluated: list[int] = []
    original = family._k2_block_bound

    def counted(*args: object) -> float:
        evaluated.append(1)
        return original(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(family, "_k2_block_bound", counted)
    monkeypatch.setattr(family, "_k2_waves", lambda *args: None)  # the one-by-one path
    runs = []
    monkeypatch.setattr(family, "K2_SWEEP_FROM_N", 1)  # (the sweep starts at n = 1e5 otherwise)
    for limit in (family.K2_FULL_WORK_MAX_N, 0):
        monkeypatch.setattr(family, "K2_FULL_WORK_MAX_N", limit)
        evaluated.clear()
        bracket, best_a = family._k2_worst_case(mech, eps)
        runs.append((bracket, best_a, len(evaluated)))
    (sweep, a_sweep, n_sweep), (halving, a_halving, n_halving) = runs
    assert a_sweep == a_halving and sweep.lower == halving.lower > 1e-8
    for bracket in (sweep, halving):
        assert bracket.upper <= bracket.lower * (1.0 + 2 * family.K2_TOLERANCE)
    assert n_sweep < n_halving
