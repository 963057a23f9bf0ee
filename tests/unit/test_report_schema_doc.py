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
from tests.paths import REPO_ROOT

DOC = (REPO_ROOT / "docs" / "report-schema.md").read_text(encoding="utf-8")


def examples() -> list[dict[str, Any]]:
    blocks = re.findall(r"```json\n(.*?)\n```", DOC, flags=re.DOTALL)
    return [json.loads(block) for block in blocks]


def test_every_example_reads_back_into_its_record_unchanged() -> None:
    readers: dict[str, Callable[[object], PublishedReport | RoundLog | AccountAnswer]] = {
        "shuffledp/report/1": PublishedReport.from_json,
        "shuffledp/round-log/1": RoundLog.from_json,
        "shuffledp/account/1": AccountAnswer.from_json,
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
