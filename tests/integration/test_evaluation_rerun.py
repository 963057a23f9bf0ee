"""docs/evaluation.md says its files are reproduced by their documented commands: a rerun of a
cheap one (`shuffledp experiment table-4 --out docs/evaluation/table-4 --seed 2026`, no
randomness, about 5 s) writes the committed summary byte for byte. (The figures are compared
by eye: PNG bytes depend on the matplotlib and FreeType builds.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.paths import REPO_ROOT


def test_a_rerun_of_table_4_writes_the_committed_summary(tmp_path: Path) -> None:
    committed = REPO_ROOT / "docs" / "evaluation" / "table-4" / "SUMMARY-table-4.md"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "shuffledp",
            "experiment",
            "table-4",
            "--out",
            str(tmp_path),
            "--seed",
            "2026",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / committed.name).read_bytes() == committed.read_bytes()
