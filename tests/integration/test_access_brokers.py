"""Broker accounts and topic ACLs (shuffledp.security.access) on the embedded broker and on
Mosquitto, and the password hash against mosquitto_passwd."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from shuffledp.brokers.embedded import EmbeddedBroker
from shuffledp.brokers.mosquitto import MosquittoBroker
from shuffledp.protocol.mqtt import MqttConnectionError, MqttTransport
from shuffledp.security.access import hash_password, init_access, load_password, verify_password
from shuffledp.security.broker_limits import STAGE_PACKET_BYTES, client_payload_bytes
from shuffledp.security.client_ids import random_client_id, stage_client_id
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


def _login(url: str, keys: Path, identity: str, **options: Any) -> MqttTransport:
    """A connection as ``identity`` with a client id of its own namespace."""
    options.setdefault("client_id", random_client_id(identity))
    return MqttTransport(url, username=identity, password=load_password(keys, identity), **options)


async def _check_broker(url: str, keys: Path) -> None:
    with pytest.raises(MqttConnectionError, match="anonymously"):
        async with MqttTransport(url, client_id="anon"):
            pass
    with pytest.raises(MqttConnectionError, match="hop-0"):
        async with MqttTransport(
            url, client_id=random_client_id("hop-0"), username="hop-0", password="wrong-password"
        ):
            pass
    async with (
        _login(url, keys, "hop-1") as hop1,
        _login(url, keys, "hop-0") as hop0,
        _login(url, keys, "clients-0") as client,
    ):
        await hop1.subscribe(f"{PREFIX}/round/1/hop/1")
        await hop0.subscribe(f"{PREFIX}/round/1/hop/0")
        # A client publishing into hop 1's ingress: Mosquitto disconnects it, amqtt drops it;
        # either way hop 1 (allowed to read there) must receive nothing.
        with contextlib.suppress(MqttConnectionError):
            await client.publish(f"{PREFIX}/round/1/hop/1", b"skip the shuffle")
    async with _login(url, keys, "hop-1") as hop1, _login(url, keys, "hop-0") as hop0:
        await hop1.subscribe(f"{PREFIX}/round/1/hop/1")
        await hop0.subscribe(f"{PREFIX}/round/1/hop/0")
        async with _login(url, keys, "clients-0") as client2:
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
    options = SimulationOptions(
        n=60, k=4, hops=2, client_processes=2, deadline=30, seed=3, broker="embedded"
    )
    assert options.auth
    report = asyncio.run(run_simulation(options))
    assert report["n_received"] == 60
    assert report["simulation"]["broker"].startswith("embedded amqtt at mqtt://127.0.0.1:")


# --- stage identities: no account takes over another's client id -------------------------------


async def _hop0_keeps_its_connection(url: str, keys: Path, *, refused: bool) -> None:
    """Hop 0 connects under its derived client id; clients-0 then connects with that very id
    (as if it had learnt it). ``refused``: the broker refuses that CONNECT (the embedded
    broker's gate); else it accepts it under clients-0's own id (Mosquitto's
    use_username_as_clientid). Either way hop 0 is not disconnected: it never reconnects and
    still receives what is published to it afterwards."""
    password = load_password(keys, "hop-0")
    hop0_id = stage_client_id(
        f"hop-0\0{password}".encode(), prefix=PREFIX, round_id=1, identity="hop-0"
    )
    topic = f"{PREFIX}/round/1/hop/0"
    async with _login(
        url, keys, "hop-0", client_id=hop0_id, persistent_session=True, reconnect_timeout=10
    ) as hop0:
        await hop0.subscribe(topic)
        for clean in (True, False):  # a clean CONNECT would also delete hop 0's session
            attempt = aiomqtt.Client(
                "127.0.0.1",
                int(url.rsplit(":", 1)[1]),
                identifier=hop0_id,
                username="clients-0",
                password=load_password(keys, "clients-0"),
                clean_session=clean,
            )
            if refused:
                with pytest.raises(aiomqtt.MqttError, match=r"[Nn]ot authori[sz]ed"):
                    async with attempt:
                        pass
            else:
                async with attempt:
                    await attempt.publish(topic, b"from the impostor", qos=1)
        async with _login(url, keys, "clients-0") as client:
            await client.publish(topic, b"after")
        received = hop0.messages()
        payloads = set()
        async with asyncio.timeout(5):
            while b"after" not in payloads:
                payloads.add((await anext(received)).payload)
        assert hop0.reconnects == 0 and hop0.sessions_lost == 0


@pytest.mark.integration
@pytest.mark.asyncio
async def test_embedded_broker_refuses_another_accounts_client_id(tmp_path: Path) -> None:
    init_access(tmp_path, hops=1, client_processes=1, prefix=PREFIX)
    async with EmbeddedBroker(access_dir=tmp_path / "access") as broker:
        await _hop0_keeps_its_connection(broker.url, tmp_path, refused=True)


@pytest.mark.integration
@pytest.mark.asyncio
async def test_mosquitto_config_ties_client_ids_to_accounts(tmp_path: Path) -> None:
    require_mosquitto()
    init_access(tmp_path, hops=1, client_processes=1, prefix=PREFIX)
    async with MosquittoBroker(access_dir=tmp_path / "access") as broker:
        await _hop0_keeps_its_connection(broker.url, tmp_path, refused=False)


@pytest.mark.integration
@pytest.mark.asyncio
async def test_a_burst_of_takeovers_does_not_crash_a_stage(tmp_path: Path) -> None:
    """On a broker that does not tie ids to accounts (an open Mosquitto), 20 connections in a
    row under hop 0's client id, half of them clean (which ends its session): each takes the
    connection over, hop 0's transport reconnects every time (counted), never raises, counts
    the sessions found gone, and still receives what is published once the burst is over."""
    require_mosquitto()
    async with MosquittoBroker() as broker:
        victim_id = random_client_id("hop-0")
        topic = f"{PREFIX}/round/1/hop/0"
        async with MqttTransport(
            broker.url, client_id=victim_id, persistent_session=True, reconnect_timeout=30
        ) as hop0:
            await hop0.subscribe(topic)
            received: list[bytes] = []

            async def read() -> None:
                async for message in hop0.messages():
                    received.append(message.payload)

            reader = asyncio.create_task(read())
            for attempt in range(20):
                async with aiomqtt.Client(
                    broker.host, broker.port, identifier=victim_id, clean_session=attempt % 2 == 0
                ):
                    await asyncio.sleep(0.05)
            async with MqttTransport(broker.url, client_id=random_client_id("clients-0")) as pub:
                await pub.publish(topic, b"after the burst")
            async with asyncio.timeout(30):
                while b"after the burst" not in received:
                    assert not reader.done(), reader.exception()
                    await asyncio.sleep(0.05)
            reader.cancel()
            assert hop0.reconnects >= 1
            assert hop0.sessions_lost >= 1  # a clean takeover ended the session
            await hop0.publish(topic, b"still publishing")


# --- resources bounded per role -------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.asyncio
async def test_mosquitto_config_refuses_an_oversized_publish(tmp_path: Path) -> None:
    """The generated configuration's max_packet_size: a client account publishing more than a
    stage's largest packet to hop 0 is disconnected and nothing reaches hop 0. (The per-role
    rules under that global bound, a client's retained message or payload over its report
    size, are the bounds plugin's: tests/integration/test_mosquitto_bounds.py.)"""
    require_mosquitto()
    init_access(tmp_path, hops=1, client_processes=1, prefix=PREFIX)
    topic = f"{PREFIX}/round/1/hop/0"
    async with (
        MosquittoBroker(access_dir=tmp_path / "access") as broker,
        _login(broker.url, tmp_path, "hop-0") as hop0,
    ):
        await hop0.subscribe(topic)
        async with _login(broker.url, tmp_path, "clients-0") as client:
            with pytest.raises(MqttConnectionError):
                await client.publish(topic, bytes(STAGE_PACKET_BYTES + 1))
        async with _login(broker.url, tmp_path, "clients-0") as client:
            await client.publish(topic, b"r" * 296)  # a report's size passes
        message = await _next(hop0)
        assert message.payload == b"r" * 296  # the oversized one never arrived


async def _next(transport: MqttTransport) -> Any:
    async with asyncio.timeout(5):
        return await anext(transport.messages())


@pytest.mark.integration
@pytest.mark.asyncio
async def test_embedded_broker_bounds_clients_packets_and_refuses_their_retained(
    tmp_path: Path,
) -> None:
    """The embedded broker's per-role rules: a client account publishing more than its report
    size bound is disconnected (a hop may publish that much), and a client's retained message
    is delivered but never kept, while a stage's retained status is."""
    init_access(tmp_path, hops=1, client_processes=1, prefix=PREFIX)
    root = f"{PREFIX}/round/1"
    bound = client_payload_bytes(1)
    async with EmbeddedBroker(access_dir=tmp_path / "access") as broker:
        async with _login(broker.url, tmp_path, "hop-0") as hop0:
            await hop0.subscribe(f"{root}/hop/0")
            async with _login(broker.url, tmp_path, "clients-0") as client:
                with pytest.raises(MqttConnectionError):
                    await client.publish(f"{root}/hop/0", bytes(bound + 1))
                    await client.publish(f"{root}/status/clients-0", b"probe")  # noticed here
            async with _login(broker.url, tmp_path, "clients-0") as client:
                await client.publish(f"{root}/hop/0", b"r" * bound)
                await client.publish(f"{root}/status/clients-0", b'{"state":"x"}', retain=True)
            assert (await _next(hop0)).payload == b"r" * bound
            await hop0.publish(f"{root}/analyzer", bytes(bound + 1))  # a stage's bound is larger
            await hop0.publish(f"{root}/status/hop-0", b'{"state":"ready"}', retain=True)
        async with _login(broker.url, tmp_path, "monitor") as monitor:
            await monitor.subscribe(f"{root}/status/+")
            first = await _next(monitor)
            assert (first.topic, first.payload) == (f"{root}/status/hop-0", b'{"state":"ready"}')
            with pytest.raises(TimeoutError):  # nothing retained from the client
                await _next(monitor)


@pytest.mark.integration
@pytest.mark.asyncio
async def test_a_fresh_stage_does_not_resume_a_session_left_behind(tmp_path: Path) -> None:
    """With use_username_as_clientid every connection of hop-0 shares one session: one a killed
    hop left behind (subscribed to round 1, three messages queued) would be resumed by hop 0 of
    the next round. A stage without a journal (fresh_session) ends it first; a journaled one
    (not fresh) resumes it, queued messages included."""
    require_mosquitto()
    init_access(tmp_path, hops=1, client_processes=1, prefix=PREFIX)
    old_topic = f"{PREFIX}/round/1/hop/0"

    async def leave_a_session(url: str) -> None:
        async with _login(url, tmp_path, "hop-0", persistent_session=True) as hop0:
            await hop0.subscribe(old_topic)
            hop0.persistent_session = False  # leave without ending the session (as if killed)
        async with _login(url, tmp_path, "clients-0") as client:
            for index in range(3):
                await client.publish(old_topic, b"queued %d" % index)

    async with MosquittoBroker(access_dir=tmp_path / "access") as broker:
        for fresh in (False, True):
            await leave_a_session(broker.url)
            async with _login(
                broker.url, tmp_path, "hop-0", persistent_session=True, fresh_session=fresh
            ) as next_round:
                assert next_round.session_present is not fresh
                if fresh:
                    with pytest.raises(TimeoutError):
                        await _next(next_round)
                else:
                    assert (await _next(next_round)).payload == b"queued 0"
