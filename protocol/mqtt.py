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

import asyncio
import contextlib
import logging
import re
import socket
import ssl
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Self

import aiomqtt

from shuffledp.accountant.mechanism import InvalidParameterError, require_int
from shuffledp.protocol.transport import Message

__all__ = ["MqttConnectionError", "MqttTransport", "parse_broker_url"]

QOS = 1
#: Seconds a connection left on an error or cancellation waits for the broker's goodbye.
ABORT_DISCONNECT_SECONDS = 2.0
DEFAULT_PORT = 1883

# aiomqtt logs a warning for every publish once more than 10 are pending; with a bounded number
# in flight that is the intended state, so its logger only passes errors.
_QUIET = logging.getLogger("shuffledp.mqtt")
_QUIET.setLevel(logging.ERROR)


class MqttConnectionError(RuntimeError):
    """The broker could not be reached, or the connection was lost."""


_PORT_RE = re.compile(r"[0-9]{1,5}")
_HOST_RE = re.compile(r"[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]")


def parse_broker_url(url: str) -> tuple[str, int]:
    """(host, port) of ``mqtt://host[:port]`` (port 1883 if omitted).

    Anything else raises InvalidParameterError naming the rule and the value: another scheme
    (mqtts://, tcp://, http://; TLS is not supported), no host, a port outside 1..65535, or a
    path, query, fragment or user credentials. An IPv6 host is written in brackets,
    ``mqtt://[::1]:1883``, and returned without them.
    """
    if not isinstance(url, str):
        raise InvalidParameterError(f"broker URL must be a string mqtt://host[:port], got {url!r}")
    if url != url.strip() or any(ch.isspace() or ord(ch) < 32 for ch in url):
        raise InvalidParameterError(f"broker URL must not contain whitespace, got {url!r}")
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() != "mqtt":
        raise InvalidParameterError(
            f"broker URL must start with mqtt:// (form mqtt://host[:port]; TLS, mqtts://, is not "
            f"supported), got {url!r}"
        )
    netloc, _, tail = _split_netloc(rest)
    if tail:
        raise InvalidParameterError(
            f"broker URL must have no path, query or fragment (form mqtt://host[:port]), "
            f"got {url!r}"
        )
    if "@" in netloc:
        raise InvalidParameterError(
            f"broker URL must not contain user credentials (form mqtt://host[:port]), got {url!r}"
        )
    host, port_text = _split_host_port(netloc)
    if not host:
        raise InvalidParameterError(
            f"broker URL must name a host (form mqtt://host[:port]), got {url!r}"
        )
    if not _HOST_RE.fullmatch(host):
        raise InvalidParameterError(
            f"broker URL host must be a host name or an IP address, got {host!r} in {url!r}"
        )
    if port_text is None:
        port = DEFAULT_PORT
    elif _PORT_RE.fullmatch(port_text) and 1 <= int(port_text) <= 65535:
        port = int(port_text)
    else:
        raise InvalidParameterError(
            f"broker URL port must be an integer in 1..65535, got {port_text!r} in {url!r}"
        )
    if host.startswith("["):
        host = host[1:-1]
        try:
            socket.inet_pton(socket.AF_INET6, host)
        except OSError:
            raise InvalidParameterError(
                f"broker URL host in brackets must be an IPv6 address, got {host!r} in {url!r}"
            ) from None
    return host, port


def _split_netloc(rest: str) -> tuple[str, str, str]:
    """(netloc, separator, everything after it) of the part after `scheme://`."""
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=-1)
    if cut < 0:
        return rest, "", ""
    return rest[:cut], rest[cut], rest[cut:]


def _split_host_port(netloc: str) -> tuple[str, str | None]:
    if netloc.startswith("["):
        end = netloc.find("]")
        if end < 0:
            return netloc, None  # rejected by the host rule
        host, after = netloc[: end + 1], netloc[end + 1 :]
        if not after:
            return host, None
        if not after.startswith(":"):
            return netloc, None  # rejected by the host rule
        return host, after[1:]
    host, colon, port = netloc.partition(":")
    if not colon:
        return host, None
    return host, port


class MqttTransport:
    """A connection to an MQTT broker; see the module docstring.

    ``client_id`` must be unique among the broker's connected clients (MQTT disconnects the
    older one otherwise). ``max_in_flight`` bounds paho's unacknowledged QoS 1 messages.
    ``will_topic``: a topic whose retained message the broker deletes if this connection is lost
    without a clean disconnect (a stage passes its status topic). ``username``/``password``: the
    broker account (:mod:`shuffledp.access`; both or neither); a broker that refuses them makes
    entering the block raise MqttConnectionError naming the user (never the password).
    """

    def __init__(
        self,
        url: str,
        *,
        client_id: str,
        max_in_flight: int = 256,
        tls_context: ssl.SSLContext | None = None,
        will_topic: str | None = None,
        username: str | None = None,
        password: str | None = None,
    ) -> None:
        self.host, self.port = parse_broker_url(url)
        self.url = url
        if not isinstance(client_id, str) or not client_id:
            raise InvalidParameterError(f"client_id must be a non-empty string, got {client_id!r}")
        require_int("max_in_flight", max_in_flight, 1, 65535, bound="[1, 65535]")
        if (username is None) != (password is None):
            raise InvalidParameterError(
                "username and password must be given together (both or neither), got "
                f"username {'set' if username is not None else 'None'}, password "
                f"{'set' if password is not None else 'None'}"
            )
        self.client_id = client_id
        self.username = username
        transport = self
        self._queue: asyncio.Queue[aiomqtt.Message] | None = None

        class _IncomingQueue(asyncio.Queue[aiomqtt.Message]):
            """aiomqtt's queue of received messages (its ``queue_type`` parameter), kept so that
            messages() can take what has already arrived without aiomqtt's iterator, which
            starts a task and an asyncio.wait per message (a third of a hop's CPU at 1e5)."""

            def __init__(self, maxsize: int = 0) -> None:
                super().__init__(maxsize)
                transport._queue = self

        self._client = aiomqtt.Client(
            self.host,
            self.port,
            identifier=client_id,
            logger=_QUIET,
            max_inflight_messages=max_in_flight,
            keepalive=60,
            queue_type=_IncomingQueue,
            tls_context=tls_context,
            username=username,
            password=password,
            # If the process dies without disconnecting, the broker publishes this: an empty
            # retained payload, which deletes the stage's retained status (no stale "ready").
            will=None
            if will_topic is None
            else aiomqtt.Will(will_topic, b"", qos=QOS, retain=True),
        )

    async def __aenter__(self) -> Self:
        try:
            await self._client.__aenter__()
        except aiomqtt.MqttError as exc:
            who = "anonymously" if self.username is None else f"as user {self.username!r}"
            raise MqttConnectionError(
                f"cannot connect to the MQTT broker at {self.url} as {self.client_id!r} "
                f"({who}): {exc}"
            ) from exc
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is None:
            with contextlib.suppress(aiomqtt.MqttError):  # already disconnected: nothing to do
                await self._client.__aexit__(exc_type, exc, traceback)
            return
        # Leaving on an error or a cancellation (Ctrl-C): a polite DISCONNECT gets a short
        # while, not aiomqtt's 10 s, so that shutting down is never held up by a slow broker.
        with contextlib.suppress(aiomqtt.MqttError, TimeoutError):
            async with asyncio.timeout(ABORT_DISCONNECT_SECONDS):
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
        iterator = self._client.messages
        try:
            while True:
                try:  # fast path: already received (no task, no wait)
                    if self._queue is None:
                        raise asyncio.QueueEmpty
                    message = self._queue.get_nowait()
                except asyncio.QueueEmpty:  # wait, noticing a lost connection (aiomqtt does)
                    message = await anext(iterator)
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
