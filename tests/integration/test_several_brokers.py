"""One round over two Mosquittos (docs/deployment.md, "Several brokers"): every component gets
`--broker A,B`; client process j publishes on broker j mod 2, hop 0 takes from both, hop 1 and
the analyzer are on A. Invariants checked: the analyzer counts every report sent; observers on
each broker see exactly their slice's reports on hop 0's topic (so the slices really took two
brokers), and nothing of hop 0's output on B (it goes to the first broker only).

The first test's brokers are open test brokers (so that the observers may subscribe), hence
--no-auth. The second runs a round as deployed: two Mosquittos enforcing the key directory's
accounts, ACL and bounds plugin over TLS (mqtts://, --tls-ca), client envelopes checked by hop
0; every report counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shuffledp.brokers.mosquitto import MosquittoBroker
from shuffledp.protocol.mqtt import MqttTransport
from shuffledp.protocol.topics import ingress_topic
from tests.conftest import require_mosquitto

CLIENTS = (300, 200)  # clients-0 on broker A, clients-1 on broker B


def _shuffledp(*args: str) -> list[str]:
    return [sys.executable, "-m", "shuffledp", *args]


def _setup(tmp_path: Path, prefix: str, *, secured: bool = False) -> tuple[Path, Path]:
    keys, manifest = tmp_path / "keys", tmp_path / "round.json"
    tls = ("--tls",) if secured else ()
    auth = () if secured else ("--no-auth",)
    for argv in (
        ("keys", "init", str(keys), "--hops", "2", "--clients", "2", "--prefix", prefix, *tls),
        ("round", "init", str(manifest), "--keys", str(keys), "--prefix", prefix, "--k", "4",
         "--eps0", "4", "--process-clients", ",".join(map(str, CLIENTS)), *auth,
         "--deadline", "60"),
    ):  # fmt: skip
        subprocess.run(_shuffledp(*argv), check=True, capture_output=True, timeout=60)
    return keys, manifest


async def _observe(url: str, topic: str, seen: set[bytes], subscribed: asyncio.Event) -> None:
    """Every distinct payload published on ``topic`` at ``url``, into ``seen``."""
    async with MqttTransport(url, client_id=f"observer-{secrets.token_hex(4)}") as transport:
        await transport.subscribe(topic)
        subscribed.set()
        async for message in transport.messages():
            seen.add(message.payload)


async def _run_round(
    keys: Path, manifest: Path, brokers: str, *connection: str
) -> tuple[int, str, str]:
    """Run the analyzer, 2 hops and the 2 client processes with ``--broker brokers`` and
    ``connection``; (exit status, stdout, stderr) of the analyzer once all ended with 0."""
    common = ("--keys", str(keys), "--manifest", str(manifest), "--broker", brokers, *connection)
    argvs = [
        ("analyzer", *common),
        *(("hop", *common, "--index", str(i)) for i in range(2)),
        *(("clients", *common, "--name", f"clients-{j}", "--values", "synthetic") for j in (0, 1)),
    ]
    started = [
        await asyncio.create_subprocess_exec(
            *_shuffledp(*argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for argv in argvs
    ]
    try:
        async with asyncio.timeout(120):
            outputs = [await process.communicate() for process in started]
        codes = [process.returncode for process in started]
        assert codes == [0] * len(started), [err.decode()[-800:] for _, err in outputs]
        return codes[0] or 0, outputs[0][0].decode(), outputs[0][1].decode()
    finally:
        for process in started:
            if process.returncode is None:
                process.kill()
                await process.wait()


@pytest.mark.asyncio
async def test_a_round_over_two_brokers_counts_every_report(tmp_path: Path) -> None:
    require_mosquitto()
    prefix = f"test/fanin-{secrets.token_hex(4)}"
    keys, manifest = _setup(tmp_path, prefix)
    round_id = int(json.loads(manifest.read_text())["manifest"]["rounds"][0])
    seen_a: set[bytes] = set()
    seen_b: set[bytes] = set()
    output_b: set[bytes] = set()
    with MosquittoBroker() as a, MosquittoBroker() as b:
        events = [asyncio.Event() for _ in range(3)]
        observers = [
            asyncio.create_task(_observe(a.url, ingress_topic(prefix, round_id, 0), seen_a, events[0])),
            asyncio.create_task(_observe(b.url, ingress_topic(prefix, round_id, 0), seen_b, events[1])),
            asyncio.create_task(_observe(b.url, ingress_topic(prefix, round_id, 1), output_b, events[2])),
        ]  # fmt: skip
        try:
            async with asyncio.timeout(30):
                await asyncio.gather(*(event.wait() for event in events))
            began = time.monotonic()
            _, out, _ = await _run_round(keys, manifest, f"{a.url},{b.url}", "--no-auth")
            wall = time.monotonic() - began
        finally:
            for task in observers:
                task.cancel()
            for task in observers:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    n = sum(CLIENTS)
    assert f": {n} of {n} reports received;" in out.splitlines()[0], out
    assert (len(seen_a), len(seen_b)) == CLIENTS
    assert not output_b  # hop 0's output went to broker A only
    print(f"two brokers: n {n}, counted {n}, wall {wall:.1f} s")


@pytest.mark.asyncio
async def test_a_round_over_two_secured_brokers_over_tls(tmp_path: Path) -> None:
    require_mosquitto()
    prefix = f"test/fanin-{secrets.token_hex(4)}"
    keys, manifest = _setup(tmp_path, prefix, secured=True)
    access, tls = keys / "access", keys / "tls"
    with (
        MosquittoBroker(access_dir=access, tls_dir=tls) as a,
        MosquittoBroker(access_dir=access, tls_dir=tls) as b,
    ):
        brokers = f"{a.tls_url},{b.tls_url}"
        _, out, _ = await _run_round(keys, manifest, brokers, "--tls-ca", str(tls / "ca.pem"))
    n = sum(CLIENTS)
    assert f": {n} of {n} reports received;" in out.splitlines()[0], out
