"""`shuffledp simulate --chaos`: hostile messages from an authenticated client process.

The pure part (simulations/pipeline/chaos_messages.py) is checked against hop 0 itself: offering the genuine reports,
then the injected messages, then the last genuine report to a HopRound with client
authentication gives exactly the predicted rejections by reason and every genuine report once.
The integration test runs the real processes at n = 2,000 (the size the issue asks CI to run).
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shuffledp.clients.service import ClientSettings
from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.client_auth import ProcessCredentials, process_key
from shuffledp.protocol.transport import MemoryBroker
from shuffledp.randomness import SeededRandom
from shuffledp.shuffler.hop import HopRound
from shuffledp.simulations.pipeline.chaos import run_chaos_clients
from shuffledp.simulations.pipeline.chaos_messages import (
    CHAOS_KINDS,
    EXPECTED_REASON,
    make_chaos_messages,
)
from tests.conftest import require_mosquitto
from tests.integration.test_faults import PersistentMosquitto
from tests.unit.protocol.test_client_auth import MASTER, verifier
from tests.unit.protocol.test_client_auth import seal as seal_messages
from tests.unit.test_services_memory import ANALYZER, EPS0, HOP_PUBLIC, HOPS, PREFIX, H, K

ROUND = 7
PROCESS = ProcessCredentials(process=1, key=process_key(MASTER, 1))


def seal(start: int, values: np.ndarray, round_id: int = ROUND) -> list[bytes]:
    """Authentic messages of PROCESS's clients start, start + 1, ... for ``values``."""
    credentials = [PROCESS.credential(start + i) for i in range(len(values))]
    return seal_messages(values, round_id=round_id, credentials=credentials)


@settings(max_examples=25, deadline=None)
@given(clients=st.integers(2, 12), count=st.integers(0, 60))
def test_hop_0_rejects_every_injected_message_under_its_predicted_reason(
    clients: int, count: int
) -> None:
    values = np.arange(clients) % K
    genuine = seal(0, values)
    sources = genuine[:-1]

    def fresh_report(index: int, old_round: bool) -> bytes:
        return seal(index, values[index : index + 1], ROUND - 1 if old_round else ROUND)[0]

    batch = make_chaos_messages(genuine=sources, count=count, fresh_report=fresh_report)
    assert sum(batch.injected.values()) == len(batch.messages) == count
    # round-robin over the kinds
    assert [batch.injected[kind] for kind in CHAOS_KINDS] == [
        len(range(i, count, len(CHAOS_KINDS))) for i in range(len(CHAOS_KINDS))
    ]
    non_copies = [
        m
        for m, kind in zip(batch.messages, CHAOS_KINDS * count, strict=False)
        if kind != "replayed"
    ]
    assert len(set(non_copies)) == len(non_copies)  # only replays repeat bytes

    hop = HopRound(
        hop_index=0,
        n_hops=H,
        round_id=ROUND,
        private_key=HOPS[0].private,
        expected_size=clients,
        min_batch=1,
        verifier=verifier(ROUND),
    )
    results = hop.offer_many([*sources, *batch.messages, genuine[-1]])
    assert results[: len(sources)] == [None] * len(sources)
    assert results[-1] is None
    assert results[len(sources) : -1] == [
        EXPECTED_REASON[kind] for kind, _ in zip(CHAOS_KINDS * count, range(count), strict=False)
    ]
    assert hop.accepted == clients
    assert {r: c for r, c in hop.rejected.items() if c} == batch.expected_rejections


def test_chaos_is_refused_without_client_authentication() -> None:
    with pytest.raises(InvalidParameterError, match="count must be >= 0"):
        make_chaos_messages(genuine=[b"x" * 100], count=-1, fresh_report=lambda i, o: b"")
    with pytest.raises(InvalidParameterError, match="one length > 40"):
        make_chaos_messages(genuine=[b"x" * 30], count=1, fresh_report=lambda i, o: b"")


@pytest.mark.asyncio
async def test_run_clients_refuses_chaos_without_credentials_before_sending() -> None:
    broker = MemoryBroker()
    settings_ = ClientSettings(prefix=PREFIX, round_id=ROUND, k=K, eps0=EPS0)
    with pytest.raises(InvalidParameterError, match="chaos needs client authentication"):
        await run_chaos_clients(
            broker.connect(),
            settings_,
            np.arange(10) % K,
            hop_public_keys=HOP_PUBLIC,
            analyzer_public_key=ANALYZER.public,
            rng=SeededRandom(1),
            chaos=5,
        )


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
    embedded = _simulate("--n", "100", "--chaos", "--quiet")
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
    common = ["--broker", broker.url, "--keys", str(keys), "--prefix", prefix, "--round", "4"]
    common += ["--reconnect", "30"]

    def spawn(*args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "shuffledp", *args, *common],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    processes = [spawn("analyzer", "--k", "4", "--eps0", "3", "--expected", str(n))]
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
