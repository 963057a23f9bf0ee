"""Full rounds over real MQTT brokers on 127.0.0.1: the embedded amqtt broker and Mosquitto.

Each test uses its own broker on a free loopback port (fixtures in conftest.py) and its own topic
prefix; nothing reaches a public host.

- In-process services (one MqttTransport per stage, as separate clients of the broker): n = 2,000
  reports, H = 3: every report arrives exactly once (n_received == n, every stage accepted n,
  nothing rejected), the histogram sums to n, and the shuffle+INV estimate is within the TV bound
  of tests/stats.py (false-alarm rate 1e-6).
- Arrival order: the order in which the analyzer receives the reports is independent of the order
  the clients sent them (hypergeometric and chi-square tests, false-alarm rate 1e-6 in all).
- `shuffledp simulate --n 2000 --json` as a subprocess on each broker: the same checks on the
  report it prints; Ctrl-C stops it and every process it started.
- The deployment path by hand: `keys init`, `analyzer`, `hop`, `clients --values synthetic` as
  separate processes against Mosquitto.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import psutil
import pytest
from scipy.stats import chi2_contingency, hypergeom

from shuffledp.analyzer import tv_distance
from shuffledp.analyzer.service import AnalyzerSettings, run_analyzer
from shuffledp.clients.service import ClientSettings, run_clients
from shuffledp.protocol import REJECTION_REASONS, decode_record, generate_keypair, peel
from shuffledp.protocol.mqtt import MqttTransport
from shuffledp.protocol.onion import message_length
from shuffledp.protocol.topics import analyzer_topic
from shuffledp.security.mosquitto_bounds import build_bounds_plugin
from shuffledp.shuffler.service import HopSettings, run_hop
from shuffledp.simulations.data.datasets import synthetic_values
from tests.binding import MANIFEST_DIGEST, analyzer_binding, frame_assembler, hop_binding
from tests.conftest import default_sigint, require_mosquitto
from tests.manifests import write_round_manifest
from tests.stats import tv_bound

pytestmark = pytest.mark.integration

ALPHA = 1e-6
N = 2_000
K = 15
EPS0 = 4.0
H = 3
ROUND = 7
EPS0_ORDER = 8.0
REPORT_KEYS = {
    "round",
    "n_expected",
    "n_received",
    "rejected",
    "k",
    "eps0",
    "histogram",
    "estimate",
    "estimator",
    "privacy",
    "true_histogram",
    "tv_distance",
    "randomness",
    "timings",
}


def _prefix() -> str:
    return f"test/{secrets.token_hex(6)}"


async def _round(
    url: str,
    values: npt.NDArray[np.int64],
    *,
    k: int,
    eps0: float,
    observe: bool = False,
) -> tuple[dict[str, Any], list[int]]:
    """One round over the broker at ``url``; with ``observe``, also the values of the reports in
    the order the analyzer received them (an extra subscriber holding the analyzer's key)."""
    prefix = _prefix()
    hops = [generate_keypair() for _ in range(H)]
    analyzer_keys = generate_keypair()
    n = int(values.size)
    arrivals: list[int] = []

    async def hop(index: int) -> None:
        settings = HopSettings(
            prefix=prefix,
            round_id=ROUND,
            hop_index=index,
            n_hops=H,
            expected_size=n,
            min_batch=n,
            deadline=120,
            **hop_binding(index),
        )
        async with MqttTransport(url, client_id=f"t-hop-{index}-{secrets.token_hex(3)}") as t:
            await run_hop(t, settings, hops[index].private)

    async def analyzer() -> dict[str, Any]:
        settings = AnalyzerSettings(
            prefix=prefix,
            round_id=ROUND,
            k=k,
            eps0=eps0,
            n_hops=H,
            n_expected=n,
            deadline=120,
            **analyzer_binding(H),
        )
        async with MqttTransport(url, client_id=f"t-an-{secrets.token_hex(3)}") as t:
            return await run_analyzer(t, settings, analyzer_keys.private)

    async def clients() -> None:
        settings = ClientSettings(
            prefix=prefix, round_id=ROUND, k=k, eps0=eps0, manifest_digest=MANIFEST_DIGEST
        )
        async with MqttTransport(url, client_id=f"t-cl-{secrets.token_hex(3)}") as t:
            await run_clients(
                t,
                settings,
                values,
                hop_public_keys=[h.public for h in hops],
                analyzer_public_key=analyzer_keys.public,
            )

    async def observer(ready: asyncio.Event) -> None:
        assembler = frame_assembler(ROUND, H - 1)
        length = message_length(H, H)
        async with MqttTransport(url, client_id=f"t-obs-{secrets.token_hex(3)}") as t:
            await t.subscribe(analyzer_topic(prefix, ROUND))
            ready.set()
            async for message in t.messages():
                for item in assembler.add(message.payload):
                    record = decode_record(
                        peel(item, analyzer_keys.private, expected_length=length),
                        expected_round=ROUND,
                        k=k,
                        manifest_digest=MANIFEST_DIGEST,
                    )
                    arrivals.append(record.value)
                if assembler.complete:
                    return

    async with asyncio.timeout(240), asyncio.TaskGroup() as group:
        if observe:
            watching = asyncio.Event()
            group.create_task(observer(watching), name="observer")
            await watching.wait()
        report_task = group.create_task(analyzer(), name="analyzer")
        for index in range(H):
            group.create_task(hop(index), name=f"hop-{index}")
        group.create_task(clients(), name="clients")
    return report_task.result(), arrivals


def _check_round(report: dict[str, Any], truth: npt.NDArray[np.int64], eps0: float) -> None:
    n = int(truth.sum())
    assert report["n_received"] == n
    assert sum(report["histogram"]) == n
    assert report["rejected"] == {reason: 0 for reason in report["rejected"]}
    assert set(REJECTION_REASONS) <= set(report["rejected"])
    for stage, log in report["stages"].items():
        if stage.startswith("hop-"):
            assert log["accepted"] == n and log["forwarded"] == n, (stage, log)
            assert not log["timed_out"]
    assert report["privacy"]["n"] == n
    assert report["privacy"]["delta"] <= 1e-6
    distribution = np.asarray(report["estimate"]["distribution"])
    bound = tv_bound(truth, eps0, ALPHA)
    # The bound can fail: the uniform distribution is farther than it from the truth.
    assert bound < tv_distance(np.full(truth.size, 1.0 / truth.size), truth / n)
    assert tv_distance(distribution, truth / n) <= bound


def _values() -> npt.NDArray[np.int64]:
    return synthetic_values(N, K)


@pytest.mark.asyncio
async def test_full_round_over_the_embedded_broker(embedded_broker_url: str) -> None:
    values = _values()
    report, _ = await _round(embedded_broker_url, values, k=K, eps0=EPS0)
    _check_round(report, np.bincount(values, minlength=K), EPS0)


@pytest.mark.asyncio
async def test_full_round_over_mosquitto(mosquitto_url: str) -> None:
    values = _values()
    report, _ = await _round(mosquitto_url, values, k=K, eps0=EPS0)
    _check_round(report, np.bincount(values, minlength=K), EPS0)


def _order_p_values(arrivals: list[int]) -> tuple[float, float]:
    """Clients sent N/2 reports of value 0, then N/2 of value 1 (eps0 = 8: a report differs from
    its value with probability 1 / (e^8 + 1) = 3.4e-4, so the values mark the sending half). The
    k-RR draws are independent of the order, so under a uniform permutation the arrival order of
    the received values is uniform whatever they are: the zeros among the first N/2 arrivals follow
    Hypergeom(N, zeros, N/2) exactly; and the 10 arrival blocks x 2 values table is independent."""
    arrived = np.asarray(arrivals)
    n = arrived.size
    zeros_first_half = int((arrived[: n // 2] == 0).sum())
    zeros = int((arrived == 0).sum())
    law = hypergeom(n, zeros, n // 2)
    two_sided = min(1.0, 2 * min(law.cdf(zeros_first_half), law.sf(zeros_first_half - 1)))
    blocks = np.array_split(arrived, 10)
    table = np.array([[(b == 0).sum(), (b == 1).sum()] for b in blocks])
    return two_sided, float(chi2_contingency(table).pvalue)


async def _check_arrival_order(url: str) -> None:
    values = np.repeat(np.array([0, 1], dtype=np.int64), N // 2)
    report, arrivals = await _round(url, values, k=2, eps0=EPS0_ORDER, observe=True)
    assert report["n_received"] == N and len(arrivals) == N
    p_half, p_blocks = _order_p_values(arrivals)
    # Each test at ALPHA / 2: total false-alarm rate <= 1e-6.
    assert p_half > ALPHA / 2, p_half
    assert p_blocks > ALPHA / 2, p_blocks
    # The tests can fail: the sending order itself is rejected.
    assert max(_order_p_values(list(values))) < ALPHA / 2


@pytest.mark.asyncio
async def test_arrival_order_is_independent_of_sending_order_embedded(
    embedded_broker_url: str,
) -> None:
    await _check_arrival_order(embedded_broker_url)


@pytest.mark.asyncio
async def test_arrival_order_is_independent_of_sending_order_mosquitto(
    mosquitto_url: str,
) -> None:
    await _check_arrival_order(mosquitto_url)


# --- the command line, as separate processes -----------------------------------------------


def _shuffledp(*args: str) -> list[str]:
    return [sys.executable, "-m", "shuffledp", *args]


def _simulate(*extra: str) -> dict[str, Any]:
    done = subprocess.run(
        _shuffledp("simulate", "--n", str(N), "--json", "--quiet", *extra),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    report: dict[str, Any] = json.loads(done.stdout)  # exactly one JSON object on stdout
    return report


def _check_simulation(report: dict[str, Any]) -> None:
    assert set(report) >= REPORT_KEYS
    truth = np.asarray(report["true_histogram"])
    assert truth.sum() == N and report["n_expected"] == N
    _check_round(report, truth, report["eps0"])
    assert set(report["tv_distance"]) == {"shuffle", "shuffle+INV", "IBU", "gaussian"}
    assert report["randomness"] == "os-csprng"


def test_simulate_on_the_embedded_broker() -> None:
    report = _simulate("--broker", "embedded")
    _check_simulation(report)
    assert report["simulation"]["broker"].startswith("embedded amqtt at mqtt://127.0.0.1:")
    assert report["simulation"]["broker"].endswith(
        "(accounts and ACLs enforced; --broker embedded)"
    )


def test_simulate_by_default_runs_on_mosquitto_when_installed() -> None:
    """--broker auto, the default: Mosquitto when the binary is installed (the fallback to the
    embedded broker without it: tests/unit/simulations/test_broker_choice.py)."""
    require_mosquitto()
    report = _simulate()
    _check_simulation(report)
    label = report["simulation"]["broker"]
    assert label.startswith("Mosquitto at mqtt://127.0.0.1:")
    assert "auto: mosquitto found at " in label
    # What the per-role bounds plugin enforces here, or that it does not and why.
    assert f"; {build_bounds_plugin().description};" in label


def test_simulate_on_mosquitto(mosquitto_url: str) -> None:
    report = _simulate("--broker", mosquitto_url)
    _check_simulation(report)
    assert report["simulation"]["broker"] == mosquitto_url


def test_ctrl_c_stops_simulate_and_everything_it_started() -> None:
    process = subprocess.Popen(
        _shuffledp("simulate", "--n", "50000", "--quiet"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # If it hangs, SIGABRT below makes it print every thread's stack (the failure's cause).
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        preexec_fn=default_sigint,
    )
    try:
        launcher = psutil.Process(process.pid)
        descendants: list[psutil.Process] = []
        deadline = time.monotonic() + 60
        # Wait until the broker, the analyzer, the hops and the client processes all run.
        while len(descendants) < 1 + 1 + H + 2 and time.monotonic() < deadline:
            time.sleep(0.2)
            descendants = launcher.children(recursive=True)
        assert len(descendants) >= 1 + 1 + H + 2, descendants
        time.sleep(1.0)
        process.send_signal(signal.SIGINT)
        try:
            _, stderr = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGABRT)
            _, stacks = process.communicate(timeout=30)
            pytest.fail(f"simulate did not stop within 30 s of Ctrl-C; its stacks:\n{stacks}")
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "interrupted" in stderr
    gone, alive = psutil.wait_procs(descendants, timeout=10)
    assert alive == [], [p.cmdline() for p in alive]
    assert len(gone) == len(descendants)


def test_components_run_by_hand_against_mosquitto(mosquitto_url: str, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    init = subprocess.run(
        _shuffledp("keys", "init", str(keys), "--hops", "2", "--json"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert init.returncode == 0, init.stderr
    n = 300
    prefix = _prefix()
    manifest = write_round_manifest(
        keys, tmp_path / "round.json", prefix=prefix, rounds=(3,), k=4, eps0=3.0, clients=(n,),
        min_batch=n // 2, deadline=300.0,
    )  # fmt: skip
    common = ["--broker", mosquitto_url, "--keys", str(keys), "--prefix", prefix, "--round", "3"]
    common += ["--manifest", str(manifest)]
    analyzer = subprocess.Popen(
        _shuffledp("analyzer", *common, "--k", "4", "--eps0", "3", "--expected", str(n), "--json"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    hops = [
        subprocess.Popen(
            _shuffledp("hop", *common, "--index", str(i), "--expected", str(n)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    clients = subprocess.run(
        _shuffledp(
            "clients",
            *common,
            "--k",
            "4",
            "--eps0",
            "3",
            "--values",
            "synthetic",
            "--count",
            str(n),
            "--seed",
            "5",
        ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    try:
        assert clients.returncode == 0, clients.stderr
        out, err = analyzer.communicate(timeout=120)
        assert analyzer.returncode == 0, err
        report = json.loads(out)
        assert report["n_received"] == n and sum(report["histogram"]) == n
        assert report["privacy"]["n"] == n
        for hop in hops:
            _, hop_err = hop.communicate(timeout=30)
            assert hop.returncode == 0, hop_err
            # Per-round counts are logged.
            assert f"accepted {n}, forwarded {n}" in hop_err
    finally:
        for process in (analyzer, *hops):
            if process.poll() is None:
                process.kill()
    assert os.stat(keys / "hop-0.key").st_mode & 0o777 == 0o600


async def _retained(url: str, topic: str) -> bytes | None:
    """The retained message of ``topic``, or None if there is none (1.5 s to arrive)."""
    async with MqttTransport(url, client_id=f"t-ret-{secrets.token_hex(3)}") as t:
        await t.subscribe(topic)
        try:
            async with asyncio.timeout(1.5):
                async for message in t.messages():
                    return message.payload or None
        except TimeoutError:
            return None
    return None


async def _check_killed_stage_leaves_no_ready(url: str, tmp_path: Path) -> None:
    """A hop killed with SIGKILL leaves no stale retained "ready" behind (its MQTT will clears
    it); a stale one would let the clients of a later run publish before anyone listens."""
    from shuffledp.protocol.topics import status_topic
    from shuffledp.security.keys import init_key_directory

    init_key_directory(tmp_path / "keys", hops=1)
    prefix = _prefix()
    manifest = write_round_manifest(
        tmp_path / "keys", tmp_path / "round.json", prefix=prefix, clients=(10,), min_batch=5,
        client_auth=False,
    )  # fmt: skip
    topic = status_topic(prefix, 1, "hop-0")
    hop = subprocess.Popen(
        _shuffledp(
            "hop",
            "--keys",
            str(tmp_path / "keys"),
            "--no-auth",
            "--index",
            "0",
            "--expected",
            "10",
            "--broker",
            url,
            "--prefix",
            prefix,
            "--manifest",
            str(manifest),
        ),
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        ready = None
        while ready is None and time.monotonic() < deadline:
            ready = await _retained(url, topic)
        assert ready is not None and b'"ready"' in ready
        hop.send_signal(signal.SIGKILL)
        hop.wait(timeout=10)
        await asyncio.sleep(0.5)
        assert await _retained(url, topic) is None
    finally:
        if hop.poll() is None:
            hop.kill()


@pytest.mark.asyncio
async def test_killed_stage_leaves_no_ready_embedded(
    embedded_broker_url: str, tmp_path: Path
) -> None:
    await _check_killed_stage_leaves_no_ready(embedded_broker_url, tmp_path)


@pytest.mark.asyncio
async def test_killed_stage_leaves_no_ready_mosquitto(mosquitto_url: str, tmp_path: Path) -> None:
    await _check_killed_stage_leaves_no_ready(mosquitto_url, tmp_path)
