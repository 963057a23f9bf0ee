"""The experiments' CSV files: a header, one line per row, numbers written exactly.

One writer for every experiment that records rows as mappings (fig-2 ... fig-7, table-5,
table-6; the delta tables write already-formatted cells with :mod:`.delta_cells`).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["write_csv"]


def write_csv(path: Path, columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> Path:
    """``rows`` as CSV with exactly ``columns`` (keys outside them are left out), and return
    ``path``. None and NaN are empty cells (nothing was measured); floats, numpy's included,
    are written with ``repr`` (shortest exact text)."""
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns))
        writer.writeheader()
        for row in rows:
            writer.writerow({key: _cell(row.get(key)) for key in columns})
    return path


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float | np.floating):
        number = float(value)  # a numpy scalar's repr would be "np.float64(...)"
        return "" if math.isnan(number) else repr(number)
    return value
