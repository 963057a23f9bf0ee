"""`shuffledp simulate` without --json prints the round log from its record (format_report):
the numbers printed are the record's."""

from __future__ import annotations

import dataclasses

from shuffledp.analyzer.report import build_report
from shuffledp.cli.simulate import format_report
from shuffledp.simulations.pipeline.records import (
    ChaosSummary,
    HopKill,
    RoundLog,
    RoundTimings,
    SimulationInfo,
)


def a_log(*, chaos: bool, warning: str | None = None) -> RoundLog:
    report = build_report(
        round_id=9,
        k=3,
        eps0=2.0,
        histogram=[40, 30, 30],
        n_expected=101,
        rejected={"duplicate": 2, "wrong-length": 0},
        true_histogram=[45, 25, 30],
        baseline_rng=3,
        randomness_name="os-csprng",
        eps=1.0,
    )
    kill = HopKill(
        stage="hop-0",
        signal="SIGKILL",
        when="after 25",
        last_progress_accepted=27,
        process_was="running",
        restarted=True,
        restart_seconds=0.4,
    )
    return RoundLog(
        report=report,
        stages={"analyzer": {"stage": "analyzer", "received": 100}},
        timings=RoundTimings(
            total_seconds=3.0,
            setup_seconds=1.0,
            round_seconds=2.0,
            clients_send_seconds=0.5,
            analyzer_collect_seconds=0.25,
        ),
        simulation=SimulationInfo(
            broker="embedded amqtt at mqtt://127.0.0.1:1",
            n_hops=2,
            client_processes=1,
            dataset="histogram: 45,25,30",
            seed=None,
            topic_prefix="shuffledp/sim-x",
            keys="fresh",
            authentication="none (--no-auth)",
            deadline_seconds=60.0,
            min_batch=50,
        ),
        warning=warning,
        chaos=ChaosSummary(
            injected={"replay": 2},
            injected_total=2,
            expected_rejections={"duplicate": 2},
            hop0_rejections={"duplicate": 2},
            redelivered_duplicates=0,
            rejections_as_expected=True,
            all_reports_counted_once=False,
            hop_killed=kill,
        )
        if chaos
        else None,
    )


def test_the_text_report_prints_the_records_numbers() -> None:
    log = a_log(chaos=False)
    text = format_report(log)
    lines = text.splitlines()
    assert lines[0] == (
        "round 9: 100 of 101 reports received; k = 3, eps0 = 2, 2 hops, "
        "broker: embedded amqtt at mqtt://127.0.0.1:1"
    )
    assert "dataset: histogram: 45,25,30" in lines
    privacy = log.report.privacy
    assert privacy.delta is not None and privacy.delta_lower is not None
    assert (
        f"guarantee: eps = 1, delta <= {privacy.delta:.4g} (valid upper bound from "
        f"{privacy.bound}; delta_lower = {privacy.delta_lower:.4g}; computed for n = 100 "
        "received)"
    ) in lines
    assert "rejected: duplicate 2" in lines  # zero counts left out
    assert (
        "timings (s): total 3.0, setup 1.0, round 2.0, clients_send 0.5, analyzer_collect 0.25"
        in lines
    )
    assert lines[-1] == "randomness: os-csprng"
    counts = log.report.estimate.counts
    assert counts is not None
    assert lines[4].split()[:4] == ["0", "45", "40", f"{counts[0]:.1f}"]  # bin, true, noisy, INV
    assert not any(line.startswith("chaos:") for line in lines)


def test_chaos_and_warning_lines() -> None:
    text = format_report(a_log(chaos=True, warning="late"))
    assert (
        "chaos: injected 2 (replay 2); hop 0 rejections as expected (0 redelivered after the "
        "restart); hop-0 killed (SIGKILL) at 27 accepted and restarted: True; n_received == n: "
        "False"
    ) in text.splitlines()
    assert text.splitlines()[-1] == "warning: late"


def test_the_ibu_remark_appears_exactly_when_the_inversion_has_no_negative_bin() -> None:
    """The remark under the table claims IBU = shuffle+INV because the inversion is inside the
    simplex: it is printed for such a histogram and not for one whose inversion goes negative
    (where the two estimates differ)."""
    from shuffledp.analyzer.estimators import matrix_inversion

    for histogram in ([40, 30, 30], [80, 20, 0]):
        report = build_report(
            round_id=1,
            k=3,
            eps0=2.0,
            histogram=histogram,
            n_expected=100,
            rejected={},
            true_histogram=[45, 25, 30],
            baseline_rng=3,
            randomness_name="os-csprng",
            eps=1.0,
        )
        log = dataclasses.replace(a_log(chaos=False), report=report)
        remark = any(
            line.startswith("IBU = shuffle+INV here") for line in format_report(log).splitlines()
        )
        inside = bool(matrix_inversion(histogram, 2.0).min() >= 0)
        assert remark == inside
        assert inside == (histogram == [40, 30, 30])  # both cases are exercised
