"""The round log records (simulations/pipeline/records.py): exact JSON round trips of what
`shuffledp simulate --json` prints, refusal of malformed logs with the rule named, and a
whole in-memory round whose published report parses back into its record."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shuffledp.analyzer.records import PublishedReport
from shuffledp.errors import InvalidParameterError
from shuffledp.simulations.pipeline.records import (
    ROUND_LOG_SCHEMA,
    ChaosSummary,
    HopKill,
    RoundLog,
    RoundTimings,
    SimulationInfo,
)
from tests.unit.analyzer.strategies import (
    as_stages,
    json_values,
    names,
    non_negative,
    reports,
    stage_logs,
)

counters = st.dictionaries(names, st.integers(0, 1000), max_size=3)


@st.composite
def chaos_summaries(draw: st.DrawFn) -> ChaosSummary:
    injected = draw(counters)
    return ChaosSummary(
        injected=injected,
        injected_total=sum(injected.values()),
        expected_rejections=draw(counters),
        hop0_rejections=draw(counters),
        redelivered_duplicates=draw(st.integers(-100, 100)),
        rejections_as_expected=draw(st.booleans()),
        all_reports_counted_once=draw(st.booleans()),
        hop_killed=HopKill(
            stage=draw(names),
            signal="SIGKILL",
            when=draw(names),
            last_progress_accepted=draw(st.none() | st.integers(0, 10**6)),
            process_was=draw(names),
            restarted=draw(st.booleans()),
            restart_seconds=draw(st.none() | non_negative),
        ),
    )


@st.composite
def round_logs(draw: st.DrawFn) -> RoundLog:
    timings = RoundTimings(
        **{key: draw(non_negative) for key in RoundTimings.KEYS},
    )
    simulation = SimulationInfo(
        broker=draw(names),
        n_hops=draw(st.integers(1, 64)),
        client_processes=draw(st.integers(1, 64)),
        dataset=draw(names),
        seed=draw(st.none() | st.integers(0, 2**63)),
        topic_prefix=draw(names),
        keys=draw(names),
        authentication=draw(names),
        deadline_seconds=draw(non_negative),
        min_batch=draw(st.integers(1, 10**6)),
        dataset_details=draw(st.none() | st.dictionaries(names, json_values, max_size=3)),
    )
    return RoundLog(
        report=draw(reports(with_truth=True)),
        stages=as_stages(draw(stage_logs)),
        timings=timings,
        simulation=simulation,
        warning=draw(st.none() | names),
        chaos=draw(st.none() | chaos_summaries()),
        randomness_source=draw(st.sampled_from([None, "os", "seeded", "generator"])),
    )


@settings(max_examples=100, deadline=None)
@given(round_logs())
def test_round_log_round_trips(log: RoundLog) -> None:
    data = log.to_json()
    assert next(iter(data)) == "schema" and data["schema"] == ROUND_LOG_SCHEMA
    tail = ["timings", "simulation"] + (["randomness_source"] if log.randomness_source else [])
    assert list(data)[-len(tail) :] == tail
    text = json.dumps(data, allow_nan=False)
    assert RoundLog.from_json(text) == log
    assert RoundLog.from_json(data).to_json() == data
    assert SimulationInfo.from_json(data["simulation"]) == log.simulation
    if log.chaos is not None:
        assert ChaosSummary.from_json(log.chaos.to_json()) == log.chaos
        assert HopKill.from_json(log.chaos.hop_killed.to_json()) == log.chaos.hop_killed


@settings(max_examples=5, deadline=None)
@given(round_logs())
def test_malformed_round_logs_are_refused(log: RoundLog) -> None:
    cases: list[tuple[str, Any, str]] = [
        ("schema", "shuffledp/report/1", "round log.schema must be 'shuffledp/round-log/1'"),
        ("simulation", None, "simulation must be a JSON object, got NoneType"),
        ("timings", {"total_seconds": 1.0}, "timings is missing key(s) 'setup_seconds'"),
        ("chaos", None, "chaos must be a JSON object"),
        ("warning", 3, "warning must be a string, got int 3"),
        ("stages", [], "stages must be a JSON object"),
        ("true_histogram", None, "true_histogram must be a list of counts"),
        ("randomness_source", "dice", "randomness_source must be one of ('os', 'seeded'"),
    ]
    for key, value, message in cases:
        data = copy.deepcopy(log.to_json())
        data[key] = value
        with pytest.raises(InvalidParameterError) as info:
            RoundLog.from_json(data)
        assert message in str(info.value), (key, str(info.value))
    without_truth = log.to_json()
    for key in ("true_histogram", "tv_distance", "IBU_method", "IBU_distribution", "baseline"):
        without_truth.pop(key, None)
    with pytest.raises(InvalidParameterError, match="round log is missing key"):
        RoundLog.from_json(without_truth)


def test_chaos_totals_and_kill_fields_are_checked() -> None:
    kill = HopKill(
        stage="hop-0",
        signal="SIGKILL",
        when="after 10",
        last_progress_accepted=10,
        process_was="running",
        restarted=True,
        restart_seconds=0.5,
    )
    with pytest.raises(InvalidParameterError, match=r"injected_total must be the sum .* 3, got 4"):
        ChaosSummary(
            injected={"replay": 1, "forged": 2},
            injected_total=4,
            expected_rejections={},
            hop0_rejections={},
            redelivered_duplicates=0,
            rejections_as_expected=True,
            all_reports_counted_once=True,
            hop_killed=kill,
        )
    data = kill.to_json()
    data["restarted"] = 1
    with pytest.raises(InvalidParameterError, match="restarted must be true or false, got 1"):
        HopKill.from_json(data)


# --- a whole round of the services in memory: the published report parses back ------------------


@pytest.mark.asyncio
async def test_an_in_memory_round_publishes_a_report_its_record_reads_back() -> None:
    from shuffledp.protocol.topics import report_topic
    from tests.unit.test_services_memory import K, N, clean_round, received

    outcome, broker, _ = await clean_round(["analyzer", "hop-2", "hop-1", "hop-0", "clients"], 31)
    published = PublishedReport.from_json(outcome.report)
    assert published.to_json() == outcome.report
    late = broker.connect()
    await late.subscribe(report_topic("test/sdp", 31))
    (retained,) = received(late)
    assert PublishedReport.from_json(retained.payload) == published  # the bytes on the topic
    report = published.report
    assert report.n_received == N == sum(report.histogram) and report.k == K
    assert report.privacy.n == N and report.privacy.guarantee is not None
    assert published.error is None and published.warning is None
    assert set(published.stages) == {"hop-0", "hop-1", "hop-2", "analyzer"}
    assert published.stages["analyzer"]["received"] == N


def test_the_fast_paths_report_is_a_report_plus_three_keys() -> None:
    """docs/report-schema.md, "The fast path's report": Report's keys plus path, dataset and
    randomness_source, nothing else."""
    from shuffledp import run_round_in_process
    from shuffledp.analyzer.records import Report

    result = run_round_in_process(n=500, k=4, seed=2)
    report = result.to_json()
    extra = {key: report.pop(key) for key in ("path", "dataset", "randomness_source")}
    assert extra["path"] == "fast" and extra["randomness_source"] == "seeded"
    record = Report.from_json(report)
    assert record.to_json() == report and record.utility is not None
    assert record == result.report
    assert type(result).from_json(result.to_json()) == result
