"""Real experiments through the command line in --quick mode (`shuffledp experiment NAME
--quick`): the files are written, listed, and the summary named.

Two cheap ones stand for all (fig-1: no data; fig-3: the check-in slices): every experiment's
own quick run and numbers are tested beside it (test_experiment_tables.py,
test_synthetic_experiments.py, test_gowalla_experiments.py), and `all` with the same command
code is tested on fakes (test_experiment_framework.py). Running all eleven here again cost
about 45 s of CI for nothing new.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from shuffledp.cli import main
from shuffledp.simulations.experiments import registry
from shuffledp.simulations.experiments.gowalla_data import GOWALLA_EXPERIMENTS
from tests.paths import SHARED_DATA

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
DATA_DIR = SHARED_DATA
#: The experiments run through the command line here (module docstring).
CLI_EXPERIMENTS = ("fig-1", "fig-3")


def _module_of(name: str) -> str:
    return registry.EXPERIMENTS[name][0].partition(":")[0]


def _listed_files(out: str) -> list[Path]:
    return [
        Path(line.strip())
        for line in out.splitlines()
        if line.startswith("  ") and not line.strip().startswith("summary:")
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.shared_data) if name in GOWALLA_EXPERIMENTS else name
        for name in CLI_EXPERIMENTS
    ],
)
def test_quick_experiment_writes_csv_png_and_summary(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    importlib.import_module(_module_of(name))  # a missing module fails, never skips
    args = ["experiment", name, "--quick", "--out", str(tmp_path), "--seed", "1", "--quiet"]
    if DATA_DIR.is_dir():
        args += ["--data-dir", str(DATA_DIR)]
    code = main(args)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    files = _listed_files(captured.out)
    assert files and all(path.parent == tmp_path and path.is_file() for path in files)
    suffixes = {path.suffix for path in files}
    assert {".csv", ".png", ".md"} <= suffixes, files
    for path in files:
        data = path.read_bytes()
        assert data, path
        if path.suffix == ".png":
            assert data.startswith(PNG_MAGIC), path
        if path.suffix == ".csv":
            assert len(data.decode("utf-8").splitlines()) >= 2, path  # a header and rows
    summary = next(path for path in files if path.suffix == ".md")
    assert f"summary: {summary}" in captured.out


def test_every_registered_experiment_has_its_own_quick_test() -> None:
    """The reason this file runs only two: each registered experiment is run in --quick mode by
    one of the dedicated test modules (its name appears there as a string)."""
    here = Path(__file__).parent
    dedicated = "".join(
        (here / name).read_text(encoding="utf-8")
        for name in (
            "test_experiment_tables.py",
            "test_synthetic_experiments.py",
            "test_gowalla_experiments.py",
        )
    )
    missing = [name for name in registry.EXPERIMENTS if f'"{name}"' not in dedicated]
    assert missing == []
