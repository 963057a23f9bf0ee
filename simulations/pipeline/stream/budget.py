"""Each user's budget ``(EPS, DELTA)`` (``--budget``) and who may report in a round under it.

Before a round, a user whose composed delta at EPS, with this round added, would exceed DELTA
does not report and stops for good (counted as cut off). The round's n depends on who reports,
and a smaller n is a weaker round (the pair of n - 1 others is a post-processing of that of n
others, so delta is non-increasing in n): the check uses n = the number of users still eligible
and is repeated with the smaller n until nobody else drops out, so every reporter passes at the
n it is sent with (:func:`plan_reporters`). Only lost reports make the received n smaller; then
every reporter is rechecked after the round and those over budget are reported
(``over_budget_after_round``, in :mod:`.runner`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shuffledp.errors import InvalidParameterError
from shuffledp.simulations.pipeline.stream.ledger import UserLedger
from shuffledp.validation import json_input, require_keys, require_number, require_positive

__all__ = ["Budget", "Plan", "parse_budget", "plan_reporters"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """Each user's total budget: its composed delta at ``eps`` must stay <= ``delta``.
    In the stream's summary it is ``budget``: ``{"eps": ..., "delta": ...}``."""

    eps: float
    delta: float

    def __post_init__(self) -> None:
        require_positive("--budget EPS", self.eps)
        value = self.delta
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
            raise InvalidParameterError(f"--budget DELTA must be in (0, 1), got {value!r}")

    def to_json(self) -> dict[str, Any]:
        return {"eps": self.eps, "delta": self.delta}

    @classmethod
    def from_json(cls, data: object) -> Budget:
        d = require_keys("budget", json_input("budget", data), ["eps", "delta"])
        eps = require_number("budget.eps", d["eps"])
        delta = require_number("budget.delta", d["delta"])
        if eps <= 0:
            raise InvalidParameterError(f"budget.eps must be > 0, got {d['eps']}")
        if not 0 < delta < 1:
            raise InvalidParameterError(f"budget.delta must be in (0, 1), got {d['delta']}")
        return cls(eps=eps, delta=delta)


def parse_budget(text: str) -> Budget:
    """``--budget EPS,DELTA`` (e.g. ``3,1e-5``)."""
    parts = [part.strip() for part in str(text).split(",")]
    if len(parts) != 2:
        raise InvalidParameterError(f"--budget must be EPS,DELTA (e.g. 3,1e-5), got {text!r}")
    try:
        eps, delta = float(parts[0]), float(parts[1])
    except ValueError:
        raise InvalidParameterError(
            f"--budget has a value that is not a number: {text!r}"
        ) from None
    if not math.isfinite(eps):
        raise InvalidParameterError(f"--budget EPS must be finite, got {parts[0]!r}")
    return Budget(eps=eps, delta=delta)


@dataclass(frozen=True, slots=True)
class Plan:
    """Who of an epoch's active users reports, who is newly cut off by the budget, and who was
    cut off before (each list in the order of the active users)."""

    reporters: list[str]
    cut: list[str]
    exhausted: list[str]


def plan_reporters(
    ledger: UserLedger, active: Sequence[str], budget: Budget | None, min_users: int
) -> Plan:
    """The fixed point of the module docstring: check everyone eligible at n = their number,
    drop those over budget, recheck the rest at the smaller n, until stable (or fewer than
    ``min_users`` are left: the epoch is skipped and nobody is charged)."""
    exhausted = [user for user in active if user in ledger.exhausted]
    eligible = [user for user in active if user not in ledger.exhausted]
    if budget is None:
        return Plan(eligible, [], exhausted)
    cut: list[str] = []
    reporters = eligible
    while len(reporters) >= min_users:
        n = len(reporters)
        passing = [u for u in reporters if ledger.delta_after(u, n, budget.eps) <= budget.delta]
        if len(passing) == n:
            break
        kept = set(passing)
        cut.extend(user for user in reporters if user not in kept)
        reporters = passing
    return Plan(reporters, cut, exhausted)
