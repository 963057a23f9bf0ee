"""`shuffledp account --json` prints one shape whatever is asked (accountant/records.py,
docs/report-schema.md): the same keys at the top, in ``mechanism``, ``query`` and in every
result, for tight, one bound, all bounds, and --rounds; and the records round-trip exactly."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shuffledp.accountant.bounds.base import BoundKind
from shuffledp.accountant.records import (
    ACCOUNT_SCHEMA,
    AccountAnswer,
    BoundResult,
    MechanismRecord,
    Query,
    WitnessDataset,
)
from shuffledp.accountant.registry import BOUND_NAMES
from shuffledp.cli.main import main
from shuffledp.errors import InvalidParameterError

BASE = ["account", "--n", "100", "--k", "10", "--eps0", "2"]
RESULT_KEYS = {
    "bound",
    "kind",
    "guarantee",
    "rounds",
    "composition",
    "eps",
    "delta",
    "eps_lower",
    "eps_upper",
    "delta_lower",
    "delta_upper",
    "upper_from",
    "lower_from",
    "ratio",
    "upper_skipped",
    "dataset",
    "nx0",
    "delta_x0_over_x1",
    "delta_x1_over_x0",
    "pair",
    "order",
    "error",
}


def printed(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main([*BASE, *args, "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    data = json.loads(out)
    assert isinstance(data, dict)
    # The printed document is exactly what its record writes.
    assert AccountAnswer.from_json(out).to_json() == data
    return data


def assert_one_shape(shapes: dict[str, dict[str, Any]], target: list[str]) -> None:
    """Every document has the same keys at the top, in ``mechanism``, ``query`` and in every
    result, and echoes the asked value in every answer that has numbers."""
    asked = "eps" if target[0] == "--eps" else "delta"
    for name, data in shapes.items():
        assert list(data) == ["schema", "mechanism", "query", "results"], name
        assert data["schema"] == ACCOUNT_SCHEMA
        assert data["mechanism"] == {"name": "shuffled k-RR", "n": 100, "k": 10, "eps0": 2.0}
        assert set(data["query"]) == {"eps", "delta", "bound", "rounds", "nx0"}, name
        for result in data["results"]:
            assert set(result) == RESULT_KEYS, (name, result["bound"])
            if result["error"] is None:
                assert result[asked] == float(target[1])


@pytest.mark.parametrize("target", [["--eps", "1"], ["--delta", "1e-6"]])
def test_one_shape_for_tight_all_one_bound_and_rdp_rounds(
    capsys: pytest.CaptureFixture[str], target: list[str]
) -> None:
    shapes = {
        "tight": printed(capsys, *target),
        "all": printed(capsys, *target, "--bound", "all", "--nx0", "5"),
        "all without nx0": printed(capsys, *target, "--bound", "all"),
        "single-bin": printed(capsys, *target, "--bound", "single-bin", "--nx0", "5"),
        "rdp rounds": printed(capsys, *target, "--bound", "renyi-girgis", "--rounds", "2"),
    }
    assert_one_shape(shapes, target)
    assert [r["bound"] for r in shapes["all"]["results"]] == list(BOUND_NAMES)
    tight = shapes["tight"]["results"][0]
    assert (tight["rounds"], tight["composition"]) == (1, "none")
    assert tight["upper_from"] is not None
    assert shapes["rdp rounds"]["results"][0]["composition"] == "rdp"


@pytest.mark.slow  # the PLD composition of tight's pair at n = 100, k = 10: 10-20 s
def test_pld_rounds_keep_the_shape_and_eps_is_not_below_one_round(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The composed answer has the one shape; and its eps is not below the one-round eps_lower,
    which is below the true one-round eps(delta), which 3 rounds can only raise (this was
    tests/unit/cli/test_cli.py's test_rounds_eps_not_below_one_round_lower_bound, the same
    command). One target: tests/unit/cli/test_cli.py's --rounds test checks the echo of --eps."""
    target = ["--delta", "1e-4"]
    data = printed(capsys, *target, "--rounds", "3")
    assert_one_shape({"rounds": data}, target)
    rounds = data["results"][0]
    assert (rounds["rounds"], rounds["composition"]) == (3, "pld")
    assert rounds["pair"] is not None
    one = printed(capsys, *target)["results"][0]
    assert rounds["eps"] >= one["eps_lower"]


def test_refused_bounds_keep_the_shape_with_null_numbers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = printed(capsys, "--eps", "0.1", "--bound", "all")
    refused = {r["bound"]: r for r in data["results"] if r["error"] is not None}
    assert set(refused) >= {"erlingsson", "single-bin", "biswas-literal"}
    for result in refused.values():
        assert result["eps"] is None and result["delta"] is None
        assert result["kind"] in {str(kind) for kind in BoundKind}


def test_tight_names_its_witness_dataset(capsys: pytest.CaptureFixture[str]) -> None:
    (tight,) = printed(capsys, "--eps", "1")["results"]
    assert tight["lower_from"] == "family-f(a=0)"
    assert tight["dataset"] == {"family": "F", "a": 0}


finite = st.floats(min_value=0.0, max_value=1e3, allow_nan=False, allow_infinity=False)
numbers = st.none() | finite | st.just(math.inf)
texts = st.text(min_size=1, max_size=10)


@st.composite
def answers(draw: st.DrawFn) -> AccountAnswer:
    at_eps = draw(st.booleans())
    asked = draw(finite) if at_eps else draw(st.floats(1e-12, 0.5))
    rounds = draw(st.integers(1, 5))
    composition = "none" if rounds == 1 else draw(st.sampled_from(["pld", "rdp"]))
    results = []
    for _ in range(draw(st.integers(1, 4))):
        common: dict[str, Any] = {
            "bound": draw(texts),
            "kind": str(draw(st.sampled_from(list(BoundKind)))),
            "guarantee": draw(texts),
            "rounds": rounds,
            "composition": composition,
        }
        if draw(st.booleans()):
            results.append(BoundResult(**common, error=draw(texts)))
            continue
        low, high = sorted(draw(st.tuples(finite, finite)))
        results.append(
            BoundResult(
                **common,
                eps=asked if at_eps else draw(numbers.filter(lambda v: v is not None)),
                delta=draw(st.floats(0.0, 1.0)) if at_eps else asked,
                eps_lower=None if at_eps else low,
                eps_upper=None if at_eps else high,
                delta_lower=min(low, 1.0) if at_eps else None,
                delta_upper=min(high, 1.0) if at_eps else None,
                upper_from=draw(st.none() | texts),
                lower_from=draw(st.none() | texts),
                ratio=draw(numbers),
                upper_skipped=draw(st.none() | texts),
                dataset=draw(
                    st.none()
                    | st.builds(
                        WitnessDataset,
                        family=st.sampled_from(["F", "single-bin"]),
                        size=st.integers(0, 10**6),
                    )
                ),
                nx0=draw(st.none() | st.integers(0, 10**6)),
                delta_x0_over_x1=draw(numbers),
                delta_x1_over_x0=draw(numbers),
                pair=draw(st.none() | texts),
                order=draw(st.none() | st.integers(2, 256)),
            )
        )
    return AccountAnswer(
        mechanism=MechanismRecord(
            n=draw(st.integers(2, 10**7)),
            k=draw(st.integers(2, 100)),
            eps0=draw(st.floats(0.01, 50)),
        ),
        query=Query(
            eps=asked if at_eps else None,
            delta=None if at_eps else asked,
            bound=draw(texts),
            rounds=rounds,
            nx0=draw(st.none() | st.integers(0, 100)),
        ),
        results=tuple(results),
    )


@settings(max_examples=150, deadline=None)
@given(answers())
def test_account_records_round_trip(answer: AccountAnswer) -> None:
    data = answer.to_json()
    text = json.dumps(data)  # Infinity where a bound certifies no finite eps
    assert AccountAnswer.from_json(text) == answer
    assert AccountAnswer.from_json(data).to_json() == data
    for result in answer.results:
        assert BoundResult.from_json(result.to_json()) == result
        assert set(result.to_json()) == RESULT_KEYS


def a_document() -> dict[str, Any]:
    return AccountAnswer(
        mechanism=MechanismRecord(n=100, k=10, eps0=2.0),
        query=Query(eps=1.0, delta=None, bound="tight"),
        results=(
            BoundResult(
                bound="tight",
                kind="bracket",
                guarantee="g",
                eps=1.0,
                delta=2e-8,
                delta_lower=1e-8,
                delta_upper=2e-8,
                dataset=WitnessDataset(family="F", size=0),
            ),
        ),
    ).to_json()


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("schema",), "shuffledp/account/2", "account.schema must be 'shuffledp/account/1'"),
        (("mechanism", "n"), 1, "mechanism.n must be >= 2, got 1"),
        (("query", "delta"), 1e-6, "query must give exactly one of eps and delta"),
        (("query", "rounds"), 0, "query.rounds must be >= 1, got 0"),
        (("results", 0, "kind"), "maybe", "results[].kind must be one of"),
        (("results", 0, "eps"), 2.0, "results[].eps must be the query's 1.0, got 2.0"),
        (("results", 0, "delta_lower"), 1.0, "results[].delta_lower must be <= delta_upper"),
        (("results", 0, "delta"), float("nan"), "results[].delta must be finite, got nan"),
        (("results", 0, "composition"), "pld", "composition must be 'none' exactly for one round"),
        (("results", 0, "error"), "refused", "results[] with an error must not give numbers"),
        (("results", 0, "dataset", "family"), "G", "dataset.family must be one of"),
        (("results", 0, "nx0"), "5", "results[].nx0 must be an integer, got '5'"),
        (("results",), [], "results must hold at least one bound's answer"),
        (("results",), {}, "results must be a list"),
    ],
)
def test_malformed_account_json_is_refused(path: tuple[Any, ...], value: Any, message: str) -> None:
    data = a_document()
    target: Any = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(InvalidParameterError) as info:
        AccountAnswer.from_json(data)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["results"][0].pop("pair"), "results[] is missing key(s) 'pair'"),
        (lambda d: d["query"].update(extra=1), "query has unknown key(s) 'extra'"),
        (lambda d: d.pop("mechanism"), "account is missing key(s) 'mechanism'"),
    ],
)
def test_missing_and_unknown_keys_are_refused(change: Any, message: str) -> None:
    data = a_document()
    change(data)
    with pytest.raises(InvalidParameterError) as info:
        AccountAnswer.from_json(data)
    assert message in str(info.value)
