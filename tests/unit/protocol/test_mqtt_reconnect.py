"""MqttTransport._reconnect without a broker: fake aiomqtt clients whose CONNECT fails with
the errors a broker gives (a refused CONNACK, a takeover at once, a timeout), then succeeds;
the session-present flag decides what is counted lost (the real brokers:
tests/integration/test_access_brokers.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import aiomqtt
import pytest

from shuffledp.errors import BrokerError
from shuffledp.protocol.mqtt import MqttConnectionError, MqttTransport


class _FakeClient:
    """Stands for an aiomqtt client: entering raises the next planned error, or connects with
    the planned session-present flag (what paho's on_connect callback would report)."""

    def __init__(self, transport: MqttTransport, outcome: BaseException | bool) -> None:
        self.transport = transport
        self.outcome = outcome
        self.subscribed: list[str] = []
        self.published: list[tuple[str, bytes]] = []

    async def __aenter__(self) -> _FakeClient:
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        self.transport.session_present = self.outcome
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def subscribe(self, topic: str, qos: int) -> None:
        self.subscribed.append(topic)

    async def publish(self, topic: str, payload: bytes, qos: int, retain: bool) -> None:
        self.published.append((topic, payload))


def _plan(transport: MqttTransport, outcomes: list[BaseException | bool]) -> Iterator[_FakeClient]:
    for outcome in outcomes:
        yield _FakeClient(transport, outcome)


def _transport(outcomes: list[BaseException | bool], reconnect: float) -> MqttTransport:
    transport = MqttTransport(
        "mqtt://127.0.0.1:1",
        client_id="sdp-hop-0-test",
        persistent_session=True,
        reconnect_timeout=reconnect,
        will_topic="p/round/1/status/hop-0",
    )
    clients = _plan(transport, outcomes)
    inside: Any = transport  # its aiomqtt client factory and client replaced by fakes
    inside._make_client = lambda **_: next(clients)
    inside._client = _FakeClient(transport, True)
    inside._subscriptions = ["p/round/1/hop/0"]
    inside._will_status = b'{"state":"ready"}'
    return transport


TRANSIENT: list[BaseException | bool] = [
    aiomqtt.MqttCodeError(135, "Not authorized"),  # a CONNACK error code
    aiomqtt.MqttError("Disconnected during message iteration"),  # taken over at once
    TimeoutError(),
]


@pytest.mark.asyncio
async def test_transient_errors_are_retried_and_a_resumed_session_is_not_a_loss() -> None:
    transport = _transport([*TRANSIENT, True], reconnect=30)
    lost: list[int] = []
    transport.on_session_lost(lambda: lost.append(1))
    await transport._reconnect(0, aiomqtt.MqttError("lost"), "connection lost")
    assert transport.reconnects == 1 and transport._generation == 1
    assert transport.session_present and transport.sessions_lost == 0 and lost == []
    client: Any = transport._client
    assert client.subscribed == ["p/round/1/hop/0"]  # subscriptions renewed
    assert client.published == [("p/round/1/status/hop-0", b'{"state":"ready"}')]
    # Another task that noticed the same loss returns at once: one reconnection for all.
    await transport._reconnect(0, aiomqtt.MqttError("lost"), "connection lost")
    assert transport.reconnects == 1


@pytest.mark.asyncio
async def test_a_session_found_gone_is_counted_and_reported() -> None:
    transport = _transport([TRANSIENT[0], False], reconnect=30)
    lost: list[int] = []
    transport.on_session_lost(lambda: lost.append(transport.reconnects))
    await transport._reconnect(0, aiomqtt.MqttError("lost"), "connection lost")
    assert (transport.sessions_lost, lost) == (1, [1])  # listener called after reconnecting


@pytest.mark.asyncio
async def test_persistent_failure_is_one_broker_error_line() -> None:
    refused: list[BaseException | bool] = [aiomqtt.MqttCodeError(135, "Not authorized")] * 50
    transport = _transport(refused, reconnect=0.25)
    with pytest.raises(MqttConnectionError) as raised:
        await transport._reconnect(0, aiomqtt.MqttError("lost"), "publish to 't' failed")
    message = str(raised.value)
    assert isinstance(raised.value, BrokerError) and "\n" not in message
    assert message.startswith("publish to 't' failed: lost; not reconnected within 0.25 s: ")
    assert "[code:135]" in message
    assert transport.reconnects == 0


@pytest.mark.asyncio
async def test_no_reconnect_fails_at_once_with_one_line() -> None:
    transport = MqttTransport("mqtt://127.0.0.1:1", client_id="sdp-hop-0-x")
    with pytest.raises(MqttConnectionError, match=r"^connection lost: \[code:7\]"):
        await transport._reconnect(
            0, aiomqtt.MqttCodeError(7, "The connection was lost."), "connection lost"
        )


@pytest.mark.asyncio
async def test_acknowledgements_of_a_lost_connection_are_not_sent() -> None:
    """An ack id carries its connection: after a reconnection, acknowledging a message of the
    old connection sends nothing (its packet id would name another message)."""
    from shuffledp.protocol.transport import Message

    transport = _transport([True], reconnect=30)
    transport.manual_ack = True
    sent: list[int] = []

    class _Paho:
        def ack(self, mid: int, qos: int) -> None:
            sent.append(mid)

    inside: Any = transport
    inside._client._client = _Paho()
    transport.ack(Message("t", b"", 5))  # generation 0, packet id 5
    await transport._reconnect(0, aiomqtt.MqttError("lost"), "connection lost")
    inside._client._client = _Paho()
    transport.ack(Message("t", b"", 6))  # still generation 0: the lost connection's
    transport.ack(Message("t", b"", 65536 + 7))  # generation 1, packet id 7
    assert sent == [5, 7]
