"""The report records (analyzer/records.py): exact JSON round trips, and refusal of malformed
JSON with a message naming the key and the rule (docs/report-schema.md)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings

from shuffledp.analyzer.records import (
    REPORT_SCHEMA,
    AnalyzerTimings,
    Baseline,
    Estimate,
    PrivacyBlock,
    PublishedReport,
    Report,
    TVDistance,
    Utility,
)
from shuffledp.analyzer.report import build_report
from shuffledp.errors import InvalidParameterError
from tests.unit.analyzer.strategies import privacy_blocks, published_reports, reports


def through_text(data: dict[str, Any]) -> str:
    return json.dumps(data, allow_nan=False)


@settings(max_examples=150, deadline=None)
@given(privacy_blocks())
def test_privacy_block_round_trips(block: PrivacyBlock) -> None:
    data = block.to_json()
    assert PrivacyBlock.from_json(data) == block
    assert PrivacyBlock.from_json(through_text(data)) == block
    assert PrivacyBlock.from_json(data).to_json() == data
    # The mode decides which keys exist: target_delta and eps_lower exactly at a target delta.
    assert ("target_delta" in data) == ("eps_lower" in data) == (block.target_delta is not None)
    assert ("guarantee" in data) != ("error" in data)


@settings(max_examples=150, deadline=None)
@given(reports())
def test_report_round_trips(report: Report) -> None:
    data = report.to_json()
    text = through_text(data)
    assert Report.from_json(text) == report
    assert Report.from_json(data).to_json() == data
    assert json.loads(text) == data  # plain JSON values only
    for part in (report.estimate, report.privacy):
        assert type(part).from_json(part.to_json()) == part
    if report.utility is not None:
        utility = report.utility
        assert Utility.from_json(utility.to_json()) == utility
        assert TVDistance.from_json(utility.tv_distance.to_json()) == utility.tv_distance
        assert Baseline.from_json(utility.baseline.to_json()) == utility.baseline


@settings(max_examples=100, deadline=None)
@given(published_reports())
def test_published_report_round_trips(published: PublishedReport) -> None:
    data = published.to_json()
    assert data["schema"] == REPORT_SCHEMA and next(iter(data)) == "schema"
    assert PublishedReport.from_json(through_text(data)) == published
    assert PublishedReport.from_json(data).to_json() == data
    assert AnalyzerTimings.from_json(data["timings"]) == published.timings


def a_report(**changes: Any) -> dict[str, Any]:
    """A real published report (build_report with the truth), as JSON."""
    arguments: dict[str, Any] = {
        "round_id": 3,
        "k": 4,
        "eps0": 2.0,
        "histogram": [10, 20, 30, 40],
        "n_expected": 120,
        "rejected": {"duplicate": 1},
        "randomness_name": "seeded-pcg64(seed=1)",
        "true_histogram": [12, 18, 30, 40],
        "baseline_rng": 1,
        "eps": 1.0,
    }
    arguments.update(changes)
    published = PublishedReport(
        report=build_report(**arguments),
        stages={"hop-0": {"stage": "hop-0", "accepted": 100, "rejected": {"duplicate": 1}}},
        timings=AnalyzerTimings(analyzer_collect_seconds=0.25),
    )
    return published.to_json()


def test_a_built_report_is_the_json_the_analyzer_always_wrote_plus_schema() -> None:
    data = a_report()
    assert list(data) == [
        "schema",
        "round",
        "n_expected",
        "n_received",
        "rejected",
        "k",
        "eps0",
        "histogram",
        "estimate",
        "estimator",
        "privacy",
        "randomness",
        "true_histogram",
        "tv_distance",
        "IBU_method",
        "IBU_distribution",
        "baseline",
        "stages",
        "timings",
    ]
    assert list(data["privacy"]) == [
        "accountant",
        "mode",
        "eps",
        "delta",
        "delta_lower",
        "bound",
        "n",
        "colluders",
        "n_counted",
        "guarantee",
    ]
    assert list(data["tv_distance"]) == ["shuffle", "shuffle+INV", "IBU", "gaussian"]


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = data
        for key in parents:
            target = target[key]
        target[last] = value

    return change


def _drop(path: str) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = data
        for key in parents:
            target = target[key]
        del target[last]

    return change


MALFORMED = [
    (_drop("k"), "report is missing key(s) 'k'"),
    (_set("colour", "red"), "report has unknown key(s) 'colour'"),
    (_set("schema", "shuffledp/report/0"), "report.schema must be 'shuffledp/report/1'"),
    (_set("n_received", "100"), "n_received must be an integer, got '100'"),
    (_set("n_received", 99), "n_received must be the histogram's sum 100, got 99"),
    (_set("histogram", [10, 20, 30, -1]), "histogram[3] must be >= 0, got -1"),
    (_set("histogram", [10, 20, 70]), "histogram must hold 4 counts, got 3"),
    (_set("k", True), "k must be an integer, got True"),
    (_set("eps0", 0), "eps0 must be > 0, got 0"),
    (_set("rejected.duplicate", 1.5), "rejected['duplicate'] must be an integer, got 1.5"),
    (_set("privacy.delta", 1.5), "privacy.delta must be <= 1.0, got 1.5"),
    (_set("privacy.n", 7), "privacy.n must be n_counted - colluders = 100 - 0, got 7"),
    (_set("privacy.mode", "eps at target delta"), "privacy is missing key(s) 'target_delta'"),
    (_set("privacy.mode", "guess"), "privacy.mode must be 'eps at target delta' or"),
    (_drop("privacy.guarantee"), "privacy must hold exactly one of guarantee and error"),
    (_set("privacy.delta_lower", 0.5), "privacy.delta_lower must be <= privacy.delta"),
    (_set("estimate.distribution", [0.5, 0.5]), "estimate.counts must have the distribution's 2"),
    (_set("estimate.note", "x"), "estimate.note must be given exactly when there is no estimate"),
    (_drop("tv_distance.IBU"), "tv_distance is missing key(s) 'IBU'"),
    (_set("tv_distance.IBU", "0.1"), "tv_distance['IBU'] must be a number, got str '0.1'"),
    (_set("baseline.note", "why"), "baseline has unknown key(s) 'eps', 'delta', 'sigma'"),
    (_set("IBU_method", None), "IBU_method and IBU_distribution must both be given"),
    (_set("true_histogram", [1, 2]), "true_histogram must have k = 4 bins, got 2"),
    (_set("stages.hop-0.rejected", {"duplicate": -1}), "stages['hop-0'].rejected['duplicate']"),
    (_set("stages.hop-0.seconds", float("inf")), "stages['hop-0'].seconds must be finite"),
    (_set("timings.analyzer_collect_seconds", -1.0), "must be >= 0.0, got -1.0"),
    (_set("error", "refused"), None),  # an error alone is a valid report ...
]


@pytest.mark.parametrize(("change", "message"), [m for m in MALFORMED if m[1] is not None])
def test_malformed_report_is_refused_with_the_rule(
    change: Callable[[dict[str, Any]], None], message: str
) -> None:
    data = a_report()
    PublishedReport.from_json(copy.deepcopy(data))  # the unchanged report is accepted
    change(data)
    with pytest.raises(InvalidParameterError) as info:
        PublishedReport.from_json(data)
    assert message in str(info.value)


def test_error_and_warning_together_are_refused() -> None:
    data = a_report()
    data["error"] = "the round was refused: too few"
    assert PublishedReport.from_json(data).error == "the round was refused: too few"
    data["warning"] = "late"
    with pytest.raises(InvalidParameterError, match="at most one of error and warning"):
        PublishedReport.from_json(data)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", "report must be a JSON object, got list"),
        ("{", "report must be JSON text"),
        ('{"round": NaN}', "report must be JSON text: NaN"),
        (b"\xff", "report must be JSON text"),
    ],
)
def test_text_that_is_not_a_json_object_is_refused(text: str | bytes, message: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        PublishedReport.from_json(text)
    assert message in str(info.value)


def test_records_are_immutable_and_copy_their_inputs() -> None:
    rejected = {"duplicate": 1}
    report = build_report(
        round_id=1,
        k=2,
        eps0=1.0,
        histogram=[3, 4],
        n_expected=7,
        rejected=rejected,
        randomness_name="x",
        eps=1.0,
    )
    rejected["duplicate"] = 5
    assert report.rejected["duplicate"] == 1
    with pytest.raises(TypeError):
        report.rejected["duplicate"] = 2  # type: ignore[index]
    with pytest.raises(AttributeError):
        report.k = 3  # type: ignore[misc]


def test_privacy_keys_exist_by_mode() -> None:
    """The mode decides the keys: a given-eps block refuses target-delta keys and vice versa."""
    block = PrivacyBlock(
        mode="delta at given eps",
        eps=1.0,
        delta=None,
        delta_lower=None,
        bound=None,
        n=1,
        error="too few",
    )
    data = block.to_json()
    assert "target_delta" not in data and "eps_lower" not in data
    data["target_delta"] = 1e-6
    with pytest.raises(InvalidParameterError, match="unknown key"):
        PrivacyBlock.from_json(data)
    with pytest.raises(InvalidParameterError, match="target_delta must be given exactly"):
        PrivacyBlock(
            mode="delta at given eps",
            eps=1.0,
            delta=None,
            delta_lower=None,
            bound=None,
            n=1,
            error="too few",
            target_delta=1e-6,
        )
    with pytest.raises(InvalidParameterError, match=r"privacy.n must be >= 2 for a guarantee"):
        PrivacyBlock(
            mode="delta at given eps",
            eps=1.0,
            delta=0.1,
            delta_lower=0.0,
            bound="x",
            n=1,
            guarantee="g",
        )
    assert Estimate.from_json('{"distribution": null, "counts": null, "note": "none"}').note == (
        "none"
    )
