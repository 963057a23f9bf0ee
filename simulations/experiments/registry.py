"""The experiments of ``shuffledp experiment NAME``: name -> "module:function".

Each target is ``run(context: ExperimentContext) -> ExperimentOutput`` (see :mod:`.base`),
imported only when its experiment runs (matplotlib and the accountant load lazily).
``all`` runs every one in this order.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from shuffledp.simulations.experiments.base import ExperimentContext, ExperimentOutput

__all__ = ["EXPERIMENTS", "load_experiment"]

_PACKAGE = "shuffledp.simulations.experiments"

#: name -> (target, one-line description)
EXPERIMENTS: dict[str, tuple[str, str]] = {
    "table-2": (
        f"{_PACKAGE}.table_2:run",
        "Table II (eps0 = 0.49, n = 100, 1000): published columns beside ours, every bound",
    ),
    "table-4": (
        f"{_PACKAGE}.table_4:run",
        "Table IV (vary eps0, n, k): published vs printed formula, single-bin, tight bracket",
    ),
    "fig-1": (
        f"{_PACKAGE}.fig_1:run",
        "Fig. 1: delta over (eps, eps0), the printed formula beside the valid delta_upper",
    ),
    "fig-2": (
        f"{_PACKAGE}.fig_2:run",
        "Fig. 2: TV distance vs n on N(0, 2) data, Gaussian vs shuffle(+INV), eps = 4",
    ),
    "table-5": (
        f"{_PACKAGE}.table_5:run",
        "Table V: per-x0 error |pihat_x0 - pi_x0| on N(0, 2) data, n = 1,000 and 100,000",
    ),
    "fig-3": (
        f"{_PACKAGE}.fig_3:run",
        "Fig. 3: the Gowalla check-ins of SF and Paris (maps, true distributions)",
    ),
    "fig-4": (
        f"{_PACKAGE}.fig_4_5:run_sf",
        "Fig. 4: SF heat maps, Gaussian vs shuffle(+INV) at eps = 4 (paper, honest, amplified)",
    ),
    "fig-5": (
        f"{_PACKAGE}.fig_4_5:run_paris",
        "Fig. 5: Paris heat maps, Gaussian vs shuffle(+INV) at eps = 4 (paper, honest, amplified)",
    ),
    "fig-6": (
        f"{_PACKAGE}.fig_6_7:run_sf",
        "Fig. 6: SF, TV distance vs n (10k-100k), eps = 4 and 6, 10 runs (paper, honest)",
    ),
    "fig-7": (
        f"{_PACKAGE}.fig_6_7:run_paris",
        "Fig. 7: Paris, TV distance vs n (1k-10k), eps = 4 and 6, 10 runs (paper, honest)",
    ),
    "table-6": (
        f"{_PACKAGE}.table_6:run",
        "Table VI: individual-specific utility at the paper's cells, eps0 = eps = 4",
    ),
}


def load_experiment(name: str) -> Callable[[ExperimentContext], ExperimentOutput]:
    """The run function of experiment ``name`` (KeyError if there is none)."""
    target, _ = EXPERIMENTS[name]
    module_name, _, function = target.partition(":")
    module = importlib.import_module(module_name)
    run: Callable[[ExperimentContext], ExperimentOutput] = getattr(module, function)
    return run
