"""The :class:`~shuffledp.protocol.transport.Transport` over a real MQTT broker, with aiomqtt.

``async with MqttTransport("mqtt://127.0.0.1:1883", client_id="hop-0") as transport:`` connects
(aiomqtt must be created inside the running loop), and disconnects on exit. Every publish and
subscription uses QoS 1 (at least once): a duplicate delivery is caught by the stages' seen-sets
and counted, while QoS 0 could lose a report silently. Publishing waits for the broker's PUBACK;
:func:`~shuffledp.protocol.transport.publish_all` keeps many in flight, bounded by
``max_in_flight`` (paho-mqtt overwrites QoS 1 messages silently past 65,535 unacknowledged ones,
docs/transport.md, so the bound also protects against that). ``mqtts://host[:port]`` connects over
TLS (:class:`MqttTransport`, :mod:`shuffledp.security.tls`).

Why aiomqtt: the maintained asyncio MQTT client (successor of asyncio-mqtt) on top of paho-mqtt.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import re
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, cast

import aiomqtt

from shuffledp.errors import BrokerError, InvalidParameterError
from shuffledp.protocol.instance_lock import InstanceLock
from shuffledp.protocol.kept_cancellation import keep_cancellation
from shuffledp.protocol.transport import Message
from shuffledp.validation import require_int, require_positive

__all__ = [
    "BrokerAddress",
    "IdentityInUseError",
    "MqttConnectionError",
    "MqttTransport",
    "parse_broker_address",
    "parse_broker_url",
]

QOS = 1
#: MQTT packet ids are 16-bit: an acknowledgement id is generation * _MID_SPAN + packet id.
_MID_SPAN = 1 << 16
#: Seconds a connection left on an error or cancellation waits for the broker's goodbye.
ABORT_DISCONNECT_SECONDS = 2.0
DEFAULT_PORT = 1883
DEFAULT_TLS_PORT = 8883
#: Seconds to wait for the broker's CONNACK, SUBACK or PUBACK (aiomqtt's own default).
DEFAULT_TIMEOUT = 10.0
_SCHEME_PORTS = {"mqtt": DEFAULT_PORT, "mqtts": DEFAULT_TLS_PORT}

# aiomqtt logs a warning for every publish once more than 10 are pending; with a bounded number
# in flight that is the intended state, so its logger only passes errors.
_QUIET = logging.getLogger("shuffledp.mqtt")
_QUIET.setLevel(logging.ERROR)
#: paho's own lines for a connection that breaks (it logs them at ERROR while it hands the loss
#: to aiomqtt). Every such loss reaches our code as an MqttError, which the caller turns into
#: its one line (or a reconnection): printed, they would be a second, library-worded line.
_PAHO_LOSS_LINES = ("failed to receive on socket", "timeout on socket", "Client is not connected")


def _not_a_connection_loss(record: logging.LogRecord) -> bool:
    """A logging filter for ``_QUIET``: drop paho's connection-loss lines, keep the rest."""
    return not str(record.msg).startswith(_PAHO_LOSS_LINES)


_QUIET.addFilter(_not_a_connection_loss)
#: Says when a connection is lost and re-established (``reconnect_timeout``).
_RECONNECT_LOG = logging.getLogger("shuffledp.reconnect")


_UNREACHABLE = {errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EADDRNOTAVAIL}


def _unreachable(cause: BaseException | None) -> str | None:
    """Why no connection could be opened at all (nothing listens, no route, a name that does not
    resolve), in lower case; None for any other failure (TLS, refused login, timeout)."""
    if isinstance(cause, socket.gaierror) or (
        isinstance(cause, OSError) and cause.errno in _UNREACHABLE
    ):
        return str(cause.strerror or cause).lower()
    return None


class MqttConnectionError(BrokerError):
    """The broker could not be reached, or the connection was lost."""


class IdentityInUseError(MqttConnectionError):
    """Another process is connected under this connection's identity (an ``exclusive``
    :class:`MqttTransport`: the broker handed the connection over to it); this one stops."""


#: An exclusive connection taken over this many times within TAKEOVER_WINDOW seconds stops
#: (at the loss that would be the last: it does not take the connection back once more).
TAKEOVER_LIMIT = 3
TAKEOVER_WINDOW = 30.0
#: A first connection lost this soon after it was opened counts as one takeover more (a
#: newcomer is taken over at once by the process that was running: the newcomer stops first).
YOUNG_SECONDS = 5.0


class _UnreachableError(MqttConnectionError):
    """Nothing answered at the broker's address (yet): the first connection may retry."""


#: The first connection to a broker that is not up yet (components started in any order):
#: retried with pauses doubling from FIRST_PAUSE to MAX_PAUSE seconds, for up to the
#: transport's ``reconnect_timeout``.
FIRST_PAUSE = 0.1
MAX_PAUSE = 2.0


_PORT_RE = re.compile(r"[0-9]{1,5}")
_HOST_RE = re.compile(r"[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]")


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerAddress:
    """Where a broker URL points: ``tls`` is True for ``mqtts://`` (MQTT over TLS)."""

    host: str
    port: int
    tls: bool


def parse_broker_address(url: str) -> BrokerAddress:
    """The :class:`BrokerAddress` of ``mqtt://host[:port]`` (plain; port 1883 if omitted) or
    ``mqtts://host[:port]`` (TLS; port 8883 if omitted), the IANA ports of MQTT and of MQTT over
    TLS. The scheme is case-insensitive.

    Anything else raises InvalidParameterError naming the rule and the value: another scheme
    (tcp://, ssl://, http://), no host, a port outside 1..65535, or a path, query, fragment or
    user credentials. An IPv6 host is written in brackets, ``mqtt://[::1]:1883``, and returned
    without them.
    """
    if not isinstance(url, str):
        raise InvalidParameterError(
            f"--broker URL must be a string mqtt[s]://host[:port], got {url!r}"
        )
    if url != url.strip() or any(ch.isspace() or ord(ch) < 32 for ch in url):
        raise InvalidParameterError(f"--broker URL must not contain whitespace, got {url!r}")
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in _SCHEME_PORTS:
        raise InvalidParameterError(
            f"--broker URL must start with mqtt:// or mqtts:// (form mqtt://host[:port], or "
            f"mqtts://host[:port] for TLS), got {url!r}"
        )
    tls = scheme.lower() == "mqtts"
    netloc, _, tail = _split_netloc(rest)
    if tail:
        raise InvalidParameterError(
            f"--broker URL must have no path, query or fragment (form mqtt[s]://host[:port]), "
            f"got {url!r}"
        )
    if "@" in netloc:
        raise InvalidParameterError(
            f"--broker URL must not contain user credentials (form mqtt[s]://host[:port]), "
            f"got {url!r}"
        )
    host, port_text = _split_host_port(netloc)
    if not host:
        raise InvalidParameterError(
            f"--broker URL must name a host (form mqtt[s]://host[:port]), got {url!r}"
        )
    if not _HOST_RE.fullmatch(host):
        raise InvalidParameterError(
            f"--broker URL host must be a host name or an IP address, got {host!r} in {url!r}"
        )
    if port_text is None:
        port = _SCHEME_PORTS[scheme.lower()]
    elif _PORT_RE.fullmatch(port_text) and 1 <= int(port_text) <= 65535:
        port = int(port_text)
    else:
        raise InvalidParameterError(
            f"--broker URL port must be an integer in 1..65535, got {port_text!r} in {url!r}"
        )
    if host.startswith("["):
        host = host[1:-1]
        try:
            socket.inet_pton(socket.AF_INET6, host)
        except OSError:
            raise InvalidParameterError(
                f"--broker URL host in brackets must be an IPv6 address, got {host!r} in {url!r}"
            ) from None
    return BrokerAddress(host=host, port=port, tls=tls)


def parse_broker_url(url: str) -> tuple[str, int]:
    """(host, port) of a broker URL, ``mqtt://host[:port]`` or ``mqtts://host[:port]``; see
    :func:`parse_broker_address`, which also says whether the URL asks for TLS."""
    address = parse_broker_address(url)
    return address.host, address.port


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


def _tls_settings(
    url: str,
    tls: bool,
    tls_context: ssl.SSLContext | None,
    tls_ca: str | os.PathLike[str] | None,
) -> tuple[ssl.SSLContext | None, str | None]:
    """(the SSL context to connect with, what it trusts in words) for ``MqttTransport``."""
    if not tls:
        given = [
            name for name, value in (("tls_context", tls_context), ("tls_ca", tls_ca)) if value
        ]
        if given:
            raise InvalidParameterError(
                f"{' and '.join(given)} given, but broker URL {url!r} is plain mqtt:// (TLS "
                f"needs mqtts://host[:port]); use an mqtts:// URL or drop {' and '.join(given)}"
            )
        return None, None
    if tls_context is not None and tls_ca is not None:
        raise InvalidParameterError(
            f"tls_context and tls_ca must not both be given (one source of trust for {url!r}), "
            f"got tls_ca {os.fspath(tls_ca)!r} and a context"
        )
    if tls_context is not None:
        return tls_context, "the given TLS context"
    from shuffledp.protocol.tls_client import client_tls_context, system_tls_context

    if tls_ca is not None:
        return client_tls_context(tls_ca), f"the CA file {os.fspath(tls_ca)}"
    return system_tls_context(), "the system's default trust store"


def _check_connection_settings(
    client_id: object,
    max_in_flight: int,
    timeout: float,
    username: str | None,
    password: str | None,
) -> None:
    """InvalidParameterError naming the parameter unless the client id is a non-empty string,
    ``max_in_flight`` in [1, 65535], ``timeout`` > 0, and username and password both given or
    both not."""
    if not isinstance(client_id, str) or not client_id:
        raise InvalidParameterError(f"client_id must be a non-empty string, got {client_id!r}")
    require_int("max_in_flight", max_in_flight, 1, 65535, bound="[1, 65535]")
    require_positive("timeout", timeout)
    if (username is None) != (password is None):
        raise InvalidParameterError(
            "username and password must be given together (both or neither), got "
            f"username {'set' if username is not None else 'None'}, password "
            f"{'set' if password is not None else 'None'}"
        )


def _check_flags(**flags: object) -> None:
    """InvalidParameterError naming the first of ``flags`` that is not True or False."""
    for name, flag in flags.items():
        if not isinstance(flag, bool):
            raise InvalidParameterError(f"{name} must be True or False, got {flag!r}")


def _reconnect_seconds(reconnect_timeout: object, persistent_session: bool) -> float:
    """``reconnect_timeout`` as seconds; InvalidParameterError unless it is a finite number
    >= 0, and 0 without a persistent session (what the broker received meanwhile is lost)."""
    if isinstance(reconnect_timeout, bool) or not isinstance(reconnect_timeout, int | float):
        raise InvalidParameterError(
            f"reconnect_timeout must be a number of seconds, got {reconnect_timeout!r}"
        )
    if not 0 <= reconnect_timeout < float("inf"):
        raise InvalidParameterError(
            f"reconnect_timeout must be finite and >= 0 (0: no reconnect), got "
            f"{reconnect_timeout!r}"
        )
    if reconnect_timeout and not persistent_session:
        raise InvalidParameterError(
            "reconnect_timeout needs persistent_session=True (without a session, what the "
            f"broker received while this client was away is lost), got {reconnect_timeout!r}"
        )
    return float(reconnect_timeout)


def _note_session_flag(client: aiomqtt.Client, transport: MqttTransport) -> None:
    """Keep the session-present flag of ``client``'s CONNACK in ``transport.session_present``
    (aiomqtt drops it; its paho client's on_connect callback receives it)."""
    paho = client._client
    answer: Any = paho.on_connect

    def on_connect(*args: Any) -> None:
        flags = args[2] if len(args) > 2 else None
        transport.session_present = bool(getattr(flags, "session_present", False))
        if answer is not None:
            answer(*args)

    paho.on_connect = on_connect


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


#: What a reconnection attempt may meet and retry: the broker still down or refusing (a CONNACK
#: error code, MqttCodeError), the connection lost again at once (another connection under the
#: same client id took it over), no answer in time, a socket error.
_TRANSIENT = (aiomqtt.MqttError, TimeoutError, OSError)


class MqttTransport:
    """A connection to an MQTT broker; see the module docstring.

    ``client_id`` must be unique among the broker's connected clients (MQTT disconnects the
    older one otherwise). ``max_in_flight`` bounds paho's unacknowledged QoS 1 messages.
    ``timeout``: seconds to wait for the broker's answer to a connect, subscribe or publish.
    ``will_topic``: a topic whose retained message the broker deletes if this connection is lost
    without a clean disconnect (a stage passes its status topic). ``username``/``password``: the
    broker account (:mod:`shuffledp.security.access`; both or neither); a broker that refuses them makes
    entering the block raise MqttConnectionError naming the user (never the password).

    Surviving a crash (a hop or the analyzer with a journal): ``persistent_session=True``
    connects with MQTT 3.1.1 CleanSession = 0, so the broker keeps this ``client_id``'s
    subscriptions and queues QoS 1 messages while the process is down (the id must then be
    stable across restarts and unique to the stage); a clean exit of the block ends the
    session. ``manual_ack=True`` sends no PUBACK until :meth:`ack` is called for the message:
    the broker delivers an unacknowledged message again to the next connection of the session.
    Both need Mosquitto: the embedded amqtt broker (0.12) redelivers neither unacknowledged nor
    queued messages after a reconnect.
    ``reconnect_timeout`` > 0 (persistent sessions only): a lost connection (the broker
    restarted) is re-established for up to that many seconds instead of raising; a publish that
    failed is sent again (at least once), :meth:`messages` continues with what the resumed
    session delivers. Lossless only if the broker kept the sessions (Mosquitto with
    ``persistence true``, restarted gracefully) and every stage has one. Every error met while
    reconnecting (a refused CONNECT, the new connection taken over at once by another client
    under the same id, a timeout) is retried with a growing pause; only the time limit ends it,
    with MqttConnectionError (one line). :attr:`reconnects` counts the reconnections.

    ``exclusive=True`` (a stage: one process per identity): entering the block first takes
    this machine's lock on (URL, client id) (:mod:`~shuffledp.protocol.instance_lock`): a second
    process here raises :class:`IdentityInUseError` before it connects, leaving the first
    untouched. From another machine the two would take the connection from each other: a
    reconnection at the first attempt (the broker was up) counts as a takeover, a first
    connection lost within :data:`YOUNG_SECONDS` as one more (the newcomer's), and the loss that
    would make :data:`TAKEOVER_LIMIT` of them within :data:`TAKEOVER_WINDOW` seconds stops the
    process with IdentityInUseError (one line naming the identity) without reconnecting: the
    other keeps the connection.

    ``fresh_session=True`` (with ``persistent_session``): a process that has nothing to resume
    (no journal) first ends any session its client id left behind, then opens its own; without
    it a restarted process resumes the session (its subscriptions, the messages queued for it).

    Session loss: :attr:`session_present` is the last CONNACK's session-present flag;
    :attr:`sessions_lost` counts the reconnections whose session was gone (the broker
    restarted without persistence, or expired it), and every listener given to
    :meth:`on_session_lost` is called at each one: what the broker held for this client
    meanwhile is lost, a stage must treat it as a loss to repair.

    TLS: an ``mqtts://`` URL connects over TLS (>= 1.2, the host name checked against the
    broker's certificate) and trusts ``tls_context`` if given, else the CA certificates of the
    PEM file ``tls_ca`` (:func:`shuffledp.security.tls.client_tls_context`, e.g. a key directory's
    ``tls/ca.pem``), else the system's default trust store. A certificate that does not verify
    makes entering the block raise MqttConnectionError saying so and against what it was
    checked. InvalidParameterError for ``tls_context`` or ``tls_ca`` with a plain ``mqtt://``
    URL (which would silently not be used), for both at once, or for a bad ``tls_ca`` file
    (:class:`shuffledp.security.tls.TlsError`, naming the file).
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
        tls_ca: str | os.PathLike[str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        manual_ack: bool = False,
        persistent_session: bool = False,
        reconnect_timeout: float = 0.0,
        fresh_session: bool = False,
        exclusive: bool = False,
    ) -> None:
        address = parse_broker_address(url)
        self.host, self.port, self.tls = address.host, address.port, address.tls
        self.url = url
        self._tls_context, self.trust = _tls_settings(url, address.tls, tls_context, tls_ca)
        _check_connection_settings(client_id, max_in_flight, timeout, username, password)
        self.timeout = float(timeout)
        self.client_id = client_id
        self.username = username
        self._password = password
        self._max_in_flight = max_in_flight
        _check_flags(
            exclusive=exclusive,
            manual_ack=manual_ack,
            persistent_session=persistent_session,
            fresh_session=fresh_session,
        )
        self.manual_ack = manual_ack
        self.persistent_session = persistent_session
        self.fresh_session = fresh_session and persistent_session
        self.exclusive = exclusive
        self.reconnect_timeout = _reconnect_seconds(reconnect_timeout, persistent_session)
        self._will_topic = will_topic
        self._init_connection_state()
        self._client = self._make_client()

    def _init_connection_state(self) -> None:
        """What this transport keeps across connections: the counters and flag it reports,
        and what a reconnection needs to renew."""
        #: Connections re-established after a loss (a broker restart, a session takeover).
        self.reconnects = 0
        #: The session-present flag of the last CONNACK: True iff the broker resumed this
        #: client id's persistent session (its subscriptions and queued messages).
        self.session_present = False
        #: Reconnections whose CONNACK said the session was gone (session present = 0): what
        #: the broker held for this client while it was away is lost and must be repaired.
        self.sessions_lost = 0
        self._session_lost_listeners: list[Callable[[], object]] = []
        # The last retained message this connection published on its will topic (the stage's
        # status): the will may delete it when the connection is lost, so a reconnection
        # publishes it again (else the other stages would wait for a "ready" that is gone).
        self._will_status: bytes | None = None
        self._generation = 0  # +1 per reconnection: a task tells whether another reconnected
        self._epoch = 0  # +1 per reconnection attempt, as it begins (the property epoch)
        self._takeovers: list[float] = []  # when recent takeovers were noticed (exclusive)
        self._superseded: str | None = None  # why an exclusive connection stopped for good
        self._connected_since = time.monotonic()  # when the current connection was opened
        self._lock: InstanceLock | None = None  # this machine's lock, while connected
        self._reconnecting: asyncio.Lock | None = None
        # (generation, error) once a reconnection has given up: every other task that noticed
        # the same loss raises that error instead of retrying (and logging) once more.
        self._gave_up: tuple[int, MqttConnectionError] | None = None
        self._subscriptions: list[str] = []
        # ids of messages received on a connection since lost, with that connection's epoch
        self._stale: dict[int, int] = {}
        self._queue: asyncio.Queue[aiomqtt.Message] | None = None

    def _incoming_queue(self, maxsize: int = 0) -> asyncio.Queue[aiomqtt.Message]:
        """A new queue of received messages for aiomqtt (the client's ``queue_type``, which it
        calls once as ``queue_type(maxsize=...)``), kept as ``_queue`` so that messages() can
        take what has already arrived without aiomqtt's iterator, which starts a task and an
        asyncio.wait per message (a third of a hop's CPU at 1e5)."""
        queue: asyncio.Queue[aiomqtt.Message] = asyncio.Queue(maxsize)
        self._queue = queue
        return queue

    def _make_client(self, *, ending_session: bool = False) -> aiomqtt.Client:
        """An aiomqtt client with these settings (each reconnection takes a fresh one).
        ``ending_session``: a bare CleanSession = 1 connection under the same id and login
        (no will, automatic acks), whose only purpose is to end the persistent session."""
        login: dict[str, Any] = {
            "identifier": self.client_id,
            "logger": _QUIET,
            "timeout": self.timeout,
            "tls_context": self._tls_context,
            "username": self.username,
            "password": self._password,
        }
        if ending_session:
            return aiomqtt.Client(self.host, self.port, clean_session=True, **login)
        # aiomqtt types queue_type as a Queue class; it only ever calls it (see _incoming_queue).
        queue_type = cast("type[asyncio.Queue[aiomqtt.Message]]", self._incoming_queue)
        client = aiomqtt.Client(
            self.host,
            self.port,
            # MQTT 3.1.1 CleanSession = 0: the broker keeps the subscriptions and queues QoS 1
            # messages while the client is away; None lets paho use its default (clean).
            clean_session=False if self.persistent_session else None,
            max_inflight_messages=self._max_in_flight,
            keepalive=60,
            queue_type=queue_type,
            # If the process dies without disconnecting, the broker publishes this: an empty
            # retained payload, which deletes the stage's retained status (no stale "ready").
            will=None
            if self._will_topic is None
            else aiomqtt.Will(self._will_topic, b"", qos=QOS, retain=True),
            **login,
        )
        if self.manual_ack:
            # paho then sends no PUBACK by itself: ack() does, once the stage has kept the
            # message (aiomqtt has no API for this; the paho client underneath has).
            client._client.manual_ack_set(True)
        _note_session_flag(client, self)
        return client

    async def __aenter__(self) -> Self:
        if self.exclusive:
            self._lock = InstanceLock(f"{self.url}\0{self.client_id}")
            if not self._lock.acquire():
                path, self._lock = self._lock.path, None
                raise IdentityInUseError(
                    f"another process on this machine is connected to {self.url} as "
                    f"{self._who()} with this client id (lock {path}); one process per "
                    f"identity: this one stops before connecting"
                )
        try:
            return await self._enter_retrying()
        except BaseException:
            self._release_lock()
            raise

    def _who(self) -> str:
        return f"user {self.username!r}" if self.username is not None else repr(self.client_id)

    def _release_lock(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    async def _enter_retrying(self) -> Self:
        """Connect. With ``reconnect_timeout`` > 0, a broker that does not answer yet
        (connection refused, no route) is tried again with growing pauses until that time has
        passed: the components of a deployment may start in any order."""
        give_up = time.monotonic() + self.reconnect_timeout
        pause = FIRST_PAUSE
        while True:
            try:
                return await self._enter()
            except _UnreachableError as exc:
                left = give_up - time.monotonic()
                if left <= 0:
                    if self.reconnect_timeout <= 0:
                        raise
                    raise MqttConnectionError(
                        f"{exc} (tried for {self.reconnect_timeout:g} s, --reconnect)"
                    ) from exc
                if pause == FIRST_PAUSE:
                    _RECONNECT_LOG.info(
                        "%s; trying again for up to %g s", exc, self.reconnect_timeout
                    )
                await asyncio.sleep(min(pause, left))
                pause = min(2 * pause, MAX_PAUSE)
                self._client = self._make_client()

    async def _enter(self) -> Self:
        if self.fresh_session:
            # A process with nothing to resume: whatever session this id left behind (a
            # killed process, another round under the same account) is ended first.
            await self._end_session()
        try:
            await keep_cancellation(self._client.__aenter__())
        except aiomqtt.MqttError as exc:
            who = "anonymously" if self.username is None else f"as user {self.username!r}"
            where = f"cannot connect to the MQTT broker at {self.url} as {self.client_id!r} ({who})"
            # aiomqtt raises MqttError(str(error)) from None: the TLS error is the context.
            cause = exc.__cause__ or exc.__context__
            unreachable = _unreachable(cause)
            if unreachable is not None:
                message = f"cannot reach the broker at {self.url}: {unreachable}"
                raise _UnreachableError(message) from exc
            if isinstance(cause, ssl.SSLCertVerificationError):
                reason = cause.verify_message or cause.reason or "verification failed"
                message = (
                    f"{where}: the broker's TLS certificate did not verify against {self.trust}: "
                    f"{reason}"
                )
            elif isinstance(cause, ssl.SSLError) or (
                self.tls and isinstance(cause, ConnectionResetError)
            ):
                # A plain listener answers a TLS ClientHello by closing the connection.
                detail = getattr(cause, "reason", None) or cause
                message = (
                    f"{where}: the TLS handshake failed ({detail}); is the port a TLS listener? "
                    f"(a plain one needs mqtt://)"
                )
            elif not self.tls and isinstance(cause, TimeoutError):
                # aiomqtt ignores a connection closed before the CONNACK and waits the full
                # timeout: what a TLS listener does with a plain CONNECT.
                message = (
                    f"{where}: no answer to the MQTT CONNECT within {self.timeout:g} s ({exc}); "
                    f"if the port is a TLS listener, use mqtts://"
                )
            else:
                message = f"{where}: {exc}"
            raise MqttConnectionError(" ".join(message.split())) from exc
        self._connected_since = time.monotonic()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if exc_type is None and self._superseded is None:
                with contextlib.suppress(aiomqtt.MqttError):  # already disconnected
                    await self._client.__aexit__(exc_type, exc, traceback)
                if self.persistent_session:
                    await self._end_session()
                return
            # Leaving on an error or a cancellation (Ctrl-C): a polite DISCONNECT gets a short
            # while, not aiomqtt's 10 s, so that shutting down is never held up by a slow broker.
            with contextlib.suppress(aiomqtt.MqttError, TimeoutError):
                async with asyncio.timeout(ABORT_DISCONNECT_SECONDS):
                    await self._client.__aexit__(exc_type, exc, traceback)
        finally:
            self._release_lock()

    async def _end_session(self) -> None:
        """Make the broker forget this client's persistent session (its subscriptions and
        queued messages): MQTT 3.1.1 ends a session by a connection with CleanSession = 1 under
        the same client id. Best effort: a failure leaves a session that the next clean run
        of the same id ends."""
        with contextlib.suppress(aiomqtt.MqttError, TimeoutError):
            async with (
                asyncio.timeout(ABORT_DISCONNECT_SECONDS + self.timeout),
                self._make_client(ending_session=True),
            ):
                pass

    def ack(self, message: Message) -> None:
        """Acknowledge ``message`` (send its PUBACK): until then, and across a crash with a
        persistent session, the broker keeps it and delivers it again. A no-op without
        ``manual_ack``, for a message with nothing to acknowledge (QoS 0), or for one received
        on a connection since lost (its packet id means nothing on the new connection; the
        resumed session delivers the message again)."""
        if not self.manual_ack or message.ack_id is None:
            return
        generation, mid = divmod(message.ack_id, _MID_SPAN)
        if generation == self._generation:
            self._client._client.ack(mid, QOS)

    @property
    def epoch(self) -> int:
        """The connection epoch (:func:`~shuffledp.protocol.transport.connection_epoch`): +1 at
        every reconnection attempt, as it begins; every received :class:`Message` carries the
        epoch it was received in (one received on a connection since lost, its older one)."""
        return self._epoch

    def on_session_lost(self, listener: Callable[[], object]) -> None:
        """Call ``listener()`` after every reconnection that found the session gone (the
        reconnection is complete then: subscriptions renewed, the will status republished)."""
        self._session_lost_listeners.append(listener)

    async def _drop_client(self) -> None:
        """Close the current aiomqtt client after its connection was lost (briefly: it is gone
        or going) and take the loss it kept, else asyncio logs "Future exception was never
        retrieved"."""
        with contextlib.suppress(*_TRANSIENT):
            async with asyncio.timeout(ABORT_DISCONNECT_SECONDS):
                await self._client.__aexit__(None, None, None)
        lost_future = getattr(self._client, "_disconnected", None)
        if isinstance(lost_future, asyncio.Future) and lost_future.done():
            with contextlib.suppress(asyncio.CancelledError):
                lost_future.exception()

    async def _connect_again(self) -> None:
        """One reconnection attempt: a fresh aiomqtt client (reusing one after a lost connection
        leaves its connected-future set: it would return before the CONNACK), connected, its
        subscriptions renewed (the session kept them; subscribing again is harmless and covers
        a broker that lost its state) and the will status republished. Messages received but
        not yet taken move to the new client's queue, without their acknowledgement ids (those
        belong to the lost connection; the resumed session delivers them again)."""
        leftover = self._queue
        # A new epoch from before the first message of the new connection can arrive: what
        # is stamped with an older one was received before the connection was lost.
        old_epoch, self._epoch = self._epoch, self._epoch + 1
        self._client = self._make_client()
        while leftover is not None and self._queue is not None and leftover is not self._queue:
            if leftover.empty():
                break
            message = leftover.get_nowait()
            self._stale.setdefault(id(message), old_epoch)
            self._queue.put_nowait(message)
        async with asyncio.timeout(2 * self.timeout + ABORT_DISCONNECT_SECONDS):
            await keep_cancellation(self._client.__aenter__())
            for topic_filter in self._subscriptions:
                await keep_cancellation(self._client.subscribe(topic_filter, qos=QOS))
            if self._will_topic is not None and self._will_status:
                await keep_cancellation(
                    self._client.publish(self._will_topic, self._will_status, qos=QOS, retain=True)
                )

    async def _reconnect(self, generation: int, lost: BaseException, failure: str) -> None:
        """Connect again after the connection ``generation`` was lost (``failure`` says what
        failed; once for all the tasks that noticed), retrying every transient error (class
        docstring) with a growing pause (0.1 s doubling to 2 s) for at most
        ``reconnect_timeout`` seconds; then MqttConnectionError, one line. The session resumes:
        the broker redelivers what was not acknowledged and what it queued meanwhile; a session
        found gone is counted in :attr:`sessions_lost` and reported to the listeners."""
        if self._superseded is not None:
            raise IdentityInUseError(self._superseded) from lost
        if self.reconnect_timeout <= 0:
            raise MqttConnectionError(f"{failure}: {_one_line(lost)}") from lost
        if self._reconnecting is None:
            self._reconnecting = asyncio.Lock()
        async with self._reconnecting:
            if self._generation != generation:
                return  # another task reconnected meanwhile
            if self._gave_up is not None and self._gave_up[0] == generation:
                raise MqttConnectionError(str(self._gave_up[1])) from lost
            if self._superseded is not None:
                raise IdentityInUseError(self._superseded) from lost
            if self.exclusive:
                self._stop_if_taken_over(lost)
            _RECONNECT_LOG.warning(
                "connection to %s lost (%s); reconnecting", self.url, _one_line(lost)
            )
            await self._drop_client()
            give_up = time.monotonic() + self.reconnect_timeout
            pause = 0.1
            attempts = 0
            while True:
                attempts += 1
                try:
                    await self._connect_again()
                    break
                except _TRANSIENT as exc:
                    await self._drop_client()
                    if time.monotonic() + pause > give_up:
                        error = MqttConnectionError(
                            f"{failure}: {_one_line(lost)}; not reconnected within "
                            f"{self.reconnect_timeout:g} s: {_one_line(exc)}"
                        )
                        self._gave_up = (generation, error)
                        raise error from exc
                    await asyncio.sleep(pause)
                    pause = min(2 * pause, 2.0)
            self._generation += 1
            self.reconnects += 1
            if self.exclusive and attempts == 1:  # the broker was up: the connection was taken
                self._takeovers.append(time.monotonic())
            self._connected_since = time.monotonic()
            _RECONNECT_LOG.warning(
                "reconnected to %s (reconnection %d, session %s)",
                self.url,
                self.reconnects,
                "resumed" if self.session_present else "LOST",
            )
            if not self.session_present:
                self.sessions_lost += 1
                for listener in list(self._session_lost_listeners):
                    listener()

    def _stop_if_taken_over(self, lost: BaseException) -> None:
        """An exclusive connection was lost (module docstring of the class): count a first
        connection lost within YOUNG_SECONDS as a takeover, and if the takeovers within
        TAKEOVER_WINDOW seconds (each reconnection at the first attempt: another process under
        the same identity had the connection; Mosquitto's use_username_as_clientid makes that
        any two of one account) would reach TAKEOVER_LIMIT with this loss, stop without
        reconnecting: IdentityInUseError, one line, and every later operation raises it too."""
        now = time.monotonic()
        if self.reconnects == 0 and now - self._connected_since < YOUNG_SECONDS:
            self._takeovers.append(now)
        self._takeovers = [t for t in self._takeovers if now - t < TAKEOVER_WINDOW]
        if len(self._takeovers) + 1 < TAKEOVER_LIMIT:
            return
        self._superseded = (
            f"another process is connected to {self.url} as {self._who()} (this connection was "
            f"taken over {len(self._takeovers) + 1} times in {TAKEOVER_WINDOW:g} s); one process "
            f"per identity: this one stops"
        )
        raise IdentityInUseError(self._superseded) from lost

    async def publish(self, topic: str, payload: bytes, *, retain: bool = False) -> None:
        """Publish at QoS 1 and wait for the PUBACK. With ``reconnect_timeout``, a lost
        connection is re-established and the message published again (at least once: it may
        then arrive twice, which the stages' seen-sets count as duplicate)."""
        while True:
            generation = self._generation
            try:
                await keep_cancellation(
                    self._client.publish(topic, bytes(payload), qos=QOS, retain=retain)
                )
                if retain and topic == self._will_topic:
                    self._will_status = bytes(payload)
                return
            except aiomqtt.MqttError as exc:
                await self._reconnect(generation, exc, f"publish to {topic!r} at {self.url} failed")

    async def subscribe(self, topic_filter: str) -> None:
        while True:
            generation = self._generation
            try:
                await keep_cancellation(self._client.subscribe(topic_filter, qos=QOS))
                break
            except aiomqtt.MqttError as exc:
                await self._reconnect(
                    generation, exc, f"subscribe to {topic_filter!r} at {self.url} failed"
                )
        if topic_filter not in self._subscriptions:
            self._subscriptions.append(topic_filter)

    async def messages(self) -> AsyncIterator[Message]:
        while True:
            generation = self._generation
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
                    else:  # aiomqtt decodes nothing; int/float/None only come from publishers
                        data = b"" if payload is None else str(payload).encode()
                    ack_id = None
                    epoch = self._stale.pop(id(message), None)  # received on a lost connection
                    if epoch is None:
                        epoch = self._epoch
                        if self.manual_ack and message.qos > 0:
                            ack_id = self._generation * _MID_SPAN + message.mid
                    yield Message(message.topic.value, data, ack_id, epoch)
            except aiomqtt.MqttError as exc:
                await self._reconnect(generation, exc, f"connection to {self.url} lost")
