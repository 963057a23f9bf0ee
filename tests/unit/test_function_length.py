"""Functions of at most about 60 lines (the house habit): every function of the package, from its
``def`` to its last line (signature and docstring included), is at most LIMIT lines, except the
ones listed in WAITING with the reason they are longer. A new long function fails here; a listed
one that has been shortened below the limit fails too, so the list only shrinks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.paths import REPO_ROOT

LIMIT = 62
FOLDERS = ("shuffledp", "accountant", "protocol", "clients", "shuffler", "analyzer", "simulations")

#: "path:function" -> why it is still longer than LIMIT.
WAITING: dict[str, str] = {}


def functions() -> Iterator[tuple[str, int]]:
    """("path:function", length in lines) for every function and method of the package."""
    for folder in FOLDERS:
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            relative = path.relative_to(REPO_ROOT).as_posix()
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    assert node.end_lineno is not None
                    yield f"{relative}:{node.name}", node.end_lineno - node.lineno + 1


def test_no_function_is_longer_than_the_limit() -> None:
    too_long = {name: length for name, length in functions() if length > LIMIT}
    unexpected = {name: length for name, length in too_long.items() if name not in WAITING}
    assert not unexpected, f"functions over {LIMIT} lines (split them): {unexpected}"


def test_every_waiting_function_is_still_long() -> None:
    lengths = dict(functions())
    shortened = [name for name in WAITING if lengths.get(name, 0) <= LIMIT]
    assert not shortened, f"now within {LIMIT} lines, remove from WAITING: {shortened}"


def test_the_scan_sees_the_package() -> None:
    """The walk finds functions in every folder (a wrong root would pass the tests above)."""
    seen = {name.split("/", 1)[0] for name, _ in functions()}
    assert seen == set(FOLDERS)
    assert Path(REPO_ROOT / "accountant" / "tight.py").exists()
