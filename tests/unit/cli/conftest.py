"""Running `shuffledp` in-process for the command-line tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from shuffledp.cli import main


@dataclass(frozen=True)
class Outcome:
    """What one command left: its exit status and the two streams."""

    code: int
    out: str
    err: str


Shuffledp = Callable[..., Outcome]


@pytest.fixture
def shuffledp(capsys: pytest.CaptureFixture[str]) -> Shuffledp:
    """``shuffledp(*argv)`` runs the command in-process and returns its :class:`Outcome`;
    argparse's usage errors leave through SystemExit, the rest through main's return value."""

    def run(*argv: str) -> Outcome:
        try:
            code = main(list(argv))
        except SystemExit as stop:
            assert isinstance(stop.code, int), stop.code
            code = stop.code
        captured = capsys.readouterr()
        return Outcome(code, captured.out, captured.err)

    return run
