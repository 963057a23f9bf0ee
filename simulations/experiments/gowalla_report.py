"""What every Gowalla experiment writes besides its figures: CSV files and the common sentences
of its ``SUMMARY-<name>.md`` (the data used, the randomness, number formats)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from shuffledp.simulations.experiments.base import ExperimentContext
from shuffledp.simulations.experiments.gowalla_data import Population, RegionSetup

__all__ = ["data_lines", "fmt", "median_text", "randomness_text", "rounds_text"]


def fmt(value: Any, spec: str) -> str:
    """``value`` formatted with ``spec``; "n/a" for None or NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return format(float(value), spec)


def median_text(values: Sequence[float], spec: str = ".3g") -> str:
    """The median of ``values`` formatted, "n/a" when there are none."""
    return format(float(np.median(values)), spec) if len(values) else "n/a"


def randomness_text(context: ExperimentContext) -> str:
    """What drove the draws, for a summary."""
    if context.seed is None:
        return (
            "Randomness: the OS CSPRNG (no --seed): the draws of individuals, k-RR, "
            "permutations and Gaussian noise are not reproducible."
        )
    return (
        f"Randomness: seeded from --seed {context.seed}: every (point, run) gets its own "
        "SeedSequence spawn key (runner.repetition_seed), with independent streams for the draw "
        "of individuals, the k-RR and permutation, and the Gaussian noise; the numbers do not "
        "depend on --workers. Reproducible, not a privacy guarantee."
    )


def rounds_text(context: ExperimentContext) -> str:
    """Which path the rounds took, for a summary."""
    if context.pipeline:
        return (
            "Rounds: the real pipeline (--pipeline: broker, onion encryption, 3 hops), one "
            "after the other."
        )
    return (
        "Rounds: the fast in-process path (the clients' k-RR, the hops' permutation, the "
        "analyzer's report; no broker or crypto, which cannot change the counts)."
    )


def data_lines(populations: Mapping[RegionSetup, Population]) -> list[str]:
    """The summary's data section: per region the file, N, and N against the paper's count."""
    lines = ["## Data", ""]
    for setup, population in populations.items():
        difference = population.n - setup.paper_n
        lines.append(
            f"- {setup.title}: region {population.region.describe()}. File "
            f"{population.describe()}. The paper uses {setup.paper_n:,} check-ins: ours has "
            f"{abs(difference):,} {'more' if difference > 0 else 'fewer'} ({difference / setup.paper_n:+.1%}); "
            "the paper does not say how it filtered the SNAP data."
        )
    lines.append("")
    return lines
