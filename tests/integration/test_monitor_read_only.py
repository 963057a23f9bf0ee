"""The monitor account is read-only, on Mosquitto and on the embedded broker: a report or a
stage status it publishes reaches no one, while the same publish by the account that owns the
topic (the analyzer, hop 1) arrives on the same broker (the positive control)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from shuffledp.brokers.embedded import EmbeddedBroker
from shuffledp.brokers.mosquitto import MosquittoBroker
from shuffledp.protocol.mqtt import MqttConnectionError, MqttTransport
from shuffledp.security.access import init_access, load_password
from shuffledp.security.client_ids import random_client_id
from tests.conftest import require_mosquitto

PREFIX = "ro-test"
ROOT = f"{PREFIX}/round/1"


def _login(url: str, keys: Path, identity: str) -> MqttTransport:
    return MqttTransport(
        url,
        client_id=random_client_id(identity),
        username=identity,
        password=load_password(keys, identity),
    )


async def _payloads(transport: MqttTransport, seconds: float) -> list[bytes]:
    """Everything ``transport`` receives within ``seconds``."""
    received: list[bytes] = []
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            async for message in transport.messages():
                received.append(message.payload)
    return received


async def _forge(url: str, keys: Path, topic: str, payload: bytes) -> None:
    """The monitor publishes ``payload`` retained on ``topic`` (Mosquitto may disconnect it for
    that: either way nothing must be delivered)."""
    with contextlib.suppress(MqttConnectionError):
        async with _login(url, keys, "monitor") as monitor:
            await monitor.publish(topic, payload, retain=True)


async def _check_read_only(url: str, keys: Path) -> dict[str, Any]:
    async with _login(url, keys, "hop-0") as hop0:
        await hop0.subscribe(f"{ROOT}/status/hop-1")
        await _forge(url, keys, f"{ROOT}/report", b'{"forged": "report"}')
        await _forge(url, keys, f"{ROOT}/status/hop-1", b'{"state": "ready"}')
        forged_status = await _payloads(hop0, 1.0)
        async with _login(url, keys, "hop-1") as hop1:  # the owner of that status: allowed
            await hop1.publish(f"{ROOT}/status/hop-1", b'{"state": "ready", "by": "hop-1"}')
        owner_status = await _payloads(hop0, 2.0)
    async with _login(url, keys, "analyzer") as analyzer:  # the only writer of the report
        await analyzer.publish(f"{ROOT}/report", b'{"by": "analyzer"}', retain=True)
    async with _login(url, keys, "monitor") as monitor:  # reading is still allowed
        await monitor.subscribe(f"{ROOT}/report")
        kept = await _payloads(monitor, 1.0)
    return {"forged_status": forged_status, "owner_status": owner_status, "kept": kept}


def _assert_read_only(seen: dict[str, Any]) -> None:
    assert seen["forged_status"] == []  # the monitor's forged "ready" reached nobody
    assert seen["owner_status"] == [b'{"state": "ready", "by": "hop-1"}']
    assert seen["kept"] == [b'{"by": "analyzer"}']  # not the monitor's forged report


@pytest.mark.integration
@pytest.mark.asyncio
async def test_mosquitto_monitor_can_write_neither_report_nor_status(tmp_path: Path) -> None:
    require_mosquitto()
    init_access(tmp_path, hops=2, client_processes=1, prefix=PREFIX)
    async with MosquittoBroker(access_dir=tmp_path / "access") as broker:
        _assert_read_only(await _check_read_only(broker.url, tmp_path))


@pytest.mark.integration
@pytest.mark.asyncio
async def test_embedded_monitor_can_write_neither_report_nor_status(tmp_path: Path) -> None:
    init_access(tmp_path, hops=2, client_processes=1, prefix=PREFIX)
    async with EmbeddedBroker(access_dir=tmp_path / "access") as broker:
        _assert_read_only(await _check_read_only(broker.url, tmp_path))
