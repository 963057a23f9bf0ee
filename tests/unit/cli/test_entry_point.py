"""The console script and ``python -m shuffledp`` start through one launcher (shuffledp.launcher),
the one that answers a signal arriving while the CLI's modules load in one line (the console
script had its own entry point, shuffledp.cli:main, which printed an import traceback)."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]


def test_the_console_script_runs_the_launcher() -> None:
    declared = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert declared == {"shuffledp": "shuffledp.launcher:run"}
    installed = importlib.metadata.entry_points(group="console_scripts", name="shuffledp")
    assert [entry.value for entry in installed] == ["shuffledp.launcher:run"]


def test_python_m_runs_the_launcher() -> None:
    source = (REPO_ROOT / "shuffledp" / "__main__.py").read_text()
    code = [line for line in source.splitlines() if line and not line.startswith(('"""', "#"))]
    assert code[-2:] == ["from shuffledp.launcher import run", "run()"], code
