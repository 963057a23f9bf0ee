"""How a command ends on a signal.

SIGINT, SIGTERM and SIGHUP stop every long-running command the same way: every process it
started is gone, its temporary folders (keys, broker passwords) are removed, one line on stderr
(the last, for a component that logs) and no traceback, exit status 128 + the signal (130,
143, 129).

Each command runs with its own TMPDIR (a fresh folder), which must be empty afterwards, and its
descendants are read from the process table just before the signal; all of them must be gone
within a few seconds. The heavy commands (simulate, stream, experiment) are sent SIGTERM and
SIGHUP (their Ctrl-C has its own tests); the others Ctrl-C and one of those two. About a
minute in all.

A Ctrl-C the CLI caught must keep the status it chose (130), also under `python -m`.

CPython records a KeyboardInterrupt that ends a string exec (dataclasses and namedtuple use
them) as unhandled even when it is caught, and `python -m` then dies by SIGINT at exit.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from shuffledp.brokers.ports import free_loopback_port
from shuffledp.simulations.data.regions import PRESETS
from tests.conftest import default_sigint
from tests.manifests import write_round_manifest

STOP_TIMEOUT = 60  # s from the signal to the command's exit (a loaded 2-core machine)


@dataclass(frozen=True)
class _Case:
    """A command, and how to tell that it is doing its work (children started, or some
    seconds of computation)."""

    args: list[str]
    descendants: int = 0  # wait until this many descendants run
    settle: float = 1.0  # then this many seconds more
    logs: bool = False  # it logs on stderr while it works (then only its last line is checked)


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "shuffledp", *args]


def _paris_checkins(path: Path, users: int) -> Path:
    """A SNAP-format check-in file: ``users`` users, one check-in each, inside Paris, in one
    30-day epoch (a round of ``users`` clients)."""
    region = PRESETS["paris"]
    lat = (region.lat_min + region.lat_max) / 2
    lon = (region.lon_min + region.lon_max) / 2
    lines = [f"{u}\t2010-06-0{1 + u % 9}T12:00:00Z\t{lat}\t{lon}\t{u}" for u in range(users)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _heavy_cases(tmp: Path) -> dict[str, _Case]:
    checkins = _paris_checkins(tmp / "checkins.txt", 20_000)
    return {
        "simulate": _Case(_cmd("simulate", "--n", "50000", "--quiet"), descendants=7),
        "stream": _Case(
            [
                *_cmd("stream", "--dataset", str(checkins), "--region", "paris", "--hops", "2"),
                "--epoch",
                "30d",
                "--max-epochs",
                "1",
                "--quiet",
            ],
            descendants=6,
        ),
        "experiment": _Case(
            [
                *_cmd("experiment", "fig-2", "--out", str(tmp / "out"), "--runs", "20"),
                "--workers",
                "2",
                "--quiet",
            ],
            descendants=4,
        ),
    }


def _light_cases(tmp: Path, broker: str) -> dict[str, _Case]:
    keys = ["--broker", broker, "--keys", str(tmp / "keys"), "--manifest", str(tmp / "round.json")]
    return {
        "account": _Case(  # composing 1e5 rounds: about 30 s (it says so on stderr)
            [
                *_cmd("account", "--n", "10000", "--k", "15", "--eps0", "4", "--delta", "1e-6"),
                "--rounds",
                "100000",
            ],
            settle=4.0,
            logs=True,
        ),
        "audit": _Case(
            [
                *_cmd("audit", "--n", "1000", "--k", "10", "--eps0", "1", "--eps", "0.5"),
                "--trials",
                "100000000",
                "--quiet",
            ],
            settle=4.0,
        ),
        "broker": _Case(_cmd("broker", "--port", str(free_loopback_port())), settle=4.0, logs=True),
        "hop": _Case(
            _cmd("hop", *keys, "--index", "0", "--expected", "10", "--deadline", "600"),
            settle=4.0,
            logs=True,
        ),
        "analyzer": _Case(
            [
                *_cmd("analyzer", *keys, "--k", "4", "--eps0", "1", "--expected", "10"),
                "--deadline",
                "600",
            ],
            settle=4.0,
            logs=True,
        ),
        "clients": _Case(  # waits for hop 0, which never comes
            [
                *_cmd("clients", *keys, "--k", "4", "--eps0", "1", "--values", "synthetic"),
                "--count",
                "10",
                "--ready-timeout",
                "600",
            ],
            settle=4.0,
            logs=True,
        ),
    }


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A key directory (one hop) and an embedded broker enforcing its accounts."""
    tmp = tmp_path_factory.mktemp("deployment")
    subprocess.run(
        _cmd("keys", "init", str(tmp / "keys"), "--hops", "1"), check=True, capture_output=True
    )
    write_round_manifest(
        tmp / "keys", tmp / "round.json", k=4, eps0=1.0, clients=(10,), min_batch=5, deadline=600.0
    )
    port = free_loopback_port()
    broker = subprocess.Popen(
        _cmd("broker", "--port", str(port), "--keys", str(tmp / "keys")),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert broker.stdout is not None and b"listening on" in broker.stdout.readline()
        yield tmp, f"mqtt://127.0.0.1:{port}"
    finally:
        broker.terminate()
        broker.wait(timeout=30)


def _stop_and_check(case: _Case, sig: signal.Signals, tmpdir: Path) -> None:
    tmpdir.mkdir()
    process = subprocess.Popen(
        case.args,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmpdir), "PYTHONFAULTHANDLER": "1"},
        preexec_fn=default_sigint,  # a backgrounded run inherits SIGINT ignored
    )
    try:
        main = psutil.Process(process.pid)
        descendants: list[psutil.Process] = []
        deadline = time.monotonic() + 90
        while len(descendants) < case.descendants and time.monotonic() < deadline:
            time.sleep(0.2)
            descendants = main.children(recursive=True)
            # A command that ended before its work started says why (not a bare "[]").
            assert process.poll() is None, process.communicate()[1]
        assert len(descendants) >= case.descendants, [p.cmdline() for p in descendants]
        time.sleep(case.settle)
        descendants = main.children(recursive=True)
        assert process.poll() is None, process.communicate()[1]
        process.send_signal(sig)
        _, stderr = process.communicate(timeout=STOP_TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 128 + sig, stderr
    assert "Traceback" not in stderr
    *before, last = stderr.splitlines()
    assert last.startswith(f"shuffledp {case.args[3]}: "), stderr
    assert "interrupted" in last or "stopped by" in last, stderr
    assert case.logs or before == [], stderr
    _, alive = psutil.wait_procs(descendants, timeout=10)
    assert alive == [], [p.cmdline() for p in alive]
    assert list(tmpdir.iterdir()) == []


#: SIGTERM and SIGHUP take one path (shuffledp/cli/signals.py routes both into SIGINT's, and
#: only the exit status differs), so each command gets one of them, alternating, and every
#: light command its Ctrl-C as well: each command's stop path and each signal's status are
#: checked without the whole product (it was 24 runs of 3 to 10 s).
HEAVY = [
    ("simulate", signal.SIGTERM),
    ("stream", signal.SIGHUP),
    ("experiment", signal.SIGTERM),
]
LIGHT = [
    (command, sig)
    for command, stopping in [
        ("account", signal.SIGTERM),
        ("audit", signal.SIGHUP),
        ("broker", signal.SIGTERM),
        ("hop", signal.SIGHUP),
        ("analyzer", signal.SIGTERM),
        ("clients", signal.SIGHUP),
    ]
    for sig in (signal.SIGINT, stopping)
]


def _id(case: tuple[str, signal.Signals]) -> str:
    return f"{case[0]}-{case[1].name}"


@pytest.mark.parametrize(("command", "sig"), HEAVY, ids=[_id(c) for c in HEAVY])
def test_a_signal_stops_a_pipeline_and_everything_it_started(
    command: str, sig: signal.Signals, tmp_path: Path
) -> None:
    # A short TMPDIR: the experiment's fork server puts a Unix socket under it (at most 107
    # bytes), and pytest's tmp_path under xdist is longer than that allows.
    short = Path(tempfile.mkdtemp(prefix="sdp-sig-", dir="/tmp"))
    try:
        _stop_and_check(_heavy_cases(tmp_path)[command], sig, short / "t")
    finally:
        shutil.rmtree(short, ignore_errors=True)


@pytest.mark.parametrize(("command", "sig"), LIGHT, ids=[_id(c) for c in LIGHT])
def test_a_signal_stops_a_command_in_one_line(
    command: str,
    sig: signal.Signals,
    deployment: tuple[Path, str],
    tmp_path: Path,
) -> None:
    folder, broker = deployment
    _stop_and_check(_light_cases(folder, broker)[command], sig, tmp_path / "tmpdir")


def test_a_forked_child_dies_of_the_signal_as_by_default() -> None:
    """The handler in a process forked from the command (inherited) does not turn SIGTERM into
    a KeyboardInterrupt there: the child dies of it."""
    code = (
        "import os, signal, time\n"
        "from shuffledp.cli import signals\n"
        "signals.install()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    time.sleep(30)\n"
        "    os._exit(0)\n"
        "time.sleep(0.5)\n"
        "os.kill(pid, signal.SIGTERM)\n"
        "print(os.waitpid(pid, 0)[1])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert os.WIFSIGNALED(int(done.stdout)) and os.WTERMSIG(int(done.stdout)) == signal.SIGTERM


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


def _wait_until_it_catches(pid: int, sig: signal.Signals) -> None:
    """Until the process catches ``sig`` (its bit in /proc/PID/status's SigCgt): the launcher's
    start-up handlers are in place and the CLI's modules are loading. Before that the
    interpreter itself is starting (0.15 s was not enough under load), where no Python code of
    ours can answer a signal."""
    deadline = time.monotonic() + STOP_TIMEOUT
    while time.monotonic() < deadline:
        status = Path(f"/proc/{pid}/status").read_text()
        caught = int(
            next(line for line in status.splitlines() if line.startswith("SigCgt:"))[7:], 16
        )
        if caught >> (int(sig) - 1) & 1:
            return
        time.sleep(0.005)
    raise AssertionError(f"the process did not catch {sig.name} within {STOP_TIMEOUT} s")


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name
)
def test_a_signal_while_the_modules_load_ends_in_one_line(sig: signal.Signals) -> None:
    # Once it catches SIGHUP it is importing the CLI (a second or more): shuffledp/launcher.py
    # handles the signal there; had the import finished, the command's own handlers do. Either
    # way: 128 + the signal, one line naming the command, no traceback. (The console script
    # runs the same launcher: tests/unit/cli/test_entry_point.py.)
    process = subprocess.Popen(
        _cmd("account", "--n", "1000", "--k", "10", "--eps0", "2", "--eps", "1"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    _wait_until_it_catches(process.pid, signal.SIGHUP)
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=STOP_TIMEOUT)
    assert process.returncode == 128 + sig, stderr
    assert "Traceback" not in stderr
    assert len(stderr.splitlines()) == 1, stderr
    assert stderr.startswith("shuffledp account: ") and "interrupted" in stderr, stderr


def test_a_tmpdir_too_long_for_the_worker_pool_is_named(tmp_path: Path) -> None:
    # The fork server's socket path TMPDIR/pymp-XXXXXXXX/listener-XXXXXXXX must fit 107 bytes.
    long_tmp = tmp_path / ("d" * (110 - len(str(tmp_path))))
    long_tmp.mkdir()
    result = subprocess.run(
        _cmd("experiment", "fig-2", "--out", str(tmp_path / "out"), "--runs", "2", "--quick"),
        capture_output=True,
        text=True,
        timeout=STOP_TIMEOUT,
        env={**os.environ, "TMPDIR": str(long_tmp)},
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "set TMPDIR to a shorter folder" in result.stderr, result.stderr
