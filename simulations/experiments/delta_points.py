"""One grid point of a delta table, evaluated by the accountant (runs in worker processes).

At (n, k, eps0, n_x0, eps) a point gets, each under a column that says what it guarantees:

* ``biswas-literal``: the seed paper's printed Theorem IV.1 (eq. 6), published formula, NOT a
  valid guarantee;
* ``single-bin``: the exact delta of the paper's own model (the count of x0 alone, eqs.
  12-13), both directions and the paper's direction H(P0 || P1); informative (it depends on the
  private data through n_x0 and ignores the other bins), a lower bound on the worst case;
* ``tight``: the bracket [delta_lower, delta_upper] for the whole released histogram, every
  dataset; delta_upper is the valid guarantee;
* optionally every other bound of the accountant (``evaluate_bounds_point``), an analytic bound
  outside its conditions giving the reason instead of a number.
"""

from __future__ import annotations

from dataclasses import dataclass

from shuffledp.accountant import (
    OutsideConditionsError,
    ShuffledKRR,
    SingleBin,
    Tight,
    make_bound,
)
from shuffledp.accountant.mechanism import require_eps
from shuffledp.simulations.experiments.delta_cells import (
    LABEL_NOT_A_GUARANTEE,
    LABEL_SINGLE_BIN,
    LABEL_TIGHT_LOWER,
    LABEL_TIGHT_UPPER,
    Cell,
    Column,
)

__all__ = [
    "COMPUTED",
    "LITERAL_DECIMAL",
    "NAMED_BOUNDS",
    "SINGLE_BIN",
    "SINGLE_BIN_FORWARD",
    "TIGHT_LOWER",
    "TIGHT_UPPER",
    "Point",
    "PointResult",
    "bound_cell",
    "evaluate_bounds_point",
    "evaluate_delta_point",
    "tight_cells",
]

#: (n, k, eps0, n_x0, eps): plain data, it travels to worker processes.
Point = tuple[int, int, float, int, float]

COMPUTED = Column(
    key="biswas-literal",
    label="printed formula evaluated here; " + LABEL_NOT_A_GUARANTEE,
    short="printed formula, ours; NOT a valid guarantee",
    role="not-a-guarantee",
)
#: The printed formula as a decimal string, exact also where the float underflows to 0 (at
#: n = 1000 eq. 6 reaches 1e-398 and below; Table II prints down to 3.61E-292).
LITERAL_DECIMAL = "biswas-literal decimal"
SINGLE_BIN = Column(
    key="single-bin",
    label=LABEL_SINGLE_BIN + "; max of both directions",
    short="exact single-bin, both directions (informative)",
    role="informative",
)
SINGLE_BIN_FORWARD = Column(
    key="single-bin x0||x1",
    label=LABEL_SINGLE_BIN + "; H(P0 || P1), the paper's direction",
    short="exact single-bin H(P0||P1) (informative)",
    role="informative",
)
TIGHT_LOWER = Column(key="tight delta_lower", label=LABEL_TIGHT_LOWER, short="lower", role="lower")
TIGHT_UPPER = Column(
    key="tight delta_upper", label=LABEL_TIGHT_UPPER, short="the guarantee", role="upper"
)

#: The bounds evaluated one by one by ``evaluate_bounds_point`` (column key = accountant name).
NAMED_BOUNDS: tuple[str, ...] = (
    "erlingsson",
    "blanket-analytic",
    "strong-adversary",
    "clones",
    "krr-clones",
    "wang-krr",
    "optimal-blanket",
    "largest-group",
    "renyi-girgis",
)
WANG_K2 = (
    "k = 2: the published value equals krr-clones, an upper bound, not a lower bound "
    "(not shown here)"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PointResult:
    """The cells of one grid point (keyed by column key) and the names of the bounds that gave
    the tight bracket's two sides. Plain data: it travels back from worker processes."""

    n: int
    k: int
    eps0: float
    nx0: int
    eps: float
    cells: dict[str, Cell]
    upper_from: str
    lower_from: str

    @property
    def setting(self) -> tuple[int, int, float]:
        return self.n, self.k, self.eps0

    def number(self, key: str) -> float:
        """The cell ``key`` as a number (the computed columns always hold one)."""
        return float(self.cells[key])


def bound_cell(name: str, mech: ShuffledKRR, eps: float, nx0: int | None = None) -> Cell:
    """delta of bound ``name`` at eps on its safe side, or the reason it gives none. wang-krr at
    k = 2 is not a lower bound, so a column of lower bounds shows the reason instead."""
    if name == "wang-krr" and mech.k == 2:
        return WANG_K2
    try:
        return make_bound(name, nx0).delta(mech, eps).delta
    except OutsideConditionsError as exc:
        return f"outside conditions: {exc}"


def tight_cells(mech: ShuffledKRR, eps: float) -> tuple[dict[str, Cell], str, str]:
    """The tight bracket's two columns and the names of the bounds that gave them."""
    result = Tight().delta(mech, eps)
    cells: dict[str, Cell] = {
        TIGHT_LOWER.key: result.delta_lower,
        TIGHT_UPPER.key: result.delta_upper,
    }
    return cells, str(result.extra["upper_from"]), str(result.extra["lower_from"])


def _literal_decimal(point: Point) -> str:
    """The printed formula (``biswas-literal``) to 17 digits: its float is the accountant's
    value to the last bit or one unit of it."""
    from shuffledp.accountant.bounds.biswas_literal import biswas_literal_delta_text

    n, k, eps0, nx0, eps = point
    if eps >= eps0:
        # Exactly 0 (settings.printed_delta_hat has the proof: v_s never exceeds eps0). The
        # 60-digit evaluation left 4.5e-159, 4.5e-153 and 4.2e-141 on Fig. 1's diagonal
        # eps = eps0, where v_s = eps0 exactly, which the map drew as its darkest cells.
        return "0"
    return biswas_literal_delta_text(n, k, eps0, nx0, eps)


def evaluate_delta_point(point: Point) -> PointResult:
    """The printed formula, the exact single-bin value and the tight bracket at one point."""
    n, k, eps0, nx0, eps = point
    mech = ShuffledKRR(n=n, k=k, eps0=eps0)
    eps = require_eps(eps)
    single_bin = SingleBin(nx0).delta(mech, eps)
    literal = _literal_decimal(point)  # one high-precision evaluation for both columns
    cells: dict[str, Cell] = {
        COMPUTED.key: float(literal),
        LITERAL_DECIMAL: literal,
        SINGLE_BIN.key: single_bin.delta,
        SINGLE_BIN_FORWARD.key: float(single_bin.extra["delta_x0_over_x1"]),
    }
    tight, upper_from, lower_from = tight_cells(mech, eps)
    cells.update(tight)
    return PointResult(
        n=n,
        k=k,
        eps0=eps0,
        nx0=nx0,
        eps=eps,
        cells=cells,
        upper_from=upper_from,
        lower_from=lower_from,
    )


def evaluate_bounds_point(point: Point) -> PointResult:
    """Everything of :func:`evaluate_delta_point` and every bound of :data:`NAMED_BOUNDS`."""
    result = evaluate_delta_point(point)
    mech = ShuffledKRR(n=result.n, k=result.k, eps0=result.eps0)
    cells = dict(result.cells)
    cells.update({name: bound_cell(name, mech, result.eps) for name in NAMED_BOUNDS})
    return PointResult(
        n=result.n,
        k=result.k,
        eps0=result.eps0,
        nx0=result.nx0,
        eps=result.eps,
        cells=cells,
        upper_from=result.upper_from,
        lower_from=result.lower_from,
    )
