"""The exception tree drawn in shuffledp/errors.py and docs/architecture.md is the real one:
every class it names exists and derives from the class it is drawn under, and every public error
class the package defines (less the per-reason RejectedMessage classes, which protocol/errors.py
lists) is drawn, in both places."""

from __future__ import annotations

import importlib
import pkgutil
import re
from typing import Any

import pytest

import shuffledp
from shuffledp import errors
from shuffledp.errors import RejectedMessage, ShuffledpError
from tests.paths import REPO_ROOT

_NAME = re.compile(r"[A-Za-z_][\w.]*")


def _tree(text: str, branch: str) -> list[tuple[int, list[str]]]:
    """(depth, class names) per line of a drawn tree whose branches end in ``branch`` (the
    root, ShuffledpError, is depth 0; a branch 4 columns further right is one deeper)."""
    lines = text.splitlines()
    root = next(line for line in lines if line.strip() == "ShuffledpError")
    base = root.index("ShuffledpError")
    rows = [(0, ["ShuffledpError"])]
    for line in lines:
        if branch not in line:
            continue
        mark = line.rindex(branch) - (len(branch) - 3) - 1
        depth = (mark - base) // 4 + 1
        head = line[line.rindex(branch) + len(branch) :].split("(")[0].split("  ")[0]
        names = [name.strip() for name in head.split(",") if _NAME.fullmatch(name.strip())]
        if names:
            rows.append((depth, names))
    return rows


def _resolve(name: str, parent_module: str) -> type:
    if "." not in name:
        module = importlib.import_module(parent_module)
        found = getattr(module, name, None) or getattr(errors, name)
        assert isinstance(found, type), name
        return found
    module_name, _, attribute = name.rpartition(".")
    module = importlib.import_module(f"shuffledp.{module_name}")
    found = getattr(module, attribute)
    assert isinstance(found, type), name
    return found


def _classes(rows: list[tuple[int, list[str]]]) -> list[type]:
    """The classes of the tree, each checked against the class drawn above it."""
    stack: list[type] = []
    seen = []
    for depth, names in rows:
        parent = stack[depth - 1] if depth else None
        module = parent.__module__ if parent is not None else "shuffledp.errors"
        for name in names:
            cls = _resolve(name, module)
            if parent is not None:
                assert issubclass(cls, parent), f"{name} is drawn under {parent.__name__}"
            seen.append(cls)
        del stack[depth:]
        stack.append(_resolve(names[0], module))
    return seen


DOCSTRING = _tree(errors.__doc__ or "", "── ")
ARCHITECTURE = _tree((REPO_ROOT / "docs" / "architecture.md").read_text(), "-- ")


def _defined() -> set[type]:
    # The parts install from their own folders (pyproject.toml's package-dir): walk each.
    parts = ["accountant", "protocol", "clients", "shuffler", "analyzer", "simulations"]
    packages: list[tuple[Any, str]] = [(shuffledp.__path__, "shuffledp.")]
    for part in parts:
        package = importlib.import_module(f"shuffledp.{part}")
        packages.append((package.__path__, f"shuffledp.{part}."))
    for path, prefix in packages:
        for module in pkgutil.walk_packages(path, prefix):
            if not module.name.endswith("__main__"):
                importlib.import_module(module.name)
    found: set[type] = set()
    todo = [ShuffledpError]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            public = not sub.__name__.startswith("_")  # a module's private helper class
            if (
                sub.__module__.startswith("shuffledp")
                and public
                and not issubclass(sub, RejectedMessage)
            ):
                found.add(sub)
            todo.append(sub)
    return found | {ShuffledpError, RejectedMessage}


@pytest.mark.parametrize("rows", [DOCSTRING, ARCHITECTURE], ids=["errors.py", "architecture.md"])
def test_the_drawn_tree_is_the_class_hierarchy(rows: list[tuple[int, list[str]]]) -> None:
    drawn = set(_classes(rows))
    missing = sorted(f"{c.__module__}.{c.__qualname__}" for c in _defined() - drawn)
    assert missing == []
