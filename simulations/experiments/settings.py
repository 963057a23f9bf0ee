"""The privacy settings of the evaluation: what the shuffle and the central Gaussian run at.

The seed paper (Biswas, Jung, Palamidessi, FPS 2023, Section V) compares shuffled k-RR
with the analytic Gaussian "under the same (eps, delta)", taking delta from its printed formula
(eq. 6, maximised over the primary input x0 as eq. 10). That formula is not a valid guarantee
(docs/accounting.md), so every utility experiment runs in two settings:

* ``paper`` (:func:`paper_privacy`): as literally as it can be done. eps0 = eps = the paper's eps.
  The Gaussian runs at (eps, delta_paper): the printed formula's delta_hat when it is positive and
  can be evaluated; otherwise :data:`PAPER_FALLBACK_DELTA`, and the note says why. At eps >= eps0
  the printed formula is exactly 0 (see :func:`printed_delta_hat`), and no Gaussian mechanism
  reaches delta = 0; the paper does not say which delta its Gaussian used there, so we assume
  1e-6. The record also carries the shuffle's *valid* guarantee at eps (the tight bracket; 0 at
  eps >= eps0, where k-RR alone is (eps0, 0)-DP).
* ``honest`` (:func:`honest_privacy`): both mechanisms at the same valid guarantee (eps,
  :data:`HONEST_DELTA`): eps0 is the largest value whose tight delta_upper at eps is at most
  that delta, the Gaussian runs at exactly (eps, delta).
* ``amplified`` (:func:`amplified_privacy`, an extra view): eps0 as given, the Gaussian at the
  shuffle's tight eps at :data:`HONEST_DELTA` (the amplified guarantee).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from shuffledp.accountant import ShuffledKRR, Tight, calibrate_eps0, eps_for_delta
from shuffledp.accountant.bounds.biswas_literal import MAX_N as PRINTED_MAX_N
from shuffledp.accountant.bounds.biswas_literal import biswas_literal_delta
from shuffledp.errors import InvalidParameterError
from shuffledp.validation import require_int, require_positive

__all__ = [
    "HONEST_DELTA",
    "PAPER_FALLBACK_DELTA",
    "SETTINGS",
    "SETTING_MEANINGS",
    "SettingPrivacy",
    "amplified_privacy",
    "honest_privacy",
    "paper_privacy",
    "printed_delta_hat",
    "setting_legend",
]

#: The delta of the honest setting (both mechanisms at (eps, HONEST_DELTA)).
HONEST_DELTA = 1e-6

#: The Gaussian's delta in the paper setting where the printed formula gives 0 or cannot be
#: evaluated (our assumption; the paper does not say).
PAPER_FALLBACK_DELTA = 1e-6

#: The settings' names, in the order experiments present them.
SETTINGS: tuple[str, ...] = ("paper", "honest", "amplified")

#: What each setting means, in one line: the legend of figure titles that name a setting.
SETTING_MEANINGS: dict[str, str] = {
    "paper": "as the paper did it: eps0 = eps, the Gaussian at the printed formula's delta",
    "honest": "both mechanisms at the same valid guarantee (eps, 1e-6); eps0 calibrated to it",
    "amplified": "k-RR at the given eps0; the Gaussian at the shuffle's valid (eps, 1e-6)",
}


def setting_legend(setting: str) -> str:
    """``setting 'honest' (both mechanisms at ...)``: a title's words for ``setting``."""
    return f"setting '{setting}' ({SETTING_MEANINGS[setting]})"


@dataclass(frozen=True, slots=True, kw_only=True)
class SettingPrivacy:
    """What one setting runs at for n users and k values.

    ``eps0``: the clients' k-RR parameter. ``eps`` / ``gaussian_delta``: the central Gaussian's
    (eps, delta). ``shuffle_delta_upper`` / ``shuffle_delta_lower``: the tight bracket of the
    shuffle at ``eps`` (the upper end is its valid guarantee). ``printed_delta``: the printed
    formula's delta_hat at (eps0, eps) (None: not evaluated, see ``note``). ``note``: every
    assumption of this setting, in one or two sentences (summaries quote it).
    """

    setting: str
    n: int
    k: int
    eps0: float
    eps: float
    gaussian_delta: float
    shuffle_delta_upper: float
    shuffle_delta_lower: float
    printed_delta: float | None
    note: str

    def __post_init__(self) -> None:
        if self.setting not in SETTINGS:
            raise InvalidParameterError(f"setting must be one of {SETTINGS}, got {self.setting!r}")
        if not 0.0 < self.gaussian_delta < 1.0:
            raise InvalidParameterError(
                f"the Gaussian's delta must be in (0, 1), got {self.gaussian_delta}"
            )


def printed_delta_hat(
    n: int, k: int, eps0: float, eps: float, others_holding_x0: Sequence[int]
) -> float | None:
    """The printed formula's delta_hat (eq. 10: the largest eq. 6 value over the primary inputs
    x0), each x0 given by how many *other* users hold it. NOT a valid guarantee.

    Exactly 0 at eps >= eps0, without evaluating: the printed v_s = ln(kappa2 + (E - kappa2)
    N(s) / ((n - m) D(s))) never exceeds ln E = eps0, because N(s) / (n - m) = sum_r
    ((s - r) / (n - m))^2 C(m, r) C(n - m, s - r) kappa1^r <= D(s) (using (s - r) C(n - 1 - m,
    s - 1 - r) = (s - r)^2 / (n - m) C(n - m, s - r) and s - r <= n - m), and eq. 6 only sums
    terms with v_s > eps. None when n exceeds what the printed formula evaluates (n > 5000).
    """
    require_int("--n", n, 2)
    require_positive("--eps0", eps0)
    require_positive("--eps", eps)
    if not others_holding_x0:
        raise InvalidParameterError("others_holding_x0 must name at least one primary input")
    if eps >= eps0:
        return 0.0
    if n > PRINTED_MAX_N:
        return None
    return max(_printed(n, k, eps0, int(m), eps) for m in others_holding_x0)


@functools.lru_cache(maxsize=4096)
def _printed(n: int, k: int, eps0: float, nx0: int, eps: float) -> float:
    return biswas_literal_delta(n, k, eps0, nx0, eps)


@functools.lru_cache(maxsize=1024)  # per (n, k, eps0, eps): experiments ask once per run
def _tight_bracket(n: int, k: int, eps0: float, eps: float) -> tuple[float, float]:
    result = Tight().delta(ShuffledKRR(n=n, k=k, eps0=eps0), eps)
    return float(result.delta_upper), float(result.delta_lower)


def paper_privacy(n: int, k: int, eps: float, others_holding_x0: Sequence[int]) -> SettingPrivacy:
    """The ``paper`` setting (module docstring): eps0 = eps; the Gaussian at (eps,
    delta_paper). ``others_holding_x0``: per primary input x0 considered, how many other users
    hold it (eq. 10 maximises over them; pass one value for a per-x0 delta as in Table V)."""
    printed = printed_delta_hat(n, k, eps, eps, others_holding_x0)
    upper, lower = _tight_bracket(n, k, eps, eps)
    if printed is not None and printed > 0.0:
        gaussian_delta = printed
        note = f"eps0 = eps = {eps:g}; the Gaussian at the printed formula's delta {printed:.3g}."
    else:
        gaussian_delta = PAPER_FALLBACK_DELTA
        why = (
            "gives delta = 0 here"
            if printed == 0.0
            else f"is not evaluated above n = {PRINTED_MAX_N:,}"
        )
        note = (
            f"eps0 = eps = {eps:g} (our reading of the paper); the printed formula {why}, no "
            "Gaussian mechanism reaches delta = 0 and the paper does not say which delta its "
            f"Gaussian used: we assume {PAPER_FALLBACK_DELTA:g}. The shuffle's valid delta at "
            f"eps = {eps:g} is {upper:.3g}."
        )
    return SettingPrivacy(
        setting="paper", n=n, k=k, eps0=eps, eps=eps, gaussian_delta=gaussian_delta,
        shuffle_delta_upper=upper, shuffle_delta_lower=lower, printed_delta=printed, note=note,
    )  # fmt: skip


@functools.lru_cache(maxsize=1024)
def honest_privacy(n: int, k: int, eps: float, delta: float = HONEST_DELTA) -> SettingPrivacy:
    """The ``honest`` setting: eps0 = the largest value whose tight delta_upper at ``eps`` is at
    most ``delta`` (rounded down, so the guarantee holds); the Gaussian at (eps, delta)."""
    eps0 = calibrate_eps0(n, k, eps, delta)
    upper, lower = _tight_bracket(n, k, eps0, eps)
    if upper > delta:  # calibrate_eps0 rounds down; a violation here is a bug, never a result
        raise ArithmeticError(f"calibrated eps0 {eps0} gives delta {upper} > {delta}")
    note = (
        f"both at the valid guarantee (eps, delta) = ({eps:g}, {delta:g}); eps0 = {eps0:.4g} "
        "is the largest k-RR parameter whose tight delta_upper meets it."
    )
    return SettingPrivacy(
        setting="honest", n=n, k=k, eps0=eps0, eps=eps, gaussian_delta=delta,
        shuffle_delta_upper=upper, shuffle_delta_lower=lower, printed_delta=None, note=note,
    )  # fmt: skip


@functools.lru_cache(maxsize=1024)
def amplified_privacy(n: int, k: int, eps0: float, delta: float = HONEST_DELTA) -> SettingPrivacy:
    """The ``amplified`` view: k-RR at ``eps0``; the Gaussian at the shuffle's tight eps at
    ``delta`` (the amplification-by-shuffling guarantee)."""
    result = eps_for_delta(Tight(), ShuffledKRR(n=n, k=k, eps0=eps0), delta)
    eps = float(result.eps)
    if not math.isfinite(eps) or eps <= 0.0:
        raise ArithmeticError(f"no finite eps at delta {delta} for n={n}, k={k}, eps0={eps0}")
    upper, lower = _tight_bracket(n, k, eps0, eps)
    note = (
        f"eps0 = {eps0:g}; both at the shuffle's valid guarantee (eps, delta) = ({eps:.4g}, "
        f"{delta:g}) from the tight accountant."
    )
    return SettingPrivacy(
        setting="amplified", n=n, k=k, eps0=eps0, eps=eps, gaussian_delta=delta,
        shuffle_delta_upper=upper, shuffle_delta_lower=lower, printed_delta=None, note=note,
    )  # fmt: skip
