"""The import rules: what may import what (docs/architecture.md draws the layers).

Lower layers never import upper ones, so the accountant stays pure mathematics (no CLI, no
transport), the protocol loads neither the accountant nor scipy, and the stages do not reach into
each other. Every ``import`` in the package counts, including the ones inside functions.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.paths import REPO_ROOT

#: Source folder -> the package it installs as (pyproject.toml's package-dir).
FOLDERS = {
    "shuffledp": "shuffledp",
    "accountant": "shuffledp.accountant",
    "protocol": "shuffledp.protocol",
    "clients": "shuffledp.clients",
    "shuffler": "shuffledp.shuffler",
    "analyzer": "shuffledp.analyzer",
    "simulations": "shuffledp.simulations",
}
BASE = {"shuffledp.errors", "shuffledp.validation", "shuffledp.randomness"}
#: Each part of the package and the other parts it may import.
ALLOWED: dict[str, set[str]] = {
    "shuffledp.errors": set(),
    "shuffledp.validation": {"shuffledp.errors"},
    "shuffledp.randomness": {"shuffledp.errors", "shuffledp.validation"},
    "shuffledp.accountant": BASE,
    "shuffledp.protocol": BASE,
    "shuffledp.security": BASE | {"shuffledp.protocol"},
    "shuffledp.clients": BASE | {"shuffledp.protocol", "shuffledp.accountant"},
    "shuffledp.shuffler": BASE | {"shuffledp.protocol"},
    "shuffledp.analyzer": BASE | {"shuffledp.protocol", "shuffledp.accountant"},
    "shuffledp.brokers": BASE | {"shuffledp.protocol", "shuffledp.security"},
    "shuffledp.simulations": BASE
    | {
        "shuffledp.accountant",
        "shuffledp.protocol",
        "shuffledp.security",
        "shuffledp.clients",
        "shuffledp.shuffler",
        "shuffledp.analyzer",
        "shuffledp.brokers",
    },
}
#: The command line and the package root (the Python API) sit on top and may import anything.
TOP = {"shuffledp", "shuffledp.cli", "shuffledp.__main__", "shuffledp.launcher"}
BARE = set(FOLDERS) - {"shuffledp"}


def part_of(module: str) -> str:
    """The part of the package a module belongs to: shuffledp.<second component>."""
    parts = module.split(".")
    return ".".join(parts[:2])


def modules() -> Iterator[tuple[str, Path]]:
    for folder, package in FOLDERS.items():
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            rel = path.relative_to(REPO_ROOT / folder).with_suffix("").parts
            if rel[-1] == "__init__":
                rel = rel[:-1]
            yield ".".join((package, *rel)), path


def imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


ALL_MODULES = sorted(modules())


def test_every_part_has_a_rule() -> None:
    parts = {part_of(name) for name, _ in ALL_MODULES}
    assert parts - TOP <= set(ALLOWED), sorted(parts - TOP - set(ALLOWED))


@pytest.mark.parametrize(("module", "path"), ALL_MODULES, ids=[m for m, _ in ALL_MODULES])
def test_imports_follow_the_layers(module: str, path: Path) -> None:
    source = part_of(module)
    if source in TOP:
        return
    wrong = []
    for target in imports(path):
        if target.split(".")[0] in BARE:
            wrong.append(f"{target} (bare name: import shuffledp.{target})")
        elif target.startswith("shuffledp"):
            dest = part_of(target)
            if dest != source and dest not in ALLOWED[source]:
                wrong.append(target)
    assert not wrong, f"{module} may not import {wrong}"


def test_the_accountant_has_no_command_line() -> None:
    offenders = [
        name
        for name, path in ALL_MODULES
        if part_of(name) == "shuffledp.accountant" and "argparse" in set(imports(path))
    ]
    assert offenders == []


#: The accountant's own layers, bottom up (docs/accounting.md, "Where a guaranteed number is
#: decided"): a module may import modules of its own layer or lower ones, never higher ones.
#: Every accountant module is listed (by its path under shuffledp.accountant), so a new one has
#: to take a place. The folders are the roles: engines/ is layer 0, bounds/ and worst_case/ are
#: layer 1, composition/ sits on them; tight, inversion, registry, records and mechanism stay on
#: top of the folder.
ACCOUNTANT_LAYERS: tuple[frozenset[str], ...] = (
    # engines: the mechanism, log-space numerics, the one eps(delta) search, pair divergences,
    # G sums, the k = 2 methods, F(a) for every a; no Bound
    frozenset(
        {
            "mechanism",
            "engines",
            "engines.numerics",
            "engines.crossing",
            "engines.pairs",
            "engines.gsum_fast",
            "engines.gsum",
            "engines.family_counts",
            "engines.k2_exact",
            "engines.k2_contour",
            "engines.k2_fft",
            "engines.k2_waves",
        }
    ),
    # bounds: each labelled bound and the exact worst cases (k = 2, k = 3)
    frozenset(
        {
            "bounds",
            "bounds.base",
            "bounds.biswas_literal",
            "bounds.blanket",
            "bounds.largest_group",
            "bounds.renyi_girgis",
            "worst_case",
            "worst_case.family",
            "worst_case.k3_exhaustive",
        }
    ),
    # tight and the one-round composition pairs
    frozenset(
        {
            "tight",
            "records",
            "composition",
            "composition.pair_pld",
            "composition.privacy_loss",
            "composition.profile_pld",
        }
    ),
    # what callers ask: eps(delta) and calibration, names, the composed bracket
    frozenset({"inversion", "registry", "composition.composition_bracket"}),
)
#: The flat modules of the release before the layout by role, each now a deprecated alias (one
#: ``import *`` of its new path, plus the private names callers imported) to be removed in the
#: next release; they form their own top layer. (accountant/bounds.py and composition.py became
#: the packages bounds/ and composition/, which re-export them.)
ACCOUNTANT_SHIMS: dict[str, str] = {
    "numerics": "engines.numerics",
    "crossing": "engines.crossing",
    "pairs": "engines.pairs",
    "gsum": "engines.gsum",
    "gsum_fast": "engines.gsum_fast",
    "family_counts": "engines.family_counts",
    "k2_exact": "engines.k2_exact",
    "k2_contour": "engines.k2_contour",
    "k2_fft": "engines.k2_fft",
    "k2_waves": "engines.k2_waves",
    "biswas_literal": "bounds.biswas_literal",
    "blanket": "bounds.blanket",
    "largest_group": "bounds.largest_group",
    "renyi_girgis": "bounds.renyi_girgis",
    "family": "worst_case.family",
    "k3_exhaustive": "worst_case.k3_exhaustive",
    "profile_pld": "composition.profile_pld",
    "composition_bracket": "composition.composition_bracket",
    "privacy_loss": "composition.privacy_loss",
}
ACCOUNTANT_MODULES = [
    (name, path) for name, path in ALL_MODULES if part_of(name) == "shuffledp.accountant"
]


def _short(module: str) -> str:
    return module.removeprefix("shuffledp.accountant").lstrip(".")


def _accountant_layer(module: str) -> int | None:
    """The layer of shuffledp.accountant.<module> (None for the package itself: on top)."""
    short = _short(module)
    if not short:
        return None
    if short in ACCOUNTANT_SHIMS:
        return len(ACCOUNTANT_LAYERS)
    return next(i for i, layer in enumerate(ACCOUNTANT_LAYERS) if short in layer)


def test_every_accountant_module_has_a_layer() -> None:
    placed = set().union(*ACCOUNTANT_LAYERS)
    assert not placed & set(ACCOUNTANT_SHIMS)
    names = {_short(name) for name, _ in ACCOUNTANT_MODULES}
    assert names - {""} == placed | set(ACCOUNTANT_SHIMS)


def test_the_engines_import_no_bound() -> None:
    """engines/ is the bottom layer whole: no module of it may import a bound."""
    engines = {short for short in set().union(*ACCOUNTANT_LAYERS) if short.startswith("engines")}
    assert engines <= ACCOUNTANT_LAYERS[0]


@pytest.mark.parametrize(
    ("module", "path"), ACCOUNTANT_MODULES, ids=[m for m, _ in ACCOUNTANT_MODULES]
)
def test_accountant_lower_layers_never_import_upper_ones(module: str, path: Path) -> None:
    layer = _accountant_layer(module)
    if layer is None:
        return
    upward = [
        target
        for target in imports(path)
        if target.startswith("shuffledp.accountant.") and (_accountant_layer(target) or 0) > layer
    ]
    assert not upward, f"{module} (layer {layer}) imports higher layers: {upward}"


@pytest.mark.parametrize(("old", "new"), sorted(ACCOUNTANT_SHIMS.items()))
def test_a_deprecated_alias_only_re_exports_its_new_module(old: str, new: str) -> None:
    """The alias imports its new module and nothing else, says it is deprecated, and gives
    every public name of the new module as the same object (so old imports keep working)."""
    path = REPO_ROOT / "accountant" / f"{old}.py"
    tree = ast.parse(path.read_text())
    doc = ast.get_docstring(tree) or ""
    assert "Deprecated alias" in doc and "next release" in doc, doc
    body = tree.body[1:]
    assert all(isinstance(node, ast.ImportFrom) for node in body), old
    assert {node.module for node in body if isinstance(node, ast.ImportFrom)} == {
        f"shuffledp.accountant.{new}"
    }
    alias = importlib.import_module(f"shuffledp.accountant.{old}")
    target = importlib.import_module(f"shuffledp.accountant.{new}")
    public = getattr(target, "__all__", [n for n in vars(target) if not n.startswith("_")])
    assert public
    missing = [name for name in public if getattr(alias, name, None) is not getattr(target, name)]
    assert missing == [], f"shuffledp.accountant.{old} lacks {missing}"


def _function_imports(path: Path) -> Iterator[str]:
    """Modules of the package imported inside a function (outside ``if TYPE_CHECKING``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(func):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.startswith("shuffledp"):
                    yield node.module
            elif isinstance(node, ast.Import):
                yield from (a.name for a in node.names if a.name.startswith("shuffledp"))


@pytest.mark.parametrize(
    ("module", "path"), ACCOUNTANT_MODULES, ids=[m for m, _ in ACCOUNTANT_MODULES]
)
def test_accountant_modules_import_the_package_at_the_top(module: str, path: Path) -> None:
    """No import cycle broken by an import inside a function. The package's __init__ is the
    one exception: it loads composition (dp_accounting, about 1 s) on first use."""
    if module == "shuffledp.accountant":
        return
    assert list(_function_imports(path)) == []
