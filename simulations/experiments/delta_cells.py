"""Cells of the delta tables (``table-2``, ``table-4``, ``fig-1``): labelled columns, safe-side
rounding for display, footnoted reasons, CSV and markdown.

A cell is a number (a delta) or the reason why there is none ("outside conditions: ...").
Every column carries a label saying what its numbers guarantee; the CSV header is
``"key [label]"``, so a number never travels without it.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Literal

__all__ = [
    "LABEL_ANALYTIC",
    "LABEL_NOT_A_GUARANTEE",
    "LABEL_RDP",
    "LABEL_SINGLE_BIN",
    "LABEL_TIGHT_LOWER",
    "LABEL_TIGHT_UPPER",
    "LABEL_VALID_UPPER",
    "LABEL_WANG",
    "SMALLEST_SHOWN",
    "Cell",
    "Column",
    "Footnotes",
    "Role",
    "csv_value",
    "display_cell",
    "display_decimal",
    "display_number",
    "generic_reason",
    "label_legend",
    "markdown_table",
    "orders_of_magnitude",
    "parse_cell",
    "write_csv",
]

#: A table cell: a number (delta), or the reason why there is none ("outside conditions: ...").
Cell = float | str

#: How a number in a column may be used; decides its label and its safe rounding for display.
Role = Literal["upper", "lower", "informative", "not-a-guarantee"]

LABEL_VALID_UPPER = "valid upper bound"
LABEL_ANALYTIC = "valid upper bound only within its conditions (analytic)"
LABEL_RDP = "valid upper bound (Renyi DP of Girgis et al., converted)"
LABEL_WANG = "lower bound (published as an upper bound; fails)"
LABEL_TIGHT_LOWER = "lower bound on the true delta"
LABEL_TIGHT_UPPER = "valid upper bound: the reported guarantee"
LABEL_SINGLE_BIN = "informative: dataset-specific, not a guarantee for the histogram"
LABEL_NOT_A_GUARANTEE = "published formula, not a valid guarantee"

#: Figures and summaries leave out positive values below this: they are the upper side of a
#: numerical bracket around a value that underflows (e.g. 4.94e-324), not a value.
SMALLEST_SHOWN = 1e-300


@dataclass(frozen=True, slots=True, kw_only=True)
class Column:
    """One result column: ``key`` names it, ``label`` says what its numbers guarantee (it is
    part of the CSV header, ``"key [label]"``), ``short`` is the label in markdown headers,
    ``role`` decides the display rounding."""

    key: str
    label: str
    short: str
    role: Role

    @property
    def header(self) -> str:
        return f"{self.key} [{self.label}]"


def csv_value(cell: Cell) -> str:
    """A number exactly (shortest repr that reads back as the same float), or the reason."""
    return repr(cell) if isinstance(cell, float) else cell


def parse_cell(text: str) -> Cell:
    """Inverse of :func:`csv_value` (a reason stays text)."""
    try:
        return float(text)
    except ValueError:
        return text


def display_number(value: float, role: Role, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, rounded toward the safe side of its role:
    upper bounds up, lower bounds down (a table never shows a guarantee smaller than computed);
    other numbers to nearest. Informative numbers below 1e-300 show as "< 1e-300": they are
    the upper side of a bracket around a value that underflows (e.g. 4.94e-324)."""
    if value == 0.0:
        return "0"
    if math.isinf(value):
        return "inf"
    if role in ("informative", "not-a-guarantee") and value < SMALLEST_SHOWN:
        return "< 1e-300"
    rounding = {"upper": ROUND_CEILING, "lower": ROUND_FLOOR}.get(role, ROUND_HALF_EVEN)
    exact = Decimal(value)  # the float's exact binary value
    quantum = Decimal(1).scaleb(exact.adjusted() - (digits - 1))
    rounded = exact.quantize(quantum, rounding=rounding)
    return f"{rounded:.{digits - 1}e}"


def display_decimal(text: str, digits: int = 4) -> str:
    """A decimal string (a value that may lie below double precision, e.g. "3.51e-398") to
    ``digits`` significant digits, rounded to nearest; "0" for zero."""
    value = Decimal(text)
    return "0" if value == 0 else f"{value:.{digits - 1}e}"


class Footnotes:
    """Numbers each distinct reason once, so a markdown table shows "n/a (1)" instead of the
    whole reason in every cell."""

    def __init__(self) -> None:
        self._numbers: dict[str, int] = {}

    def mark(self, reason: str) -> str:
        number = self._numbers.setdefault(generic_reason(reason), len(self._numbers) + 1)
        return f"n/a ({number})"

    def lines(self) -> list[str]:
        return [f"({number}) {reason}" for reason, number in self._numbers.items()]


_NUMBER = r"[-+0-9.eE]+"


def generic_reason(reason: str) -> str:
    """The reason without the eps and delta of the grid point, so that one footnote serves a
    whole column ("... needs 0.2874 <= eps <= 1 ..., got eps=0.1" -> "... <= eps <= 1 ...")."""
    reason = re.sub(rf",? got eps={_NUMBER}", "", reason)
    reason = re.sub(rf" at eps={_NUMBER}", "", reason)
    return re.sub(rf"delta={_NUMBER} >", "delta >", reason)


def display_cell(cell: Cell, role: Role, notes: Footnotes, digits: int = 3) -> str:
    return display_number(cell, role, digits) if isinstance(cell, float) else notes.mark(cell)


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def label_legend(columns: Sequence[Column]) -> list[str]:
    """What each column's label means, one line per column (markdown list)."""
    return ["Labels:", *(f"- `{c.key}`: {c.label}" for c in columns)]


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def orders_of_magnitude(high: float, low: float) -> float:
    """log10(high / low) for positive numbers."""
    return math.log10(high) - math.log10(low)
