"""The analytic bounds of Table II's literature columns as formulas, evaluated anywhere.

The accountant's ``erlingsson`` and ``blanket-analytic`` refuse to give a number outside the
conditions under which they were proved, and it has no closed form of Feldman et al.'s bound
(its ``clones`` evaluates their reduction exactly, which is tighter). Table II of the seed paper
prints numbers for all three at points outside those conditions, so to compare with them
``table-2`` evaluates the formulas themselves, each with the list of its conditions that fail:
a number with a non-empty list is NOT a guarantee.

* Erlingsson, Feldman, Mironov, Raghunathan, Talwar, Thakurta, Amplification by Shuffling, SODA
  2019, Corollary 5.3.1: eps = 12 eps0 sqrt(log(1/delta) / n), i.e. delta = exp(-n (eps / (12
  eps0))^2); proved for eps0 <= 1/2, n >= 1000, delta <= 0.01 (and eps <= eps0).
* Balle, Bell, Gascon, Nissim, The Privacy Blanket of the Shuffle Model, CRYPTO 2019, Theorem
  3.1 (k-RR): delta = 2 exp(-(n - 1) gamma eps^2 / (14 k)), gamma = k / (e^eps0 + k - 1);
  proved for 27 k / ((n - 1) gamma) <= eps <= 1.
* Feldman, McMillan, Talwar, Hiding Among the Clones, FOCS 2021, Theorem 3.1 (closed form):
  eps = log(1 + (e^eps0 - 1)/(e^eps0 + 1) (8 sqrt(e^eps0 log(4/delta) / n) + 8 e^eps0 / n)),
  solved for delta; proved for eps0 <= log(n / (16 log(2/delta))).

All three are capped at delta = 1 (a delta above 1 says nothing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["FormulaValue", "blanket_formula", "erlingsson_formula", "feldman_closed_form"]


@dataclass(frozen=True, slots=True)
class FormulaValue:
    """delta from a formula and the conditions of its theorem that fail here (empty: valid)."""

    delta: float
    failed: tuple[str, ...]

    @property
    def valid(self) -> bool:
        return not self.failed


def erlingsson_formula(n: int, eps0: float, eps: float) -> FormulaValue:
    delta = min(1.0, math.exp(-n * (eps / (12.0 * eps0)) ** 2))
    failed = [
        text
        for text, holds in (
            ("eps0 <= 1/2", eps0 <= 0.5),
            ("n >= 1000", n >= 1000),
            ("delta <= 0.01", delta <= 0.01),
            ("eps <= eps0", eps <= eps0),
        )
        if not holds
    ]
    return FormulaValue(delta, tuple(failed))


def blanket_formula(n: int, k: int, eps0: float, eps: float) -> FormulaValue:
    gamma = k / (math.exp(eps0) + k - 1)
    delta = min(1.0, 2.0 * math.exp(-(n - 1) * gamma * eps**2 / (14.0 * k)))
    eps_min = 27.0 * k / ((n - 1) * gamma)
    failed = () if eps_min <= eps <= 1.0 else (f"{eps_min:.3g} <= eps <= 1",)
    return FormulaValue(delta, failed)


def feldman_closed_form(n: int, eps0: float, eps: float) -> FormulaValue:
    big_e = math.exp(eps0)
    slope = (big_e - 1.0) / (big_e + 1.0)
    root_term = math.expm1(eps) / slope - 8.0 * big_e / n  # 8 sqrt(E log(4/delta) / n)
    if root_term <= 0:
        return FormulaValue(1.0, ("no delta < 1 reaches this eps",))
    log_four_over_delta = (root_term / 8.0) ** 2 * n / big_e
    delta = min(1.0, 4.0 * math.exp(-log_four_over_delta))
    log_two_over_delta = log_four_over_delta - math.log(2.0)
    holds = log_two_over_delta > 0 and eps0 <= math.log(n / (16.0 * log_two_over_delta))
    return FormulaValue(delta, () if holds else ("eps0 <= log(n / (16 log(2/delta)))",))
