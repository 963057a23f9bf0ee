"""docs/deployment.md's promise: the components may start in any order, the broker last too
(each retries its first connection with growing pauses for up to --reconnect, 60 s), and
`shuffledp broker --listen` serves other machines.
"""

from __future__ import annotations

import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shuffledp.brokers.ports import free_loopback_port
from tests.manifests import write_round_manifest

N = 60


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "shuffledp", *args]


def test_components_started_before_their_broker_complete_the_round(tmp_path: Path) -> None:
    keys = str(tmp_path / "keys")
    subprocess.run(_cmd("keys", "init", keys, "--hops", "2"), check=True, capture_output=True)
    manifest = write_round_manifest(
        tmp_path / "keys", tmp_path / "round.json", k=5, eps0=4.0, clients=(N,), min_batch=N // 2,
        deadline=300.0,
    )  # fmt: skip
    port = free_loopback_port()
    common = ["--broker", f"mqtt://127.0.0.1:{port}", "--keys", keys, "--manifest", str(manifest)]
    components = {
        "analyzer": _cmd("analyzer", *common, "--k", "5", "--eps0", "4", "--expected", str(N)),
        "hop-0": _cmd("hop", *common, "--index", "0", "--expected", str(N)),
        "hop-1": _cmd("hop", *common, "--index", "1", "--expected", str(N)),
        "clients": _cmd(
            *("clients", *common, "--k", "5", "--eps0", "4"),
            *("--values", "synthetic", "--count", str(N)),
        ),
    }
    order = list(components)
    random.shuffle(order)  # any order: the test's claim holds for each
    started: dict[str, subprocess.Popen[str]] = {}
    broker: subprocess.Popen[bytes] | None = None
    try:
        for name in order:
            started[name] = subprocess.Popen(
                components[name], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        time.sleep(2.0)  # every component has found nothing listening
        assert all(p.poll() is None for p in started.values()), order
        broker = subprocess.Popen(
            _cmd("broker", "--port", str(port), "--keys", keys),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        out, err = started["analyzer"].communicate(timeout=120)
        assert started["analyzer"].returncode == 0, (order, err)
        assert out.startswith(f"round 1: {N} of {N} reports received; k = 5"), out
        for name in ("hop-0", "hop-1", "clients"):
            _, err = started[name].communicate(timeout=60)
            assert started[name].returncode == 0, (name, order, err)
    finally:
        for process in started.values():
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=30)
        if broker is not None:
            broker.terminate()
            broker.wait(timeout=30)


def _outside_address() -> str | None:
    """An address of this host on a network interface (not loopback), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: no packet is sent by a UDP connect
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_broker_listen_serves_a_network_address(tmp_path: Path) -> None:
    outside = _outside_address()
    if outside is None:
        pytest.skip("this host has no network interface besides the loopback")
    keys = str(tmp_path / "keys")
    subprocess.run(_cmd("keys", "init", keys, "--hops", "1"), check=True, capture_output=True)
    port = free_loopback_port()
    broker = subprocess.Popen(
        _cmd("broker", "--port", str(port), "--keys", keys, "--listen", "0.0.0.0"),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert broker.stdout is not None
        assert broker.stdout.readline() == f"shuffledp broker: listening on mqtt://0.0.0.0:{port}\n"
        with socket.create_connection((outside, port), timeout=10):
            pass  # the listener accepts on a non-loopback address
    finally:
        broker.terminate()
        broker.wait(timeout=30)
    # The default stays the loopback only: the same address is refused.
    broker = subprocess.Popen(
        _cmd("broker", "--port", str(port), "--keys", keys),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert broker.stdout is not None and "listening on" in broker.stdout.readline()
        with pytest.raises(OSError), socket.create_connection((outside, port), timeout=10):
            pass
    finally:
        broker.terminate()
        broker.wait(timeout=30)
