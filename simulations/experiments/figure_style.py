"""The evaluation's figure style: colour-blind safe colours, fixed per mechanism, and PNG + SVG.

Every figure of ``shuffledp experiment`` is drawn with these rules, so a reader can put it in a
paper as it is:

* colours from the Okabe-Ito palette (distinguishable with every common colour-vision
  deficiency), each mechanism with the same colour and marker in every figure
  (:func:`series_style`);
* at most :data:`MAX_LEGEND_ENTRIES` series per panel (more is refused: split the panel);
* every figure written twice, as PNG (for the docs) and SVG (vector, for papers), by
  :func:`save_figure`.

matplotlib is imported lazily with the non-interactive Agg backend (:func:`pyplot`), so commands
that do not plot never pay for the import.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shuffledp.errors import InvalidParameterError

__all__ = [
    "DPI",
    "MAX_LEGEND_ENTRIES",
    "OKABE_ITO",
    "SeriesStyle",
    "check_legend_size",
    "pyplot",
    "save_figure",
    "series_style",
]

#: Resolution of every PNG (dots per inch).
DPI = 150

#: The most series one panel may show (a legend a reader can match by eye).
MAX_LEGEND_ENTRIES = 6

#: Okabe and Ito's colour-blind safe palette (Color Universal Design, 2002), black first.
OKABE_ITO: tuple[str, ...] = (
    "#000000",  # black
    "#E69F00",  # orange
    "#56B4E9",  # sky blue
    "#009E73",  # bluish green
    "#F0E442",  # yellow
    "#0072B2",  # blue
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
)


@dataclass(frozen=True, slots=True)
class SeriesStyle:
    """How one series is drawn: colour, marker and line style (``matplotlib`` names)."""

    colour: str
    marker: str
    linestyle: str


# Fixed styles by label prefix, tried in this order (so "shuffle+INV" wins over "shuffle").
# A label such as "Gaussian (eps = 0.42)" takes the style of its mechanism.
_FIXED: tuple[tuple[str, SeriesStyle], ...] = (
    ("Gaussian", SeriesStyle(OKABE_ITO[5], "s", "-")),
    ("central", SeriesStyle(OKABE_ITO[5], "s", "-")),
    ("shuffle+INV", SeriesStyle(OKABE_ITO[6], "o", "-")),
    ("shuffle+IBU", SeriesStyle(OKABE_ITO[3], "^", "--")),
    ("IBU", SeriesStyle(OKABE_ITO[3], "^", "--")),
    ("shuffle", SeriesStyle(OKABE_ITO[1], "D", ":")),
    ("published", SeriesStyle(OKABE_ITO[0], "x", ":")),
    ("printed formula", SeriesStyle(OKABE_ITO[7], "v", "--")),
    ("single-bin", SeriesStyle(OKABE_ITO[2], "P", "-.")),
    ("tight", SeriesStyle(OKABE_ITO[6], "o", "-")),
    ("delta_upper", SeriesStyle(OKABE_ITO[6], "o", "-")),
    ("delta_lower", SeriesStyle(OKABE_ITO[3], "^", "--")),
)

# For any other label: a stable order through the palette (black and yellow last: yellow is
# faint on white, black is kept for published values).
_OTHER_COLOURS = (
    OKABE_ITO[5],
    OKABE_ITO[6],
    OKABE_ITO[3],
    OKABE_ITO[1],
    OKABE_ITO[7],
    OKABE_ITO[2],
)
_OTHER_MARKERS = ("o", "s", "^", "D", "v", "P")
_OTHER_LINES = ("-", "--", "-.", ":", "-", "--")


def series_style(label: str, index: int = 0) -> SeriesStyle:
    """The style of series ``label``: fixed for the known mechanisms (see ``_FIXED``); any other
    label takes entry ``index`` of a colour-blind safe cycle (pass the series' position in its
    panel, so the same panel always looks the same)."""
    for prefix, style in _FIXED:
        if label.startswith(prefix):
            return style
    slot = index % len(_OTHER_COLOURS)
    return SeriesStyle(_OTHER_COLOURS[slot], _OTHER_MARKERS[slot], _OTHER_LINES[slot])


def check_legend_size(count: int, where: str) -> None:
    """Refuse a panel with more than :data:`MAX_LEGEND_ENTRIES` series, naming the panel."""
    if count > MAX_LEGEND_ENTRIES:
        raise InvalidParameterError(
            f"panel {where!r} has {count} series; at most {MAX_LEGEND_ENTRIES} per panel "
            "(split it into several panels)"
        )
    if count < 1:
        raise InvalidParameterError(f"panel {where!r} has no series")


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path) -> tuple[Path, Path]:
    """Write ``fig`` as ``path`` with suffix ``.png`` and ``.svg``; close it; return both paths.

    ``path`` may carry either suffix or none (``out / "fig-6-paper"``). SVG text stays text
    (``svg.fonttype = none``), so a paper's typesetting can restyle it. Both are reproducible
    byte for byte: the SVG gets no date and a fixed salt for its element ids (matplotlib's
    default ids are random), the PNG carries no date anyway.
    """
    import matplotlib

    plt = pyplot()
    stem = path.with_suffix("") if path.suffix in (".png", ".svg") else path
    png, svg = stem.with_suffix(".png"), stem.with_suffix(".svg")
    try:
        fig.savefig(png, dpi=DPI)
        with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": stem.name}):
            fig.savefig(svg, metadata={"Date": None})
    finally:
        plt.close(fig)
    return png, svg
