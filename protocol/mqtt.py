"""The :class:`~shuffledp.protocol.transport.Transport` over a real MQTT broker, with aiomqtt.

``async with MqttTransport("mqtt://127.0.0.1:1883", client_id="hop-0") as transport:`` connects
(aiomqtt must be created inside the running loop), and disconnects on exit. Every publish and
subscription uses QoS 1 (at least once): a duplicate delivery is caught by the stages' seen-sets
and counted, while QoS 0 could lose a report silently. Publishing waits for the broker's PUBACK;
:func:`~shuffledp.protocol.transport.publish_all` keeps many in flight, bounded by
``max_in_flight`` (paho-mqtt overwrites QoS 1 messages silently past 65,535 unacknowledged ones,
TRANSPORT.md, so the bound also protects against that).

Why aiomqtt: the maintained asyncio MQTT client (successor of asyncio-mqtt) on top of paho-mqtt.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Self

import aiomqtt

from shuffledp.accountant.mechanism import InvalidParameterError, require_int
from shuffledp.protocol.transport import Message

__all__ = ["MqttConnectionError", "MqttTransport", "parse_broker_url"]

QOS = 1
DEFAULT_PORT = 1883

# aiomqtt logs a warning for every publish once more than 10 are pending; with a bounded number
# in flight that is the intended state, so its logger only passes errors.
_QUIET = logging.getLogger("shuffledp.mqtt")
_QUIET.setLevel(logging.ERROR)


class MqttConnectionError(RuntimeError):
    """The broker could not be reached, or the connection was lost."""


def parse_broker_url(url: str) -> tuple[str, int]:
    """(host, port) of ``mqtt://host[:port]`` (default port 1883).

    Raises InvalidParameterError for anything else: another scheme, no host, a port outside
    1..65535, or a path, query, fragment or credentials (credentials do not belong in a URL
    that is printed in reports and process lists).
    """
    from urllib.parse import urlsplit

    if not isinstance(url, str):
        raise InvalidParameterError(f"broker URL must be a string, got {url!r}")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidParameterError(f"broker URL must be mqtt://host[:port], got {url!r}") from exc
    if parts.scheme != "mqtt":
        raise InvalidParameterError(
            f"broker URL must use the scheme mqtt:// (TLS is not supported yet), got {url!r}"
        )
    if not parts.hostname:
        raise InvalidParameterError(f"broker URL must name a host, got {url!r}")
    if parts.username is not None or parts.password is not None:
        raise InvalidParameterError(f"broker URL must not contain credentials, got {url!r}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise InvalidParameterError(
            f"broker URL must be mqtt://host[:port] without path or query, got {url!r}"
        )
    if port is not None and not 1 <= port <= 65535:
        raise InvalidParameterError(f"broker port must be in [1, 65535], got {port}")
    return parts.hostname, DEFAULT_PORT if port is None else port


class MqttTransport:
    """A connection to an MQTT broker; see the module docstring.

    ``client_id`` must be unique among the broker's connected clients (MQTT disconnects the
    older one otherwise). ``max_in_flight`` bounds paho's unacknowledged QoS 1 messages.
    """

    def __init__(
        self,
        url: str,
        *,
        client_id: str,
        max_in_flight: int = 256,
        tls_context: ssl.SSLContext | None = None,
    ) -> None:
        self.host, self.port = parse_broker_url(url)
        self.url = url
        if not isinstance(client_id, str) or not client_id:
            raise InvalidParameterError(f"client_id must be a non-empty string, got {client_id!r}")
        require_int("max_in_flight", max_in_flight, 1, 65535, bound="[1, 65535]")
        self.client_id = client_id
        self._client = aiomqtt.Client(
            self.host,
            self.port,
            identifier=client_id,
            logger=_QUIET,
            max_inflight_messages=max_in_flight,
            keepalive=60,
            tls_context=tls_context,
        )

    async def __aenter__(self) -> Self:
        try:
            await self._client.__aenter__()
        except aiomqtt.MqttError as exc:
            raise MqttConnectionError(
                f"cannot connect to the MQTT broker at {self.url} as {self.client_id!r}: {exc}"
            ) from exc
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        with contextlib.suppress(aiomqtt.MqttError):  # already disconnected: nothing to release
            await self._client.__aexit__(exc_type, exc, traceback)

    async def publish(self, topic: str, payload: bytes, *, retain: bool = False) -> None:
        try:
            await self._client.publish(topic, bytes(payload), qos=QOS, retain=retain)
        except aiomqtt.MqttError as exc:
            raise MqttConnectionError(f"publish to {topic!r} at {self.url} failed: {exc}") from exc

    async def subscribe(self, topic_filter: str) -> None:
        try:
            await self._client.subscribe(topic_filter, qos=QOS)
        except aiomqtt.MqttError as exc:
            raise MqttConnectionError(
                f"subscribe to {topic_filter!r} at {self.url} failed: {exc}"
            ) from exc

    async def messages(self) -> AsyncIterator[Message]:
        try:
            async for message in self._client.messages:
                payload = message.payload
                if isinstance(payload, str):
                    data = payload.encode()
                elif isinstance(payload, bytes | bytearray):
                    data = bytes(payload)
                else:  # aiomqtt decodes nothing itself; int/float/None only come from publishers
                    data = b"" if payload is None else str(payload).encode()
                yield Message(message.topic.value, data)
        except aiomqtt.MqttError as exc:
            raise MqttConnectionError(f"connection to {self.url} lost: {exc}") from exc
