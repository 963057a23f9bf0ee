"""shuffledp: the shuffle model of differential privacy with k-randomized response.

The Python API (docs/python-api.md)::

    import shuffledp

    report = shuffledp.simulate(n=1000, k=5, eps0=2.0, hops=2)   # multi-process, like the CLI
    report = await shuffledp.simulate_async(n=1000)              # inside a running loop
    report = shuffledp.run_round_in_process(n=1000, k=5)         # the fast in-process round

    mech = shuffledp.ShuffledKRR(n=1000, k=5, eps0=2.0)          # the accountant
    shuffledp.eps_for_delta(shuffledp.Tight(), mech, 1e-6)
    shuffledp.privacy_loss_distribution(mech)                    # a dp-accounting PLD

Everything here is imported on first use (module ``__getattr__``), so that ``import
shuffledp.protocol`` (every hop and client process) loads neither the accountant's numerics
nor the launcher.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Public name -> the module that defines it (imported when the name is first used).
_EXPORTS: dict[str, str] = {
    "simulate": "shuffledp.simulations.pipeline.api",
    "simulate_async": "shuffledp.simulations.pipeline.api",
    "run_round_in_process": "shuffledp.simulations.pipeline.api",
    "RunningEventLoopError": "shuffledp.simulations.pipeline.api",
    "RoundLog": "shuffledp.simulations.pipeline.records",
    "InProcessRound": "shuffledp.simulations.pipeline.records",
    "SimulationError": "shuffledp.simulations.pipeline.simulate",
    "ShuffledKRR": "shuffledp.accountant",
    "Tight": "shuffledp.accountant",
    "eps_for_delta": "shuffledp.accountant",
    "calibrate_eps0": "shuffledp.accountant",
    "compose": "shuffledp.accountant",
    "compose_rounds": "shuffledp.accountant",
    "privacy_loss_distribution": "shuffledp.accountant",
    "privacy_loss_distributions": "shuffledp.accountant",
    "ShuffledpError": "shuffledp.errors",
    "InvalidParameterError": "shuffledp.errors",
}

if TYPE_CHECKING:
    from shuffledp.accountant import (
        ShuffledKRR,
        Tight,
        calibrate_eps0,
        compose,
        compose_rounds,
        eps_for_delta,
        privacy_loss_distribution,
        privacy_loss_distributions,
    )
    from shuffledp.errors import InvalidParameterError, ShuffledpError
    from shuffledp.simulations.pipeline.api import (
        RunningEventLoopError,
        run_round_in_process,
        simulate,
        simulate_async,
    )
    from shuffledp.simulations.pipeline.records import InProcessRound, RoundLog
    from shuffledp.simulations.pipeline.simulate import SimulationError

__all__ = [
    "InProcessRound",
    "InvalidParameterError",
    "RoundLog",
    "RunningEventLoopError",
    "ShuffledKRR",
    "ShuffledpError",
    "SimulationError",
    "Tight",
    "__version__",
    "calibrate_eps0",
    "compose",
    "compose_rounds",
    "eps_for_delta",
    "privacy_loss_distribution",
    "privacy_loss_distributions",
    "run_round_in_process",
    "simulate",
    "simulate_async",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
