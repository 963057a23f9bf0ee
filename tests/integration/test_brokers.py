"""The MQTT brokers (embedded amqtt, Mosquitto), the broker URL rule and `shuffledp broker`.

Every test talks to brokers on 127.0.0.1 only, each on its own free port, under its own topic
prefix; QoS 1 delivery is checked by counting at the receiver (measured when the transport was chosen: loss and
duplicates show only there).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import hashlib
import importlib.metadata
import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import aiomqtt
import pytest

from shuffledp.brokers.amqtt_compat import AMQTT_VERSION, SnapshotDict, check_amqtt_version
from shuffledp.brokers.embedded import EmbeddedBroker
from shuffledp.brokers.mosquitto import (
    MosquittoBroker,
    deploy_mosquitto_config,
    write_mosquitto_config,
)
from shuffledp.brokers.ports import PortInUseError, free_loopback_port
from shuffledp.errors import BrokerError, InvalidParameterError
from shuffledp.protocol.mqtt import parse_broker_url
from shuffledp.security.broker_limits import QUEUED_BYTES, QUEUED_MESSAGES, STAGE_PACKET_BYTES
from tests.conftest import require_mosquitto
from tests.paths import REPO_ROOT

ROOT = REPO_ROOT
N_MESSAGES = 5_000
IN_FLIGHT = 200

# aiomqtt warns on every publish while more than 10 are pending; we keep up to 200 on purpose.
_QUIET = logging.getLogger("tests.brokers.mqtt")
_QUIET.setLevel(logging.ERROR)


@pytest.fixture(params=["embedded", "mosquitto"])
def broker_url(request: pytest.FixtureRequest) -> str:
    """Each test below runs once per broker."""
    fixture = {"embedded": "embedded_broker_url", "mosquitto": "mosquitto_url"}[request.param]
    url: str = request.getfixturevalue(fixture)
    return url


def _client(url: str, role: str, in_flight: int | None = None) -> aiomqtt.Client:
    host, port = parse_broker_url(url)
    return aiomqtt.Client(
        host,
        port,
        identifier=f"{role}-{uuid.uuid4().hex[:12]}",
        logger=_QUIET,
        max_inflight_messages=in_flight,  # paho's default: 20 QoS 1 publishes unacknowledged
    )


def _prefix() -> str:
    return f"shuffledp-test/{uuid.uuid4().hex}"


def _payloads(n: int, size: int = 200) -> list[bytes]:
    return [f"{i:08d}".encode().ljust(size, b".") for i in range(n)]


async def _publish_all(client: aiomqtt.Client, topic: str, payloads: Sequence[bytes]) -> None:
    """Publish at QoS 1 with at most IN_FLIGHT publishes awaiting their PUBACK."""
    slots = asyncio.Semaphore(IN_FLIGHT)

    async def one(payload: bytes) -> None:
        try:
            await client.publish(topic, payload, qos=1)
        finally:
            slots.release()

    async with asyncio.TaskGroup() as group:
        for payload in payloads:
            await slots.acquire()
            group.create_task(one(payload))


async def _receive(client: aiomqtt.Client, n: int, timeout: float) -> list[bytes]:
    """The first n messages (or what came within `timeout`), then anything arriving within 0.3 s
    more, which would be a duplicate."""
    received: list[bytes] = []

    async def collect(until: int) -> None:
        async for message in client.messages:
            assert isinstance(message.payload, bytes)
            received.append(message.payload)
            if len(received) >= until:
                return

    try:
        await asyncio.wait_for(collect(n), timeout)
        await asyncio.wait_for(collect(n + 1), 0.3)
    except TimeoutError:
        pass
    return received


def _assert_exactly_once(received: list[bytes], sent: list[bytes]) -> None:
    counts = collections.Counter(received)
    duplicates = sum(c - 1 for c in counts.values())
    missing = len(set(sent) - set(counts))
    assert (len(received), missing, duplicates) == (len(sent), 0, 0)
    assert set(counts) == set(sent)


@pytest.mark.integration
@pytest.mark.asyncio
async def test_qos1_messages_arrive_exactly_once(broker_url: str) -> None:
    topic = f"{_prefix()}/a"
    sent = _payloads(N_MESSAGES)
    async with (
        _client(broker_url, "sub") as sub,
        _client(broker_url, "pub", in_flight=IN_FLIGHT) as pub,
    ):
        await sub.subscribe(topic, qos=1)
        start = time.perf_counter()
        receiving = asyncio.create_task(_receive(sub, N_MESSAGES, timeout=30))
        await _publish_all(pub, topic, sent)
        received = await receiving
        elapsed = time.perf_counter() - start - 0.3  # minus the wait for duplicates
    rate = N_MESSAGES / elapsed
    print(f"\n{broker_url}: {N_MESSAGES} QoS 1 messages in {elapsed:.2f} s, {rate:,.0f} msg/s")
    _assert_exactly_once(received, sent)


@pytest.mark.integration
@pytest.mark.asyncio
async def test_retained_message_reaches_later_subscriber(broker_url: str) -> None:
    topic = f"{_prefix()}/retained"
    payload = b"round 7 keys " + uuid.uuid4().bytes
    async with _client(broker_url, "pub") as pub:
        await pub.publish(topic, payload, qos=1, retain=True)
    async with _client(broker_url, "late") as late:
        await late.subscribe(topic, qos=1)
        received = await asyncio.wait_for(anext(late.messages), 10)
        async with _client(broker_url, "cleanup") as cleanup:  # an empty payload clears it
            await cleanup.publish(topic, b"", qos=1, retain=True)
    assert received.payload == payload
    assert received.retain


@pytest.mark.integration
@pytest.mark.asyncio
async def test_one_megabyte_payload_arrives_intact(broker_url: str) -> None:
    topic = f"{_prefix()}/big"
    payload = os.urandom(1 << 20)
    async with _client(broker_url, "sub") as sub, _client(broker_url, "pub") as pub:
        await sub.subscribe(topic, qos=1)
        await pub.publish(topic, payload, qos=1)
        message = await asyncio.wait_for(anext(sub.messages), 20)
    assert isinstance(message.payload, bytes)
    assert len(message.payload) == len(payload)
    assert hashlib.sha256(message.payload).digest() == hashlib.sha256(payload).digest()


# -- a subscriber that stops reading -----------------------------------------------------------

PAUSE = 2.0


def _paused_subscriber(
    url: str, topic: str, subscribed: threading.Event, published: threading.Event
) -> list[bytes]:
    """Subscribe, then block this thread's event loop (its socket is not read, as in a stalled
    process) for PAUSE s and until all messages are published, then collect N_MESSAGES."""

    async def main() -> list[bytes]:
        async with _client(url, "paused") as sub:
            await sub.subscribe(topic, qos=1)
            subscribed.set()
            time.sleep(PAUSE)
            # On a slow machine publishing takes longer; the whole backlog builds up regardless.
            published.wait(60)
            return await _receive(sub, N_MESSAGES, timeout=30)

    return asyncio.run(main())


@pytest.mark.integration
@pytest.mark.asyncio
async def test_paused_subscriber_loses_nothing(broker_url: str) -> None:
    # All 5,000 messages wait in the broker for the paused subscriber. Mosquitto's default
    # max_queued_messages (1000) drops most of them silently (without that line in the template
    # 2,000 of 5,000 arrive); MosquittoBroker and deploy/mosquitto.conf hold QUEUED_MESSAGES.
    topic = f"{_prefix()}/paused"
    sent = _payloads(N_MESSAGES)
    subscribed, published = threading.Event(), threading.Event()
    receiving = asyncio.create_task(
        asyncio.to_thread(_paused_subscriber, broker_url, topic, subscribed, published)
    )
    try:
        assert await asyncio.to_thread(subscribed.wait, 10)
        async with _client(broker_url, "pub", in_flight=IN_FLIGHT) as pub:
            await _publish_all(pub, topic, sent)
    finally:
        published.set()
    received = await receiving
    _assert_exactly_once(received, sent)


# -- loopback only ------------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.asyncio
async def test_simultaneous_connects_and_subscribes_all_succeed(broker_url: str) -> None:
    """Regression for two amqtt 0.12.1 bugs that EmbeddedBroker works around. On connect, amqtt
    sends the new client the retained messages of every filter anyone subscribed to, awaiting
    each while it walks its subscription table; a SUBSCRIBE landing meanwhile raised
    "dictionary changed size during iteration", killed the connecting client's session, and its
    SUBSCRIBE timed out (most `shuffledp simulate` runs failed so). With 100 retained topics held
    by another client, each of 40 clients connecting at once must subscribe and receive its own
    message and nothing else (no retained message it did not subscribe to)."""
    prefix = _prefix()
    n_clients = 40

    async def one(index: int) -> list[bytes]:
        async with _client(broker_url, f"burst{index}") as client:
            await client.subscribe(f"{prefix}/new/{index}", qos=1)
            await client.publish(f"{prefix}/new/{index}", f"m{index}".encode(), qos=1)
            return await _receive(client, 1, timeout=10)

    async with _client(broker_url, "holder") as holder:
        for index in range(100):  # a long table makes each connecting client's walk long
            await holder.subscribe(f"{prefix}/held/{index}", qos=1)
            await holder.publish(f"{prefix}/held/{index}", b"retained", qos=1, retain=True)
        try:
            results = await asyncio.gather(*(one(index) for index in range(n_clients)))
        finally:
            for index in range(100):  # an empty retained payload clears it
                await holder.publish(f"{prefix}/held/{index}", b"", qos=1, retain=True)
    assert results == [[f"m{index}".encode()] for index in range(n_clients)]


def test_snapshot_table_iterates_as_it_was_when_the_loop_began() -> None:
    """The table EmbeddedBroker gives amqtt: adding or removing filters or subscribers while a
    loop walks it neither raises nor changes what that loop sees (a plain dict raises)."""
    table = SnapshotDict({"a": ["s1", "s2"], "b": ["s3"]})
    walked = []
    for key in table:
        table[f"new-{key}"] = []
        walked.append(key)
    assert walked == ["a", "b"]
    pairs = []
    for key, holders in table.items():
        if key == "a":
            table["a"].remove("s1")  # a subscriber leaves mid-broadcast
            del table["b"]
        pairs.append((key, holders))
    assert pairs[:2] == [("a", ["s1", "s2"]), ("b", ["s3"])]
    assert dict(table) == {"a": ["s2"], "new-a": [], "new-b": []}
    with pytest.raises(RuntimeError, match="changed size"):
        plain = {"a": 1}
        for key in plain:
            plain[key + "x"] = 2


def _other_local_address() -> str | None:
    """An IPv4 address of this machine that is not 127.x, or None."""
    candidates = []
    with contextlib.suppress(OSError):
        candidates.append(socket.gethostbyname(socket.gethostname()))
    try:  # the interface of the default route; connect() on UDP sends nothing
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))
            candidates.append(probe.getsockname()[0])
    except OSError:
        pass
    return next((a for a in candidates if not a.startswith("127.") and a != "0.0.0.0"), None)


def _connects(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=2):
            return True
    except OSError:
        return False


@pytest.mark.integration
@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["embedded", "mosquitto"])
async def test_broker_listens_on_loopback_only(kind: str) -> None:
    address = _other_local_address()
    if address is None:
        pytest.skip("this machine has no IPv4 address besides 127.x")
    # Control: a socket bound to all interfaces is reachable through that address.
    with socket.socket() as wildcard:
        wildcard.bind(("0.0.0.0", 0))
        wildcard.listen()
        assert _connects(address, wildcard.getsockname()[1])
    if kind == "mosquitto":
        require_mosquitto()
    broker = EmbeddedBroker() if kind == "embedded" else MosquittoBroker()
    async with broker:
        assert await asyncio.to_thread(_connects, "127.0.0.1", broker.port)
        assert not await asyncio.to_thread(_connects, address, broker.port)


@pytest.mark.integration
@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["embedded", "mosquitto"])
async def test_cancelled_task_stops_its_broker(kind: str) -> None:
    if kind == "mosquitto":
        require_mosquitto()
    broker = EmbeddedBroker() if kind == "embedded" else MosquittoBroker()
    running = asyncio.Event()
    tmpdirs: list[Path] = []

    async def serve() -> None:
        async with broker:
            if isinstance(broker, MosquittoBroker):
                tmpdirs.append(broker.config_path.parent)
                assert tmpdirs[0].is_dir()
            running.set()
            await asyncio.sleep(3600)

    task = asyncio.create_task(serve())
    await asyncio.wait_for(running.wait(), 15)
    assert await asyncio.to_thread(_connects, "127.0.0.1", broker.port)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not await asyncio.to_thread(_connects, "127.0.0.1", broker.port)
    assert not any(path.exists() for path in tmpdirs)  # Mosquitto's config directory is gone


# -- start-up errors ----------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["embedded", "mosquitto"])
async def test_port_in_use_is_a_clear_error(kind: str) -> None:
    if kind == "mosquitto":
        require_mosquitto()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker = EmbeddedBroker(port) if kind == "embedded" else MosquittoBroker(port)
        with pytest.raises(PortInUseError, match=f"{port}.*(?i:already in use)") as caught:
            async with broker:
                pass
    assert isinstance(caught.value, BrokerError)  # exit status 1 on the command line
    print(f"\n{kind}: {caught.value}")


@pytest.mark.asyncio
async def test_amqtt_failure_is_not_reported_as_a_port_in_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """amqtt failing for another reason than EADDRINUSE (here EACCES) is a BrokerError that says
    so, never a PortInUseError."""
    from amqtt.broker import Broker
    from amqtt.errors import BrokerError as AmqttBrokerError

    async def refuse(self: object) -> None:
        raise AmqttBrokerError("Broker instance can't be started") from PermissionError(
            errno.EACCES, "Permission denied"
        )

    monkeypatch.setattr(Broker, "start", refuse)
    with pytest.raises(BrokerError, match=r"could not start.*Permission denied") as caught:
        async with EmbeddedBroker():
            pass
    assert not isinstance(caught.value, PortInUseError)
    assert "in use" not in str(caught.value)


@pytest.mark.asyncio
@pytest.mark.parametrize("version", ["0.12.0", "0.12.2", "0.13.0", "none"])
async def test_other_amqtt_version_is_refused(
    monkeypatch: pytest.MonkeyPatch, version: str
) -> None:
    """The patches of amqtt_compat replace amqtt internals of exactly AMQTT_VERSION: any other
    installed version is refused before a broker is built (and the pin matches pyproject)."""
    assert importlib.metadata.version("amqtt") == AMQTT_VERSION
    pin = f'"amqtt=={AMQTT_VERSION}"'
    assert pin in (ROOT / "pyproject.toml").read_text()
    monkeypatch.setattr(importlib.metadata, "version", lambda name: version)
    with pytest.raises(BrokerError, match=f"needs amqtt {AMQTT_VERSION}.*found amqtt {version}"):
        async with EmbeddedBroker():
            pass
    check_amqtt_version(AMQTT_VERSION)  # the version itself passes


@pytest.mark.asyncio
async def test_mosquitto_missing_binary_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BrokerError, match="mosquitto not found"):
        async with MosquittoBroker(binary=str(tmp_path / "no-such-mosquitto")):
            pass


def test_shipped_mosquitto_config_is_the_template(tmp_path: Path) -> None:
    """deploy/mosquitto.conf is deploy_mosquitto_config() (accounts required: its test is
    tests/integration/test_deploy_config.py) with the delivery settings of the open test
    configuration, which says that it is for tests only."""
    shipped = (ROOT / "deploy" / "mosquitto.conf").read_text()
    assert shipped == deploy_mosquitto_config()
    open_config = write_mosquitto_config(tmp_path, 1883).read_text()
    assert open_config.startswith("# FOR TESTS ONLY: an open Mosquitto")
    assert "allow_anonymous true\n" in open_config and "allow_anonymous true" not in shipped
    settings = {
        line.split()[0]: line.split()[1:]
        for line in shipped.splitlines()
        if line and not line.startswith("#")
    }
    assert settings["listener"] == ["1883", "127.0.0.1"]
    # Bounded queues large enough for a round of 10^6 reports, bounded packets, persistence.
    assert settings["max_queued_messages"] == [str(QUEUED_MESSAGES)]
    assert int(settings["max_queued_messages"][0]) >= 1_000_000
    assert settings["max_queued_bytes"] == [str(QUEUED_BYTES)]
    assert settings["max_packet_size"] == [str(STAGE_PACKET_BYTES)]
    assert settings["persistence"] == ["true"]


# -- broker URLs -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("mqtt://127.0.0.1:1883", ("127.0.0.1", 1883)),
        ("mqtt://localhost", ("localhost", 1883)),
        ("mqtt://broker.example.org:8883", ("broker.example.org", 8883)),
        ("MQTT://host:1", ("host", 1)),
        ("mqtt://h:65535", ("h", 65535)),
        ("mqtt://[::1]:1884", ("::1", 1884)),
        ("mqtt://[::1]", ("::1", 1883)),
    ],
)
def test_parse_broker_url_accepts(url: str, expected: tuple[str, int]) -> None:
    assert parse_broker_url(url) == expected


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        (
            "ssl://127.0.0.1:8883",
            "mqtt://",
        ),  # mqtts:// is accepted (tests/unit/security/test_tls.py)
        ("http://127.0.0.1:1883", "mqtt://"),
        ("tcp://127.0.0.1:1883", "mqtt://"),
        ("127.0.0.1:1883", "mqtt://"),
        ("mqtt:/127.0.0.1", "mqtt://"),
        ("mqtt://", "host"),
        ("mqtt://:1883", "host"),
        ("mqtt://h:0", "1..65535"),
        ("mqtt://h:65536", "1..65535"),
        ("mqtt://h:-1", "1..65535"),
        ("mqtt://h:", "1..65535"),
        ("mqtt://h:18x3", "1..65535"),
        ("mqtt://h:1883:1", "1..65535"),
        ("mqtt://h:1883/", "no path"),
        ("mqtt://h:1883/topic", "no path"),
        ("mqtt://h?x=1", "no path"),
        ("mqtt://h#frag", "no path"),
        ("mqtt://user:pw@h:1883", "credentials"),
        ("mqtt://user@h", "credentials"),
        ("mqtt://bad host", "whitespace"),
        (" mqtt://h", "whitespace"),
        ("mqtt://h%20x", "host name or an IP address"),
        ("mqtt://[not-ipv6]:1883", "host name or an IP address"),
        ("mqtt://[1::2::3]", "IPv6"),
        ("", "mqtt://"),
    ],
)
def test_parse_broker_url_rejects(url: str, rule: str) -> None:
    with pytest.raises(InvalidParameterError, match=rule.replace(".", r"\.")) as caught:
        parse_broker_url(url)
    assert repr(url) in str(caught.value)  # the message names the value


# -- shuffledp broker ----------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.asyncio
async def test_broker_command_serves_and_exits_cleanly_on_sigint() -> None:
    port = free_loopback_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "shuffledp",
        "broker",
        "--port",
        str(port),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        line = await asyncio.wait_for(process.stdout.readline(), 20)
        assert line.decode() == f"shuffledp broker: listening on mqtt://127.0.0.1:{port}\n"
        url = f"mqtt://127.0.0.1:{port}"
        topic = f"{_prefix()}/cli"
        async with _client(url, "sub") as sub, _client(url, "pub") as pub:
            await sub.subscribe(topic, qos=1)
            await pub.publish(topic, b"hello", qos=1)
            message = await asyncio.wait_for(anext(sub.messages), 10)
        assert message.payload == b"hello"
        process.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(process.wait(), 5)
        stderr = (await process.stderr.read()).decode()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert code == 130, stderr  # 128 + SIGINT, after one line
    assert "Traceback" not in stderr and stderr.endswith("shuffledp broker: stopped by SIGINT\n")
