"""k = 3: the worst case over every dataset (accountant/worst_case/k3_exhaustive.py), against the float
oracle of tests/reference/oracle_float.py (every dataset of user values, its own rigorous
bracket), the family F(a), optimal-blanket, and through ``tight``."""

from __future__ import annotations

import itertools
import json

import pytest

from shuffledp.accountant import ShuffledKRR, Tight, calibrate_eps0, eps_for_delta
from shuffledp.accountant.bounds.base import OutsideConditionsError
from shuffledp.accountant.bounds.blanket import OptimalBlanket
from shuffledp.accountant.records import WitnessDataset
from shuffledp.accountant.tight import witness_dataset
from shuffledp.accountant.worst_case.family import family_delta
from shuffledp.accountant.worst_case.k3_exhaustive import (
    K3_MAX_N,
    dataset_delta,
    enumerate_datasets,
    k3_worst_case,
)
from shuffledp.errors import InvalidParameterError
from tests.reference import oracle_float

EPS0S = (0.5, 1.0, 2.0, 4.0)
FRACTIONS = (0.05, 0.3, 0.7)  # eps = fraction * eps0


@pytest.mark.parametrize(("n", "eps0"), list(itertools.product((2, 4, 7), EPS0S)))
def test_worst_case_equals_the_oracle(n: int, eps0: float) -> None:
    mech = ShuffledKRR(n=n, k=3, eps0=eps0)
    eps = tuple(f * eps0 for f in FRACTIONS)
    for case in oracle_float.worst_case(n, 3, eps0, eps):
        bracket, witness = k3_worst_case(mech, case.eps)
        # Both brackets are rigorous: they must overlap, and each is narrow.
        assert bracket.lower <= case.upper and case.lower <= bracket.upper
        assert bracket.upper <= bracket.lower * (1 + 1e-10)
        # The witness is a worst dataset: its own delta reaches the oracle's worst case.
        assert dataset_delta(mech, witness, case.eps).upper >= case.lower


def test_every_dataset_equals_the_oracle() -> None:
    n, eps0, eps = 6, 1.5, 0.4
    mech = ShuffledKRR(n=n, k=3, eps0=eps0)
    oracle = {c: v[0] for c, v in oracle_float.evaluate_datasets(n, 3, eps0, (eps,))}
    ours = {c: (lo, up) for c, _, lo, up in enumerate_datasets(mech, eps)}
    # The oracle lists each dataset once up to the x0/x1 mirror (c0 >= c1) and, for k = 3,
    # with the third value's count last: the same set as ours.
    assert set(ours) == set(oracle)
    for counts, (lower, upper) in ours.items():
        _, o_lo, o_up = oracle[counts]
        assert lower <= o_up and o_lo <= upper, counts
        single = dataset_delta(mech, counts, eps)
        assert single.lower <= upper and lower <= single.upper


def test_mirror_swaps_directions_only() -> None:
    mech = ShuffledKRR(n=9, k=3, eps0=2.0)
    for counts in [(5, 1, 2), (0, 3, 5), (2, 2, 4)]:
        mirror = (counts[1], counts[0], counts[2])
        a, b = dataset_delta(mech, counts, 0.7), dataset_delta(mech, mirror, 0.7)
        assert a.lower <= b.upper and b.lower <= a.upper


@pytest.mark.parametrize(("eps0", "fraction"), list(itertools.product((0.5, 1.0, 4.0), (0.2, 0.6))))
def test_bracket_between_family_and_optimal_blanket(eps0: float, fraction: float) -> None:
    mech = ShuffledKRR(n=30, k=3, eps0=eps0)
    eps = fraction * eps0
    bracket, _ = k3_worst_case(mech, eps)
    best_f = max(family_delta(mech, a, eps).lower for a in range(mech.n))
    assert bracket.upper >= best_f  # every F(a) is a dataset
    assert bracket.lower <= OptimalBlanket().bracket(mech, eps).upper  # a valid upper bound


def test_refuses_outside_its_conditions() -> None:
    with pytest.raises(OutsideConditionsError, match="k = 3"):
        k3_worst_case(ShuffledKRR(n=5, k=4, eps0=1.0), 0.5)
    with pytest.raises(OutsideConditionsError, match=f"n <= {K3_MAX_N}"):
        k3_worst_case(ShuffledKRR(n=K3_MAX_N + 1, k=3, eps0=1.0), 0.5)
    with pytest.raises(OutsideConditionsError, match="summing to n - 1"):
        dataset_delta(ShuffledKRR(n=5, k=3, eps0=1.0), (1, 1, 1), 0.5)


def test_exact_zero_at_eps0() -> None:
    bracket, _ = k3_worst_case(ShuffledKRR(n=8, k=3, eps0=1.0), 1.0)
    assert bracket.lower == bracket.upper == 0.0


def test_tight_uses_the_enumeration_and_names_the_dataset() -> None:
    mech = ShuffledKRR(n=12, k=3, eps0=2.0)
    result = Tight().delta(mech, 0.5)
    bracket, _ = k3_worst_case(mech, 0.5)
    assert result.extra["upper_from"] == "exhaustive(k=3)"
    assert result.delta_upper == bracket.upper
    assert float(result.extra["ratio"]) <= 1 + 1e-10
    dataset = witness_dataset(str(result.extra["lower_from"]))
    assert dataset["family"] in ("counts", "F")
    if dataset["family"] == "counts":
        counts = (int(dataset["x0"]), int(dataset["x1"]), int(dataset["x2"]))
        assert sum(counts) == mech.n - 1
        assert dataset_delta(mech, counts, 0.5).lower == result.delta_lower


def test_tight_eps_for_delta_is_confirmed_by_the_enumeration() -> None:
    mech = ShuffledKRR(n=20, k=3, eps0=1.0)
    delta = 1e-4
    result = eps_for_delta(Tight(), mech, delta)
    assert result.extra["upper_from"] == "exhaustive(k=3)"
    assert result.eps_upper - result.eps_lower <= 2e-9
    assert k3_worst_case(mech, result.eps_upper)[0].upper <= delta
    # Below eps_lower the true worst case is above delta (the lower end's own dataset is).
    assert k3_worst_case(mech, result.eps_lower)[0].lower > delta


def test_counts_witness_json_round_trip() -> None:
    assert witness_dataset("counts(x0=3,x1=1,x2=95)") == {
        "family": "counts",
        "x0": 3,
        "x1": 1,
        "x2": 95,
    }
    record = WitnessDataset(family="counts", size=3, x1=1, x2=95)
    text = json.dumps(record.to_json())
    assert json.loads(text) == {"family": "counts", "x0": 3, "x1": 1, "x2": 95}
    assert WitnessDataset.from_json(json.loads(text)) == record
    with pytest.raises(InvalidParameterError, match="x1"):
        WitnessDataset(family="F", size=3, x1=1, x2=0)
    with pytest.raises(InvalidParameterError, match="x2"):
        WitnessDataset.from_json({"family": "counts", "x0": 3, "x1": 1})


@pytest.mark.parametrize(("n", "eps", "delta"), [(20, 0.5, 1e-3), (40, 1.0, 1e-6)])
def test_calibration_is_the_largest_eps0_the_enumeration_accepts(
    n: int, eps: float, delta: float
) -> None:
    eps0 = calibrate_eps0(n, 3, eps, delta)
    assert k3_worst_case(ShuffledKRR(n=n, k=3, eps0=eps0), eps)[0].upper <= delta
    assert k3_worst_case(ShuffledKRR(n=n, k=3, eps0=eps0 * (1 + 1e-6)), eps)[0].lower > delta


def test_tight_refuses_the_enumeration_above_its_limit_and_keeps_the_others() -> None:
    mech = ShuffledKRR(n=K3_MAX_N + 1, k=3, eps0=2.0)
    names = [bound.name for bound in Tight().upper_bounds(mech)]
    assert "exhaustive(k=3)" not in names and "optimal-blanket" in names
    assert "exhaustive(k=3)" in [
        b.name for b in Tight().upper_bounds(ShuffledKRR(n=9, k=3, eps0=2.0))
    ]


def test_a_witness_outside_f_is_the_first_lower_member_and_named_by_its_counts() -> None:
    mech = ShuffledKRR(n=10, k=3, eps0=1.0)
    first = Tight().lower_bounds(mech, None, (1, 1, 7))[0]
    assert first.name == "counts(x0=1,x1=1,x2=7)"
    assert first.bracket(mech, 0.3) == dataset_delta(mech, (1, 1, 7), 0.3)
    # Inside F (nobody on x1) the witness is F(c0) itself.
    assert Tight().lower_bounds(mech, None, (4, 0, 5))[0].name == "family-f(a=4)"


def test_every_dataset_is_exactly_zero_from_eps0_and_negative_eps_is_refused() -> None:
    mech = ShuffledKRR(n=6, k=3, eps0=1.0)
    rows = list(enumerate_datasets(mech, 1.0))
    assert len(rows) == len(list(enumerate_datasets(mech, 0.5))) == 12  # c0 >= c1, sum 5
    assert all(row[1:] == (0.0, 0.0, 0.0) for row in rows)
    with pytest.raises(InvalidParameterError, match="eps must be >= 0"):
        k3_worst_case(mech, -0.1)
