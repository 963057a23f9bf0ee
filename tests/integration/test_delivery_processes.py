"""End-to-end delivery and loud accounting with real processes (`shuffledp simulate`):

- a plain Mosquitto (``listener``, ``allow_anonymous true``, nothing else: at most 1,000
  queued QoS 1 messages per client) while hop 0 is paused with SIGSTOP for 1 s: the broker drops
  what hop 0's queue cannot hold (about a tenth of the reports when measured), the client
  processes learn it from hop 0's receipts and resend, and every report is counted exactly once
  (before receipts, 8 % fewer were published, with exit status 0);
- a client process stopped (SIGSTOP) before it handed any report to the broker: nothing can
  repair that, and `simulate` exits with status 5 and one line saying how many reports were
  lost and where; with ``--accept-loss`` the smaller round is published and says so.

The stopped processes are found by the run's own round id (a random 48-bit one), never by a
broad name.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import require_mosquitto


def _pids(pattern: str) -> list[int]:
    found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True, check=False)
    return [int(pid) for pid in found.stdout.split()]


def _wait_pid(pattern: str, timeout: float = 60.0) -> int:
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        pids = _pids(pattern)
        if pids:
            return pids[0]
        time.sleep(0.02)
    raise AssertionError(f"no process matching {pattern!r} within {timeout} s")


def _simulate(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "shuffledp", "simulate", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _client_stopped_round(*extra: str) -> tuple[int, str, str]:
    """simulate n = 2,000 over 2 client processes with clients-1 stopped as soon as it runs:
    (exit status, stdout, stderr)."""
    round_id = 1 + secrets.randbelow(2**48)
    run = _simulate(
        "--n", "2000", "--k", "5", "--hops", "2", "--broker", "mosquitto", "--deadline", "4",
        "--round", str(round_id), "--quiet", "--json", *extra,
    )  # fmt: skip
    stopped = _wait_pid(f"shuffledp clients .*--round {round_id} .*--name clients-1")
    os.kill(stopped, signal.SIGSTOP)
    try:
        out, err = run.communicate(timeout=240)
    finally:
        if run.poll() is None:
            run.kill()
    return run.returncode, out, err


@pytest.mark.integration
def test_a_client_process_stopped_before_sending_fails_the_round_naming_the_loss() -> None:
    require_mosquitto()
    code, out, err = _client_stopped_round()
    assert code == 5, err
    assert out == ""
    lines = err.strip().splitlines()
    assert lines == [
        "shuffledp simulate: error: the round was refused: lost 1,000 of 2,000 reports between "
        "clients and hop-0 (the client processes said they sent 1,000)"
    ]


@pytest.mark.integration
def test_accept_loss_publishes_the_smaller_round_and_says_so() -> None:
    require_mosquitto()
    code, out, err = _client_stopped_round("--accept-loss")
    assert code == 0, err
    report = json.loads(out)
    assert report["n_received"] == 1000 and report["privacy"]["n"] == 1000
    assert report["warning"].startswith("lost 1,000 of 2,000 reports between clients and hop-0")
    assert "published with --accept-loss" in report["warning"]
    delivery = report["delivery"]
    assert delivery["lost"] == 1000 and delivery["loss_accepted"] is True
    assert delivery["clients_sent"] == 1000


@pytest.mark.integration
def test_a_paused_hop_0_on_a_plain_mosquitto_still_counts_every_report(tmp_path: Path) -> None:
    require_mosquitto()
    from shuffledp.brokers.mosquitto import find_mosquitto
    from shuffledp.brokers.ports import free_loopback_port

    port = free_loopback_port()
    config = tmp_path / "plain.conf"
    config.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\n")
    binary = find_mosquitto()
    assert binary is not None
    broker = subprocess.Popen([binary, "-c", str(config)], stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        round_id = 1 + secrets.randbelow(2**48)
        n = 20_000
        run = _simulate(
            "--n", str(n), "--k", "5", "--hops", "2", "--broker", f"mqtt://127.0.0.1:{port}",
            "--round", str(round_id), "--quiet", "--json", "--seed", "4",
        )  # fmt: skip
        hop0 = _wait_pid(f"shuffledp hop .*--round {round_id} .*--index 0 ")
        time.sleep(4.0)  # the clients are sending
        os.kill(hop0, signal.SIGSTOP)
        time.sleep(1.0)
        os.kill(hop0, signal.SIGCONT)
        out, err = run.communicate(timeout=400)
    finally:
        broker.terminate()
        broker.wait(timeout=10)
    assert run.returncode == 0, err
    report = json.loads(out)
    assert report["n_received"] == n
    assert report["delivery"]["lost"] == 0 and report["delivery"]["counted"] == n
    assert {r: c for r, c in report["rejected"].items() if c and r != "duplicate"} == {}
