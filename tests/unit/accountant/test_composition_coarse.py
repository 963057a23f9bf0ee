"""The coarse listing of a clone-form pair (pair_pld.rounded_pair over MAX_LISTED_OUTCOMES):
a pair that dominates the listed one, so its PLD's delta is never below the pair's exact delta
(CloneFormPair.delta, computed independently of any listing), and close to the full listing's."""

from __future__ import annotations

import importlib

import pytest

from shuffledp.accountant.bounds.base import Clones, KRRClones, StrongAdversary
from shuffledp.accountant.mechanism import ShuffledKRR
from shuffledp.errors import OutsideConditionsError

pair_pld = importlib.import_module("shuffledp.accountant.composition.pair_pld")

MECH = ShuffledKRR(n=3000, k=4, eps0=2.0)
GRID = 1e-4


def _pld(pair: object, monkeypatch: pytest.MonkeyPatch, cap: int) -> object:
    monkeypatch.setattr(pair_pld, "MAX_LISTED_OUTCOMES", cap)
    return pair_pld._pld_from_pmfs(*pair_pld.rounded_pair(pair, GRID), GRID, False)


@pytest.mark.parametrize("bound", [KRRClones(), StrongAdversary(), Clones()], ids=lambda b: b.name)
def test_coarse_pair_dominates_and_stays_close(
    bound: KRRClones, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair = bound.dominating_pair(MECH)
    assert pair.outcome_count() > 20_000  # the coarse path is taken below
    full = _pld(pair, monkeypatch, 10**9)
    coarse = _pld(pair, monkeypatch, 20_000)
    for eps in (0.0, 0.05, 0.1, 0.2, 0.4):
        exact = pair.delta(eps)
        value = float(coarse.get_delta_for_epsilon(eps))  # type: ignore[attr-defined]
        listed = float(full.get_delta_for_epsilon(eps))  # type: ignore[attr-defined]
        assert value >= exact.lower  # dominates: never below the pair's own delta
        assert value >= listed - 1e-12  # fewer clones: never below the full listing
        # and close to it (blocks of about 1 % of C here; 4e6 outcomes make them 1e-5)
        assert value <= listed * 1.1 + 1e-12, eps
    for delta in (1e-3, 1e-6):
        eps_coarse = float(coarse.get_epsilon_for_delta(delta))  # type: ignore[attr-defined]
        eps_full = float(full.get_epsilon_for_delta(delta))  # type: ignore[attr-defined]
        assert eps_full <= eps_coarse <= eps_full * 1.02 + GRID


def test_rounds_over_the_listed_limit_are_refused_in_one_line() -> None:
    mech = ShuffledKRR(n=pair_pld.MAX_LISTED_N + 1, k=4, eps0=2.0)
    with pytest.raises(OutsideConditionsError, match=r"takes n <= 10,000,000") as caught:
        pair_pld.compose_rounds([mech], delta=1e-6)
    assert "\n" not in str(caught.value) and "account --rounds" in str(caught.value)
    with pytest.raises(OutsideConditionsError, match=r"n = 10,000,001"):
        pair_pld.compose(mech, 2, delta=1e-6)
