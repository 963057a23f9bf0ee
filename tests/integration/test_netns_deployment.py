"""docs/deployment.md's commands across hosts: each in a Linux network namespace of its own.

The block "Each component on its own" runs as the page says for several machines: the broker
line with ``--listen 0.0.0.0``, every other line with ``--broker mqtt://BROKER-HOST:1883``, and
each stage on a "host" of its own: the broker, the analyzer, hop 0, hop 1, hop 2 (the block's
``for`` line, one namespace per value) and the client process, each a network namespace with
its own address. They share the file system (the key files and the manifest, as if copied),
and nothing else: the only network is a bridge in the broker's namespace (10.77.0.1/24 on the
bridge) with one veth pair per other namespace (10.77.0.11...), whose bridge ports are
isolated from each other, so that every stage reaches the broker and nothing else. Nothing is
connected to the host's own network.

Checked: the analyzer counts every report of the manifest; the client namespace reaches the
broker but not the analyzer's address (the stages share only the broker). Bounded: every
wait has a timeout. Cleaned up in a ``finally``: the process groups, then the namespaces
(deleting a namespace deletes its veth ends and the bridge). Needs root (``ip netns add``); CI
runs as root.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_documented_commands import _block_after, _workdir
from tests.paths import REPO_ROOT

BROKER_HOST = "10.77.0.1"
HOSTS = ("analyzer", "hop-0", "hop-1", "hop-2", "clients")
ADDRESSES = {host: f"10.77.0.{11 + i}" for i, host in enumerate(HOSTS)}
SKIP_REASON = "needs root for network namespaces (ip netns add)"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


class Network:
    """The namespaces ``<tag>-broker`` and ``<tag>-<host>`` for each of HOSTS, wired as the
    module docstring says."""

    def __init__(self) -> None:
        self.tag = f"sdp{secrets.token_hex(3)}"
        self.made: list[str] = []

    def ns(self, host: str) -> str:
        return f"{self.tag}-{host}"

    def build(self) -> None:
        broker = self.ns("broker")
        self._add(broker)
        _ip("-n", broker, "link", "add", "br0", "type", "bridge")
        _ip("-n", broker, "addr", "add", f"{BROKER_HOST}/24", "dev", "br0")
        _ip("-n", broker, "link", "set", "br0", "up")
        for index, host in enumerate(HOSTS):
            name, port = self.ns(host), f"port{index}"
            self._add(name)
            _ip(
                "-n",
                broker,
                "link",
                "add",
                port,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                name,
            )
            _ip("-n", broker, "link", "set", port, "master", "br0")
            _ip("-n", broker, "link", "set", port, "type", "bridge_slave", "isolated", "on")
            _ip("-n", broker, "link", "set", port, "up")
            _ip("-n", name, "addr", "add", f"{ADDRESSES[host]}/24", "dev", "eth0")
            _ip("-n", name, "link", "set", "eth0", "up")  # fmt: skip

    def _add(self, name: str) -> None:
        _ip("netns", "add", name)
        self.made.append(name)
        _ip("-n", name, "link", "set", "lo", "up")

    def remove(self) -> None:
        for name in reversed(self.made):
            subprocess.run(
                ["ip", "netns", "del", name], capture_output=True, timeout=10, check=False
            )
        self.made.clear()


@pytest.fixture
def network() -> Iterator[Network]:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip(SKIP_REASON)
    net = Network()
    try:
        try:
            net.build()
        except subprocess.CalledProcessError as failed:  # root without CAP_SYS_ADMIN (a container)
            if b"Operation not permitted" not in (failed.stderr or b""):
                raise
            pytest.skip(f"{SKIP_REASON}: {failed.stderr.decode().strip()}")
        yield net
    finally:
        net.remove()
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
        assert net.tag not in left.stdout, left.stdout


def _placed(block: str) -> tuple[list[str], list[tuple[str, str]]]:
    """The block's setup lines, and (host, command) for every other line, as on several
    machines (module docstring); the ``for`` line gives one hop per value."""
    lines = [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    keys, manifest, *rest = lines
    assert " keys init " in keys and " round init " in manifest
    placed: list[tuple[str, str]] = []
    for line in rest:
        line = line.removesuffix("&").strip()
        loop = re.fullmatch(r"for (\w+) in ([0-9 ]+); do (.*?) &? ?done", line)
        if loop is not None:
            name, values, body = loop.groups()
            for value in values.split():
                command = body.replace(f"${name}", value).strip().removesuffix("&").strip()
                placed.append((f"hop-{value}", f"{command} --broker mqtt://{BROKER_HOST}:1883"))
        elif " broker " in f"{line} ":
            placed.append(("broker", f"{line} --listen 0.0.0.0"))
        else:
            host = next(h for h in ("analyzer", "clients") if f" {h} " in line)
            placed.append((host, f"{line} --broker mqtt://{BROKER_HOST}:1883"))
    return [keys, manifest], placed


def _reaches(net: Network, host: str, address: str) -> bool:
    """Whether a TCP connection from ``host``'s namespace to ``address`` port 9 gets an answer
    (refused counts: the address was reached; a timeout or an unreachable host does not)."""
    probe = (
        "import socket,sys\ns=socket.socket();s.settimeout(2)\n"
        f"try:\n s.connect(({address!r},9))\nexcept ConnectionRefusedError:\n sys.exit(0)\n"
        "except OSError:\n sys.exit(1)\nsys.exit(0)\n"
    )
    done = subprocess.run(
        ["ip", "netns", "exec", net.ns(host), sys.executable, "-c", probe],
        capture_output=True,
        timeout=20,
        check=False,
    )
    return done.returncode == 0


def test_the_deployment_pages_commands_across_network_namespaces(
    network: Network, tmp_path: Path
) -> None:
    began = time.monotonic()
    block = _block_after(REPO_ROOT / "docs" / "deployment.md", "## Each component on its own", "sh")
    setup, placed = _placed(block)
    assert sorted(host for host, _ in placed) == sorted(("broker", *HOSTS))
    cwd = _workdir(tmp_path)
    for line in setup:  # the key files and the manifest, then "copied" to every host
        subprocess.run(["bash", "-c", line], cwd=cwd, check=True, capture_output=True, timeout=60)
    started: dict[str, subprocess.Popen[str]] = {}
    try:
        for host, command in placed:
            started[host] = subprocess.Popen(
                ["ip", "netns", "exec", network.ns(host), "bash", "-c", command],
                cwd=cwd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        out, err = started["analyzer"].communicate(timeout=90)
        assert started["analyzer"].returncode == 0, (placed, err)
        expected = re.search(r" round init .* --n (\d+)", block)
        assert expected is not None
        n = expected.group(1)
        assert f": {n} of {n} reports received;" in out.splitlines()[0], out
        started["clients"].communicate(timeout=30)
        assert started["clients"].returncode == 0
        assert _reaches(network, "clients", BROKER_HOST)
        assert not _reaches(network, "clients", ADDRESSES["analyzer"])
    finally:
        for process in started.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in started.values():
            try:
                process.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.communicate(timeout=15)
    print(f"netns deployment: n {n}, counted {n}, wall {time.monotonic() - began:.1f} s")
