"""A round's report is written once (analyzer/published.py): an analyzer rerun after a round
never replaces the published report. Without its journal it derives another outcome (nothing
counted) and refuses with ReportExistsError, the retained report unchanged byte for byte; with
the journal of a run that died between publishing and removing it, it re-derives the same
outcome and returns the published report, publishing nothing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from shuffledp.analyzer.published import (
    IDENTITY_FIELDS,
    ReportExistsError,
    ReportWatch,
    first_report,
    report_identity,
)
from shuffledp.analyzer.service import AnalyzerSettings, run_analyzer
from shuffledp.protocol.delivery import EXIT_PUBLISHED
from shuffledp.protocol.journal import HopJournal
from shuffledp.protocol.topics import report_topic
from shuffledp.protocol.transport import MemoryBroker, Message
from tests.binding import analyzer_binding
from tests.unit.test_services_memory import (
    ANALYZER,
    EPS0,
    PREFIX,
    H,
    K,
    clients,
    pipeline,
    start_in_order,
    values_for,
)

N = 200
ROUND = 41


def _settings(deadline: float = 30.0) -> AnalyzerSettings:
    return AnalyzerSettings(
        prefix=PREFIX,
        round_id=ROUND,
        k=K,
        eps0=EPS0,
        n_hops=H,
        n_expected=N,
        deadline=deadline,
        **analyzer_binding(H),
    )


async def _round(broker: MemoryBroker, state_dir: Path | None = None) -> dict[str, object]:
    """One whole round of N reports (the analyzer journaled in ``state_dir`` if given)."""
    stages = pipeline(broker, round_id=ROUND, expected_size=N)
    stages["analyzer"].close()
    stages["analyzer"] = run_analyzer(
        broker.connect(), _settings(), ANALYZER.private, state_dir=state_dir
    )
    stages["clients"] = clients(broker, values_for(N), round_id=ROUND, seed=5)
    outcome = await start_in_order(stages, ["analyzer", "hop-2", "hop-1", "hop-0", "clients"])
    return outcome.report


@pytest.mark.slow  # a whole round: about 5 s, most of it the accountant
@pytest.mark.asyncio
async def test_a_rerun_without_journal_refuses_and_leaves_the_report() -> None:
    broker = MemoryBroker()
    report = await _round(broker)
    assert report["n_received"] == N and "error" not in report
    topic = report_topic(PREFIX, ROUND)
    published = broker._retained[topic]
    async with asyncio.timeout(10):  # it stops at once, not at its 30 s deadline
        with pytest.raises(ReportExistsError) as refused:
            await run_analyzer(broker.connect(), _settings(), ANALYZER.private)
    line = str(refused.value)
    assert "\n" not in line
    assert f"round {ROUND} already has a published report (200 of 200 received)" in line
    assert "(0 of 200 received, refused)" in line  # what the rerun derived: an error
    assert broker._retained[topic] == published  # the good report stays, byte for byte
    assert json.loads(published)["n_received"] == N
    assert EXIT_PUBLISHED == 6


@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_rerun_from_the_journal_re_derives_the_published_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = MemoryBroker()
    with monkeypatch.context() as crash:  # the analyzer dies after publishing, journal kept
        crash.setattr(HopJournal, "remove", lambda self: None)
        report = await _round(broker, state_dir=tmp_path)
    assert report["n_received"] == N
    topic = report_topic(PREFIX, ROUND)
    published = broker._retained[topic]
    assert list(tmp_path.iterdir())  # the journal survived the "crash"
    async with asyncio.timeout(10):
        again = await run_analyzer(
            broker.connect(), _settings(), ANALYZER.private, state_dir=tmp_path
        )
    assert again == json.loads(published)  # the published report itself, timings included
    assert broker._retained[topic] == published
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".journal")]


def test_identity_ignores_timings_and_names_the_outcome() -> None:
    base = {name: index for index, name in enumerate(IDENTITY_FIELDS)}
    one = {**base, "timings": {"analyzer_collect_seconds": 1.0}, "stages": {"a": 1}}
    two = {**base, "timings": {"analyzer_collect_seconds": 9.0}, "stages": {"a": 2}}
    assert report_identity(one) == report_identity(two)
    assert first_report(json.dumps(one).encode(), two, 3) == one
    for field in IDENTITY_FIELDS:
        with pytest.raises(ReportExistsError, match="written once"):
            first_report(json.dumps(one).encode(), {**two, field: "other"}, 3)
    with pytest.raises(ReportExistsError, match="not a report \\(5 bytes\\)"):
        first_report(b"\xff[1]x", two, 3)


def test_the_watch_keeps_the_report_and_ignores_a_deletion() -> None:
    watch = ReportWatch("p/round/1/report")
    assert watch.wants("p/round/1/report") and not watch.wants("p/round/1/analyzer")
    watch.note(Message("p/round/1/report", b"{}"))
    watch.note(Message("p/round/1/report", b""))
    assert watch.existing == b"{}"
