"""Errors on the command line: one line naming the flag, exit status 2 for bad input and 1 for a
run that failed, the same in every command.

Each test could fail: a traceback, a second line, the Python identifier instead of the flag, or
the other exit status would each break an assertion.
"""

from __future__ import annotations

import errno
import importlib.metadata
import socket
import time
from pathlib import Path

import pytest

from shuffledp.brokers.amqtt_compat import AMQTT_VERSION
from shuffledp.cli import main
from shuffledp.cli.main import exit_status
from shuffledp.errors import (
    BrokerError,
    InvalidParameterError,
    OperationalError,
    OutsideConditionsError,
    RejectedMessage,
)
from tests.manifests import write_round_manifest
from tests.unit.cli.conftest import Outcome, Shuffledp

UNREACHABLE = "mqtt://127.0.0.1:1"  # port 1: nothing listens there


def one_line(outcome: Outcome, command: str) -> str:
    """The single stderr line of a failed command, checked for shape; its message."""
    assert outcome.err.endswith("\n") and outcome.err.count("\n") == 1, outcome.err
    assert "Traceback" not in outcome.err
    prefix = f"shuffledp {command}: error: "
    assert outcome.err.startswith(prefix), outcome.err
    return outcome.err[len(prefix) : -1]


# -- the mapping ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (InvalidParameterError("x"), 2),
        (OutsideConditionsError("x"), 2),
        (OperationalError("x"), 1),
        (BrokerError("x"), 1),
        (RejectedMessage("x"), 1),
        (FileNotFoundError(errno.ENOENT, "No such file or directory", "f"), 1),
        (ValueError("a bug"), None),
        (RuntimeError("a bug"), None),
        (KeyError("a bug"), None),
    ],
)
def test_exit_status_by_error_class(error: BaseException, status: int | None) -> None:
    assert exit_status(error) == status


def test_an_unexpected_exception_keeps_its_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug is not dressed up as a one-line error: it leaves main() as it was raised."""
    from shuffledp.cli import account

    def broken(args: object) -> int:
        raise RuntimeError("dictionary changed size during iteration")

    monkeypatch.setattr(account, "run", broken)
    with pytest.raises(RuntimeError, match="dictionary changed size"):
        main(["account", "--n", "10", "--k", "3", "--eps0", "1", "--eps", "1"])


def test_a_group_of_failed_publishes_is_its_first_error_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Concurrent publishes (a TaskGroup) that failed raise an ExceptionGroup: the command says
    its first error in one line with that error's status (6: a report already published), and a
    group holding a bug keeps its traceback."""
    from shuffledp.cli import account
    from shuffledp.protocol.delivery import ReportExistsError
    from shuffledp.protocol.mqtt import IdentityInUseError

    argv = ["account", "--n", "10", "--k", "3", "--eps0", "1", "--eps", "1"]
    for error, status in [(ReportExistsError("published"), 6), (IdentityInUseError("taken"), 1)]:

        def failed(args: object, error: Exception = error) -> int:
            raise ExceptionGroup("publishes", [ExceptionGroup("inner", [error]), error])

        monkeypatch.setattr(account, "run", failed)
        assert main(argv) == status
        err = capsys.readouterr().err
        assert err == f"shuffledp account: error: {error}\n"

    def bug(args: object) -> int:
        raise ExceptionGroup("publishes", [KeyError("a bug")])

    monkeypatch.setattr(account, "run", bug)
    with pytest.raises(ExceptionGroup):
        main(argv)


# -- bad input: exit status 2, the flag named ------------------------------------------------------

BAD_FLAGS = [
    (
        "simulate",
        ["simulate", "--client-processes", "0"],
        "--client-processes must be in [1, 64], got 0",
    ),
    ("simulate", ["simulate", "--eps0", "-1"], "--eps0 must be > 0, got -1"),
    ("simulate", ["simulate", "--delta", "2"], "--delta must be in (0, 1), got 2"),
    (
        "simulate",
        ["simulate", "--n", "3", "--client-processes", "5"],
        "--client-processes must be <= --n = 3, got 5",
    ),
    ("simulate", ["simulate", "--n", "10", "--min-batch", "11"], "--min-batch must be in"),
    ("stream", ["stream", "--dataset", "-", "--region", "sf", "--hops", "0"], "--hops must be"),
    ("hop", ["hop", "--keys", "k", "--index", "0", "--expected", "0"], "--expected must be >= 1"),
    (
        "analyzer",
        ["analyzer", "--keys", "k", "--k", "1", "--eps0", "1", "--expected", "9"],
        "--k must be in [2, ",
    ),
    (
        "clients",
        ["clients", "--keys", "k", "--k", "3", "--eps0", "1", "--values", "v", "--rate", "0"],
        "--rate must be > 0, got 0",
    ),
    (
        "clients",
        ["clients", "--keys", "k", "--k", "3", "--eps0", "x", "--values", "v"],
        "--eps0 must be a real number, got 'x'",
    ),
    ("broker", ["broker", "--port", "70000"], "--port must be in [1, 65535], got 70000"),
    ("keys init", ["keys", "init", "d", "--clients", "0"], "--clients must be in [1, "),
    ("experiment", ["experiment", "all", "--out", "o", "--workers", "0"], "--workers must be"),
    ("audit", ["audit", "--n", "1", "--k", "3", "--eps0", "1", "--eps", "1"], "--n must be >= 2"),
    ("account", ["account", "--n", "9", "--k", "3", "--eps0", "1", "--eps", "nan"], "--eps must"),
]


@pytest.mark.parametrize(("command", "argv", "message"), BAD_FLAGS)
def test_bad_flag_is_one_line_naming_the_flag_exit_2(
    shuffledp: Shuffledp, command: str, argv: list[str], message: str
) -> None:
    outcome = shuffledp(*argv)
    assert outcome.code == 2
    assert outcome.out == ""
    assert message in one_line(outcome, command)


IDENTIFIERS = ("client_processes", "expected_size", "min_batch", "overwrite=True", "n_expected")


@pytest.mark.parametrize(("command", "argv", "message"), BAD_FLAGS)
def test_messages_never_name_python_identifiers(
    shuffledp: Shuffledp, command: str, argv: list[str], message: str
) -> None:
    err = shuffledp(*argv).err
    assert not any(name in err for name in IDENTIFIERS), err


def test_existing_keys_message_names_the_flag(shuffledp: Shuffledp, tmp_path: Path) -> None:
    assert shuffledp("keys", "init", str(tmp_path / "k"), "--hops", "1").code == 0
    outcome = shuffledp("keys", "init", str(tmp_path / "k"), "--hops", "1")
    assert outcome.code == 2
    message = one_line(outcome, "keys init")
    assert "already exists (--overwrite replaces the keys)" in message
    assert "overwrite=True" not in message


# -- a missing or unreadable input file: exit status 2 in every command ----------------------------


def missing_inputs(tmp: Path) -> list[tuple[str, list[str], str]]:
    missing = str(tmp / "missing.txt")
    keys = str(tmp / "keys")
    manifest = ["--manifest", str(tmp / "round.json")]
    return [
        (
            "simulate",
            ["simulate", "--dataset", f"gowalla:{missing}", "--region", "sf"],
            f"--dataset {missing}: no such file",
        ),
        ("simulate", ["simulate", "--keys", str(tmp / "nokeys")], "public.json"),
        ("stream", ["stream", "--dataset", missing, "--region", "sf"], missing),
        (
            "clients",
            ["clients", "--keys", keys, *manifest, "--values", missing],
            f"--values {missing}: no such file",
        ),
        (
            "clients",
            ["clients", "--keys", keys, *manifest, "--values", str(tmp)],
            "is a folder, a file is needed",
        ),
        (
            "hop",
            ["hop", "--keys", keys, *manifest, "--index", "0", "--tls-ca", missing],
            f"--tls-ca {missing}: no such file",
        ),
        (
            "hop",
            ["hop", "--keys", str(tmp / "nokeys"), *manifest, "--index", "0"],
            "public",
        ),
        (
            "experiment",
            ["experiment", "fig-6", "--out", str(tmp / "o"), "--dataset", missing],
            f"--dataset {missing}: no such file",
        ),
    ]


@pytest.mark.parametrize("case", range(8))
def test_missing_input_file_is_exit_2_in_every_command(
    shuffledp: Shuffledp, tmp_path: Path, case: int
) -> None:
    assert shuffledp("keys", "init", str(tmp_path / "keys"), "--hops", "1").code == 0
    write_round_manifest(tmp_path / "keys", tmp_path / "round.json")
    command, argv, message = missing_inputs(tmp_path)[case]
    outcome = shuffledp(*argv)
    assert outcome.code == 2, outcome.err
    assert message in one_line(outcome, command)


# -- an unreachable broker: one line, exit status 1 -----------------------------------------------


def unreachable_commands(tmp: Path) -> list[tuple[str, list[str]]]:
    keys = str(tmp / "keys")
    checkins = tmp / "checkins.txt"
    checkins.write_text(
        "u1\t2020-01-01T00:00:00Z\t0.5\t0.5\t1\n"
        "u2\t2020-01-01T01:00:00Z\t0.2\t0.7\t2\n"
        "u3\t2020-01-01T02:00:00Z\t0.7\t0.2\t3\n",
        encoding="utf-8",
    )
    broker = ["--broker", UNREACHABLE]
    # --no-reconnect: a component otherwise waits up to --reconnect (60 s) for the broker to
    # come up (tests/integration/test_components_any_order.py).
    common = [*broker, "--keys", keys, "--no-reconnect", "--manifest", str(tmp / "round.json")]
    return [
        ("simulate", ["simulate", "--broker", UNREACHABLE, "--n", "10"]),  # progress shown
        (
            "stream",
            ["stream", "--dataset", str(checkins), "--box", "0,1,0,1", "--grid", "2x2", *broker],
        ),
        ("hop", ["hop", *common, "--index", "0", "--expected", "4"]),
        ("analyzer", ["analyzer", *common, "--k", "3", "--eps0", "1", "--expected", "4"]),
        ("clients", ["clients", *common, "--k", "3", "--eps0", "1", "--values", "synthetic"]),
    ]


@pytest.mark.parametrize("case", range(5))
def test_unreachable_broker_is_one_line_exit_1(
    shuffledp: Shuffledp, tmp_path: Path, case: int
) -> None:
    assert shuffledp("keys", "init", str(tmp_path / "keys"), "--hops", "1").code == 0
    write_round_manifest(tmp_path / "keys", tmp_path / "round.json")
    command, argv = unreachable_commands(tmp_path)[case]
    if command == "clients":
        argv = [*argv, "--count", "4"]
    outcome = shuffledp(*argv)
    assert outcome.code == 1, outcome.err
    message = one_line(outcome, command)
    assert message == f"cannot reach the broker at {UNREACHABLE}: connection refused"


# -- shuffledp broker: a port in use, an amqtt failure, another amqtt ----------------------------


def test_broker_port_in_use_is_one_line_exit_1(shuffledp: Shuffledp) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        outcome = shuffledp("broker", "--port", str(port))
    assert outcome.code == 1
    assert f"port {port} on 127.0.0.1 is already in use" in one_line(outcome, "broker")


def test_broker_amqtt_failure_is_not_called_a_port_in_use(
    shuffledp: Shuffledp, monkeypatch: pytest.MonkeyPatch
) -> None:
    from amqtt.broker import Broker
    from amqtt.errors import BrokerError as AmqttBrokerError

    async def crash(self: object) -> None:
        raise AmqttBrokerError("Broker instance can't be started") from OSError(
            errno.EACCES, "Permission denied"
        )

    monkeypatch.setattr(Broker, "start", crash)
    outcome = shuffledp("broker", "--port", "1884")
    assert outcome.code == 1
    message = one_line(outcome, "broker")
    assert "could not start" in message and "Permission denied" in message
    assert "in use" not in message


def test_broker_refuses_another_amqtt_version(
    shuffledp: Shuffledp, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.11.3")
    started = time.monotonic()
    outcome = shuffledp("broker", "--port", "1884")
    assert outcome.code == 1
    message = one_line(outcome, "broker")
    assert f"needs amqtt {AMQTT_VERSION}" in message and "found amqtt 0.11.3" in message
    assert time.monotonic() - started < 5
