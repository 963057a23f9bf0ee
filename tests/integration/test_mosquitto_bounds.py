"""The per-role bounds plugin (shuffledp/security/mosquitto_bounds.c) on a real Mosquitto on
127.0.0.1 with the accounts and ACL of `keys init`: a client account can neither retain a
message nor publish over its payload bound, stages keep both, and the ACL still applies."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from shuffledp.brokers.mosquitto import MosquittoBroker
from shuffledp.protocol.mqtt import MqttTransport
from shuffledp.security.access import init_access, load_password
from shuffledp.security.broker_limits import client_payload_bytes
from shuffledp.security.client_ids import random_client_id
from shuffledp.security.mosquitto_bounds import ENFORCED, build_bounds_plugin
from tests.conftest import require_mosquitto

PREFIX = "bounds-test"
ROOT = f"{PREFIX}/round/1"
BOUND = client_payload_bytes(1)


def _require_plugin() -> None:
    """Skip if the plugin cannot be built here (fail instead under CI, which installs gcc and
    mosquitto-dev)."""
    build = build_bounds_plugin()
    if build.path is None:
        if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
            pytest.fail(f"CI must build the Mosquitto bounds plugin: {build.reason}")
        pytest.skip(f"cannot build the Mosquitto bounds plugin: {build.reason}")


@pytest_asyncio.fixture
async def broker(tmp_path: Path) -> AsyncIterator[MosquittoBroker]:
    require_mosquitto()
    _require_plugin()
    init_access(tmp_path, hops=1, client_processes=1, prefix=PREFIX)
    async with MosquittoBroker(access_dir=tmp_path / "access") as started:
        assert started.bounds == ENFORCED
        yield started


def _login(keys: Path, broker: MosquittoBroker, identity: str) -> MqttTransport:
    return MqttTransport(
        broker.url,
        client_id=random_client_id(identity),
        username=identity,
        password=load_password(keys, identity),
    )


async def _next(transport: MqttTransport, seconds: float = 5.0) -> Any:
    async with asyncio.timeout(seconds):
        return await anext(transport.messages())


async def _nothing(transport: MqttTransport, seconds: float = 1.0) -> None:
    with pytest.raises(TimeoutError):
        await _next(transport, seconds)


@pytest.mark.integration
@pytest.mark.asyncio
async def test_a_client_accounts_retained_publish_is_refused(
    broker: MosquittoBroker, tmp_path: Path
) -> None:
    """On its own status topic and on hop 0's topic of another round (both in its ACL), a
    client's retained publish reaches no one, live or later; hop 0's retained status does."""
    other_round = f"{PREFIX}/round/7/hop/0"
    async with (
        _login(tmp_path, broker, "monitor") as live,
        _login(tmp_path, broker, "hop-0") as hop0,
    ):
        await live.subscribe(f"{ROOT}/status/+")
        await hop0.subscribe(other_round)
        async with _login(tmp_path, broker, "clients-0") as client:
            await client.publish(f"{ROOT}/status/clients-0", b'{"state":"x"}', retain=True)
            await client.publish(other_round, b"junk", retain=True)
            await client.publish(f"{ROOT}/status/clients-0", b'{"state":"plain"}')
        first = await _next(live)  # the same message without the flag is delivered
        assert first.payload == b'{"state":"plain"}'
        await _nothing(hop0)
        await hop0.publish(f"{ROOT}/status/hop-0", b'{"state":"ready"}', retain=True)
    async with (
        _login(tmp_path, broker, "monitor") as fresh,
        _login(tmp_path, broker, "hop-0") as later,
    ):
        await fresh.subscribe(f"{ROOT}/status/+")
        await later.subscribe(f"{PREFIX}/round/+/hop/0")
        kept = await _next(fresh)
        assert (kept.topic, kept.payload) == (f"{ROOT}/status/hop-0", b'{"state":"ready"}')
        await _nothing(fresh)  # nothing retained from the client
        await _nothing(later)
    assert "shuffledp-bounds: refused a PUBLISH of 13 bytes (retained)" in broker.log()


@pytest.mark.integration
@pytest.mark.asyncio
async def test_a_client_accounts_oversized_publish_never_arrives(
    broker: MosquittoBroker, tmp_path: Path
) -> None:
    """Over its bound (under Mosquitto's global 4 MiB) a client's publish is dropped; a report
    and a payload of exactly the bound still arrive."""
    async with _login(tmp_path, broker, "hop-0") as hop0:
        await hop0.subscribe(f"{ROOT}/hop/0")
        async with _login(tmp_path, broker, "clients-0") as client:
            await client.publish(f"{ROOT}/hop/0", bytes(BOUND + 1))
            await client.publish(f"{ROOT}/hop/0", bytes(1024 * 1024))
            await client.publish(f"{ROOT}/hop/0", b"r" * 296)
            await client.publish(f"{ROOT}/hop/0", b"b" * BOUND)
        assert (await _next(hop0)).payload == b"r" * 296
        assert (await _next(hop0)).payload == b"b" * BOUND
        await _nothing(hop0)
    assert f"refused a PUBLISH of {BOUND + 1} bytes from user clients-0" in broker.log()


@pytest.mark.integration
@pytest.mark.asyncio
async def test_stages_keep_large_frames_and_retained_reports(
    broker: MosquittoBroker, tmp_path: Path
) -> None:
    """Hop 0 (the last hop here) sends a 1 MiB frame to the analyzer, the analyzer retains its
    report: both pass (stage accounts are not bounded by the client rules)."""
    frame = os.urandom(1024 * 1024)
    async with _login(tmp_path, broker, "analyzer") as analyzer:
        await analyzer.subscribe(f"{ROOT}/analyzer")
        async with _login(tmp_path, broker, "hop-0") as hop0:
            await hop0.publish(f"{ROOT}/analyzer", frame)
        assert (await _next(analyzer)).payload == frame
        await analyzer.publish(f"{ROOT}/report", b'{"report": 1}', retain=True)
    async with _login(tmp_path, broker, "monitor") as monitor:
        await monitor.subscribe(f"{ROOT}/report")
        report = await _next(monitor)
        assert report.payload == b'{"report": 1}'  # retained: the analyzer has left


@pytest.mark.integration
@pytest.mark.asyncio
async def test_the_plugin_never_widens_the_acl(broker: MosquittoBroker, tmp_path: Path) -> None:
    """A small, unretained publish by a client to the analyzer's topic (outside its ACL) is
    still refused by the acl_file; the same publish to hop 0's topic arrives."""
    async with (
        _login(tmp_path, broker, "analyzer") as analyzer,
        _login(tmp_path, broker, "hop-0") as hop0,
    ):
        await analyzer.subscribe(f"{ROOT}/analyzer")
        await hop0.subscribe(f"{ROOT}/hop/0")
        async with _login(tmp_path, broker, "clients-0") as client:
            await client.publish(f"{ROOT}/analyzer", b"skip the shuffle")
            await client.publish(f"{ROOT}/hop/0", b"allowed")
        assert (await _next(hop0)).payload == b"allowed"
        await _nothing(analyzer)
