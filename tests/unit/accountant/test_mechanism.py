"""Parameter validation: each rule named in the message with the offending value."""

from __future__ import annotations

import math

import pytest

from shuffledp.accountant import InvalidParameterError, ShuffledKRR, Tight


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n": 1, "k": 3, "eps0": 1.0}, "n must be >= 2, got 1"),
        ({"n": 10, "k": 1, "eps0": 1.0}, "k must be >= 2, got 1"),
        ({"n": 10, "k": 3, "eps0": 0.0}, "eps0 must be > 0, got 0.0"),
        ({"n": 10, "k": 3, "eps0": -1.0}, "eps0 must be > 0, got -1.0"),
        ({"n": 10, "k": 3, "eps0": math.inf}, "eps0 must be finite, got inf"),
        ({"n": 10, "k": 3, "eps0": math.nan}, "eps0 must be finite, got nan"),
        ({"n": 10.5, "k": 3, "eps0": 1.0}, "n must be an integer, got 10.5"),
        ({"n": True, "k": 3, "eps0": 1.0}, "n must be an integer, got True"),
        ({"n": 10, "k": 3, "eps0": "1"}, "eps0 must be a real number, got '1'"),
    ],
)
def test_invalid_mechanism(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        ShuffledKRR(**kwargs)  # type: ignore[arg-type]
    assert str(info.value) == message


def test_probabilities() -> None:
    """pt = e^eps0 / (e^eps0 + k - 1), pb = 1 / (e^eps0 + k - 1); pt + (k-1) pb = 1."""
    mech = ShuffledKRR(n=10, k=15, eps0=4.0)
    assert mech.pt == pytest.approx(math.exp(4) / (math.exp(4) + 14), rel=1e-15)
    assert mech.pb == pytest.approx(1 / (math.exp(4) + 14), rel=1e-15)
    assert mech.pt + 14 * mech.pb == pytest.approx(1.0, rel=1e-15)
    # Large eps0 without overflow.
    big = ShuffledKRR(n=10, k=3, eps0=700.0)
    assert big.pt == 1.0
    assert big.log_pb == pytest.approx(-700.0, rel=1e-15)


def test_frozen() -> None:
    mech = ShuffledKRR(n=10, k=3, eps0=1.0)
    with pytest.raises(AttributeError):
        mech.n = 11  # type: ignore[misc]


@pytest.mark.parametrize(
    ("eps", "message"),
    [(-0.1, "eps must be >= 0, got -0.1"), (math.nan, "eps must be finite, got nan")],
)
def test_invalid_eps(eps: float, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        Tight().delta(ShuffledKRR(n=10, k=3, eps0=1.0), eps)
