"""A fault-bench scenario, run and judged: :func:`run_scenario` gives its
:class:`~shuffledp.simulations.faults.records.FaultRow`.

The counts come from the published report alone: ``counted`` is the sum of its histogram less
the attacker's reports hop 0 accepted (``fill-round``), ``lost_at`` the differences along the
stage logs (what hop 0 did not accept, what each hop accepted but did not forward, what the next
stage did not accept of it), ending at the analyzer's ``n_received``; so ``counted + lost ==
sent`` holds exactly when the report's histogram agrees with its ``n_received``, and a negative
place is one that counted a report twice.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiomqtt

from shuffledp.errors import InvalidParameterError, OperationalError
from shuffledp.simulations.faults.harness import FaultRound, RoundOutcome, RoundSpec
from shuffledp.simulations.faults.memory import PeakRss
from shuffledp.simulations.faults.records import FaultRow, judge
from shuffledp.simulations.faults.scenarios import SCENARIOS, Scenario

__all__ = ["DUPLICATE_REASONS", "account", "default_deadline", "run_scenario"]

DUPLICATE_REASONS = ("duplicate", "duplicate-frame", "client-already-reported")


def default_deadline(n: int) -> float:
    """`shuffledp simulate`'s deadline for a round of n: 60 s + 2 ms per client."""
    return 60.0 + 0.002 * n


async def run_scenario(
    name: str, *, n: int, deadline: float | None = None, quick: bool = False
) -> FaultRow:
    """Run scenario ``name`` (:data:`~shuffledp.simulations.faults.scenarios.SCENARIOS`) once
    at ``n`` reports, every stage with ``deadline`` seconds (default: simulate's), in a
    temporary directory removed afterwards; every process it started is stopped before it
    returns."""
    if name not in SCENARIOS:
        raise InvalidParameterError(
            f"--scenario must be one of {', '.join(SCENARIOS)}, got {name!r}"
        )
    scenario = SCENARIOS[name]
    asyncio.get_running_loop().set_exception_handler(_ignore_dropped_mqtt)
    spec = RoundSpec(n=n, deadline=default_deadline(n) if deadline is None else deadline)
    enrolment = max(spec.counts()) if scenario.enrolment == "exact" else None
    with tempfile.TemporaryDirectory(prefix="shuffledp-faultbench-") as tmp:
        async with FaultRound(
            spec, Path(tmp), broker=scenario.broker, clients_per_process=enrolment
        ) as r:
            notes, outcome, peaks = await _run(scenario, r, quick)
            if scenario.after is not None:
                notes.update(await scenario.after(r))
    notes["peak_rss_mib"] = dict(peaks)
    return make_row(scenario, spec, outcome, notes)


async def _run(
    scenario: Scenario, r: FaultRound, quick: bool
) -> tuple[dict[str, Any], RoundOutcome, dict[str, float]]:
    def pid_of(stage: str) -> Any:
        def pid() -> int | None:
            component = r.components.get(stage)
            return None if component is None else component.process.pid

        return pid

    broker_pid = lambda: None if r.broker is None else r.broker.pid  # noqa: E731
    with PeakRss({"mosquitto": broker_pid, "hop-0": pid_of("hop-0")}) as peaks:
        try:
            notes = dict(await scenario.run(r, quick))
        except OperationalError as exc:  # the fault's trigger never came
            notes = {"injected": False, "error": str(exc)}
        if "analyzer" not in r.components:
            raise OperationalError(f"{scenario.name}: the analyzer was never started")
        outcome = await r.finish()
    return notes, outcome, peaks.mib


def _ignore_dropped_mqtt(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's exception handler while a scenario runs: an MQTT client of the bench (the
    monitor, an attacker) that the broker cut off leaves a future holding the MqttError
    ("Future exception was never retrieved"); that is the scenario working, not news."""
    if isinstance(context.get("exception"), aiomqtt.MqttError):
        return
    loop.default_exception_handler(context)


def account(
    report: Mapping[str, Any] | None, *, sent: int, hops: int, attacker: int = 0
) -> tuple[int, dict[str, int], int]:
    """(counted, lost_at, duplicates) of a report (module docstring); attacker: reports of the
    attacker hop 0 accepted (they pass every stage like genuine ones)."""
    if report is None:
        return 0, {"no report": sent}, 0
    counted = sum(int(c) for c in report.get("histogram") or []) - attacker
    stages = report.get("stages") or {}
    rejected = report.get("rejected") or {}
    duplicates = sum(int(rejected.get(reason, 0)) for reason in DUPLICATE_REASONS)
    lost: dict[str, int] = {}
    upstream, before = "before hop-0", sent
    for index in range(hops):
        log = stages.get(f"hop-{index}")
        if not isinstance(log, Mapping) or "accepted" not in log:
            lost[f"hop-{index} (no log)"] = before - counted
            return counted, _nonzero(lost), duplicates
        accepted = int(log["accepted"]) - attacker
        forwarded = int(log.get("forwarded", 0)) - attacker
        lost[upstream] = before - accepted
        lost[f"hop-{index}"] = accepted - forwarded
        upstream, before = (
            f"hop-{index}->{'analyzer' if index == hops - 1 else f'hop-{index + 1}'}",
            forwarded,
        )
    lost[upstream] = before - (int(report.get("n_received", 0)) - attacker)
    return counted, _nonzero(lost), duplicates


def _nonzero(lost: dict[str, int]) -> dict[str, int]:
    return {place: count for place, count in lost.items() if count}


def make_row(
    scenario: Scenario, spec: RoundSpec, outcome: RoundOutcome, notes: dict[str, Any]
) -> FaultRow:
    attacker = int(notes.get("attacker_accepted", 0))
    counted, lost_at, duplicates = account(
        outcome.report, sent=spec.n, hops=spec.hops, attacker=attacker
    )
    message = outcome.message
    error = None if outcome.report is None else outcome.report.get("error")
    if error and outcome.exit_status not in (None, 0):
        message = f"analyzer: {error}"  # what the published report says went wrong
    verdict, why = judge(
        sent=spec.n,
        counted=max(0, counted),
        exit_status=outcome.exit_status,
        other_exits=outcome.other_exits,
        message=message,
        unrepairable=scenario.unrepairable,
    )
    if scenario.must_inject and notes.get("injected") is not True and verdict == "OK":
        verdict, why = "FAIL", "the fault did not happen as the scenario says (see notes)"
    notes = {**notes, "clients_said_sent": outcome.clients_sent}
    if outcome.still_running:
        notes["still_running_at_end"] = outcome.still_running
    if outcome.report is not None and outcome.report.get("warning"):
        notes["report_warning"] = outcome.report["warning"]
    return FaultRow(
        scenario=scenario.name,
        n=spec.n,
        sent=spec.n,
        counted=max(0, counted),
        duplicates=duplicates,
        lost_at=lost_at,
        exit_status=outcome.exit_status,
        other_exits=outcome.other_exits,
        wall_seconds=outcome.wall_seconds,
        verdict=verdict,
        why=why,
        message=message[:300],
        notes=notes,
    )
