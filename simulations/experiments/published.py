"""The seed paper's published delta tables, cell by cell, as printed, and how ours compare.

S. Biswas, K. Jung, C. Palamidessi, "Tight Differential Privacy Guarantees for the Shuffle Model
with k-Randomized Response", FPS 2023 (arXiv 2205.08858):

* Table II: delta at eps0 = 0.49, eps in {0.01, 0.1, 0.2, 0.3, 0.4}, n = 100 and n = 1,000, in
  four columns: [11] Erlingsson et al., [10] Balle et al., [12] Feldman et al. and "Our delta"
  (the paper's eq. 6). The paper states neither k nor n_x0.
* Table IV: "Tight delta for various eps" (eq. 6), eps in {0.1, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0}
  (the text extraction mangles the column headers of the n and k blocks; their rows n = 100 and
  k = 10 repeat the eps0 = 2 row, so every block has the same eps columns), in three blocks
  around n = 100, k = 10, eps0 = 2, n_x0 = 80: eps0 in {1, 2, 3}, n in {50, 100, 150}, k in
  {5, 10, 15}.

Every cell is kept as the text the paper prints ("6.580E-7", "0.62", "0"), so the number of
digits it shows is known: :class:`Printed` says whether a value of ours agrees with it to those
digits. Data only: nothing here computes a bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from enum import StrEnum

from shuffledp.errors import InvalidParameterError

__all__ = [
    "PAPER",
    "PUBLISHED_TABLE_IV",
    "TABLE_II",
    "TABLE_II_COLUMNS",
    "TABLE_II_EPS",
    "TABLE_IV_BLOCKS",
    "TABLE_IV_EPS",
    "Agreement",
    "Printed",
    "TableIVBlock",
]

PAPER = (
    "S. Biswas, K. Jung, C. Palamidessi, Tight Differential Privacy Guarantees for the Shuffle "
    "Model with k-Randomized Response, FPS 2023 (arXiv 2205.08858)"
)


class Agreement(StrEnum):
    """How a value of ours compares with a printed cell."""

    #: ours, rounded (half even) to the printed digits, is the printed text; zeros: both 0.
    DIGITS = "equal to the printed digits"
    #: within one unit of the last printed digit (the paper truncated, or rounded differently).
    LAST_DIGIT = "within one unit of the last printed digit"
    DIFFERS = "differs"


@dataclass(frozen=True, slots=True)
class Printed:
    """One published cell, exactly as printed (e.g. ``"1.18E-14"``, ``"0.62"``, ``"0"``)."""

    text: str

    def __post_init__(self) -> None:
        try:
            number = Decimal(self.text)
        except ArithmeticError:
            raise InvalidParameterError(
                f"a printed cell must be a number, got {self.text!r}"
            ) from None
        if not number.is_finite() or number < 0:
            raise InvalidParameterError(f"a printed delta must be >= 0, got {self.text!r}")

    @property
    def value(self) -> float:
        return float(self.text)

    @property
    def unit(self) -> Decimal:
        """One unit of the last printed digit (1E-16 for "1.18E-14")."""
        return Decimal(1).scaleb(Decimal(self.text).as_tuple().exponent)  # type: ignore[arg-type]

    def agreement(self, ours: float | str) -> Agreement:
        """Whether ``ours`` (a float, or a decimal string for values below double precision)
        shows as this cell; a printed 0 needs ours = 0 exactly (the paper's zeros are the
        formula's exact zeros: no v_s exceeds eps)."""
        printed = Decimal(self.text)
        exact = Decimal(ours)
        if printed == 0:
            return Agreement.DIGITS if exact == 0 else Agreement.DIFFERS
        if exact.quantize(self.unit, rounding=ROUND_HALF_EVEN) == printed:
            return Agreement.DIGITS
        if abs(exact - printed) <= self.unit:
            return Agreement.LAST_DIGIT
        return Agreement.DIFFERS

    def relative_difference(self, ours: float | str) -> float:
        """(ours - printed) / printed; 0 when both are 0, inf when only ours is not 0."""
        printed, exact = Decimal(self.text), Decimal(ours)
        if printed == 0:
            return 0.0 if exact == 0 else float("inf")
        return float((exact - printed) / printed)

    def orders_off(self, ours: float | str) -> float:
        """|log10(ours / printed)|: 0 when both are 0, inf when only one is."""
        printed, exact = Decimal(self.text), Decimal(ours)
        if printed == 0 or exact == 0:
            return 0.0 if printed == exact else float("inf")
        return float(abs((exact / printed).log10()))


def _cells(*texts: str) -> tuple[Printed, ...]:
    return tuple(Printed(text) for text in texts)


# ---------------------------------------------------------------------------------------------
# Table II

TABLE_II_EPS: tuple[float, ...] = (0.01, 0.1, 0.2, 0.3, 0.4)
TABLE_II_EPS0 = 0.49
#: The four columns of Table II, in the paper's order (key, the paper's heading).
TABLE_II_COLUMNS: tuple[tuple[str, str], ...] = (
    ("erlingsson", "[11] Erlingsson et al."),
    ("balle", "[10] Balle et al."),
    ("feldman", "[12] Feldman et al."),
    ("ours", "Our delta"),
)
#: n -> eps -> the four cells of the row (TABLE_II_COLUMNS order), as printed.
TABLE_II: dict[int, dict[float, tuple[Printed, ...]]] = {
    100: {
        0.01: _cells("0.999", "0.996", "0.984", "1.18E-14"),
        0.1: _cells("0.97", "0.68", "0.2", "1.26E-28"),
        0.2: _cells("0.89", "0.22", "1.78E-3", "2.69E-43"),
        0.3: _cells("0.77", "0.03", "6.580E-7", "1.39E-57"),
        0.4: _cells("0.62", "2.2E-3", "1.02E-11", "9.46E-73"),
    },
    1000: {
        0.01: _cells("0.997", "0.963", "0.853", "6.66E-58"),
        0.1: _cells("0.75", "0.02", "2.02E-7", "3.82E-93"),
        0.2: _cells("0.32", "4.06E-7", "1.66E-27", "6.02E-143"),
        0.3: _cells("0.08", "4.17E-15", "5.60E-61", "4.46E-207"),
        0.4: _cells("0.01", "2.73E-26", "7.69E-108", "3.61E-292"),
    },
}


def table_ii_cell(n: int, eps: float, column: str) -> Printed:
    """The printed cell of Table II at (n, eps) in column ``column`` (a TABLE_II_COLUMNS key)."""
    keys = [key for key, _ in TABLE_II_COLUMNS]
    return TABLE_II[n][eps][keys.index(column)]


# ---------------------------------------------------------------------------------------------
# Table IV

TABLE_IV_EPS: tuple[float, ...] = (0.1, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class TableIVBlock:
    """One block of Table IV: ``varies`` ("eps0", "n" or "k") takes the keys of ``rows``; the
    other two parameters are those of the reference row (n = 100, k = 10, eps0 = 2)."""

    varies: str
    rows: dict[float, tuple[Printed, ...]]

    def setting(self, value: float) -> tuple[int, int, float]:
        """(n, k, eps0) of the row where the varied parameter is ``value``."""
        n, k, eps0 = 100, 10, 2.0
        if self.varies == "eps0":
            return n, k, float(value)
        if self.varies == "n":
            return int(value), k, eps0
        return n, int(value), eps0


_EPS0_2 = _cells("2.49E-15", "3.25E-22", "2.20E-30", "1.57E-40", "0", "0", "0")
TABLE_IV_BLOCKS: tuple[TableIVBlock, ...] = (
    TableIVBlock(
        varies="eps0",
        rows={
            1.0: _cells("2.08E-20", "3.42E-43", "0", "0", "0", "0", "0"),
            2.0: _EPS0_2,
            3.0: _cells(
                "8.79E-11", "5.73E-13", "3.52E-16", "4.49E-20", "1.09E-25", "4.52E-33", "0"
            ),
        },
    ),
    TableIVBlock(
        varies="n",
        rows={
            50: _cells("1.91E-08", "5.02E-12", "2.40E-15", "4.49E-21", "0", "0", "0"),
            100: _EPS0_2,
            150: _cells("6.58E-22", "7.83E-32", "2.75E-44", "6.99E-59", "0", "0", "0"),
        },
    ),
    TableIVBlock(
        varies="k",
        rows={
            5: _cells("1.96E-10", "2.51E-14", "1.08E-19", "2.02E-27", "0", "0", "0"),
            10: _EPS0_2,
            15: _cells("1.66E-18", "7.13E-28", "1.49E-38", "7.35E-50", "0", "0", "0"),
        },
    ),
)


def table_iv_nx0(n: int) -> int:
    """The n_x0 that reproduces Table IV's row at this n: 80 at n = 100 as the text says, and
    0.8 n in the "varying n" block (n = 150 needs 120, n = 50 cannot have 80 others)."""
    return round(0.8 * n)


def _published_table_iv() -> dict[tuple[int, int, float, int], dict[float, float]]:
    table: dict[tuple[int, int, float, int], dict[float, float]] = {}
    for block in TABLE_IV_BLOCKS:
        for value, cells in block.rows.items():
            n, k, eps0 = block.setting(value)
            values = dict(zip(TABLE_IV_EPS, (cell.value for cell in cells), strict=True))
            table[(n, k, eps0, table_iv_nx0(n))] = values
    return table


#: (n, k, eps0, n_x0) -> {eps: published delta} for every row of Table IV (the printed
#: formula's values; NOT a valid guarantee), with the n_x0 that reproduces the row.
PUBLISHED_TABLE_IV: dict[tuple[int, int, float, int], dict[float, float]] = _published_table_iv()
