"""Everything that knows amqtt's internals, written for exactly :data:`AMQTT_VERSION`.

The embedded broker (:mod:`shuffledp.brokers.embedded`) is amqtt plus what this module adds:

- its configuration (:func:`amqtt_config`: amqtt 0.12's format, unknown keys rejected);
- two plugins that read the very files Mosquitto reads (:class:`PasswordFileAuthPlugin`,
  :class:`AclFileTopicPlugin`), so both brokers enforce one policy;
- patches of three amqtt 0.12.1 bugs on the Broker instance (:func:`patch_broker`);
- with accounts, a gate on every CONNECT (:func:`gate_connects`): the login and the client id
  are checked *before* amqtt touches its sessions (amqtt 0.12.1 deletes the session of a clean
  CONNECT's client id, or hands an existing session to the newcomer, before it authenticates),
  so no account connects under another account's client id
  (:func:`shuffledp.security.client_ids.client_id_belongs`);
- the per-role bounds of :mod:`shuffledp.security.broker_limits` on every PUBLISH
  (:func:`bound_publishes`);
- :func:`start_amqtt`, which builds, patches and starts a Broker and tells a port in use
  (:class:`~shuffledp.brokers.ports.PortInUseError`) from any other failure (BrokerError).

The patches replace private attributes of amqtt's Broker; another amqtt version may have renamed
them or fixed the bugs differently. :func:`check_amqtt_version` therefore refuses, with a
BrokerError, any installed amqtt but the one these were written and tested for; pyproject.toml
pins the same version.

Message size: amqtt 0.12 has no maximum message size (no setting exists; a message is held in
memory whole), so the pipeline's batches of ~1 MB sent as one message pass as they are.
"""

from __future__ import annotations

import errno
import importlib.metadata
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amqtt.plugins.base import BaseAuthPlugin, BaseTopicPlugin

from shuffledp.brokers.ports import LOOPBACK, port_in_use
from shuffledp.errors import BrokerError

__all__ = [
    "AMQTT_VERSION",
    "AclFileTopicPlugin",
    "ConnectGate",
    "PasswordFileAuthPlugin",
    "SnapshotDict",
    "amqtt_config",
    "bound_publishes",
    "check_amqtt_version",
    "gate_connects",
    "patch_broker",
    "start_amqtt",
]

AMQTT_VERSION = "0.12.1"
"""The amqtt release the plugins and patches below were written and tested for."""


def check_amqtt_version(installed: str | None = None) -> None:
    """BrokerError unless the installed amqtt (or ``installed``) is exactly :data:`AMQTT_VERSION`."""
    if installed is None:
        try:
            installed = importlib.metadata.version("amqtt")
        except importlib.metadata.PackageNotFoundError:
            installed = "none"
    if installed != AMQTT_VERSION:
        raise BrokerError(
            f"the embedded broker needs amqtt {AMQTT_VERSION} (its patches in "
            f"shuffledp.brokers.amqtt_compat are written for that release), found amqtt "
            f"{installed}: pip install 'amqtt=={AMQTT_VERSION}', or use --broker mosquitto"
        )


def amqtt_config(port: int, access_dir: Path | None = None, host: str = LOOPBACK) -> dict[str, Any]:
    """amqtt 0.12's configuration for a listener on ``host``:``port`` (default 127.0.0.1).

    No $SYS plugin, no event/packet logger plugins. Without ``access_dir`` the anonymous-auth
    plugin (without any auth plugin every client is refused); with it, the accounts and ACL of
    :mod:`shuffledp.security.access`, from the files Mosquitto reads (its passwd with $7$ hashes
    and its acl file)."""
    bind = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    listeners = {"default": {"type": "tcp", "bind": bind}}
    if access_dir is None:
        plugin = {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}}
        return {"listeners": listeners, "plugins": plugin}
    root = str(Path(os.path.abspath(access_dir)))
    return {
        "listeners": listeners,
        "plugins": {
            f"{__name__}.PasswordFileAuthPlugin": {"password_file": f"{root}/passwd"},
            f"{__name__}.AclFileTopicPlugin": {"acl_file": f"{root}/acl"},
        },
    }


class PasswordFileAuthPlugin(BaseAuthPlugin):  # type: ignore[misc]  # amqtt is untyped
    """amqtt authentication against a Mosquitto 2.0 password file of ``$7$`` (PBKDF2-SHA512)
    hashes: a CONNECT is accepted iff it names a user of the file and the password verifies
    (:func:`shuffledp.security.access.verify_password`, constant-time). Anonymous and unknown
    users are refused (CONNACK "not authorized"). amqtt's own FileAuthPlugin needs argon2-cffi or
    the deprecated crypt module; this one reads the file Mosquitto reads."""

    @dataclass
    class Config:
        password_file: str = ""

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        from shuffledp.security.access import parse_password_file

        self._users = parse_password_file(self.config.password_file)

    async def authenticate(self, *, session: Any) -> bool:
        from shuffledp.security.access import verify_password

        username, password = session.username, session.password
        if not username or password is None or username not in self._users:
            return False
        if isinstance(password, bytes | bytearray):
            password = bytes(password).decode("utf-8", errors="replace")
        return verify_password(str(password), self._users[username])


class AclFileTopicPlugin(BaseTopicPlugin):  # type: ignore[misc]  # amqtt is untyped
    """amqtt topic ACL from a Mosquitto ACL file (``user``/``topic read|write`` lines): a
    PUBLISH is broadcast only to a topic the user may write (otherwise amqtt drops it, as
    Mosquitto does for MQTT 3.1.1), a SUBSCRIBE is granted only for a filter within one the user
    may read (otherwise the SUBACK says failure), and a message is delivered only to a session
    whose user may read its topic. Anything not listed is denied."""

    @dataclass
    class Config:
        acl_file: str = ""

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        from shuffledp.security.access import parse_acl_file

        self._rules = parse_acl_file(self.config.acl_file)

    async def topic_filtering(
        self, *, session: Any = None, topic: str | None = None, action: Any = None
    ) -> bool:
        return self.allows(session, topic, action)

    def allows(self, session: Any, topic: str | None, action: Any) -> bool:
        """The ACL decision, without awaiting (see :func:`_check_topics_without_yielding`)."""
        from amqtt.contexts import Action

        from shuffledp.security.access import topic_matches

        if action == Action.RECEIVE:
            # Every subscription was checked against the read rules when it was made, so a
            # delivery on it is allowed; checking again per message cost nothing in safety.
            return True
        username = getattr(session, "username", None)
        rules = self._rules.get(username) if username else None
        if rules is None or not topic:
            return False
        allowed = rules.write if action == Action.PUBLISH else rules.read
        return any(topic_matches(topic, rule) for rule in allowed)


class SnapshotDict(dict[str, Any]):
    """A dict whose iteration walks a snapshot of its keys (items and values likewise).

    amqtt 0.12.1 iterates its broker-wide subscription table with ``await`` inside the loop
    (Broker._handle_client_session, when a client connects; Broker._run_broadcast, for every
    message; Broker._del_all_subscriptions). A SUBSCRIBE from another client in between adds a
    key, and the iteration raises "RuntimeError: dictionary changed size during iteration": the
    connecting client's session dies and its SUBSCRIBE times out. It happened in most runs of
    ``shuffledp simulate`` (six stages connecting and subscribing at once). Iterating a snapshot
    gives each loop the table as it was when the loop began, which is what those loops assume;
    the table holds one key per topic filter (tens), so the copy is cheap. Not reported upstream
    as of amqtt 0.12.1; the test_brokers regression test checks it.
    """

    def __iter__(self) -> Iterator[str]:
        return iter(list(super().keys()))

    def keys(self) -> Any:
        return list(super().keys())

    def items(self) -> Any:
        # The values are lists of (session, qos), also changed while a broadcast awaits: a
        # subscriber removed mid-loop would make the loop skip the next one, so copy them too.
        return [(key, list(value)) for key, value in super().items()]

    def values(self) -> Any:
        return [list(value) for value in super().values()]


def patch_broker(broker: Any, *, acl: bool) -> None:
    """Work around amqtt 0.12.1 bugs on this Broker instance (after :func:`check_amqtt_version`).

    1. Its subscription table is iterated with awaits inside: swap it for a :class:`SnapshotDict`.
    2. When a client connects, amqtt sends it the retained messages of every topic filter that
       any client subscribed to (Broker._handle_client_session walks the broker-wide table where
       the session's own subscriptions were meant), so a new client received other stages'
       retained status messages it never asked for. Retained messages now go only to a session
       that holds the subscription (as for a SUBSCRIBE, where amqtt adds it before sending).
    3. With ``acl``: topics are checked without giving up the event loop
       (:func:`_check_topics_without_yielding`).
    4. A CONNECT that resumes an existing session (CleanSession = 0, the id known) takes the new
       will's topic, message and QoS but keeps the old session's *retain* flag
       (Broker._initialize_client_session): a stage whose id had just ended a clean session
       got a will that no longer cleared its retained "ready" when it died. The new CONNECT's
       retain flag now applies (:func:`_keep_will_retain`).
    """
    table = getattr(broker, "_subscriptions", None)
    send_retained = getattr(broker, "_publish_retained_messages_for_subscription", None)
    if not isinstance(table, dict) or send_retained is None:
        raise BrokerError(
            "amqtt's Broker lacks _subscriptions or _publish_retained_messages_for_subscription: "
            f"the patches of shuffledp.brokers.amqtt_compat need amqtt {AMQTT_VERSION}"
        )
    snapshot_table = SnapshotDict(table)
    broker._subscriptions = snapshot_table

    async def retained_to_subscribers_only(subscription: tuple[str, int], session: Any) -> None:
        holders = dict.get(snapshot_table, subscription[0], ())
        if any(holder.client_id == session.client_id for holder, _qos in holders):
            await send_retained(subscription, session)

    broker._publish_retained_messages_for_subscription = retained_to_subscribers_only
    _keep_will_retain(broker)
    if acl:
        _check_topics_without_yielding(broker)


_WILL_RETAIN_ATTRIBUTE = "_shuffledp_will_retain"


def _keep_will_retain(broker: Any) -> None:
    """Patch 4 of :func:`patch_broker`: the CONNECT's will retain flag, noted on its protocol
    handler when the CONNECT is read (:func:`_install_connect_gate`), is set on whatever session
    amqtt picks for the connection."""
    _install_connect_gate()
    initialize = broker._initialize_client_session

    async def initialize_keeping_will_retain(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
        handler, session = await initialize(*args, **kwargs)
        retain = getattr(handler, _WILL_RETAIN_ATTRIBUTE, None)
        if retain is not None:
            session.will_retain = retain
        return handler, session

    broker._initialize_client_session = initialize_keeping_will_retain


def _check_topics_without_yielding(broker: Any) -> None:
    """Make amqtt 0.12.1 check topics without giving up the event loop.

    amqtt asks its topic plugins through tasks gathered with ``await`` (one per plugin and per
    message, also per delivery inside its broadcast loop); with the ACL plugin on, a round of
    200 reports lost 30-50 % of them on the way to hop 0 (the same run without ACL lost none).
    The same decision taken synchronously, from the ACL plugin's rules, loses none.
    """
    plugins = [
        p for p in broker.plugins_manager._topic_plugins if isinstance(p, AclFileTopicPlugin)
    ]
    if len(plugins) != 1:
        raise BrokerError("the embedded broker's ACL plugin did not load")
    acl = plugins[0]

    async def topic_filtering(session: Any, topic: str, action: Any) -> bool:
        return acl.allows(session, topic, action)

    broker._topic_filtering = topic_filtering


@dataclass(frozen=True, slots=True)
class ConnectGate:
    """Who may connect with which client id: the accounts of a password file (``users``:
    identity -> $7$ hash). :meth:`refusal` says why a CONNECT is refused, or None."""

    users: dict[str, str]
    client_payload: int

    def refusal(self, session: Any) -> str | None:
        from shuffledp.security.access import verify_password
        from shuffledp.security.client_ids import client_id_belongs

        username, password = session.username, session.password
        if not username or password is None or username not in self.users:
            return f"unknown user {username!r}"
        if isinstance(password, bytes | bytearray):
            password = bytes(password).decode("utf-8", errors="replace")
        if not verify_password(str(password), self.users[username]):
            return f"wrong password for user {username!r}"
        if not client_id_belongs(session.client_id, username):
            return (
                f"client id {session.client_id!r} is not user {username!r}'s (sdp-{username}-...)"
            )
        will = session.will_message
        if will is not None and len(will) > self.payload_limit(username):
            return f"user {username!r}'s will of {len(will)} bytes is over its payload bound"
        return None

    def payload_limit(self, username: str) -> int:
        """The largest payload ``username`` may publish (its role's bound)."""
        from shuffledp.security.broker_limits import STAGE_PACKET_BYTES, is_client_account

        return self.client_payload if is_client_account(username) else STAGE_PACKET_BYTES

    def admit(self, session: Any) -> None:
        """What an admitted CONNECT may not keep: a client account's will is never retained."""
        from shuffledp.security.broker_limits import is_client_account

        if is_client_account(session.username):
            session.will_retain = False


_GATE_ATTRIBUTE = "_shuffledp_connect_gate"
_GATE_INSTALLED: list[bool] = []
_LOG = logging.getLogger("shuffledp.brokers")


def _install_connect_gate() -> None:
    """Wrap amqtt's reading of a CONNECT (BrokerProtocolHandler.init_from_connect, a class
    method: once per process) so that a broker with a :class:`ConnectGate` on its plugin manager
    answers a refused CONNECT with CONNACK "not authorized" and closes the connection before
    amqtt looks at its sessions (brokers without a gate skip that), and so that the CONNECT's
    will retain flag is noted on its handler (patch 4 of :func:`patch_broker`)."""
    if _GATE_INSTALLED:
        return
    from amqtt.errors import MQTTError
    from amqtt.mqtt.connack import NOT_AUTHORIZED, ConnackPacket
    from amqtt.mqtt.protocol.broker_handler import BrokerProtocolHandler

    read_connect = BrokerProtocolHandler.init_from_connect.__func__

    async def init_from_connect(
        cls: Any, reader: Any, writer: Any, plugins_manager: Any, loop: Any = None
    ) -> tuple[Any, Any]:
        handler, session = await read_connect(cls, reader, writer, plugins_manager, loop=loop)
        gate = getattr(plugins_manager, _GATE_ATTRIBUTE, None)
        reason = None if gate is None else gate.refusal(session)
        if reason is not None:
            _LOG.warning("CONNECT refused: %s", reason)
            await ConnackPacket.build(0, NOT_AUTHORIZED).to_stream(writer)
            await writer.close()
            raise MQTTError(f"CONNECT refused: {reason}")
        if gate is not None:
            gate.admit(session)
        setattr(handler, _WILL_RETAIN_ATTRIBUTE, bool(session.will_retain))
        return handler, session

    BrokerProtocolHandler.init_from_connect = classmethod(init_from_connect)
    _GATE_INSTALLED.append(True)


def gate_connects(broker: Any, password_file: Path, client_payload: int) -> None:
    """Check every CONNECT to ``broker`` against ``password_file``'s accounts, their client
    id namespaces and their payload bound (``client_payload`` for client accounts) before
    amqtt handles it (module docstring)."""
    from shuffledp.security.access import parse_password_file

    _install_connect_gate()
    gate = ConnectGate(parse_password_file(password_file), client_payload)
    setattr(broker.plugins_manager, _GATE_ATTRIBUTE, gate)


def bound_publishes(broker: Any, client_payload: int | None) -> None:
    """Apply the per-role bounds of :mod:`shuffledp.security.broker_limits` to every PUBLISH
    ``broker`` receives: a payload over :data:`STAGE_PACKET_BYTES` (anyone), or over
    ``client_payload`` from a client account, disconnects its sender without being delivered
    (Mosquitto's ``max_packet_size`` does the same); a client account's retained flag is
    dropped (the message is delivered, never kept), and so is its will's. ``client_payload``
    None: an open broker, no roles."""
    from shuffledp.security.broker_limits import STAGE_PACKET_BYTES, is_client_account

    deliver = broker._handle_message_delivery

    async def bounded(session: Any, handler: Any, wait_deliver: Any) -> bool:
        message = wait_deliver.result()
        if message is not None:
            client = client_payload is not None and is_client_account(session.username)
            limit = client_payload if client and client_payload is not None else STAGE_PACKET_BYTES
            if len(message.data) > limit:
                _LOG.warning(
                    "%s (user %r) published %d bytes to %r, over its %d: disconnected",
                    session.client_id,
                    session.username,
                    len(message.data),
                    message.topic,
                    limit,
                )
                if handler.writer is not None:
                    await handler.writer.close()
                return True
            if client and message.publish_packet is not None:
                message.publish_packet.retain_flag = False
        result: bool = await deliver(session, handler, wait_deliver)
        return result

    broker._handle_message_delivery = bounded


class _DropStartupTraceback(logging.Filter):
    """amqtt logs a traceback ("Broker startup failed") before raising; we raise a clear error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "Broker startup failed"


async def start_amqtt(port: int, access_dir: Path | None, host: str = LOOPBACK) -> Any:
    """A started, patched amqtt Broker on ``host``:``port`` (default 127.0.0.1).

    PortInUseError if the port is taken; BrokerError for a wrong amqtt version or any other
    start-up failure (amqtt's own message and the cause, never reported as a port in use)."""
    check_amqtt_version()
    from amqtt.broker import Broker
    from amqtt.errors import BrokerError as AmqttBrokerError

    from shuffledp.security.broker_limits import deployment_client_payload

    what = f"embedded MQTT broker (amqtt {AMQTT_VERSION})"
    broker = Broker(amqtt_config(port, access_dir, host))
    patch_broker(broker, acl=access_dir is not None)
    client_payload = None
    if access_dir is not None:
        client_payload = deployment_client_payload(access_dir)
        gate_connects(broker, Path(access_dir) / "passwd", client_payload)
    bound_publishes(broker, client_payload)
    log_filter = _DropStartupTraceback()
    amqtt_logger = logging.getLogger("amqtt.broker")
    amqtt_logger.addFilter(log_filter)
    try:
        await broker.start()
    except AmqttBrokerError as exc:
        cause = exc.__cause__
        if isinstance(cause, OSError) and cause.errno == errno.EADDRINUSE:
            raise port_in_use(port, what) from exc
        detail = f"{exc}" + (f" ({cause})" if cause is not None else "")
        raise BrokerError(f"{what} could not start on {host}:{port}: {detail}") from exc
    finally:
        amqtt_logger.removeFilter(log_filter)
    return broker
