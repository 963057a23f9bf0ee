"""TLS to an external broker: Mosquitto with a TLS listener on 127.0.0.1 (mqtts:// in
protocol/mqtt.py, certificates from shuffledp.security.tls)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from shuffledp.brokers.mosquitto import MosquittoBroker
from shuffledp.protocol.mqtt import MqttConnectionError, MqttTransport
from shuffledp.security.access import init_access, load_password
from shuffledp.security.tls import init_tls
from shuffledp.simulations.pipeline.simulate import SimulationOptions, run_simulation
from tests.conftest import require_mosquitto

PREFIX = "tls-test"


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MosquittoBroker, Path]]:
    """Mosquitto on 127.0.0.1 with accounts, ACLs and a TLS listener whose certificate (default
    names: localhost, 127.0.0.1) is signed by the CA of the key directory it yields."""
    require_mosquitto()
    keys = tmp_path_factory.mktemp("tls-keys")
    init_access(keys, hops=1, client_processes=1, prefix=PREFIX)
    init_tls(keys)
    with MosquittoBroker(access_dir=keys / "access", tls_dir=keys / "tls") as broker:
        yield broker, keys


def _monitor(url: str, keys: Path, identity: str = "monitor", **tls: object) -> MqttTransport:
    return MqttTransport(
        url,
        client_id=f"t-{os.urandom(3).hex()}",
        username=identity,
        password=load_password(keys, identity),
        timeout=3,
        **tls,  # type: ignore[arg-type]
    )


@pytest.mark.integration
@pytest.mark.asyncio
async def test_message_round_trips_over_tls_with_the_right_ca(
    tls_broker: tuple[MosquittoBroker, Path],
) -> None:
    broker, keys = tls_broker
    topic = f"{PREFIX}/round/1/status/hop-0"  # hop 0 writes it, the (read-only) monitor reads
    ca = keys / "tls" / "ca.pem"
    async with (
        _monitor(broker.tls_url, keys, tls_ca=ca) as transport,
        _monitor(broker.tls_url, keys, "hop-0", tls_ca=ca) as hop0,
    ):
        assert transport.tls and hop0.tls
        await transport.subscribe(f"{PREFIX}/round/1/status/+")
        await hop0.publish(topic, b"over tls")
        async with asyncio.timeout(5):
            message = await anext(transport.messages())
    assert (message.topic, message.payload) == (topic, b"over tls")


@pytest.mark.integration
@pytest.mark.asyncio
async def test_another_deployments_ca_is_refused_naming_the_certificate(
    tls_broker: tuple[MosquittoBroker, Path], tmp_path: Path
) -> None:
    broker, keys = tls_broker
    other = init_tls(tmp_path)  # a second `keys init --tls`: another CA
    with pytest.raises(MqttConnectionError) as caught:
        async with _monitor(broker.tls_url, keys, tls_ca=other.ca_cert):
            pass
    message = str(caught.value)
    assert "\n" not in message
    assert f"TLS certificate did not verify against the CA file {other.ca_cert}" in message
    assert "unable to get local issuer certificate" in message
    assert load_password(keys, "monitor") not in message


@pytest.mark.integration
@pytest.mark.asyncio
async def test_wrong_scheme_for_the_port_fails_cleanly(
    tls_broker: tuple[MosquittoBroker, Path],
) -> None:
    broker, keys = tls_broker
    # Plain MQTT to the TLS port: Mosquitto closes the connection, aiomqtt waits for its timeout.
    with pytest.raises(MqttConnectionError, match="if the port is a TLS listener, use mqtts://"):
        async with _monitor(f"mqtt://127.0.0.1:{broker.tls_port}", keys):
            pass
    # TLS to the plain port: the handshake fails at once.
    with pytest.raises(MqttConnectionError, match=r"TLS handshake failed.*TLS listener"):
        async with _monitor(
            f"mqtts://127.0.0.1:{broker.port}", keys, tls_ca=keys / "tls" / "ca.pem"
        ):
            pass


@pytest.mark.integration
@pytest.mark.asyncio
async def test_host_name_outside_the_certificate_is_refused(tmp_path: Path) -> None:
    require_mosquitto()
    files = init_tls(tmp_path, hosts=["broker.example.org"])  # not 127.0.0.1
    async with MosquittoBroker(tls_dir=tmp_path / "tls") as broker:
        with pytest.raises(MqttConnectionError) as caught:
            async with MqttTransport(broker.tls_url, client_id="t-san", tls_ca=files.ca_cert):
                pass
    message = str(caught.value)
    assert f"did not verify against the CA file {files.ca_cert}" in message
    assert "mismatch" in message and "127.0.0.1" in message


@pytest.mark.integration
def test_simulate_passes_the_ca_to_every_component(tmp_path: Path) -> None:
    """A full round over mqtts://: every child and the launcher must verify with --tls-ca (the
    system's trust store does not know this CA, so any component without it would fail)."""
    require_mosquitto()
    files = init_tls(tmp_path)
    with MosquittoBroker(tls_dir=tmp_path / "tls") as broker:  # open: the run's fresh accounts
        options = SimulationOptions(
            n=12,
            k=3,
            hops=1,
            client_processes=1,
            deadline=30,
            seed=5,
            broker=broker.tls_url,
            tls_ca=files.ca_cert,
        )
        report = asyncio.run(run_simulation(options))
    assert report["n_received"] == 12
    assert report["simulation"]["broker"] == broker.tls_url
