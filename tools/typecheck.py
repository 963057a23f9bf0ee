"""Run mypy on the package as it is installed (shuffledp.accountant, ...), plus tests and bench.

The source folders (accountant/, protocol/, ...) install under `shuffledp.` through setuptools'
package-dir mapping, which mypy cannot follow; this builds a throw-away tree of symlinks,
.typecheck/shuffledp/, that mirrors the installed layout, and points mypy at it.

Usage: .venv/bin/python tools/typecheck.py [extra mypy arguments]
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIRROR = ROOT / ".typecheck"


def build_mirror() -> Path:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    mapping: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    if MIRROR.exists():
        shutil.rmtree(MIRROR)
    top = MIRROR / "shuffledp"
    top.mkdir(parents=True)
    for entry in (ROOT / mapping["shuffledp"]).iterdir():
        if entry.suffix == ".py":
            (top / entry.name).symlink_to(entry)
    for package, folder in mapping.items():
        if package != "shuffledp":
            (top / package.split(".", 1)[1]).symlink_to(ROOT / folder, target_is_directory=True)
    return top


def main() -> int:
    build_mirror()
    command = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(ROOT / "pyproject.toml"),
        str(MIRROR / "shuffledp"),
        str(ROOT / "tests"),
        str(ROOT / "bench"),
        str(ROOT / "tools"),
        *sys.argv[1:],
    ]
    return subprocess.call(command, cwd=ROOT, env={"MYPYPATH": f"{MIRROR}:{ROOT}", **_env()})


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "MYPYPATH"}


if __name__ == "__main__":
    sys.exit(main())
