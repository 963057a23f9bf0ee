"""eps at a target delta (``eps_for_delta``) and calibration of eps0 (``calibrate_eps0``).

What is checked, from the contract in accountant/inversion.py:

* upper bounds (and ``tight``): the returned eps is a guarantee, i.e. the bound's numerical upper
  value meets the target there, and it is tight: 1e-6 lower the bound is above the target;
* lower bounds (``wang-krr``): the returned eps is the bottom of the final interval, where the
  lower value was checked to be above the target, and the target is met 2e-9 higher;
* for both: the exact eps(delta) of the pair (tests/reference/mpmath_pairs.py, 60 digits) or of the whole
  mechanism (tests/reference/oracle.py, exhaustive, 80 digits) lies inside [eps_lower, eps_upper];
* published / docs/accounting.md values (clones at n = 1e5, strong-adversary at n = 1000).
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Callable
from typing import Any

import mpmath
import pytest

from tests.paths import REPO_ROOT

_ROOT = str(REPO_ROOT)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from shuffledp.accountant import (  # noqa: E402
    Bound,
    Clones,
    InvalidParameterError,
    KRRClones,
    ShuffledKRR,
    SingleBin,
    StrongAdversary,
    Tight,
    WangKRR,
    calibrate_eps0,
    eps_for_delta,
)
from tests.reference import mpmath_pairs, oracle  # noqa: E402

Mpf = Any

UPPER_FACTORIES: dict[str, Callable[[], Bound]] = {
    "strong-adversary": StrongAdversary,
    "clones": Clones,
    "krr-clones": KRRClones,
    "tight": Tight,
}

# (n, k, eps0, delta): small, moderate and large n (n = 1e5 exercises the truncated windows).
UPPER_CASES = [
    (50, 3, 1.0, 1e-3),
    (1000, 4, math.log(13), 1e-6),
    (10**5, 10, 4.0, 1e-8),
]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(UPPER_FACTORIES))
@pytest.mark.parametrize(("n", "k", "eps0", "delta"), UPPER_CASES)
def test_upper_bound_eps_is_safe_and_tight(
    name: str, n: int, k: int, eps0: float, delta: float
) -> None:
    bound = UPPER_FACTORIES[name]()
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    result = eps_for_delta(bound, mech, delta)
    assert result.eps == result.eps_upper  # the headline of an upper bound is its safe side
    assert result.eps_lower <= result.eps_upper
    assert result.eps > 0.0  # none of these targets is met at eps = 0
    if name != "strong-adversary":
        # The clone pairs' loss is at most eps0 (their delta is 0 from eps0 on), and tight also
        # uses that k-RR alone is (eps0, 0)-DP. The strong adversary's loss is unbounded.
        assert result.eps <= eps0
    # Safe: the bound's upper value meets the target at the returned eps.
    assert bound.bracket(mech, result.eps).upper <= delta
    # Tight: 1e-6 lower it does not (the search tolerance is 1e-9).
    assert bound.bracket(mech, result.eps - 1e-6).upper > delta


def _exact_pair_delta(name: str, n: int, k: int, eps0: float, eps: float) -> Mpf:
    """max(H(P||Q), H(Q||P)) of a bound's pair, by plain mpmath enumeration."""
    with mpmath.workdps(60):
        if name == "strong-adversary":
            return max(mpmath_pairs.strong_adversary(n, k, eps0, eps))
        if name == "clones":
            return max(mpmath_pairs.clones(n, eps0, eps))
        if name == "krr-clones":
            return max(mpmath_pairs.krr_clones(n, k, eps0, eps))
        return max(mpmath_pairs.wang_krr(n, k, eps0, eps))


@pytest.mark.parametrize("name", ["strong-adversary", "clones", "krr-clones", "wang-krr"])
@pytest.mark.parametrize(("n", "k", "eps0", "delta"), [(60, 3, 1.5, 1e-4), (40, 5, 2.0, 5e-2)])
def test_exact_crossing_inside_eps_bracket(
    name: str, n: int, k: int, eps0: float, delta: float
) -> None:
    """The exact eps(delta) of the pair lies in [eps_lower, eps_upper]: the exact delta is above
    the target at eps_lower and at most the target at eps_upper (delta(eps) is non-increasing)."""
    bound: Bound = WangKRR() if name == "wang-krr" else UPPER_FACTORIES[name]()
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    result = eps_for_delta(bound, mech, delta)
    assert 0.0 < result.eps_lower <= result.eps_upper
    with mpmath.workdps(60):
        assert _exact_pair_delta(name, n, k, eps0, result.eps_upper) <= delta
        assert _exact_pair_delta(name, n, k, eps0, result.eps_lower) > delta
    # The bracket is narrow: both ends are float-accurate evaluations of the same function.
    assert result.eps_upper - result.eps_lower <= 1e-6


@pytest.mark.parametrize(
    ("n", "k", "eps0", "delta"),
    [(4, 3, 0.5, 0.01), (60, 3, 1.5, 1e-4), (1000, 10, 2.0, 1e-6), (10**5, 5, 3.0, 1e-7)],
)
def test_wang_krr_eps_is_lower_side(n: int, k: int, eps0: float, delta: float) -> None:
    """wang-krr is a lower bound: inversion.py returns the bottom of the final interval, where the
    lower value was checked > target; the top (at most EPS_TOL = 1e-9 above) has it <= target."""
    bound = WangKRR()
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    result = eps_for_delta(bound, mech, delta)
    assert result.eps == result.eps_lower
    assert result.eps_lower <= result.eps_upper
    assert result.eps > 0.0
    assert bound.bracket(mech, result.eps).lower > delta
    assert bound.bracket(mech, result.eps + 2e-9).lower <= delta


def test_strong_adversary_eps_is_inf_below_its_infinite_loss_mass() -> None:
    """The strong-adversary pair has outcomes Q cannot produce (second count 0 under P), so its
    delta never drops below their P-mass, (1 - pb)^(n-1); for a smaller target no finite eps
    exists and the safe answer is inf. n = 40, k = 5, eps0 = 2: pb = 1/(e^2 + 4) = 0.08780,
    (1 - pb)^39 = 0.027762 (also the limit of the mpmath enumeration as eps grows)."""
    n, k, eps0 = 40, 5, 2.0
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    floor_mass = (1.0 - mech.pb) ** (n - 1)
    assert floor_mass == pytest.approx(0.027762, abs=1e-6)
    with mpmath.workdps(60):
        assert _exact_pair_delta("strong-adversary", n, k, eps0, 50.0) >= floor_mass * (1 - 1e-12)
    for eps in (10.0, 30.0, 37.0, 40.0, 60.0):
        assert StrongAdversary().bracket(mech, eps).upper >= floor_mass * (1 - 1e-12), eps
    assert eps_for_delta(StrongAdversary(), mech, 0.01).eps == math.inf


def test_clones_upper_at_large_eps0_and_eps() -> None:
    """eps0 = 80, eps = 40, n = 100: the clones pair hardly has clones (C ~ Bin(99, e^-80)), so
    its delta is that of D ~ Bern(e^80 / (e^80 + 1)) alone, 1 - e^-40 (mpmath: 1 - 4.2e-18).
    The upper value must not fall below it."""
    mech = ShuffledKRR(n=100, k=3, eps0=80.0)
    with mpmath.workdps(60):
        exact = _exact_pair_delta("clones", 100, 3, 80.0, 40.0)
        assert exact > 1 - mpmath.mpf("1e-17")
        assert Clones().bracket(mech, 40.0).upper >= exact * (1 - mpmath.mpf("1e-12"))


# ----------------------------------------------------------------------------------------------
# Known answers
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [2, 10, 50])
def test_clones_known_answer(k: int) -> None:
    # docs/accounting.md, "Reference values": clones (Feldman, McMillan, Talwar), eps at delta = 1e-6,
    # n = 1e5, eps0 = 4 -> 0.169770. The clones pair does not involve k.
    result = eps_for_delta(Clones(), ShuffledKRR(n=10**5, k=k, eps0=4.0), 1e-6)
    assert round(result.eps, 6) == 0.169770


@pytest.mark.parametrize(
    ("eps", "delta"),
    [
        # docs/accounting.md, "Reference values" (checked there at high precision): strong-adversary,
        # n = 1000, k = 4, eps0 = ln 13: delta(0.5) = 2.2446543775e-4, delta(1) = 8.2924068726e-9.
        # Inverting at those deltas must give back eps; the 11 printed digits pin eps to ~1e-10.
        (0.5, 2.2446543775e-4),
        (1.0, 8.2924068726e-9),
    ],
)
def test_strong_adversary_known_answer(eps: float, delta: float) -> None:
    result = eps_for_delta(StrongAdversary(), ShuffledKRR(n=1000, k=4, eps0=math.log(13)), delta)
    assert abs(result.eps - eps) <= 1e-7


# ----------------------------------------------------------------------------------------------
# tight against the exhaustive oracle
# ----------------------------------------------------------------------------------------------


def _worst_case_function(n: int, k: int, eps0: float) -> Callable[[Mpf], Mpf]:
    """eps -> exact worst-case delta of the histogram over every dataset of the other n-1 users
    (the same enumeration as oracle.worst_case_delta, with the laws built once)."""
    laws = [
        (
            oracle.histogram_distribution(others, 0, k, eps0),
            oracle.histogram_distribution(others, 1, k, eps0),
        )
        for others in itertools.combinations_with_replacement(range(k), n - 1)
    ]

    def worst(eps: Mpf) -> Mpf:
        return max(
            max(oracle.hockey_stick(p, q, eps), oracle.hockey_stick(q, p, eps)) for p, q in laws
        )

    return worst


def _true_eps(worst: Callable[[Mpf], Mpf], eps0: float, delta: float) -> Mpf:
    """inf{eps : worst(eps) <= delta} by bisection on [0, eps0] to ~1e-11 (k-RR alone is
    (eps0, 0)-DP, so worst(eps0) = 0)."""
    with mpmath.workdps(40):
        lo, hi = mpmath.mpf(0), mpmath.mpf(eps0)
        if worst(lo) <= delta:
            return lo
        while hi - lo > mpmath.mpf("1e-11"):
            mid = (lo + hi) / 2
            if worst(mid) > delta:
                lo = mid
            else:
                hi = mid
        return hi


@pytest.mark.slow
@pytest.mark.parametrize(
    ("n", "k", "eps0", "delta"),
    [
        (3, 2, 1.0, 0.1),
        (6, 2, 1.0, 0.05),
        (4, 3, 1.0, 0.05),
        (5, 3, 0.5, 0.01),
        (5, 4, 2.0, 0.2),
        (6, 4, 1.5, 0.1),
    ],
)
def test_tight_eps_brackets_oracle(n: int, k: int, eps0: float, delta: float) -> None:
    result = eps_for_delta(Tight(), ShuffledKRR(n=n, k=k, eps0=eps0), delta)
    assert result.eps == result.eps_upper
    assert result.eps_lower <= result.eps_upper
    worst = _worst_case_function(n, k, eps0)
    true_eps = _true_eps(worst, eps0, delta)
    with mpmath.workdps(40):
        assert result.eps_lower - 1e-7 <= true_eps <= result.eps_upper + 1e-7
        # Stronger, and exact: the guarantee holds at eps_upper, and eps_lower is below eps(delta).
        assert worst(result.eps_upper) <= delta
        assert worst(result.eps_lower) > delta


# ----------------------------------------------------------------------------------------------
# calibrate_eps0
# ----------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("n", "k", "eps", "delta", "name"),
    [
        # Default bound (tight). Small n: tight evaluates its lower side too, which calibration
        # does not need, so each step is slow.
        (100, 3, 1.0, 1e-3, "tight"),
        (1000, 10, 0.5, 1e-6, "tight"),
        # A single valid upper bound at larger n.
        (20_000, 4, 0.2, 1e-8, "krr-clones"),
        (20_000, 4, 0.2, 1e-8, "clones"),
    ],
)
def test_calibrate_eps0_meets_target_and_is_largest(
    n: int, k: int, eps: float, delta: float, name: str
) -> None:
    bound = UPPER_FACTORIES[name]()
    eps0 = (
        calibrate_eps0(n, k, eps, delta)
        if name == "tight"
        else calibrate_eps0(n, k, eps, delta, bound=bound)
    )
    assert eps0 > eps  # amplification: shuffling allows a larger local eps0 than eps
    assert bound.bracket(ShuffledKRR(n=n, k=k, eps0=eps0), eps).upper <= delta
    assert bound.bracket(ShuffledKRR(n=n, k=k, eps0=eps0 * (1 + 1e-6)), eps).upper > delta


def test_calibrate_eps0_clones_known_answer() -> None:
    # Inverse of the docs/accounting.md clones value (n = 1e5, eps0 = 4 -> eps = 0.169770 at
    # delta = 1e-6). d eps / d eps0 is about eps / 2 there, so the 6 printed digits of eps
    # (+-5e-7) pin eps0 to about +-1e-5.
    eps0 = calibrate_eps0(10**5, 2, 0.169770, 1e-6, bound=Clones())
    assert abs(eps0 - 4.0) <= 1e-4
    mech = ShuffledKRR(n=10**5, k=2, eps0=eps0)
    assert Clones().bracket(mech, 0.169770).upper <= 1e-6


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n": 1}, "n must be >= 2"),
        ({"k": 1}, "k must be >= 2"),
        ({"eps": -1.0}, "eps must be >= 0"),
        ({"eps": math.nan}, "eps must be finite"),
        ({"delta": 0.0}, r"delta must be in \(0, 1\)"),
        ({"delta": 1.0}, r"delta must be in \(0, 1\)"),
        ({"delta": math.inf}, "delta must be finite"),
        ({"bound": WangKRR()}, "calibration needs a valid upper bound"),
        ({"bound": SingleBin(3)}, "calibration needs a valid upper bound"),
    ],
)
def test_calibrate_eps0_rejects_bad_parameters(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"n": 100, "k": 3, "eps": 0.5, "delta": 1e-6, **kwargs}
    with pytest.raises(InvalidParameterError, match=message):
        calibrate_eps0(**args)


@pytest.mark.parametrize(
    ("delta", "message"),
    [
        (0.0, r"delta must be in \(0, 1\)"),
        (1.5, r"delta must be in \(0, 1\)"),
        (math.nan, "delta must be finite"),
    ],
)
def test_eps_for_delta_rejects_bad_delta(delta: float, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        eps_for_delta(Tight(), ShuffledKRR(n=100, k=3, eps0=1.0), delta)
