"""The Python API of a simulation: what ``shuffledp.simulate`` and its siblings are.

Three ways to run one round, with the parameters named as ``shuffledp simulate``'s flags (``n``,
``k``, ``eps0``, ``hops``, ``dataset``, ``seed``, ``delta``, ``eps``, ...):

- :func:`simulate`: the full pipeline, every component a separate OS process over MQTT (the
  broker of ``broker``, by default ``auto``: Mosquitto if installed, else the embedded one),
  exactly as ``shuffledp simulate``. Synchronous;
  inside a running event loop (a notebook, an async function) it refuses, naming
  :func:`simulate_async`.
- :func:`simulate_async`: the same, awaitable in the caller's running loop (a notebook cell:
  ``report = await shuffledp.simulate_async(n=300)``). Cancelling it stops every process it
  started.
- :func:`run_round_in_process`: the fast in-process round (:mod:`~shuffledp.simulations.
  experiments.fastpath`): the clients' k-RR, the hops' permutation and the analyzer's report in
  this process, no broker, no encryption; the same histogram distribution as the pipeline.

Randomness (``seed``): None is the OS CSPRNG (the default), an int a reproducible seed, a numpy
``Generator`` the caller's stream (:mod:`shuffledp.randomness`). Every report says which in
``randomness_source`` (``os``, ``seeded`` or ``generator``) beside ``randomness`` (the name).

Each returns a frozen, typed record: :func:`simulate` and :func:`simulate_async` the round log
(:class:`~shuffledp.simulations.pipeline.records.RoundLog`: ``.report`` is the analyzer's
:class:`~shuffledp.analyzer.records.Report` with the truth, then every stage's log, the
accounting, timings and what ran), :func:`run_round_in_process` an
:class:`~shuffledp.simulations.pipeline.records.InProcessRound`. ``.to_json()`` gives the JSON
object of docs/report-schema.md and ``from_json`` reads it back.
"""

from __future__ import annotations

import asyncio
import functools
import secrets
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, ParamSpec, TypeAlias, TypeVar

import numpy as np
import numpy.typing as npt

from shuffledp.accountant.mechanism import check_range, require_delta, require_eps
from shuffledp.analyzer.baseline import RandomState
from shuffledp.errors import InvalidParameterError, ShuffledpError
from shuffledp.randomness import GeneratorRandom, RandomSource, SeedLike, seed_value
from shuffledp.security.keys import load_public_directory
from shuffledp.simulations.data.datasets import DEFAULT_K, parse_dataset_spec, resolve_dataset
from shuffledp.simulations.data.regions import Region
from shuffledp.simulations.experiments.fastpath import run_round, spec_sources
from shuffledp.simulations.pipeline.records import InProcessRound, RoundLog
from shuffledp.simulations.pipeline.simulate import (
    PipelineSession,
    ProgressCallback,
    SimulationOptions,
    run_simulation,
)
from shuffledp.validation import require_int, require_positive

__all__ = [
    "InProcessRound",
    "Report",
    "RoundLog",
    "RunningEventLoopError",
    "run_round_in_process",
    "simulate",
    "simulate_async",
]

#: What the pipeline entry points return (kept as a name for callers that annotated with it).
Report: TypeAlias = RoundLog

P = ParamSpec("P")
T = TypeVar("T")


class RunningEventLoopError(ShuffledpError, RuntimeError):
    """A synchronous entry point was called inside a running event loop (a notebook cell, an
    async function), where it cannot start its own loop: the message names the awaitable one."""


async def simulate_async(
    *,
    n: int | None = None,
    k: int | None = None,
    eps0: float = 4.0,
    hops: int | None = None,
    dataset: str = "synthetic",
    values: npt.ArrayLike | None = None,
    region: Region | None = None,
    seed: SeedLike = None,
    broker: str | None = None,
    client_processes: int = 2,
    delta: float = 1e-6,
    eps: float | None = None,
    min_batch: int | None = None,
    deadline: float | None = None,
    timeout: float | None = None,
    round_id: int | None = None,
    auth: bool = True,
    keys: Path | None = None,
    tls_ca: Path | None = None,
    on_progress: ProgressCallback | None = None,
) -> RoundLog:
    """One full round through the multi-process pipeline, awaited in the caller's event loop.

    The parameters are ``shuffledp simulate``'s flags (``delta`` is ``--delta``, the target;
    ``round_id`` is ``--round``; ``auth=False`` is ``--no-auth``) with its defaults: ``hops`` 3
    or the hops of ``keys``; ``round_id`` 1, or a fresh random one with ``keys``. ``values``: the true values
    (integers in [0, k)) instead of a ``dataset`` spec; then ``n`` is their number. ``k`` None:
    the dataset's own (a region's cells, a histogram's length), else 15. ``seed``: None (OS
    CSPRNG), an int, or a numpy Generator (a seed is drawn from it; the report records it).
    ``on_progress(counts, states)`` is called as the stages report progress.

    InvalidParameterError (a ValueError) naming the parameter for a bad value, before anything
    starts; SimulationError if a component fails or the round does not complete in ``timeout``.
    """
    drawn = seed_value(seed)
    options, given = _options(
        n=n,
        k=k,
        values=values,
        dataset=dataset,
        region=region,
        seed=drawn,
        extra={
            "eps0": eps0,
            "hops": hops if hops is not None else _default_hops(keys),
            "broker": broker,
            "client_processes": client_processes,
            "target_delta": delta,
            "eps": eps,
            "min_batch": min_batch,
            "deadline": deadline,
            "timeout": timeout,
            "round_id": round_id if round_id is not None else _default_round(keys),
            "auth": auth,
            "keys": keys,
            "tls_ca": tls_ca,
        },
    )
    report = await _run_round(options, given, on_progress)
    return RoundLog.from_json(_label_randomness(report, seed, drawn))


async def _run_round(
    options: SimulationOptions,
    given: npt.NDArray[np.int64] | None,
    on_progress: ProgressCallback | None,
) -> dict[str, Any]:
    """The round log of one round on the options' dataset, or on the caller's values."""
    if given is None:
        return await run_simulation(options, on_progress=on_progress)
    async with PipelineSession(options) as session:
        report = await session.run_round(
            given,
            round_id=options.round_id,
            dataset_label="values given by the caller",
            on_progress=on_progress,
        )
    report["simulation"]["dataset_details"] = {"kind": "values", "n": int(given.size)}
    return report


def _default_hops(keys: Path | None) -> int:
    """``shuffledp simulate``'s: 3, or the hops of the key directory ``keys``."""
    return 3 if keys is None else load_public_directory(keys).n_hops


def _default_round(keys: Path | None) -> int:
    """``shuffledp simulate``'s: 1 with fresh keys, else a fresh random round id (a round id
    must not repeat under one key directory)."""
    return 1 if keys is None else 1 + secrets.randbelow(2**48)


def _blocking(
    function: Callable[P, Coroutine[Any, Any, T]], name: str, awaitable: str, doc: str
) -> Callable[P, T]:
    """``function`` run to completion in a loop of its own; RunningEventLoopError inside a
    running loop (checked before anything starts)."""

    @functools.wraps(function)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(function(*args, **kwargs))
        raise RunningEventLoopError(
            f"shuffledp.{name}() cannot run inside a running event loop (a notebook cell, an "
            f"async function): there, use `await shuffledp.{awaitable}(...)`, which "
            "takes the same parameters"
        )

    run.__name__ = run.__qualname__ = name
    run.__doc__ = doc
    return run


simulate = _blocking(
    simulate_async,
    "simulate",
    "simulate_async",
    """One full round through the multi-process pipeline (``shuffledp simulate``), synchronous.

    The parameters and the report are :func:`simulate_async`'s. Inside a running event loop (a
    notebook cell, an async function) it raises RunningEventLoopError naming
    ``await shuffledp.simulate_async(...)``: it cannot start a loop of its own there.
    """,
)


def _options(
    *,
    n: int | None,
    k: int | None,
    values: npt.ArrayLike | None,
    dataset: str,
    region: Region | None,
    seed: int | None,
    extra: dict[str, Any],
) -> tuple[SimulationOptions, npt.NDArray[np.int64] | None]:
    """The run's validated SimulationOptions, and the caller's values (None for a dataset)."""
    given = None
    if values is not None:
        given, k = _given_values(values, n=n, k=k, dataset=dataset, region=region)
        n = int(given.size)
    elif k is None:
        k = parse_dataset_spec(dataset).fixed_k(region) or DEFAULT_K
    options = SimulationOptions(n=n, k=k, dataset=dataset, region=region, seed=seed, **extra)
    return options, given


def _given_values(
    values: npt.ArrayLike, *, n: int | None, k: int | None, dataset: str, region: Region | None
) -> tuple[npt.NDArray[np.int64], int]:
    """The caller's values (integers in [0, k), at least 2) and k (default 15), checked against
    ``n`` and refused beside a ``dataset``."""
    if dataset != "synthetic" or region is not None:
        raise InvalidParameterError(
            f"give values or dataset, not both (got values and dataset {dataset!r})"
        )
    array = np.asarray(values)
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise InvalidParameterError(
            f"values must be a one-dimensional sequence of integers, got shape {array.shape} "
            f"and dtype {array.dtype}"
        )
    if array.size < 2:
        raise InvalidParameterError(f"values must hold at least 2 values, got {array.size}")
    if n is not None and n != array.size:
        raise InvalidParameterError(
            f"n must be the number of values ({array.size}) when values are given, got {n}"
        )
    k_value = DEFAULT_K if k is None else k
    require_int("k", k_value, 2)
    low, high = int(array.min()), int(array.max())
    if low < 0 or high >= k_value:
        raise InvalidParameterError(
            f"values must lie in [0, k) = [0, {k_value}), got {low if low < 0 else high}"
            + ("" if k is not None else " (k defaults to 15: pass k)")
        )
    return array.astype(np.int64), k_value


def _label_randomness(report: dict[str, Any], seed: SeedLike, drawn: int | None) -> dict[str, Any]:
    """``randomness_source`` (os, seeded, generator); for a Generator, ``randomness`` says the
    seed was drawn from it."""
    if isinstance(seed, np.random.Generator):
        report["randomness_source"] = "generator"
        report["randomness"] = (
            f"seeded-pcg64 from seed {drawn}, drawn from the caller's numpy Generator "
            "(reproducible simulation; not a privacy guarantee)"
        )
    else:
        report["randomness_source"] = "os" if seed is None else "seeded"
    return report


def run_round_in_process(
    values: npt.ArrayLike | None = None,
    *,
    n: int | None = None,
    k: int | None = None,
    eps0: float = 4.0,
    hops: int = 1,
    dataset: str = "synthetic",
    region: Region | None = None,
    seed: SeedLike = None,
    delta: float = 1e-6,
    eps: float | None = None,
    round_id: int = 0,
) -> InProcessRound:
    """One round on the fast in-process path: each value randomised with the clients' k-RR,
    ``hops`` uniform permutations with the hops' function, counted, and the analyzer's report
    (:func:`shuffledp.simulations.experiments.fastpath.run_round`). No broker, no processes, no
    encryption: nothing is lost or rejected, so ``n_received = n``; the histogram has the
    pipeline's distribution (tests/unit/simulations/test_fastpath.py checks it).

    ``values`` (integers in [0, k)) or a ``dataset`` spec with ``n`` (default: the dataset's
    size, 10,000 for the generators). ``seed``: None (OS CSPRNG), an int (the streams of
    ``shuffledp experiment --seed``: reproducible), or a numpy Generator (k-RR, permutations,
    the dataset and the Gaussian baseline all draw from it). ``delta``: the target delta;
    ``eps``: report the delta bracket at this eps instead. The report has ``path`` = "fast" and
    ``randomness_source``. InvalidParameterError naming the parameter for a bad value.
    """
    require_positive("eps0", eps0)
    require_int("hops", hops, 1, 64)
    require_int("round_id", round_id, 0)
    require_delta(delta)
    if eps is not None:
        require_eps(eps)
    source, baseline, label = _in_process_sources(seed)
    if values is None:
        drawn = resolve_dataset(dataset, n=n, k=k, region=region, rng=source)
        given, k_value, dataset_label = drawn.values, drawn.k, drawn.label
    else:
        given, k_value = _given_values(values, n=n, k=k, dataset=dataset, region=region)
        dataset_label = "values given by the caller"
    check_range(int(given.size), float(eps0))
    report = run_round(
        given,
        k=k_value,
        eps0=eps0,
        rng=source,
        target_delta=delta,
        eps=eps,
        hops=hops,
        round_id=round_id,
        baseline_rng=baseline,
        randomness_name=label,
    )
    report["dataset"] = dataset_label
    report["randomness_source"] = (
        "generator"
        if isinstance(seed, np.random.Generator)
        else ("os" if seed is None else "seeded")
    )
    return InProcessRound.from_json(report)


def _in_process_sources(seed: SeedLike) -> tuple[RandomSource, RandomState, str]:
    """(k-RR and permutation source, Gaussian baseline state, label) for ``seed``: a Generator
    drives everything; an int or None as ``shuffledp experiment`` (spec_sources)."""
    if isinstance(seed, np.random.Generator):
        source = GeneratorRandom(seed)
        return source, seed, f"{source.name} (the caller's; not a privacy guarantee)"
    return spec_sources(seed_value(seed))
