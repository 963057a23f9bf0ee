"""`shuffledp simulate --chaos` and the stage commands as real processes on Mosquitto: the
issue's CI run at n = 2,000 through a hop kill, the brokers chaos refuses, and a Mosquitto
restart survived by every component (the pure part: tests/unit/simulations/test_chaos.py)."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shuffledp.simulations.pipeline.chaos_messages import CHAOS_KINDS
from tests.conftest import require_mosquitto
from tests.integration.test_faults import PersistentMosquitto
from tests.manifests import write_round_manifest


def _simulate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shuffledp", "simulate", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.integration
def test_simulate_chaos_at_n_2000_counts_every_report_once_through_a_hop_kill() -> None:
    """The issue's CI run: n = 2,000, 10 % hostile messages, hop 0 killed with SIGKILL while it
    collects and restarted; every genuine report counted exactly once, every injected message
    rejected under its reason (duplicates may exceed the injected replays by the messages the
    broker redelivers to the restarted hop; never accepted twice)."""
    require_mosquitto()
    done = _simulate(
        "--n", "2000", "--k", "5", "--hops", "3", "--chaos", "--broker", "mosquitto",
        "--json", "--quiet",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    chaos = report["chaos"]
    assert report["n_received"] == 2000
    assert sum(report["histogram"]) == 2000
    assert chaos["injected_total"] == 200  # 10 % of n
    assert set(chaos["injected"]) == set(CHAOS_KINDS)
    killed = chaos["hop_killed"]
    assert killed["process_was"] == "running" and killed["restarted"] is True
    assert 500 <= killed["last_progress_accepted"] < 2000  # mid-collection
    observed, expected = chaos["hop0_rejections"], chaos["expected_rejections"]
    assert {r: c for r, c in observed.items() if r != "duplicate"} == {
        r: c for r, c in expected.items() if r != "duplicate"
    }
    assert observed["duplicate"] == expected["duplicate"] + chaos["redelivered_duplicates"]
    assert chaos["redelivered_duplicates"] >= 0
    assert chaos["rejections_as_expected"] and chaos["all_reports_counted_once"]
    # nothing got past hop 0: the later stages rejected nothing
    assert {r: c for r, c in report["rejected"].items() if c} == observed


def test_simulate_chaos_refuses_a_broker_that_keeps_no_sessions_and_no_auth() -> None:
    embedded = _simulate("--n", "100", "--chaos", "--broker", "embedded", "--quiet")
    assert embedded.returncode == 2
    assert "needs a broker that keeps MQTT sessions" in embedded.stderr
    no_auth = _simulate("--n", "100", "--chaos", "--no-auth", "--broker", "mosquitto", "--quiet")
    assert no_auth.returncode == 2
    assert "chaos needs client authentication" in no_auth.stderr
    assert "Traceback" not in embedded.stderr + no_auth.stderr


@pytest.mark.integration
def test_components_from_the_command_line_survive_a_mosquitto_restart(tmp_path: Path) -> None:
    """`shuffledp analyzer|hop|clients --reconnect` (hops also `--state-dir`) against a
    Mosquitto with persistence that enforces the key directory's accounts: the broker is stopped
    while clients are still sending and hop 0 holds part of the batch, and started again; the
    round completes with every report counted once (only duplicates rejected: publishes sent
    again after the restart)."""
    require_mosquitto()
    n, prefix = 1500, f"test/restart-{secrets.token_hex(4)}"
    keys = tmp_path / "keys"
    init = subprocess.run(
        [sys.executable, "-m", "shuffledp", "keys", "init", str(keys), "--hops", "2",
         "--clients", "1", "--clients-per-process", str(n), "--prefix", prefix],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert init.returncode == 0, init.stderr
    broker = PersistentMosquitto(tmp_path / "broker", access_dir=keys / "access")
    (tmp_path / "broker").mkdir()
    broker.start()
    manifest = write_round_manifest(
        keys, tmp_path / "round.json", prefix=prefix, rounds=(4,), k=4, eps0=3.0, clients=(n,),
        min_batch=n // 2, deadline=300.0,
    )  # fmt: skip
    common = ["--broker", broker.url, "--keys", str(keys), "--prefix", prefix, "--round", "4"]
    common += ["--reconnect", "30", "--manifest", str(manifest)]

    def spawn(*args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "shuffledp", *args, *common],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    processes = [spawn("analyzer", "--k", "4", "--eps0", "3", "--expected", str(n), "--json")]
    for index in range(2):
        state = str(tmp_path / f"state-{index}")
        processes.append(
            spawn("hop", "--index", str(index), "--expected", str(n), "--state-dir", state)
        )
    processes.append(
        spawn("clients", "--k", "4", "--eps0", "3", "--values", "synthetic", "--count", str(n),
              "--rate", "500")
    )  # fmt: skip
    try:
        journal = tmp_path / "state-0"
        deadline = time.monotonic() + 60
        while sum(p.stat().st_size for p in journal.glob("*")) < n // 4 * 200:
            assert time.monotonic() < deadline, "hop 0 journaled nothing within 60 s"
            time.sleep(0.01)
        broker.stop()
        time.sleep(0.5)
        broker.start()
        out, err = processes[0].communicate(timeout=120)
        assert processes[0].returncode == 0, err
        report = json.loads(out)
        assert report["n_received"] == n and sum(report["histogram"]) == n
        redelivered = {"duplicate", "duplicate-frame"}
        assert {r: c for r, c in report["rejected"].items() if c and r not in redelivered} == {}
        for process in processes[1:]:
            _, err = process.communicate(timeout=60)
            assert process.returncode == 0, err
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
        broker.stop()
