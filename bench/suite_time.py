"""The suite's tests and seconds by tier, from pytest's JUnit XML: prints figures, asserts nothing.

Per tier (tests/unit, tests/reference, tests/integration; the fast loop is tests/unit less its
`slow` tests, which the XML does not mark): how many tests, how many passed, skipped and failed,
and the seconds they took (setup, call and teardown summed; with two xdist workers the wall time
is about half), then the slowest test functions (all their parameters summed).

Run: .venv/bin/python -m pytest --junitxml=/tmp/suite.xml
     .venv/bin/python bench/suite_time.py /tmp/suite.xml [--top 20]
"""

from __future__ import annotations

import argparse
import re
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

TIERS = ("unit", "reference", "integration")


@dataclass
class Tally:
    """Tests of one tier or one function: counts by outcome and summed seconds."""

    tests: int = 0
    seconds: float = 0.0
    outcomes: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, outcome: str, seconds: float) -> None:
        self.tests += 1
        self.seconds += seconds
        self.outcomes[outcome] += 1


def outcome_of(case: ET.Element) -> str:
    """passed, skipped or failed (a failure or an error) for one <testcase>."""
    if case.find("skipped") is not None:
        return "skipped"
    if case.find("failure") is not None or case.find("error") is not None:
        return "failed"
    return "passed"


def function_of(classname: str, name: str) -> tuple[str, str]:
    """(tier, "path.py::[Class.]function") of a <testcase> (its parameters dropped)."""
    parts = classname.split(".")
    module = max(i for i, part in enumerate(parts) if part.startswith("test_"))
    path = "/".join(parts[: module + 1]) + ".py"
    tier = parts[1] if len(parts) > 1 and parts[1] in TIERS else "other"
    function = ".".join([*parts[module + 1 :], re.sub(r"\[.*", "", name)])
    return tier, f"{path}::{function}"


def tally(xml: Path) -> tuple[dict[str, Tally], dict[str, Tally]]:
    """(per tier, per test function) tallies of a JUnit XML file."""
    tiers: dict[str, Tally] = defaultdict(Tally)
    functions: dict[str, Tally] = defaultdict(Tally)
    for case in ET.parse(xml).getroot().iter("testcase"):
        tier, function = function_of(case.get("classname", ""), case.get("name", ""))
        outcome, seconds = outcome_of(case), float(case.get("time", 0.0))
        tiers[tier].add(outcome, seconds)
        functions[function].add(outcome, seconds)
    return tiers, functions


def line(label: str, t: Tally) -> str:
    counts = (t.outcomes["passed"], t.outcomes["skipped"], t.outcomes["failed"])
    return (
        f"{label:<12} {t.tests:>6} {counts[0]:>6} {counts[1]:>7} {counts[2]:>6} {t.seconds:>8.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("xml", type=Path, help="pytest's --junitxml file")
    parser.add_argument("--top", type=int, default=20, help="slowest functions to list")
    args = parser.parse_args()
    tiers, functions = tally(args.xml)
    print(f"{'tier':<12} {'tests':>6} {'passed':>6} {'skipped':>7} {'failed':>6} {'seconds':>8}")
    total = Tally()
    for name in (*TIERS, "other"):
        if name in tiers:
            print(line(name, tiers[name]))
            total.tests += tiers[name].tests
            total.seconds += tiers[name].seconds
            for outcome, count in tiers[name].outcomes.items():
                total.outcomes[outcome] += count
    print(line("all", total))
    print(f"\nslowest {args.top} test functions (seconds, tests):")
    slowest = sorted(functions.items(), key=lambda item: -item[1].seconds)[: args.top]
    for function, t in slowest:
        print(f"{t.seconds:8.1f} {t.tests:5d}  {function}")


if __name__ == "__main__":
    main()
