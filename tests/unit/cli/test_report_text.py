"""`shuffledp analyzer`'s summary: every number it shows is the report's (the published report
of docs/report-schema.md's example, read back through its record)."""

from __future__ import annotations

import json
import re
from typing import Any

from shuffledp.analyzer.records import PublishedReport
from shuffledp.cli.report_text import format_published_report
from tests.paths import REPO_ROOT


def _published_example() -> dict[str, Any]:
    doc = (REPO_ROOT / "docs" / "report-schema.md").read_text(encoding="utf-8")
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)\n```", doc, flags=re.DOTALL)]
    return next(b for b in blocks if b.get("schema") == "shuffledp/report/1")


def test_the_summary_shows_the_reports_numbers() -> None:
    data = _published_example()
    text = format_published_report(PublishedReport.from_json(data))
    lines = text.splitlines()
    assert lines[0].startswith(
        f"round {data['round']}: {data['n_received']} of {data['n_expected']} reports received; "
        f"k = {data['k']}, eps0 = {data['eps0']:g}; estimate: {data['estimator']}"
    )
    rows = [line.split() for line in lines if re.match(r"^\s+\d+\s+\d+\s+-?\d", line)]
    assert [int(row[0]) for row in rows] == list(range(data["k"]))
    assert [int(row[1]) for row in rows] == data["histogram"]
    assert [float(row[2]) for row in rows] == [round(c, 1) for c in data["estimate"]["counts"]]
    privacy = data["privacy"]
    assert f"guarantee: eps = {privacy['eps']:.4g}, delta <= {privacy['delta']:.4g}" in text
    assert f"computed for n = {privacy['n']} received" in text
    rejected = {k: v for k, v in data["rejected"].items() if v}
    expected = ", ".join(f"{k} {v}" for k, v in rejected.items()) or "none"
    assert f"rejected: {expected}" in lines
