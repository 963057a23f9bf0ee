"""A Ctrl-C the CLI caught must keep the status it chose (130), also under `python -m`.

CPython records a KeyboardInterrupt that ends a string exec (dataclasses and namedtuple use
them) as unhandled even when it is caught, and `python -m` then dies by SIGINT at exit.
"""

import subprocess
import sys
from pathlib import Path

import pytest

_MODULE = """
import sys

from shuffledp.cli.main import forget_caught_interrupt

try:
    exec("raise KeyboardInterrupt", {})  # what a Ctrl-C inside dataclass creation leaves
except KeyboardInterrupt:
    pass
if sys.argv[1] == "forget":
    forget_caught_interrupt()
sys.exit(7)
"""


def _status(tmp_path: Path, mode: str) -> int:
    (tmp_path / "caught_interrupt.py").write_text(_MODULE)
    return subprocess.run(
        [sys.executable, "-m", "caught_interrupt", mode], cwd=tmp_path, timeout=60, check=False
    ).returncode


def test_a_caught_interrupt_keeps_the_chosen_exit_status(tmp_path: Path) -> None:
    if _status(tmp_path, "keep") == 7:
        pytest.skip("this interpreter keeps the status of a caught KeyboardInterrupt anyway")
    assert _status(tmp_path, "forget") == 7
