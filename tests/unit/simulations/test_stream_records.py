"""The stream's records (simulations/pipeline/stream/records.py): exact JSON round trips of
every line `shuffledp stream --json` prints, refusal of malformed lines with the rule named, and
the command's own output (through a stand-in pipeline session: no broker, no process) read back
into the records with known answers."""

from __future__ import annotations

import copy
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shuffledp.cli import main
from shuffledp.errors import InvalidParameterError
from shuffledp.simulations.pipeline.records import RoundLog
from shuffledp.simulations.pipeline.stream.budget import Budget
from shuffledp.simulations.pipeline.stream.epochs import iso_time
from shuffledp.simulations.pipeline.stream.records import (
    STREAM_SCHEMA,
    CompositionInfo,
    EmptyEpochsRecord,
    EpochRecord,
    StreamInput,
    StreamSummary,
    TopCells,
    WorstUser,
    read_stream_record,
)
from tests.unit.analyzer.strategies import names, non_negative
from tests.unit.simulations.test_round_log_records import round_logs
from tests.unit.simulations.test_stream import T0, FakeRounds, fake_round_log

DAY = 86_400
counts = st.integers(0, 10**6)


@st.composite
def spans(draw: st.DrawFn) -> tuple[str, str]:
    start = draw(st.integers(0, 2**34))
    return iso_time(start), iso_time(start + draw(st.integers(3_600, 10 * 365 * DAY)))


@st.composite
def epoch_heads(draw: st.DrawFn, reporting: int | None = None) -> dict[str, Any]:
    """The keys every epoch record has, consistent with each other."""
    start, end = draw(spans())
    users_reporting = draw(st.integers(0, 50)) if reporting is None else reporting
    exhausted = draw(st.integers(0, 50))
    active = max(1, users_reporting + exhausted + draw(st.integers(0, 5)))
    return {
        "epoch": draw(st.integers(0, 10**4)),
        "start": start,
        "end": end,
        "checkins": active + draw(st.integers(0, 100)),
        "users_active": active,
        "cut_off": draw(st.integers(0, exhausted)),
        "budget_exhausted": exhausted,
        "users_reporting": users_reporting,
    }


@st.composite
def run_epochs(draw: st.DrawFn) -> EpochRecord:
    head = draw(epoch_heads(reporting=draw(st.integers(2, 50))))
    log = draw(round_logs())
    report = replace(log.report, round=head["epoch"], n_expected=head["users_reporting"])
    charged = min(report.n_received, head["users_reporting"])
    lost = 0 < charged < head["users_reporting"]
    over = draw(st.integers(0, head["users_reporting"])) if lost else 0
    return EpochRecord(
        **head,
        status="run",
        charged_n=charged,
        over_budget_after_round=over,
        round_log=replace(log, report=report),
    )


@st.composite
def other_epochs(draw: st.DrawFn) -> EpochRecord:
    if draw(st.booleans()):
        return EpochRecord(**draw(epoch_heads()), status="skipped", reason=draw(names))
    head = draw(epoch_heads(reporting=draw(st.integers(2, 50))))
    return EpochRecord(**head, status="failed", error=draw(names), charged_n=1)


@st.composite
def empty_records(draw: st.DrawFn) -> EmptyEpochsRecord:
    first = draw(st.integers(1, 10**4))
    start, end = draw(spans())
    return EmptyEpochsRecord(
        first_epoch=first, last_epoch=first + draw(st.integers(0, 100)), start=start, end=end
    )


@st.composite
def worst_users(draw: st.DrawFn) -> WorstUser:
    epochs = sorted(draw(st.sets(st.integers(0, 10**4), min_size=1, max_size=20)))
    eps = draw(st.none() | non_negative)
    return WorstUser(
        eps=eps,
        delta=draw(st.floats(0.0, 1.0)),
        delta_at_budget_eps=draw(st.none() | st.floats(0.0, 1.0)),
        rounds=len(epochs),
        epochs=tuple(epochs),
        round_sizes=tuple(draw(st.integers(1, 10**6)) for _ in epochs),
        users_with_this_history=draw(st.integers(1, 10**6)),
        bound=draw(names),
        note=draw(names) if eps is None else None,
    )


compositions = st.builds(
    CompositionInfo,
    discretization=st.floats(1e-6, 1.0),
    families=st.lists(names, min_size=1, max_size=4).map(tuple),
    compositions=counts,
    stored_peak_mib=non_negative,
    evictions=counts,
    accountant_seconds=non_negative,
)


@st.composite
def stream_inputs(draw: st.DrawFn) -> StreamInput:
    rejected = draw(st.dictionaries(names, st.integers(0, 100), max_size=3))
    examples = {
        reason: tuple(draw(st.lists(st.integers(1, 10**6), max_size=3))) for reason in rejected
    }
    accepted = draw(counts)
    return StreamInput(
        source=draw(names),
        format=draw(st.sampled_from([None, "snap", "latlon"])),
        rows=accepted + sum(rejected.values()) + draw(st.integers(0, 3)),
        accepted=accepted,
        rejected=rejected,
        rejected_examples=examples,
        header=draw(st.none() | st.text(max_size=12)),
        truncated=draw(st.none() | names),
        outside_region=draw(counts),
    )


@st.composite
def summaries(draw: st.DrawFn) -> StreamSummary:
    run, below, refused, empty, failed = (draw(st.integers(0, 100)) for _ in range(5))
    budget = draw(
        st.none() | st.builds(Budget, eps=st.floats(0.01, 50), delta=st.floats(1e-12, 0.5))
    )
    cut, over = (0, 0) if budget is None else (draw(counts), draw(counts))
    users = draw(counts)
    late = draw(counts)
    reasons = {"below --min-users": below, "refused": refused}
    return StreamSummary(
        epochs=run + below + refused + empty + failed,
        epochs_run=run,
        epochs_skipped=below + refused,
        epochs_empty=empty,
        epochs_failed=failed,
        budget_cut_offs=cut,
        over_budget_after_round=over,
        skipped_by_reason={key: value for key, value in reasons.items() if value},
        stopped_at_max_epochs=draw(st.booleans()),
        checkins_in_epochs=draw(counts),
        outside_region=draw(counts),
        late=late,
        late_examples=tuple(draw(st.lists(names, max_size=min(late, 5)))),
        users=users,
        users_reported=draw(st.integers(0, users)),
        users_cut_off=cut + over,
        budget=budget,
        worst_user=draw(st.none() | worst_users()),
        composition=draw(compositions),
        region=draw(names),
        epoch_seconds=draw(st.integers(3_600, 10**8)),
        eps0=draw(st.floats(0.01, 20)),
        k=draw(st.integers(2, 1000)),
        seconds=draw(non_negative),
        input=draw(st.none() | stream_inputs()),
    )


stream_records = run_epochs() | other_epochs() | empty_records() | summaries()


# ----------------------------------------------------------------------------------------------
# Round trips


@settings(max_examples=150, deadline=None)
@given(stream_records)
def test_every_record_round_trips_through_its_json_text(
    record: EpochRecord | EmptyEpochsRecord | StreamSummary,
) -> None:
    data = record.to_json()
    assert list(data)[:2] == ["schema", "type"] and data["schema"] == STREAM_SCHEMA
    text = json.dumps(data, allow_nan=False)
    assert type(record).from_json(text) == record
    assert read_stream_record(text) == record
    assert read_stream_record(data).to_json() == data


@settings(max_examples=50, deadline=None)
@given(run_epochs())
def test_a_run_epoch_is_its_round_log_without_the_round_logs_schema(record: EpochRecord) -> None:
    data = record.to_json()
    assert record.round_log is not None
    log = record.round_log.to_json()
    assert {key: data[key] for key in log if key != "schema"} == {
        key: value for key, value in log.items() if key != "schema"
    }
    assert list(data)[-4:] == ["status", "charged_n", "over_budget_after_round", "top_cells"]
    # top_cells is derived from the log: the largest estimated counts and true counts.
    truth = np.asarray(data["true_histogram"])
    assert data["top_cells"]["true"][0] == int(np.argmax(truth))  # argmax: first of the ties
    assert truth[data["top_cells"]["true"]].tolist() == sorted(truth, reverse=True)[:3]


@settings(max_examples=30, deadline=None)
@given(worst_users(), compositions, stream_inputs())
def test_the_summarys_blocks_round_trip(
    worst: WorstUser, composition: CompositionInfo, stream_input: StreamInput
) -> None:
    assert WorstUser.from_json(json.dumps(worst.to_json())) == worst
    assert CompositionInfo.from_json(json.dumps(composition.to_json())) == composition
    assert StreamInput.from_json(json.dumps(stream_input.to_json())) == stream_input
    assert ("note" in worst.to_json()) == (worst.eps is None)


# ----------------------------------------------------------------------------------------------
# Refusals: missing key, wrong type, wrong schema, broken rules


def _examples() -> list[dict[str, Any]]:
    """One line of each kind: run (the stand-in round log), skipped, failed, empty."""
    log = fake_round_log(3, np.array([2, 1, 0, 0]), np.array([2, 1, 0, 0]))
    head: dict[str, Any] = {
        "epoch": 3,
        "start": "2010-03-01T00:00:00Z",
        "end": "2010-03-02T00:00:00Z",
        "checkins": 5,
        "users_active": 4,
        "cut_off": 1,
        "budget_exhausted": 1,
        "users_reporting": 3,
    }
    run = EpochRecord(**head, status="run", charged_n=3, over_budget_after_round=0, round_log=log)
    skipped = EpochRecord(**head, status="skipped", reason="round refused")
    failed = EpochRecord(**head, status="failed", error="boom", charged_n=1)
    empty = EmptyEpochsRecord(
        first_epoch=4, last_epoch=5, start="2010-03-02T00:00:00Z", end="2010-03-04T00:00:00Z"
    )
    return [r.to_json() for r in (run, skipped, failed, empty)]


@pytest.mark.parametrize(
    ("kind", "change", "message"),
    [
        ("run", {"schema": "shuffledp/round-log/1"}, "schema must be 'shuffledp/stream/1'"),
        ("run", {"type": "summary"}, "summary is missing key(s) 'epochs'"),
        ("run", {"status": "done"}, "status must be one of ('run', 'skipped', 'failed')"),
        ("run", {"users_active": "4"}, "users_active must be an integer, got '4'"),
        ("run", {"charged_n": 2}, "charged_n must be min(n_received, users_reporting) = 3, got 2"),
        ("run", {"top_cells": {"true": [3, 2, 1]}}, "top_cells must be the round log's"),
        ("run", {"round": 4}, "round must be epoch 3, got 4"),
        ("run", {"n_expected": 4}, "n_expected must be users_reporting = 3, got 4"),
        ("run", {"histogram": [2, 1, 0]}, "histogram must hold 4 counts"),
        ("run", {"start": "2010-03-01"}, "start must be a UTC time YYYY-MM-DDTHH:MM:SSZ"),
        ("run", {"end": "2010-02-28T00:00:00Z"}, "epoch.start must be before its end"),
        ("run", {"users_reporting": 4}, "users_reporting must be in users_active - budget"),
        ("run", {"extra": 1}, "unknown key(s) 'extra'"),
        ("skipped", {"reason": None}, "status 'skipped' needs reason, got None"),
        ("skipped", {"reason": 3}, "reason must be a string, got int 3"),
        ("failed", {"charged_n": 2}, "charged_n of a failed epoch must be 1"),
        ("failed", {"users_reporting": 0}, "users_reporting must be >= 2, got 0"),
        ("skipped", {"round": 3}, "unknown key(s) 'round'"),
        ("empty", {"epochs": 3}, "epochs must be 2, got 3"),
        ("empty", {"first_epoch": 0}, "first_epoch must be >= 1, got 0"),
        ("empty", {"status": "run"}, "status must be 'skipped', got 'run'"),
    ],
)
def test_malformed_epoch_lines_are_refused_with_the_rule(
    kind: str, change: dict[str, Any], message: str
) -> None:
    data = copy.deepcopy(
        dict(zip(["run", "skipped", "failed", "empty"], _examples(), strict=True))[kind]
    )
    data.update(change)
    with pytest.raises(InvalidParameterError) as info:
        read_stream_record(json.dumps(data))
    assert message in str(info.value)


@pytest.mark.parametrize("kind", ["run", "skipped", "failed", "empty"])
def test_a_missing_key_is_named(kind: str) -> None:
    data = dict(zip(["run", "skipped", "failed", "empty"], _examples(), strict=True))[kind]
    for key in list(data):
        if key in ("schema", "type", "status"):
            continue
        broken = {k: v for k, v in data.items() if k != key}
        with pytest.raises(InvalidParameterError, match="missing key") as info:
            read_stream_record(broken)
        assert repr(key) in str(info.value), key


def test_a_run_epoch_without_top_cells_is_refused() -> None:
    data = _examples()[0]
    del data["top_cells"]
    with pytest.raises(InvalidParameterError, match="missing key\\(s\\) 'top_cells'"):
        EpochRecord.from_json(data)


@settings(max_examples=10, deadline=None)
@given(summaries())
def test_malformed_summaries_are_refused_with_the_rule(summary: StreamSummary) -> None:
    cases: list[tuple[str, Any, str]] = [
        (
            "schema",
            "shuffledp/stream/0",
            "schema must be 'shuffledp/stream/1', got 'shuffledp/stream/0'",
        ),
        ("epochs", summary.epochs + 1, f"epochs must be the sum of epochs_* = {summary.epochs}"),
        ("late", -1, "late must be >= 0, got -1"),
        ("stopped_at_max_epochs", 1, "stopped_at_max_epochs must be true or false, got 1"),
        ("composition", None, "composition must be a JSON object"),
        ("budget", {"eps": 1.0}, "budget is missing key(s) 'delta'"),
        ("budget", {"eps": 1.0, "delta": 2.0}, "budget.delta must be in (0, 1), got 2.0"),
        ("worst_user", {"eps": 1.0}, "worst_user is missing key(s) 'delta'"),
        ("k", 1, "k must be >= 2, got 1"),
        ("input", {"source": "x"}, "input is missing key(s) 'format'"),
    ]
    for key, value, message in cases:
        data = copy.deepcopy(summary.to_json())
        data[key] = value
        with pytest.raises(InvalidParameterError) as info:
            read_stream_record(data)
        assert message in str(info.value), (key, str(info.value))
    wrong = {**summary.to_json(), "schema": "shuffledp/stream/0"}
    with pytest.raises(
        InvalidParameterError, match=re.escape("summary.schema must be 'shuffledp/stream/1'")
    ):
        StreamSummary.from_json(wrong)
    data = summary.to_json()
    del data["users"]
    with pytest.raises(InvalidParameterError, match="summary is missing key\\(s\\) 'users'"):
        StreamSummary.from_json(data)


def test_unknown_types_and_foreign_documents_are_refused() -> None:
    with pytest.raises(InvalidParameterError, match="type must be one of"):
        read_stream_record({"schema": STREAM_SCHEMA, "type": "epochs"})
    with pytest.raises(InvalidParameterError, match="schema must be 'shuffledp/stream/1'"):
        read_stream_record({"schema": "shuffledp/round-log/1", "round": 1})
    with pytest.raises(InvalidParameterError, match="must be JSON text"):
        read_stream_record("{not json")
    with pytest.raises(InvalidParameterError, match=re.escape("empty record.type must be 'empty'")):
        EmptyEpochsRecord.from_json(_examples()[0])


def test_construction_names_the_rule_and_the_value() -> None:
    run = read_stream_record(_examples()[0])
    assert isinstance(run, EpochRecord)
    with pytest.raises(InvalidParameterError, match="'skipped' must not have a round log, got a"):
        replace(run, status="skipped", reason="x", charged_n=None, over_budget_after_round=None)
    with pytest.raises(InvalidParameterError, match="over_budget_after_round must be 0 unless"):
        replace(run, over_budget_after_round=1)  # nothing was lost: nobody can be over
    with pytest.raises(InvalidParameterError, match="users_reporting must be >= 2, got 1"):
        replace(run, users_reporting=1)
    with pytest.raises(InvalidParameterError, match=re.escape("worst_user.epochs must increase")):
        WorstUser(
            eps=1.0, delta=1e-6, delta_at_budget_eps=None, rounds=2, epochs=(3, 3),
            round_sizes=(2, 2), users_with_this_history=1, bound="b",
        )  # fmt: skip
    with pytest.raises(
        InvalidParameterError, match=re.escape("worst_user.note must be given exactly")
    ):
        WorstUser(
            eps=None, delta=1e-6, delta_at_budget_eps=None, rounds=1, epochs=(0,),
            round_sizes=(2,), users_with_this_history=1, bound="b",
        )  # fmt: skip
    with pytest.raises(InvalidParameterError, match=re.escape("top_cells.true[0] must be >= 0")):
        TopCells(estimate=None, true=(-1,))
    with pytest.raises(
        InvalidParameterError, match=re.escape("input.accepted must be in rows - rejected")
    ):
        StreamInput(
            source="x", format="snap", rows=3, accepted=3, rejected={"bad-time": 1},
            rejected_examples={}, header=None, truncated=None, outside_region=0,
        )  # fmt: skip


def test_records_are_frozen() -> None:
    run = EpochRecord.from_json(_examples()[0])
    with pytest.raises(AttributeError):
        run.epoch = 4  # type: ignore[misc]
    assert isinstance(run.round_log, RoundLog) and run.epoch == 3


# ----------------------------------------------------------------------------------------------
# The command's output, through a stand-in pipeline session


class FakeSession:
    """Stands in for PipelineSession: no broker, no process; rounds from FakeRounds."""

    rounds = FakeRounds()

    def __init__(self, options: Any) -> None:
        self.options = options

    async def __aenter__(self) -> FakeSession:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    async def run_round(
        self, values: Any, *, round_id: int, dataset_label: str, on_progress: Any = None
    ) -> dict[str, Any]:
        return await self.rounds(values, round_id, dataset_label)


def _snap_file(path: Path) -> Path:
    """Day 0: u0, u1, u2 (u2 twice: its latest check-in counts); day 1: only u0 (skipped, below
    --min-users); days 2-3 nothing; day 4: u0, u1. Plus one row outside the box and one
    malformed row. Cells on the 2 x 2 unit square: (lat 0.25, lon 0.25) -> 0, (0.25, 0.75) -> 1,
    (0.75, 0.25) -> 2, (0.75, 0.75) -> 3."""
    rows = [
        ("u0", 0.1, 0.25, 0.25),
        ("u1", 0.2, 0.25, 0.75),
        ("u2", 0.3, 0.75, 0.25),
        ("u2", 0.4, 0.75, 0.75),
        ("u9", 0.5, 5.0, 5.0),
        ("u0", 1.5, 0.25, 0.25),
        ("u0", 4.2, 0.75, 0.75),
        ("u1", 4.3, 0.75, 0.75),
    ]
    lines = [
        f"{user}\t{iso_time(T0 + round(day * DAY))}\t{lat}\t{lon}\t{i}"
        for i, (user, day, lat, lon) in enumerate(rows)
    ]
    lines.insert(3, "broken line")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_the_commands_json_lines_read_back_into_the_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from shuffledp.simulations.pipeline import simulate

    FakeSession.rounds = FakeRounds()
    monkeypatch.setattr(simulate, "PipelineSession", FakeSession)
    dataset = _snap_file(tmp_path / "checkins.txt")
    box = ["--box", "0,1,0,1", "--grid", "2x2", "--epoch", "1d", "--quiet"]
    code = main(["stream", "--dataset", str(dataset), *box, "--json"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    records = [read_stream_record(line) for line in out]
    assert all(line == json.dumps(r.to_json()) for line, r in zip(out, records, strict=True))
    run0, skipped, empty, run4, summary = records
    assert isinstance(run0, EpochRecord) and run0.status == "run" and run0.round_log is not None
    assert run0.round_log.report.histogram == (1, 1, 0, 1)  # u2's latest check-in: cell 3
    assert (run0.users_active, run0.checkins, run0.charged_n) == (3, 4, 3)
    assert isinstance(skipped, EpochRecord) and skipped.status == "skipped"
    assert skipped.reason == "1 users can report, below the minimum of 2"
    assert isinstance(empty, EmptyEpochsRecord) and (empty.first_epoch, empty.last_epoch) == (2, 3)
    assert isinstance(run4, EpochRecord) and run4.round_log is not None
    assert run4.round_log.report.histogram == (0, 0, 0, 2)
    assert FakeSession.rounds.calls == [(0, [0, 1, 3]), (4, [3, 3])]
    assert isinstance(summary, StreamSummary) and summary.input is not None
    assert (summary.epochs, summary.epochs_run, summary.epochs_skipped) == (5, 2, 1)
    assert summary.skipped_by_reason == {"below --min-users": 1}
    assert (summary.input.rows, summary.input.accepted, summary.outside_region) == (9, 8, 1)
    assert summary.input.rejected == {"wrong-field-count": 1}
    assert summary.worst_user is not None and summary.worst_user.round_sizes == (3, 2)
    # Without --json the same records print as a table and the summary as text.
    FakeSession.rounds = FakeRounds()
    assert main(["stream", "--dataset", str(dataset), *box]) == 0
    text = capsys.readouterr().out
    assert "epochs: 5 (2 run, 1 skipped, 2 empty, 0 failed)" in text
    assert "2-3 2010-03-03       2010-03-05       no check-in in the region" in text
