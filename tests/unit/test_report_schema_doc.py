"""docs/report-schema.md stays true: its examples read back into their records, and every key
of every record is described there."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from shuffledp.accountant.records import AccountAnswer, BoundResult, Query
from shuffledp.analyzer.records import (
    REPORT_KEYS,
    UTILITY_KEYS,
    Baseline,
    Delivery,
    DeliveryLeg,
    PrivacyBlock,
    PublishedReport,
    TVDistance,
)
from shuffledp.simulations.pipeline.records import (
    ChaosSummary,
    HopKill,
    RoundLog,
    RoundTimings,
    SimulationInfo,
)
from shuffledp.simulations.pipeline.stream.records import (
    EPOCH_KEYS,
    STATUS_KEYS,
    SUMMARY_KEYS,
    CompositionInfo,
    EmptyEpochsRecord,
    StreamInput,
    StreamSummary,
    TopCells,
    WorstUser,
    read_stream_record,
)
from tests.paths import REPO_ROOT

DOC = (REPO_ROOT / "docs" / "report-schema.md").read_text(encoding="utf-8")


def examples() -> list[dict[str, Any]]:
    blocks = re.findall(r"```json\n(.*?)\n```", DOC, flags=re.DOTALL)
    return [json.loads(block) for block in blocks]


def test_every_example_reads_back_into_its_record_unchanged() -> None:
    readers: dict[str, Callable[[object], Any]] = {
        "shuffledp/report/1": PublishedReport.from_json,
        "shuffledp/round-log/1": RoundLog.from_json,
        "shuffledp/account/1": AccountAnswer.from_json,
        "shuffledp/stream/1": read_stream_record,
    }
    found = examples()
    assert sorted(example["schema"] for example in found) == sorted(readers)
    for example in found:
        record = readers[example["schema"]](example)
        assert record.to_json() == example


def documented(key: str) -> bool:
    return f"`{key}`" in DOC


def test_every_key_is_documented() -> None:
    keys = set(REPORT_KEYS) | set(UTILITY_KEYS) | {"schema", "stages", "error", "warning"}
    keys |= {"timings", "simulation", "chaos", "note", "distribution", "counts"}
    keys |= {"randomness_source", "path", "dataset"}
    keys |= set(PrivacyBlock.__dataclass_fields__) | set(Baseline.__dataclass_fields__)
    keys |= set(Delivery.__dataclass_fields__) | {"delivery"}
    keys |= set(DeliveryLeg.__dataclass_fields__)
    keys |= set(RoundTimings.KEYS) | set(SimulationInfo.__dataclass_fields__)
    keys |= set(ChaosSummary.__dataclass_fields__) | set(HopKill.__dataclass_fields__)
    keys |= {field.name for field in fields(BoundResult)} | {"mechanism", "query", "results"}
    keys |= {field.name for field in fields(Query)} | set(TVDistance.KEYS)
    missing = sorted(key for key in keys if not documented(key))
    assert missing == [], missing


def test_every_key_of_the_streams_records_is_in_its_tables() -> None:
    """The stream's keys, each in a table row of the stream's section (not merely somewhere)."""
    section = DOC[DOC.index("## The stream (`shuffledp/stream/1`)") : DOC.index("## Examples")]
    keys = {"schema", "type", *EPOCH_KEYS, "input", *SUMMARY_KEYS, "eps", "delta"}
    keys |= {key for status in STATUS_KEYS.values() for key in status}
    keys |= set(EmptyEpochsRecord.KEYS) | set(WorstUser.KEYS) | {"note"}
    keys |= set(CompositionInfo.KEYS) | set(StreamInput.KEYS)
    keys |= {field.name for field in fields(TopCells)}
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    missing = sorted(
        key for key in keys - {"schema", "type"} if not any(f"`{key}`" in row for row in rows)
    )
    assert missing == [], missing
    assert "`schema`" in section and "`type`" in section
    # The summary's table lists its keys in the order the summary writes them.
    table = section[section.index("### The summary") : section.index("`worst_user` (`WorstUser`)")]
    positions = [table.index(f"`{key}`") for key in (*SUMMARY_KEYS, "input")]
    assert positions == sorted(positions)
    assert {f.name for f in fields(StreamSummary)} == {*SUMMARY_KEYS, "input"}
