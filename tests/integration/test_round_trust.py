"""A round you can trust end to end, tried as a deployer would: plain CLI commands, one Mosquitto.

Each test is a row of issue 23's table: what was wrong, and what the round publishes now. Before
the round manifest, an analyzer started with ``--eps0 1`` for clients that used 4 published
eps = 0.0457 (the true one is 0.905), one started with ``--k 10`` counted a fifth fewer reports,
hop 1 started with ``--expected 1500`` published 1,500 with no loss, and one client process key
could take an honest client's place with an extra authentic report (each process was enrolled
for ceil(2001 / 2) = 1,001 ids). Now a flag that contradicts the manifest refuses to start, and
the enrolment is exact.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from nacl.signing import SigningKey

from shuffledp.accountant.inversion import eps_for_delta
from shuffledp.accountant.mechanism import ShuffledKRR
from shuffledp.accountant.tight import Tight
from shuffledp.clients.client import make_client_messages
from shuffledp.protocol.client_auth import ProcessCredentials
from shuffledp.protocol.end_statement import EndStatement
from shuffledp.protocol.frames import FrameSigner, encode_batch, encode_end
from shuffledp.protocol.mqtt import MqttTransport
from shuffledp.protocol.onion import message_length
from shuffledp.protocol.runtime import decode_json
from shuffledp.protocol.topics import ingress_topic, status_topic
from shuffledp.security.access import init_access, load_password, load_process_credentials
from shuffledp.security.keys import init_key_directory, load_public_directory
from shuffledp.security.manifests import load_round_manifest
from tests.manifests import write_round_manifest

N = 2001
K = 15
EPS0 = 4.0
ROUND = 7


def _shuffledp(*args: str) -> list[str]:
    return [sys.executable, "-m", "shuffledp", *args]


class Deployment:
    """A key directory with 2 client accounts and a manifest of 1,001 + 1,000 clients."""

    def __init__(self, url: str, tmp: Path) -> None:
        self.url = url
        self.tmp = tmp
        self.keys = tmp / "keys"
        self.prefix = f"test/trust-{secrets.token_hex(4)}"
        init_key_directory(self.keys, hops=3)
        init_access(self.keys, hops=3, client_processes=2, prefix=self.prefix)
        self.manifest = write_round_manifest(
            self.keys, tmp / "round.json", prefix=self.prefix, rounds=(ROUND,), k=K, eps0=EPS0,
            clients=(1001, 1000), min_batch=1000, deadline=120.0,
        )  # fmt: skip

    def argv(self, command: str, *extra: str) -> list[str]:
        common = ["--broker", self.url, "--keys", str(self.keys), "--manifest", str(self.manifest)]
        return _shuffledp(command, *common, *extra)

    def refused(self, command: str, *extra: str) -> str:
        """Run a component that must refuse to start: its one line (exit status 2)."""
        done = subprocess.run(
            self.argv(command, *extra), capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 2, (done.returncode, done.stderr)
        assert done.stderr.count("\n") == 1, done.stderr
        return done.stderr

    def start(self, command: str, *extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv(command, *extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )


async def _wait_ready(url: str, prefix: str, stage: str) -> None:
    async with MqttTransport(url, client_id=f"t-ready-{secrets.token_hex(4)}") as t:
        await t.subscribe(status_topic(prefix, ROUND, stage))
        async with asyncio.timeout(60):
            async for message in t.messages():
                body = decode_json(message.payload)
                if body is not None and body.get("state") == "ready":
                    return


async def _extra_authentic_report(deployment: Deployment, credentials: ProcessCredentials) -> None:
    """What a leaked client process key can try: an authentic report for an id beyond its
    process's clients (clients-1 hosts 1,000: index 1,000 is the 1,001st), before the honest
    reports, to push one of them out of a full batch."""
    directory = load_public_directory(deployment.keys)
    manifest = load_round_manifest(deployment.manifest, deployment.keys)
    (message,) = make_client_messages(
        [3],
        k=K,
        eps0=EPS0,
        round_id=ROUND,
        manifest_digest=manifest.digest,
        hop_public_keys=directory.hop_keys,
        analyzer_public_key=directory.analyzer_key,
        credentials=[credentials.credential(1000)],
    )
    await _wait_ready(deployment.url, deployment.prefix, "hop-0")
    async with MqttTransport(deployment.url, client_id=f"t-evil-{secrets.token_hex(4)}") as t:
        await t.publish(ingress_topic(deployment.prefix, ROUND, 0), message)


def _kill_all(processes: list[subprocess.Popen[str]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_flags_that_contradict_the_manifest_refuse_and_enrolment_is_exact(
    mosquitto_url: str, tmp_path: Path
) -> None:
    deployment = Deployment(mosquitto_url, tmp_path)
    # Rows 1-3: each wrong flag now refuses the start, naming the flag and the field.
    assert "--expected 1500 contradicts the manifest's expected = 2001" in deployment.refused(
        "hop", "--index", "1", "--expected", "1500"
    )
    assert "--k 10 contradicts the manifest's k = 15" in deployment.refused("analyzer", "--k", "10")
    assert "--eps0 1 contradicts the manifest's eps0 = 4" in deployment.refused(
        "analyzer", "--eps0", "1"
    )
    processes = [deployment.start("analyzer", "--json")]
    processes += [deployment.start("hop", "--index", str(i)) for i in range(3)]
    try:
        credentials = load_process_credentials(deployment.keys, 1)
        asyncio.run(_extra_authentic_report(deployment, credentials))
        for index in range(2):
            processes.append(
                deployment.start("clients", "--name", f"clients-{index}", "--values", "synthetic")
            )
        out, err = processes[0].communicate(timeout=180)
        assert processes[0].returncode == 0, err
        report: dict[str, Any] = json.loads(out)
    finally:
        _kill_all(processes)
    # Row 6: the extra report is refused (its id is not enrolled); every honest one counted.
    assert report["n_received"] == N
    assert {r: c for r, c in report["rejected"].items() if c} == {"unknown-client": 1}
    # The guarantee is for the manifest's parameters and the n counted.
    expected = eps_for_delta(Tight(), ShuffledKRR(n=N, k=K, eps0=EPS0), 1e-6)
    assert report["k"] == K and report["eps0"] == EPS0
    assert (
        report["manifest"] == load_round_manifest(deployment.manifest, deployment.keys).digest.hex()
    )
    assert report["privacy"]["n"] == N
    assert report["privacy"]["eps"] == pytest.approx(float(expected.eps), rel=1e-12)


async def _forge_frames(deployment: Deployment) -> None:
    """What hop 0's broker account (or the broker) can publish on hop 1's ingress without hop
    0's signing key, before hop 0 starts: an END announcing a short batch (1,489 of 2,001) and
    a garbage data frame 0, both signed with a key of its own."""
    manifest = load_round_manifest(deployment.manifest, deployment.keys)
    item = message_length(1, manifest.n_hops)
    stranger = FrameSigner(
        manifest_digest=manifest.digest, round_id=ROUND, sender=0, signing_key=SigningKey.generate()
    )
    short = EndStatement(
        stage="hop-0", accepted=1489, forwarded=1489, frames=1, rejected={}, aborted=None,
        upstream_end=None, stages={"hop-0": {"accepted": 1489, "forwarded": 1489, "rejected": {}}},
    )  # fmt: skip
    garbage = [os.urandom(item) for _ in range(1489)]
    frames = [
        encode_end(signer=stranger, item_length=item, statement=short),
        encode_batch(garbage, signer=stranger, item_length=item)[0],
    ]
    await _wait_ready(deployment.url, deployment.prefix, "hop-1")
    async with MqttTransport(
        deployment.url,
        client_id=f"t-forger-{secrets.token_hex(4)}",
        username="hop-0",
        password=load_password(deployment.keys, "hop-0"),
    ) as t:
        for frame in frames:
            await t.publish(ingress_topic(deployment.prefix, ROUND, 1), frame)


def test_forged_end_and_frame_0_before_hop_0_starts_change_nothing(
    mosquitto_url: str, tmp_path: Path
) -> None:
    """Rows 4 and 5: a forged END on hop 1's input before the real hop 0 starts (it made hop 1
    count 1,489 of 2,000 with nothing lost) and a garbage data frame 0 ahead of the real one
    (it shadowed it: the rest were decryption-failed). Both are refused and counted now; every
    report is counted."""
    deployment = Deployment(mosquitto_url, tmp_path)
    processes = [deployment.start("analyzer", "--json")]
    processes += [deployment.start("hop", "--index", str(i)) for i in (2, 1)]
    try:
        asyncio.run(_forge_frames(deployment))
        processes.append(deployment.start("hop", "--index", "0"))
        for index in range(2):
            processes.append(
                deployment.start("clients", "--name", f"clients-{index}", "--values", "synthetic")
            )
        out, err = processes[0].communicate(timeout=180)
        assert processes[0].returncode == 0, err
        report: dict[str, Any] = json.loads(out)
    finally:
        _kill_all(processes)
    assert report["n_received"] == N
    hop1 = report["stages"]["hop-1"]
    assert {r: c for r, c in hop1["frames_rejected"].items() if c} == {
        "forged-end": 1,
        "forged-frame": 1,
    }
    assert hop1["accepted"] == N
    assert report["delivery"]["lost"] == 0
