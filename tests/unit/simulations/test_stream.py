"""`shuffledp stream`: epochs, order, reports, budget cut-offs (pure, with a stand-in round
runner); the command over the real pipeline is in tests/integration/test_stream_pipeline.py.

The stand-in round runner returns what the pipeline's report holds that the stream reads
(n_received, histogram, estimate counts, privacy); the pure tests check the stream's own
decisions. Known answers are derived independently: epoch boundaries with datetime arithmetic,
the budget cut-off epoch with the accountant's compose() (dp-accounting's self_compose, not the
stream's own composition code), active users per epoch by reading the file with plain Python.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from shuffledp.accountant import ShuffledKRR, compose
from shuffledp.analyzer.records import (
    MODE_AT_TARGET,
    Baseline,
    Estimate,
    PrivacyBlock,
    Report,
    TVDistance,
    Utility,
)
from shuffledp.cli import main
from shuffledp.cli.stream import format_record, format_summary
from shuffledp.errors import InvalidParameterError
from shuffledp.simulations.data.checkins import CheckIn
from shuffledp.simulations.data.regions import Region
from shuffledp.simulations.pipeline.records import RoundLog, RoundTimings, SimulationInfo
from shuffledp.simulations.pipeline.stream import (
    EPOCH_ORIGIN,
    STREAM_DISCRETIZATION,
    STREAM_SCHEMA,
    Budget,
    EmptyEpochs,
    Epoch,
    EpochAssembler,
    InputCounts,
    StreamError,
    StreamEvent,
    StreamRecord,
    StreamRoundRefusedError,
    StreamRunner,
    StreamSettings,
    StreamSummary,
    epoch_number,
    events_from_checkins,
    parse_budget,
    parse_epoch_length,
    read_stream_record,
    sorted_events,
)
from shuffledp.simulations.pipeline.stream.records import StreamInput
from tests.paths import SHARED_DATA

DATA = SHARED_DATA
PARIS_SNAP = DATA / "gowalla-paris-checkins.txt"
PARIS_LATLON = DATA / "gowalla-paris-latlon.csv"

DAY = 86_400
#: A 2 x 2 grid on the unit square: k = 4 (cell = row * 2 + column, row 0 the south).
SQUARE = Region(
    name="square", lat_min=0.0, lat_max=1.0, lon_min=0.0, lon_max=1.0, columns=2, rows=2
)
#: Midnight UTC of Monday 2010-03-01, an epoch boundary for daily and weekly epochs.
T0 = int(datetime(2010, 3, 1, tzinfo=UTC).timestamp())


def _event(user: str, day: float, cell: int = 0) -> StreamEvent:
    return StreamEvent(user, T0 + round(day * DAY), cell)


class FakeRounds:
    """Stands in for PipelineSession.run_round: records each round's values; loses ``lose``
    reports; raises ``raise_in[round]`` if given. Returns a valid round log (RoundLog's JSON,
    as run_round does) whose counts are the received values' and whose privacy is a fixed
    stand-in (the stream reads n_received from it, never its eps)."""

    def __init__(self, *, k: int = 4, lose: int = 0, raise_in: dict[int, Exception] | None = None):
        self.k, self.lose = k, lose
        self.raise_in = raise_in or {}
        self.calls: list[tuple[int, list[int]]] = []

    async def __call__(
        self, values: npt.NDArray[np.int64], round_id: int, label: str
    ) -> dict[str, Any]:
        self.calls.append((round_id, values.tolist()))
        if round_id in self.raise_in:
            raise self.raise_in[round_id]
        received = values[: max(0, values.size - self.lose)]
        histogram = np.bincount(received, minlength=self.k)
        return fake_round_log(
            round_id, histogram, np.bincount(values, minlength=self.k), label
        ).to_json()


def fake_round_log(
    round_id: int,
    histogram: npt.NDArray[np.int64],
    truth: npt.NDArray[np.int64],
    label: str = "fake",
) -> RoundLog:
    """A round log of these counts: the estimate is the histogram itself, privacy a stand-in."""
    n, k = int(histogram.sum()), histogram.size
    if n >= 2:
        privacy = PrivacyBlock(
            mode=MODE_AT_TARGET,
            eps=1.0,
            delta=1e-6,
            delta_lower=1e-7,
            bound="stand-in",
            n=n,
            target_delta=1e-6,
            eps_lower=0.9,
            guarantee="a stand-in guarantee (unit test)",
        )
    else:
        privacy = PrivacyBlock(
            mode=MODE_AT_TARGET, eps=None, delta=None, delta_lower=None, bound=None, n=n,
            target_delta=1e-6, error="fewer than 2 reports",
        )  # fmt: skip
    counts = tuple(float(c) for c in histogram)
    estimate = (
        Estimate(distribution=tuple(c / n for c in counts), counts=counts)
        if n
        else Estimate(distribution=None, counts=None, note="nothing received")
    )
    utility = Utility(
        true_histogram=tuple(int(c) for c in truth),
        tv_distance=TVDistance(shuffle=None, shuffle_inv=0.0, ibu=None, gaussian=None),
        ibu_method=None,
        ibu_distribution=None,
        baseline=Baseline(note="not computed by the stand-in"),
    )
    report = Report(
        round=round_id,
        n_expected=int(truth.sum()),
        n_received=n,
        rejected={},
        k=k,
        eps0=2.0,
        histogram=tuple(int(c) for c in histogram),
        estimate=estimate,
        estimator="shuffle+INV",
        privacy=privacy,
        randomness="stand-in",
        utility=utility,
    )
    return RoundLog(
        report=report,
        stages={},
        timings=RoundTimings(**{key: 0.0 for key in RoundTimings.KEYS}),
        simulation=SimulationInfo(
            broker="none (unit test)",
            n_hops=1,
            client_processes=1,
            dataset=label,
            seed=None,
            topic_prefix="test",
            keys="fresh",
            authentication="none",
            deadline_seconds=1.0,
            min_batch=1,
        ),
    )


def _run_typed(
    events: Sequence[StreamEvent],
    rounds: FakeRounds,
    *,
    failed: tuple[type[BaseException], ...] = (),
    **settings: Any,
) -> tuple[list[StreamRecord], StreamSummary, StreamRunner]:
    records: list[StreamRecord] = []
    options = {"region": SQUARE, "epoch_seconds": DAY, "eps0": 2.0, **settings}
    runner = StreamRunner(
        StreamSettings(**options), rounds, on_record=records.append, failed=failed
    )
    summary = asyncio.run(runner.run(events))
    return records, summary, runner


def _run(
    events: Sequence[StreamEvent],
    rounds: FakeRounds,
    *,
    failed: tuple[type[BaseException], ...] = (),
    **settings: Any,
) -> tuple[list[dict[str, Any]], dict[str, Any], StreamRunner]:
    """The stream's records and summary as `shuffledp stream --json` prints them; each one
    reads back (from its text) into the typed record the runner emitted."""
    typed, summary, runner = _run_typed(events, rounds, failed=failed, **settings)
    records = [record.to_json() for record in typed]
    for data, record in zip(records, typed, strict=True):
        assert read_stream_record(json.dumps(data, allow_nan=False)) == record
    assert read_stream_record(json.dumps(summary.to_json(), allow_nan=False)) == summary
    return records, summary.to_json(), runner


# ----------------------------------------------------------------------------------------------
# Options


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("7d", 7 * DAY), ("12h", 12 * 3600), ("2w", 14 * DAY), (" 30D ", 30 * DAY)],
)
def test_epoch_lengths(text: str, seconds: int) -> None:
    assert parse_epoch_length(text) == seconds


@pytest.mark.parametrize("text", ["0d", "7", "7m", "1.5d", "-1d", "d", "", "4000d"])
def test_bad_epoch_lengths(text: str) -> None:
    with pytest.raises(InvalidParameterError, match="--epoch must"):
        parse_epoch_length(text)


def test_budget_parsing() -> None:
    assert parse_budget("3,1e-5") == Budget(eps=3.0, delta=1e-5)
    for text, message in [
        ("3", "EPS,DELTA"),
        ("3,1e-5,2", "EPS,DELTA"),
        ("x,1e-5", "not a number"),
        ("0,1e-5", "--budget EPS must be > 0"),
        ("inf,1e-5", "must be finite"),
        ("3,0", r"--budget DELTA must be in \(0, 1\)"),
        ("3,1", r"--budget DELTA must be in \(0, 1\)"),
    ]:
        with pytest.raises(InvalidParameterError, match=message):
            parse_budget(text)


def test_settings_are_validated() -> None:
    with pytest.raises(InvalidParameterError, match="min_users must be >= 2"):
        StreamSettings(region=SQUARE, epoch_seconds=DAY, min_users=1)
    with pytest.raises(InvalidParameterError, match="max_epochs must be >= 1"):
        StreamSettings(region=SQUARE, epoch_seconds=DAY, max_epochs=0)
    with pytest.raises(InvalidParameterError, match="eps0 must be > 0"):
        StreamSettings(region=SQUARE, epoch_seconds=DAY, eps0=0.0)


# ----------------------------------------------------------------------------------------------
# Epochs


def test_epoch_origin_is_a_monday_midnight_and_weeks_start_on_mondays() -> None:
    origin = datetime.fromtimestamp(EPOCH_ORIGIN, tz=UTC)
    assert origin == datetime(1970, 1, 5, tzinfo=UTC) and origin.weekday() == 0
    week = parse_epoch_length("7d")
    sunday = int(datetime(2010, 7, 25, 11, 40, 18, tzinfo=UTC).timestamp())
    start = EPOCH_ORIGIN + epoch_number(sunday, week) * week
    assert datetime.fromtimestamp(start, tz=UTC) == datetime(2010, 7, 19, tzinfo=UTC)


def test_a_check_in_on_a_boundary_belongs_to_the_later_epoch() -> None:
    assert epoch_number(T0, DAY) == epoch_number(T0 - 1, DAY) + 1
    assert epoch_number(T0 + DAY - 1, DAY) == epoch_number(T0, DAY)
    counts = InputCounts()
    assembler = EpochAssembler(DAY, counts)
    closed = []
    for event in [
        StreamEvent("a", T0 - 1, 0),
        StreamEvent("b", T0, 1),
        StreamEvent("c", T0 + DAY - 1, 2),
    ]:
        closed += assembler.push(event)
    closed += assembler.finish()
    assert [type(item) for item in closed] == [Epoch, Epoch]
    first, second = closed
    assert isinstance(first, Epoch) and isinstance(second, Epoch)
    assert (first.index, first.start, first.end) == (0, T0 - DAY, T0)
    assert set(first.reports) == {"a"}
    assert (second.index, second.start, set(second.reports)) == (1, T0, {"b", "c"})


def test_reports_are_each_users_latest_check_in_first_read_on_ties() -> None:
    events = [
        _event("u", 0.1, 0),
        _event("u", 0.7, 3),  # the latest: reported
        _event("u", 0.4, 1),  # older, read later (standard input may do this): ignored
        _event("v", 0.5, 2),  # tie at 0.5: the first read wins
        _event("v", 0.5, 1),
    ]
    assembler = EpochAssembler(DAY, InputCounts())
    for event in events:
        assert assembler.push(event) == []
    (epoch,) = assembler.finish()
    assert isinstance(epoch, Epoch)
    assert epoch.reports == {"u": (T0 + round(0.7 * DAY), 3), "v": (T0 + DAY // 2, 2)}
    assert epoch.checkins == 5


def test_late_check_ins_are_dropped_and_gaps_are_one_empty_record() -> None:
    counts = InputCounts()
    assembler = EpochAssembler(DAY, counts)
    closed = []
    for event in [
        _event("a", 0.2),
        _event("b", 3.5),  # closes epoch 0; epochs 1 and 2 had nothing
        _event("c", 0.9),  # older than epoch 3's start: late
        _event("d", 3.1),  # earlier than b but in the current epoch: kept
    ]:
        closed += assembler.push(event)
    closed += assembler.finish()
    assert counts.late == 1 and "user c" in counts.late_examples[0]
    epoch0, gap, epoch3 = closed
    assert isinstance(epoch0, Epoch) and epoch0.index == 0
    assert gap == EmptyEpochs(first=1, last=2, start=T0 + DAY, end=T0 + 3 * DAY)
    assert isinstance(epoch3, Epoch) and epoch3.index == 3 and set(epoch3.reports) == {"b", "d"}


def test_sorting_is_by_time_and_stable() -> None:
    events = [_event("a", 2.0), _event("b", 1.0, 1), _event("c", 1.0, 2), _event("d", 0.5)]
    assert [e.user for e in sorted_events(events)] == ["d", "b", "c", "a"]


def test_events_from_check_ins_filter_the_region_and_need_times() -> None:
    when = datetime(2010, 3, 1, 12, tzinfo=UTC)
    rows = [
        CheckIn("u", when, 0.25, 0.75, "1"),  # row 0, column 1: cell 1
        CheckIn("v", when, 5.0, 5.0, "2"),  # outside
        CheckIn("w", when, 1.0, 1.0, "3"),  # upper corner: last cell, 3
    ]
    counts = InputCounts()
    events = list(events_from_checkins(rows, SQUARE, counts))
    assert events == [StreamEvent("u", T0 + DAY // 2, 1), StreamEvent("w", T0 + DAY // 2, 3)]
    assert counts.outside_region == 1
    with pytest.raises(StreamError, match="without a user or a time"):
        list(events_from_checkins([CheckIn(None, None, 0.5, 0.5, None)], SQUARE, InputCounts()))


# ----------------------------------------------------------------------------------------------
# Rounds, skips, budget


def test_each_epoch_is_one_round_of_its_active_users() -> None:
    events = [
        _event("a", 0.1, 0),
        _event("b", 0.2, 1),
        _event("a", 0.9, 2),
        _event("a", 1.1, 3),
        _event("c", 1.5, 1),
        _event("b", 1.6, 2),
    ]
    rounds = FakeRounds()
    records, summary, runner = _run(events, rounds)
    assert rounds.calls == [(0, [2, 1]), (1, [3, 2, 1])]  # users in name order, latest cells
    assert [(r["epoch"], r["status"], r["users_active"], r["n_received"]) for r in records] == [
        (0, "run", 2, 2),
        (1, "run", 3, 3),
    ]
    assert records[1]["true_histogram"] == [0, 1, 1, 1]
    # An epoch record is not a round log: the round log's schema is replaced by the stream's.
    assert all(r["schema"] == STREAM_SCHEMA and list(r)[:2] == ["schema", "type"] for r in records)
    assert (
        records[1]["start"] == "2010-03-02T00:00:00Z"
        and records[1]["end"] == "2010-03-03T00:00:00Z"
    )
    assert runner.ledger.history == {"a": [(0, 2), (1, 3)], "b": [(0, 2), (1, 3)], "c": [(1, 3)]}
    assert summary["epochs_run"] == 2 and summary["users"] == 3 and summary["users_reported"] == 3
    assert summary["checkins_in_epochs"] == 6
    worst = summary["worst_user"]
    assert worst["rounds"] == 2 and worst["round_sizes"] == [2, 3]
    assert worst["users_with_this_history"] == 2
    want = compose_eps_of([2, 3], eps0=2.0, k=4)
    assert worst["eps"] == pytest.approx(want, rel=1e-9)


def compose_eps_of(sizes: list[int], *, eps0: float, k: int, delta: float = 1e-6) -> float:
    from shuffledp.accountant.composition.pair_pld import compose_rounds

    mechs = [ShuffledKRR(n=n, k=k, eps0=eps0) for n in sizes]
    return compose_rounds(mechs, delta=delta, discretization=STREAM_DISCRETIZATION).eps


def test_small_epochs_are_skipped_not_charged() -> None:
    events = [_event("a", 0.1), _event("a", 1.1), _event("b", 1.2), _event("c", 1.3)]
    rounds = FakeRounds()
    records, summary, runner = _run(events, rounds, min_users=3)
    assert records[0]["status"] == "skipped" and "below the minimum of 3" in records[0]["reason"]
    assert records[1]["status"] == "run" and records[1]["n_received"] == 3
    assert [call[0] for call in rounds.calls] == [1]
    assert runner.ledger.history["a"] == [(1, 3)]
    assert summary["epochs_skipped"] == 1 and summary["skipped_by_reason"] == {
        "below --min-users": 1
    }


def test_max_epochs_counts_empty_epochs_too() -> None:
    events = [_event("a", 0.1), _event("b", 0.2), _event("a", 9.0), _event("b", 9.1)]
    records, summary, _ = _run(events, FakeRounds(), max_epochs=3)
    assert [r["type"] for r in records] == ["epoch", "empty"]
    assert records[1]["first_epoch"] == 1 and records[1]["last_epoch"] == 2
    assert records[1]["epochs"] == 2
    assert summary["epochs"] == 3 and summary["stopped_at_max_epochs"] is True
    assert summary["epochs_empty"] == 2 and summary["epochs_run"] == 1


def _daily(users: int, days: int) -> list[StreamEvent]:
    return [
        _event(f"u{i}", day + 0.1 + 0.01 * i, i % 4) for day in range(days) for i in range(users)
    ]


def test_budget_cuts_users_off_at_the_computable_epoch() -> None:
    """Five users active every day: each round is ShuffledKRR(5, 4, 2). With the budget's delta
    between the 3-round and the 4-round composed delta (compose(), dp-accounting's
    self_compose), every user reports in epochs 0..2 and is cut off at epoch 3."""
    mech = ShuffledKRR(n=5, k=4, eps0=2.0)
    eps_budget = 3.0
    deltas = [
        compose(mech, r, eps=eps_budget, discretization=STREAM_DISCRETIZATION).delta for r in (3, 4)
    ]
    assert deltas[1] > 1.2 * deltas[0]  # a clear gap: the choice below is not a rounding call
    budget = Budget(eps=eps_budget, delta=math.sqrt(deltas[0] * deltas[1]))
    records, summary, runner = _run(_daily(5, 6), FakeRounds(), budget=budget)
    assert [r["status"] for r in records] == ["run"] * 3 + ["skipped"] * 3
    assert [r["cut_off"] for r in records] == [0, 0, 0, 5, 0, 0]
    assert [r["budget_exhausted"] for r in records] == [0, 0, 0, 5, 5, 5]
    assert "after budget cut-offs" in records[3]["reason"]
    assert summary["users_cut_off"] == 5 and summary["budget_cut_offs"] == 5
    worst = summary["worst_user"]
    assert worst["rounds"] == 3 and worst["round_sizes"] == [5, 5, 5]
    assert worst["delta_at_budget_eps"] == pytest.approx(deltas[0], rel=1e-9)
    assert worst["delta_at_budget_eps"] <= budget.delta
    for user in runner.ledger.history:
        assert runner.ledger.user_delta(user, eps_budget) <= budget.delta


def test_budget_fixed_point_every_reporter_passes_at_the_n_it_is_sent_with() -> None:
    """Mixed histories: long-time users drop out first, which makes the round smaller and so
    costlier for the others. Invariants (no report lost):
    * every user's composed delta at the budget's eps is within the budget and equals
      compose_rounds over its rounds;
    * a user cut off would have exceeded the budget in the round it missed: it was dropped at
      some n >= the n finally sent (>= 2), and delta only grows as n shrinks, so its history
      plus a round of max(n sent, 2) is over budget.
    """
    from shuffledp.accountant.composition.pair_pld import compose_rounds

    def delta_of(sizes: list[int]) -> float:
        mechs = [ShuffledKRR(n=n, k=4, eps0=2.0) for n in sizes]
        return compose_rounds(mechs, eps=2.5, discretization=STREAM_DISCRETIZATION).delta

    events = []
    joined: dict[str, int] = {}
    for day in range(6):
        # u0..u5 every day; v0..v(day) join one by one, so rounds differ in n and history.
        for i in range(6):
            events.append(_event(f"u{i}", day + 0.1 + 0.01 * i, i % 4))
            joined.setdefault(f"u{i}", day)
        for j in range(day + 1):
            events.append(_event(f"v{j}", day + 0.5 + 0.01 * j, j % 4))
            joined.setdefault(f"v{j}", day)
    budget = Budget(eps=2.5, delta=1e-3)
    records, summary, runner = _run(sorted_events(events), FakeRounds(), budget=budget)
    ledger = runner.ledger
    for user, rounds in ledger.history.items():
        sizes = [n for _, n in rounds]
        got = ledger.user_delta(user, budget.eps)
        assert got <= budget.delta, (user, sizes)
        assert got == pytest.approx(delta_of(sizes), rel=1e-9, abs=1e-15)
    assert summary["users_cut_off"] == len(ledger.exhausted) > 0  # the budget bites here
    assert any(0 < r["cut_off"] < r["users_active"] for r in records)  # not all at once
    for user in ledger.exhausted:
        reported = [epoch for epoch, _ in ledger.history.get(user, [])]
        # Active every day from joining: the first day it did not report is when it was cut.
        cut_epoch = next(day for day in range(joined[user], 6) if day not in reported)
        record = records[cut_epoch]
        sent = record["users_reporting"] if record["status"] == "run" else 0
        sizes = [n for _, n in ledger.history.get(user, [])]
        assert delta_of([*sizes, max(sent, 2)]) > budget.delta, (user, cut_epoch)


def test_lost_reports_charge_the_received_n_and_recheck_the_budget() -> None:
    """Five users, budget between one round at n = 5 and one at n = 4: they are allowed to
    report, one report is lost, the round is charged at n = 4 and all five are over budget."""
    at5 = compose(ShuffledKRR(n=5, k=4, eps0=2.0), 1, eps=1.0, discretization=1e-3).delta
    at4 = compose(ShuffledKRR(n=4, k=4, eps0=2.0), 1, eps=1.0, discretization=1e-3).delta
    assert at4 > 1.05 * at5
    budget = Budget(eps=1.0, delta=math.sqrt(at4 * at5))
    records, summary, runner = _run(_daily(5, 2), FakeRounds(lose=1), budget=budget)
    first = records[0]
    assert first["status"] == "run" and first["users_reporting"] == 5
    assert first["n_received"] == 4 and first["charged_n"] == 4
    assert first["over_budget_after_round"] == 5
    assert records[1]["status"] == "skipped" and records[1]["budget_exhausted"] == 5
    assert summary["over_budget_after_round"] == 5 and summary["users_cut_off"] == 5
    assert runner.ledger.history["u0"] == [(0, 4)]


def test_refused_round_charges_nobody_and_failed_round_charges_a_lone_report() -> None:
    rounds = FakeRounds(
        raise_in={0: StreamRoundRefusedError("below the minimum batch"), 1: RuntimeError("boom")}
    )
    records, summary, runner = _run(_daily(3, 3), rounds, failed=(RuntimeError,))
    assert records[0]["status"] == "skipped" and "below the minimum batch" in records[0]["reason"]
    assert records[1]["status"] == "failed" and records[1]["error"] == "boom"
    assert records[2]["status"] == "run"
    assert runner.ledger.history["u0"] == [(1, 1), (2, 3)]
    assert summary["epochs_failed"] == 1 and summary["skipped_by_reason"] == {"refused": 1}
    # The lone report costs eps0 (k-RR alone): the worst composed eps exceeds eps0 = 2.
    assert summary["worst_user"]["eps"] > 2.0


def test_text_rows_show_the_epoch_numbers() -> None:
    records, typed_summary, _ = _run_typed(
        [*_daily(3, 2), _event("u0", 5.0)], FakeRounds(), min_users=2
    )
    rows = [format_record(r, DAY) for r in records]
    assert rows[0].split()[:7] == ["0", "2010-03-01", "2010-03-02", "3", "3", "0", "3"]
    assert rows[2].split()[:3] == ["2-4", "2010-03-03", "2010-03-06"]
    assert "no check-in in the region" in rows[2]
    assert "below the minimum of 2" in rows[3]
    stream_input = StreamInput(
        source="x",
        format="snap",
        rows=7,
        accepted=7,
        rejected={},
        rejected_examples={},
        header=None,
        truncated=None,
        outside_region=0,
    )
    text = format_summary(replace(typed_summary, input=stream_input))
    assert "input x: 7 rows, 7 accepted, rejected none; 0 outside the region, 0 late" in text
    assert "epochs: 6 (2 run, 1 skipped, 3 empty, 0 failed)" in text
    assert "users: 3 active, 3 reported at least once, 0 cut off" in text


# ----------------------------------------------------------------------------------------------
# The command line: errors without a broker


@pytest.mark.slow
@pytest.mark.shared_data
def test_lat_lon_files_cannot_form_a_stream(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["stream", "--dataset", str(PARIS_LATLON), "--region", "paris", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1
    assert "no users or times" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--epoch", "7x"], "--epoch must"),
        (["--budget", "1"], "--budget must be EPS,DELTA"),
        (["--region", "mars"], "unknown region"),
        (["--min-users", "1"], "--min-users must be >= 2, got 1"),
        (["--dataset", "/nonexistent/checkins.txt"], "/nonexistent/checkins.txt"),
    ],
)
def test_bad_options_are_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["stream", "--dataset", str(PARIS_SNAP), "--region", "paris", "--quiet"]
    try:
        code = main([*base, *args])
    except SystemExit as stop:  # argparse's usage errors (flags checked when parsed)
        assert isinstance(stop.code, int)
        code = stop.code
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and message in err
