"""compose_bracket: what the answer must say, and its one-line refusals."""

from __future__ import annotations

import pytest

from shuffledp.accountant import (
    InvalidParameterError,
    LargestGroup,
    OutsideConditionsError,
    ShuffledKRR,
)
from shuffledp.accountant import composition_bracket as cb


def test_profile_not_reached_is_said_and_stays_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no time for tight's profile, optimal-blanket's values stand in, and the note says so
    (no silent fallback); the bracket is still ordered and the same as optimal-blanket's own."""
    mech = ShuffledKRR(n=10**6, k=10, eps0=1.0)
    monkeypatch.setattr(cb, "PROFILE_BUDGET", 0.0)
    result = cb.compose_bracket(mech, 2, delta=1e-6)
    assert result.notes is not None
    assert "optimal-blanket's value at the others" in result.notes
    assert 0.0 < result.lower <= result.upper <= 1.05 * result.lower


@pytest.mark.parametrize("rounds", [0, cb.MAX_ROUNDS + 1, 2.5, True])
def test_rounds_out_of_range_refused_in_one_line(rounds: object) -> None:
    with pytest.raises(
        InvalidParameterError, match=r"--rounds must be an integer in \[1, 100000\]"
    ):
        cb.compose_bracket(ShuffledKRR(n=10, k=3, eps0=1.0), rounds, delta=1e-6)  # type: ignore[arg-type]


def test_spread_order_visits_every_point_once_eps_zero_last() -> None:
    for size in (1, 2, 33, 200):
        order = cb.spread_order(size)
        assert sorted(order) == list(range(size))
        assert order[-1] == 0


def test_profile_refusing_everywhere_refused_in_one_line() -> None:
    """largest-group refuses above n = 300 at every eps: one line naming its limit (this was a
    math domain error inside dp-accounting)."""
    mech = ShuffledKRR(n=301, k=5, eps0=2.0)
    with pytest.raises(
        OutsideConditionsError, match=r"largest-group refused at every eps.*n <= 300"
    ):
        cb.compose_bracket(mech, 10, delta=1e-6, bound=LargestGroup())
