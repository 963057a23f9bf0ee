"""Broker accounts and topic ACLs (shuffledp.security.access) on the embedded broker and on
Mosquitto, and the password hash against mosquitto_passwd."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
from pathlib import Path

import pytest

from shuffledp.brokers.embedded import EmbeddedBroker
from shuffledp.brokers.mosquitto import MosquittoBroker
from shuffledp.protocol.mqtt import MqttConnectionError, MqttTransport
from shuffledp.security.access import hash_password, init_access, load_password, verify_password
from shuffledp.simulations.pipeline.simulate import SimulationOptions, run_simulation
from tests.conftest import require_mosquitto

PREFIX = "acl-test"


def test_hash_matches_mosquitto_passwd_and_rejects_wrong_password(tmp_path: Path) -> None:
    tool = shutil.which("mosquitto_passwd")
    if tool is None:
        pytest.skip("mosquitto_passwd is not installed")
    path = tmp_path / "pw"
    subprocess.run([tool, "-c", "-b", str(path), "alice", "s3cret"], check=True)
    hashed = path.read_text().strip().split(":", 1)[1]
    assert verify_password("s3cret", hashed)  # mosquitto's hash verifies with our code
    assert not verify_password("s3cret!", hashed)
    ours = hash_password("s3cret")
    assert ours.startswith("$7$101$") and verify_password("s3cret", ours)
    assert not verify_password("other", ours)
    assert not verify_password("s3cret", "$6$not$ours")


async def _check_broker(url: str, keys: Path) -> None:
    with pytest.raises(MqttConnectionError, match="anonymously"):
        async with MqttTransport(url, client_id="anon"):
            pass
    with pytest.raises(MqttConnectionError, match="hop-0"):
        async with MqttTransport(url, client_id="x", username="hop-0", password="wrong-password"):
            pass
    async with (
        MqttTransport(
            url, client_id="h1", username="hop-1", password=load_password(keys, "hop-1")
        ) as hop1,
        MqttTransport(
            url, client_id="h0", username="hop-0", password=load_password(keys, "hop-0")
        ) as hop0,
        MqttTransport(
            url, client_id="c0", username="clients-0", password=load_password(keys, "clients-0")
        ) as client,
    ):
        await hop1.subscribe(f"{PREFIX}/round/1/hop/1")
        await hop0.subscribe(f"{PREFIX}/round/1/hop/0")
        # A client publishing into hop 1's ingress: Mosquitto disconnects it, amqtt drops it;
        # either way hop 1 (allowed to read there) must receive nothing.
        with contextlib.suppress(MqttConnectionError):
            await client.publish(f"{PREFIX}/round/1/hop/1", b"skip the shuffle")
        async with MqttTransport(
            url, client_id="c0b", username="clients-0", password=load_password(keys, "clients-0")
        ) as client2:
            await client2.publish(f"{PREFIX}/round/1/hop/0", b"allowed")
        received = hop0.messages()
        async with asyncio.timeout(5):
            message = await anext(received)
        assert message.payload == b"allowed"  # the allowed path works on the same broker
        stray = hop1.messages()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(1.0):
                await anext(stray)


@pytest.mark.integration
@pytest.mark.asyncio
async def test_embedded_broker_refuses_anonymous_and_enforces_acl(tmp_path: Path) -> None:
    init_access(tmp_path, hops=2, client_processes=1, prefix=PREFIX)
    async with EmbeddedBroker(access_dir=tmp_path / "access") as broker:
        await _check_broker(broker.url, tmp_path)


@pytest.mark.integration
@pytest.mark.asyncio
async def test_mosquitto_refuses_anonymous_and_enforces_acl(tmp_path: Path) -> None:
    require_mosquitto()
    init_access(tmp_path, hops=2, client_processes=1, prefix=PREFIX)
    async with MosquittoBroker(access_dir=tmp_path / "access") as broker:
        await _check_broker(broker.url, tmp_path)


@pytest.mark.integration
def test_simulate_with_auth_on_embedded_broker_counts_every_report() -> None:
    options = SimulationOptions(n=60, k=4, hops=2, client_processes=2, deadline=30, seed=3)
    assert options.auth
    report = asyncio.run(run_simulation(options))
    assert report["n_received"] == 60
