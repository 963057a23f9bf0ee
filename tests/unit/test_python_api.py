"""The Python API (shuffledp.simulate, simulate_async, run_round_in_process, the accountant's
exports): every ``python`` block of docs/python-api.md runs as it is, and the API's promises.

A block preceded by ``<!-- test: integration -->`` starts processes (the embedded broker, the
components) and is marked integration. A block containing ``await`` is compiled as a notebook
cell is (top-level await) and run inside a running event loop.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
from typing import Any

import numpy as np
import pytest

import shuffledp
from shuffledp.simulations.experiments.fastpath import RoundSpec, run_spec
from tests.paths import REPO_ROOT
from tests.unit.simulations.test_stream import fake_round_log

DOC = REPO_ROOT / "docs" / "python-api.md"
_BLOCK = re.compile(
    r"(?:<!-- test: (?P<marks>[a-z, -]+) -->\n)?```python\n(?P<code>.*?)^```", re.S | re.M
)


def _blocks() -> list[Any]:
    text = DOC.read_text(encoding="utf-8")
    params = []
    for match in _BLOCK.finditer(text):
        line = text.count("\n", 0, match.start("code")) + 1
        marks = [m.strip() for m in (match.group("marks") or "").split(",") if m.strip()]
        params.append(
            pytest.param(
                line,
                match.group("code"),
                id=f"line-{line}",
                marks=[getattr(pytest.mark, mark) for mark in marks],
            )
        )
    return params


BLOCKS = _blocks()


def test_the_page_has_its_examples() -> None:
    assert len(BLOCKS) >= 7
    assert DOC.read_text(encoding="utf-8").count("```python") == len(BLOCKS)


@pytest.mark.parametrize(("line", "code"), BLOCKS)
def test_every_example_of_the_page_runs(line: int, code: str) -> None:
    # Padded so that a failure's traceback points at the line of docs/python-api.md.
    compiled = compile(
        "\n" * (line - 1) + code, str(DOC), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    )
    namespace: dict[str, Any] = {"__name__": "__python_api_example__"}
    if compiled.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(compiled, namespace))  # a notebook cell: inside a running loop
    else:
        exec(compiled, namespace)


def test_simulate_refuses_inside_a_running_loop_before_anything_starts() -> None:
    async def cell() -> None:
        # n=1 is invalid too: the loop is checked first, so nothing is validated or started.
        shuffledp.simulate(n=1)

    with pytest.raises(shuffledp.RunningEventLoopError) as caught:
        asyncio.run(cell())
    assert str(caught.value) == (
        "shuffledp.simulate() cannot run inside a running event loop (a notebook cell, an async "
        "function): there, use `await shuffledp.simulate_async(...)`, which takes the same "
        "parameters"
    )
    assert isinstance(caught.value, RuntimeError)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n": 1}, "n must be >= 2, got 1"),
        ({"n": 300, "hops": 0}, "hops must be in [1, 64], got 0"),
        ({"n": 300, "delta": 2.0}, "delta must be in (0, 1), got 2.0"),
        ({"n": 300, "seed": -3}, "seed must be >= 0, got -3"),
        ({"values": [0, 1, 7], "k": 5}, "values must lie in [0, k) = [0, 5), got 7"),
        ({"values": [0, 1, 2], "n": 4}, "n must be the number of values (3) when values are given"),
        ({"values": [0, 1], "dataset": "uniform"}, "give values or dataset, not both"),
    ],
)
def test_simulate_names_the_parameter_before_starting_anything(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(shuffledp.InvalidParameterError, match=re.escape(message)):
        shuffledp.simulate(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"eps0": 0.0}, "eps0 must be > 0, got 0.0"),
        ({"hops": 65}, "hops must be in [1, 64], got 65"),
        ({"eps": -1.0}, "eps must be >= 0, got -1.0"),
        ({"seed": 1.5}, "seed must be None (the OS CSPRNG), an integer >= 0 or a numpy Generator"),
        ({"values": [0, 20]}, "values must lie in [0, k) = [0, 15), got 20 (k defaults to 15"),
    ],
)
def test_run_round_in_process_names_the_parameter(kwargs: dict[str, Any], message: str) -> None:
    kwargs.setdefault("n", None if "values" in kwargs else 100)
    with pytest.raises(shuffledp.InvalidParameterError, match=re.escape(message)):
        shuffledp.run_round_in_process(**kwargs)


def test_an_int_seed_is_the_experiments_stream() -> None:
    values = np.arange(1_000) % 6
    ours = shuffledp.run_round_in_process(values, k=6, eps0=1.5, seed=5, eps=1.0)
    theirs = run_spec(RoundSpec(values=values, k=6, eps0=1.5, seed=5, eps=1.0))
    assert list(ours.report.histogram) == theirs["histogram"]
    assert ours.to_json()["tv_distance"] == theirs["tv_distance"]
    assert ours.randomness_source == "seeded"


def test_a_generator_drives_the_in_process_round() -> None:
    values = np.arange(1_000) % 6
    runs = [
        shuffledp.run_round_in_process(
            values, k=6, eps0=1.5, eps=1.0, seed=np.random.default_rng(s)
        )
        for s in (8, 8, 9)
    ]
    assert runs[0].report.histogram == runs[1].report.histogram
    # Two independent seeds give the same 6-bin histogram of 1,000 k-RR reports with
    # probability far below 1e-6.
    assert runs[0].report.histogram != runs[2].report.histogram
    assert runs[0].report.randomness == (
        "numpy-generator(PCG64) (the caller's; not a privacy guarantee)"
    )
    # The dataset is drawn from the Generator too.
    a = shuffledp.run_round_in_process(n=500, k=5, eps=1.0, seed=np.random.default_rng(3))
    b = shuffledp.run_round_in_process(n=500, k=5, eps=1.0, seed=np.random.default_rng(3))
    assert a.report.utility is not None and b.report.utility is not None
    assert a.report.utility.true_histogram == b.report.utility.true_histogram
    assert a.report.histogram == b.report.histogram


def test_the_package_lists_its_names() -> None:
    assert set(shuffledp.__all__) <= set(dir(shuffledp))
    for name in shuffledp.__all__:
        assert getattr(shuffledp, name) is not None
    with pytest.raises(AttributeError, match="has no attribute 'simulat'"):
        _ = shuffledp.simulat


def test_simulate_passes_the_flags_as_the_command_line_does(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """The options simulate() builds (the launcher replaced by a recorder: no process starts):
    the defaults of ``shuffledp simulate`` (hops from --keys, a fresh round id with --keys) and
    the names mapped (delta -> target delta, a Generator -> a seed drawn from it)."""
    from shuffledp.randomness import seed_value
    from shuffledp.security.keys import init_key_directory
    from shuffledp.simulations.pipeline import api
    from shuffledp.simulations.pipeline.simulate import SimulationOptions

    seen: list[SimulationOptions] = []

    async def recorder(options: SimulationOptions, **_: Any) -> dict[str, Any]:
        seen.append(options)
        truth = np.full(options.k, 20)
        return fake_round_log(1, truth, truth).to_json()

    monkeypatch.setattr(api, "run_simulation", recorder)
    init_key_directory(tmp_path / "keys", hops=2)
    report = shuffledp.simulate(n=300, keys=tmp_path / "keys", auth=False, delta=1e-7)
    fresh = shuffledp.simulate(n=300, seed=np.random.default_rng(11), eps=0.5)
    with_keys, plain = seen
    assert (with_keys.hops, with_keys.target_delta, with_keys.k) == (2, 1e-7, 15)
    assert with_keys.round_id > 1  # a fresh random id (1 with probability 2^-48)
    assert report.randomness_source == "os"
    assert (plain.hops, plain.round_id, plain.eps) == (3, 1, 0.5)
    assert plain.seed == seed_value(np.random.default_rng(11))
    assert fresh.randomness_source == "generator"
    assert f"from seed {plain.seed}, drawn from the caller's numpy Generator" in (
        fresh.report.randomness
    )
