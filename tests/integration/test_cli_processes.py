"""The installed command in a real process: its exit codes and streams (`shuffledp account`,
compared with the in-process run of tests/unit/cli/test_cli.py), and what a fresh interpreter
imports at start-up (every hop, client and analyzer process starts through this command)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.unit.cli.test_cli import account, run_json


def _subprocess(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shuffledp", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_subprocess_json_equals_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    argv = account(100, 10, "2", "--eps", "0.1", "--json")
    proc = _subprocess(argv)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.count("\n") == 1
    assert json.loads(proc.stdout) == run_json(capsys, argv)


def test_subprocess_bad_input_exit_2() -> None:
    proc = _subprocess(account(10, 3, "1", "--delta", "1.5"))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == "shuffledp account: error: --delta must be in (0, 1), got 1.5\n"


def test_the_command_does_not_load_what_only_some_subcommands_need() -> None:
    """Every process of the pipeline (hops, clients, analyzer) starts through this command, which
    builds the parser of every subcommand; heavy modules must load only where they are used (the
    audit's import cost every hop and client 50 MiB and 1 s at start-up once)."""
    heavy = (
        "scipy.stats",
        "matplotlib",
        "dp_accounting",
        "diffprivlib",
        "sklearn",
        "shuffledp.simulations.audit.empirical",
        "shuffledp.simulations.pipeline.stream",
        "shuffledp.simulations.experiments.fastpath",
    )
    probe = f"import sys, shuffledp.cli; print(','.join(m for m in {heavy!r} if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == ""


def test_mpmath_is_not_imported_at_start_up() -> None:
    """Hops and clients import the accountant package; mpmath loads only when the bound runs."""
    code = (
        "import sys; import shuffledp.accountant, shuffledp.cli; "
        "assert 'mpmath' not in sys.modules, 'mpmath imported at start-up'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_importing_the_package_loads_no_api_module() -> None:
    probe = (
        "import sys, shuffledp, shuffledp.protocol\n"
        "heavy = ('shuffledp.simulations.pipeline.api', 'shuffledp.accountant', "
        "'dp_accounting', 'shuffledp.simulations.pipeline.simulate')\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
        "shuffledp.simulate\n"
        "print('shuffledp.simulations.pipeline.api' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.split("\n")[:2] == ["", "True"]


def test_a_reader_that_goes_away_ends_the_command_quietly() -> None:
    """`shuffledp ... | head`: standard output is closed before the command writes. It ends
    with the SIGPIPE status (141) and nothing on stderr (it once printed 'error: Broken pipe'
    and exited 1, or a traceback at the interpreter's final flush)."""
    from shuffledp.cli.main import EXIT_BROKEN_PIPE

    argv = account(100, 10, "2", "--eps", "0.1")
    process = subprocess.Popen(
        [sys.executable, "-m", "shuffledp", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    process.stdout.close()  # the reader is gone before the first write
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == EXIT_BROKEN_PIPE
    assert stderr == b""
