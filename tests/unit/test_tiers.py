"""The unit tier stays fast and self-contained: no test file under tests/unit starts a process
or a broker (those belong in tests/integration, which the fast loop skips; pyproject.toml's
markers). Checked on the source, so a new test in the wrong tier fails here at once."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.paths import UNIT_TESTS

#: Modules whose import means starting processes.
PROCESS_MODULES = {"subprocess", "multiprocessing"}
#: Names that start a broker (shuffledp.brokers.embedded, tests/conftest.py's fixtures).
BROKER_NAMES = {"EmbeddedBroker", "MosquittoBroker", "mosquitto_url", "embedded_broker_url"}


def _what_belongs_elsewhere(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] in PROCESS_MODULES}
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in PROCESS_MODULES:
                found.add(node.module)
        elif isinstance(node, ast.Name | ast.arg) and (
            (node.id if isinstance(node, ast.Name) else node.arg) in BROKER_NAMES
        ):
            found.add(node.id if isinstance(node, ast.Name) else node.arg)
        elif isinstance(node, ast.Attribute) and node.attr == "integration":
            found.add("pytest.mark.integration")
    return found


@pytest.mark.parametrize(
    "path",
    sorted(UNIT_TESTS.rglob("*.py")),
    ids=lambda path: str(path.relative_to(UNIT_TESTS)),
)
def test_no_unit_test_starts_a_process_or_a_broker(path: Path) -> None:
    found = _what_belongs_elsewhere(ast.parse(path.read_text(encoding="utf-8")))
    assert not found, f"{path} uses {sorted(found)}: move those tests to tests/integration"


def test_the_check_finds_each_kind() -> None:
    source = (
        "import subprocess\nfrom multiprocessing import Pool\n"
        "async def test_x(mosquitto_url): EmbeddedBroker()\n"
        "@pytest.mark.integration\ndef test_y(): pass\n"
    )
    assert _what_belongs_elsewhere(ast.parse(source)) == {
        "subprocess",
        "multiprocessing",
        "mosquitto_url",
        "EmbeddedBroker",
        "pytest.mark.integration",
    }
