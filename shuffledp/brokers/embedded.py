"""MQTT brokers for the pipeline: the embedded one (amqtt, in-process) and a Mosquitto launcher.

Both listen on the loopback interface only (127.0.0.1), never on 0.0.0.0: the simulations run on
one machine, and an anonymous broker must not be reachable from the network.

- :class:`EmbeddedBroker` runs amqtt inside the current event loop; no setup, fine for the default
  runs (amqtt 0.12 with aiomqtt: ~2,600 QoS 1 messages/s with the broker in a process of its own,
  measured when the transport was chosen; ~1,400/s when broker, publisher and subscriber share one event loop).
- :class:`MosquittoBroker` starts ``mosquitto -c CONF`` as a child process on a free port with the
  configuration of :data:`MOSQUITTO_CONFIG_TEMPLATE`; for large runs and the integration tests.
  The same configuration ships as ``deploy/mosquitto.conf`` (port 1883) for users who run
  Mosquitto themselves: ``mosquitto -c deploy/mosquitto.conf``.
- :func:`parse_broker_url` (from :mod:`shuffledp.protocol.mqtt`) checks ``--broker`` URLs.

Message size: amqtt 0.12 has no maximum message size (no setting exists; a message is held in
memory whole), so the pipeline's batches of ~1 MB sent as one message pass as they are. Mosquitto
gets ``max_packet_size`` = :data:`MAX_PACKET_BYTES` (16 MiB), see the template.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from amqtt.plugins.base import BaseAuthPlugin, BaseTopicPlugin

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.mqtt import parse_broker_url
from shuffledp.security.access import MAX_PACKET_BYTES, MOSQUITTO_DELIVERY_SETTINGS

__all__ = [
    "DEFAULT_MQTT_PORT",
    "LOOPBACK",
    "MAX_PACKET_BYTES",
    "MOSQUITTO_CONFIG_TEMPLATE",
    "EmbeddedBroker",
    "MosquittoBroker",
    "find_mosquitto",
    "free_loopback_port",
    "parse_broker_url",
    "write_mosquitto_config",
]

LOOPBACK = "127.0.0.1"
DEFAULT_MQTT_PORT = 1883
# Attempts at a fresh free port when the one picked was taken meanwhile (port chosen by us only).
_PORT_ATTEMPTS = 3
_AMQTT_LOGGERS = ("amqtt", "transitions")
_T = TypeVar("_T")


def free_loopback_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now (the OS picks it; another process may take
    it before the caller binds it, which the brokers below handle by retrying)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
    return port


def _check_port(port: int) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise InvalidParameterError(f"broker port must be an integer in 1..65535, got {port!r}")
    return port


async def _run_to_completion(awaitable: Awaitable[_T]) -> _T:
    """Await `awaitable` to its end even if the caller is cancelled meanwhile, then re-raise the
    cancellation: a broker half started or half stopped would leak its socket or process."""
    task = asyncio.ensure_future(awaitable)
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait([task])  # unlike `await task`, does not cancel it with the caller
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        error = None if task.cancelled() else task.exception()
        raise asyncio.CancelledError from error
    return task.result()


# --------------------------------------------------------------------------------------------
# Embedded broker (amqtt)
# --------------------------------------------------------------------------------------------


class _PortInUseError(Exception):
    pass


class _DropStartupTraceback(logging.Filter):
    """amqtt logs a traceback ("Broker startup failed") before raising; we raise a clear error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "Broker startup failed"


def _amqtt_config(port: int, access_dir: Path | None = None) -> dict[str, Any]:
    # amqtt 0.12's format; unknown keys raise. No $SYS plugin, no event/packet logger plugins.
    # Without access_dir the anonymous-auth plugin (without any auth plugin every client is
    # refused); with it, the accounts and ACL of shuffledp.security.access, from the very files Mosquitto
    # reads (its passwd with $7$ hashes and its acl file), so both brokers enforce one policy.
    listeners = {"default": {"type": "tcp", "bind": f"{LOOPBACK}:{port}"}}
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
    (:func:`shuffledp.security.access.verify_password`, constant-time). Anonymous and unknown users are
    refused (CONNACK "not authorized"). amqtt's own FileAuthPlugin needs argon2-cffi or the
    deprecated crypt module; this one reads the file Mosquitto reads."""

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


class _SnapshotDict(dict[str, Any]):
    """A dict whose iteration walks a snapshot of its keys (items and values likewise).

    amqtt 0.12.1 iterates its broker-wide subscription table with ``await`` inside the loop
    (Broker._handle_client_session, when a client connects; Broker._run_broadcast, for every
    message; Broker._del_all_subscriptions). A SUBSCRIBE from another client in between adds a
    key, and the iteration raises "RuntimeError: dictionary changed size during iteration": the
    connecting client's session dies and its SUBSCRIBE times out. It happened in most runs of
    ``shuffledp simulate`` (six stages connecting and subscribing at once). Iterating a snapshot
    gives each loop the table as it was when the loop began, which is what those loops assume;
    the table holds one key per topic filter (tens), so the copy is cheap. Not reported upstream
    as of amqtt 0.12.1 (the version pinned); the test_brokers regression test checks it.
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


def _patch_amqtt(broker: Any) -> None:
    """Work around two amqtt 0.12.1 bugs on this Broker instance (amqtt is pinned to 0.12.x).

    1. Its subscription table is iterated with awaits inside: swap it for a :class:`_SnapshotDict`.
    2. When a client connects, amqtt sends it the retained messages of every topic filter that
       any client subscribed to (Broker._handle_client_session walks the broker-wide table where
       the session's own subscriptions were meant), so a new client received other stages'
       retained status messages it never asked for. Retained messages now go only to a session
       that holds the subscription (as for a SUBSCRIBE, where amqtt adds it before sending).
    """
    table = getattr(broker, "_subscriptions", None)
    send_retained = getattr(broker, "_publish_retained_messages_for_subscription", None)
    if not isinstance(table, dict) or send_retained is None:
        raise RuntimeError(
            "amqtt's Broker lacks _subscriptions or _publish_retained_messages_for_subscription: "
            "this amqtt version is not supported (pinned to 0.12.x in pyproject.toml)"
        )
    snapshot_table = _SnapshotDict(table)
    broker._subscriptions = snapshot_table

    async def retained_to_subscribers_only(subscription: tuple[str, int], session: Any) -> None:
        holders = dict.get(snapshot_table, subscription[0], ())
        if any(holder.client_id == session.client_id for holder, _qos in holders):
            await send_retained(subscription, session)

    broker._publish_retained_messages_for_subscription = retained_to_subscribers_only


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
        raise RuntimeError("the embedded broker's ACL plugin did not load")
    acl = plugins[0]

    async def topic_filtering(session: Any, topic: str, action: Any) -> bool:
        return acl.allows(session, topic, action)

    broker._topic_filtering = topic_filtering


class EmbeddedBroker:
    """amqtt's MQTT 3.1.1 broker in the running event loop, on 127.0.0.1 only.

    ``access_dir`` (a key directory's ``access/``, :mod:`shuffledp.security.access`): accounts and topic
    ACLs enforced (no anonymous client); without it the broker is open (loopback only).

    ``async with EmbeddedBroker() as broker:`` starts it on a free port (or `port`); it accepts
    connections when the body runs, at ``broker.url``. Leaving the block stops it, also when the
    task is cancelled. amqtt's loggers are set to WARNING (INFO with ``verbose=True``).
    """

    host = LOOPBACK

    def __init__(
        self,
        port: int | None = None,
        *,
        verbose: bool = False,
        access_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self._fixed_port = port is not None
        self._port = _check_port(port) if port is not None else free_loopback_port()
        self._verbose = verbose
        self._access_dir = None if access_dir is None else _check_access_dir(access_dir)
        self._broker: Any = None

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"mqtt://{self.host}:{self._port}"

    @property
    def access_dir(self) -> Path | None:
        """The access directory whose accounts and ACLs are enforced, or None (open broker)."""
        return self._access_dir

    async def __aenter__(self) -> EmbeddedBroker:
        if self._broker is not None:
            raise RuntimeError("this EmbeddedBroker is already running")
        for name in _AMQTT_LOGGERS:
            level = logging.INFO if self._verbose and name == "amqtt" else logging.WARNING
            logging.getLogger(name).setLevel(level)
        try:
            await _run_to_completion(self._start_on_some_port())
        except asyncio.CancelledError:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def _start_on_some_port(self) -> None:
        for attempt in range(_PORT_ATTEMPTS):
            try:
                self._broker = await self._start()
                return
            except _PortInUseError:
                if self._fixed_port or attempt == _PORT_ATTEMPTS - 1:
                    raise RuntimeError(
                        f"embedded MQTT broker: port {self._port} on {self.host} is already in "
                        f"use (another broker running? choose another port)"
                    ) from None
                self._port = free_loopback_port()

    async def _start(self) -> Any:
        from amqtt.broker import Broker
        from amqtt.errors import BrokerError

        broker = Broker(_amqtt_config(self._port, self._access_dir))
        _patch_amqtt(broker)
        if self._access_dir is not None:
            _check_topics_without_yielding(broker)
        log_filter = _DropStartupTraceback()
        amqtt_logger = logging.getLogger("amqtt.broker")
        amqtt_logger.addFilter(log_filter)
        try:
            await broker.start()
        except BrokerError as exc:
            cause = exc.__cause__
            if isinstance(cause, OSError) and cause.errno == errno.EADDRINUSE:
                raise _PortInUseError from exc
            raise RuntimeError(
                f"embedded MQTT broker could not start on {self.host}:{self._port}: {exc}"
            ) from exc
        finally:
            amqtt_logger.removeFilter(log_filter)
        return broker

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        broker, self._broker = self._broker, None
        if broker is not None:
            await _run_to_completion(broker.shutdown())


# --------------------------------------------------------------------------------------------
# Mosquitto
# --------------------------------------------------------------------------------------------

MOSQUITTO_CONFIG_TEMPLATE = f"""\
# Mosquitto 2.x configuration for shuffledp (made from MOSQUITTO_CONFIG_TEMPLATE in
# shuffledp/brokers/embedded.py; deploy/mosquitto.conf is this file for port 1883).
# Run: mosquitto -c deploy/mosquitto.conf   then: shuffledp simulate --broker mqtt://127.0.0.1:1883
#
# Security settings (allow_anonymous) apply to every listener alike; set before any listener.
per_listener_settings false
# Listen on port {{port}} of the loopback interface only: nothing off this machine can connect.
listener {{port}} 127.0.0.1
# Anonymous clients: reports are protected by their onion encryption, not by broker accounts;
# acceptable only because the listener above is loopback-only.
allow_anonymous true
{MOSQUITTO_DELIVERY_SETTINGS}# Keep nothing on disk: messages live in memory only, no mosquitto.db is written.
persistence false
# Log to the standard error stream (MosquittoBroker keeps it in a file and shows it on failure),
log_dest stderr
# errors only,
log_type error
# and warnings.
log_type warning
"""


def write_mosquitto_config(
    directory: str | os.PathLike[str],
    port: int,
    *,
    access_dir: str | os.PathLike[str] | None = None,
    tls_dir: str | os.PathLike[str] | None = None,
    tls_port: int | None = None,
) -> Path:
    """Write `directory`/mosquitto.conf for a listener on 127.0.0.1:`port`; return its path.
    With ``access_dir`` (:mod:`shuffledp.security.access`), anonymous clients are refused and the
    accounts and ACL of that directory apply (its passwd and acl files). With ``tls_dir`` (a
    key directory's ``tls/``, :mod:`shuffledp.security.tls`) and ``tls_port``, a second listener on
    127.0.0.1:`tls_port` speaks MQTT over TLS with that directory's server certificate; the
    same security settings apply to both listeners."""
    from shuffledp.security.access import mosquitto_auth_settings
    from shuffledp.security.tls import mosquitto_tls_listener

    path = Path(directory) / "mosquitto.conf"
    text = MOSQUITTO_CONFIG_TEMPLATE.format(port=_check_port(port))
    if access_dir is not None:
        settings = mosquitto_auth_settings(_check_access_dir(access_dir))
        text = text.replace("per_listener_settings false\n", settings, 1)
        text = text.replace("allow_anonymous true\n", "", 1)
    if (tls_dir is None) != (tls_port is None):
        raise InvalidParameterError(
            f"tls_dir and tls_port must be given together (both or neither), got tls_dir "
            f"{tls_dir!r} and tls_port {tls_port!r}"
        )
    if tls_dir is not None and tls_port is not None:
        text += "# MQTT over TLS (shuffledp.security.tls), loopback only like the listener above.\n"
        text += mosquitto_tls_listener(
            _check_tls_dir(tls_dir), _check_port(tls_port), bind_address=LOOPBACK
        )
    secured = access_dir is not None or tls_dir is not None
    if secured and hasattr(os, "geteuid") and os.geteuid() == 0:
        # Started as root, mosquitto drops to the user "mosquitto" before it reads these files,
        # and cannot read the 0600 passwd/acl/server.key files of the launching user (nor enter
        # its 0700 key directory): stay the launching user instead.
        text += (
            "# Stay root: the passwd, acl and TLS key files are readable by their owner only.\n"
            "user root\n"
        )
    path.write_text(text, encoding="utf-8")
    return path


def _check_tls_dir(tls_dir: str | os.PathLike[str]) -> Path:
    from shuffledp.security.tls import SERVER_CERT_FILE, SERVER_KEY_FILE, TlsError

    root = Path(os.path.abspath(tls_dir))
    for name in (SERVER_CERT_FILE, SERVER_KEY_FILE):
        if not (root / name).is_file():
            raise TlsError(
                f"{root / name}: broker TLS file must exist, it does not (made by `shuffledp "
                f"keys init --tls` in KEYDIR/tls)"
            )
    return root


def _check_access_dir(access_dir: str | os.PathLike[str]) -> Path:
    from shuffledp.security.access import AccessError

    root = Path(os.path.abspath(access_dir))
    for name in ("passwd", "acl"):
        if not (root / name).is_file():
            raise AccessError(
                f"{root / name}: broker {name} file must exist, it does not (made by `shuffledp "
                f"keys init` in KEYDIR/access)"
            )
    return root


def find_mosquitto() -> str | None:
    """Path of the mosquitto binary: on PATH, else Debian's /usr/sbin/mosquitto; None if absent."""
    found = shutil.which("mosquitto")
    if found is not None:
        return found
    fallback = "/usr/sbin/mosquitto"
    return fallback if os.access(fallback, os.X_OK) else None


class MosquittoBroker:
    """A ``mosquitto -c CONF`` child process on 127.0.0.1, configured by
    :data:`MOSQUITTO_CONFIG_TEMPLATE` in a temporary directory.

    Use ``async with MosquittoBroker() as broker:`` (or plain ``with``): on entry it starts and
    waits until the port accepts connections (10 s at most; the error shows mosquitto's log); on
    exit it sends SIGTERM, waits, SIGKILLs if need be, and removes the temporary directory.

    With ``tls_dir`` (a key directory's ``tls/``), a second listener on a free loopback port,
    :attr:`tls_port`, speaks MQTT over TLS with that directory's server certificate
    (:attr:`tls_url`, ``mqtts://127.0.0.1:PORT``); the plain listener stays.
    """

    host = LOOPBACK
    START_TIMEOUT = 10.0
    STOP_TIMEOUT = 5.0

    def __init__(
        self,
        port: int | None = None,
        *,
        binary: str | None = None,
        access_dir: str | os.PathLike[str] | None = None,
        tls_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self._fixed_port = port is not None
        self._port = _check_port(port) if port is not None else free_loopback_port()
        self._binary = binary
        self._access_dir = None if access_dir is None else _check_access_dir(access_dir)
        self._tls_dir = None if tls_dir is None else _check_tls_dir(tls_dir)
        self._tls_port = None if tls_dir is None else self._free_port_but_plain()
        self._tmpdir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"mqtt://{self.host}:{self._port}"

    @property
    def tls_port(self) -> int:
        """The TLS listener's port; RuntimeError without ``tls_dir``."""
        if self._tls_port is None:
            raise RuntimeError("this MosquittoBroker has no TLS listener (pass tls_dir)")
        return self._tls_port

    @property
    def tls_url(self) -> str:
        """``mqtts://127.0.0.1:PORT`` of the TLS listener; RuntimeError without ``tls_dir``."""
        return f"mqtts://{self.host}:{self.tls_port}"

    def _free_port_but_plain(self) -> int:
        """A free loopback port other than the plain listener's."""
        while True:
            port = free_loopback_port()
            if port != self._port:
                return port

    @property
    def config_path(self) -> Path:
        if self._tmpdir is None:
            raise RuntimeError("MosquittoBroker is not running")
        return self._tmpdir / "mosquitto.conf"

    def log(self) -> str:
        """What mosquitto wrote to stderr so far."""
        if self._tmpdir is None:
            return ""
        path = self._tmpdir / "mosquitto.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # -- starting: one generator of steps, driven by a blocking or by an asyncio sleep ------------

    def _start_steps(self) -> Iterator[float]:
        """Start mosquitto; yield seconds to sleep while waiting for its port; raise on failure."""
        binary = self._binary or find_mosquitto()
        if binary is None or not os.access(binary, os.X_OK):
            raise RuntimeError(
                f"mosquitto not found ({binary or 'looked on PATH and at /usr/sbin/mosquitto'}); "
                f"install it (apt-get install mosquitto) or use the embedded broker"
            )
        for attempt in range(_PORT_ATTEMPTS):
            self._tmpdir = Path(tempfile.mkdtemp(prefix="shuffledp-mosquitto-"))
            config = write_mosquitto_config(
                self._tmpdir,
                self._port,
                access_dir=self._access_dir,
                tls_dir=self._tls_dir,
                tls_port=self._tls_port,
            )
            with open(self._tmpdir / "mosquitto.log", "wb") as log:
                self._process = subprocess.Popen(
                    [binary, "-c", str(config)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # a Ctrl-C in the terminal reaches us, not it
                )
            deadline = time.monotonic() + self.START_TIMEOUT
            while True:
                code = self._process.poll()
                if code is not None:
                    reason = f"exited with code {code}"
                    break
                if _accepts_connections(self.host, self._port) and (
                    self._tls_port is None or _accepts_connections(self.host, self._tls_port)
                ):
                    # Could be another program on a port just taken: ours must still be running.
                    yield 0.05
                    code = self._process.poll()
                    if code is None:
                        return
                    reason = f"exited with code {code}"
                    break
                if time.monotonic() > deadline:
                    reason = f"did not accept connections within {self.START_TIMEOUT:g} s"
                    break
                yield 0.02
            output = self.log().strip()
            self._stop()
            if (
                "address already in use" in output.lower()
                and not self._fixed_port
                and attempt < _PORT_ATTEMPTS - 1
            ):
                self._port = free_loopback_port()
                if self._tls_port is not None:
                    self._tls_port = self._free_port_but_plain()
                continue
            raise RuntimeError(
                f"mosquitto ({binary}) on {self.host}:{self._port} {reason}; its output: "
                f"{output or '(none)'}"
            )

    def _stop_process(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=self.STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _stop(self) -> None:
        try:
            self._stop_process()
        finally:
            tmpdir, self._tmpdir = self._tmpdir, None
            if tmpdir is not None:
                shutil.rmtree(tmpdir, ignore_errors=True)

    def __enter__(self) -> MosquittoBroker:
        if self._process is not None:
            raise RuntimeError("this MosquittoBroker is already running")
        try:
            for delay in self._start_steps():
                time.sleep(delay)
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop()

    async def __aenter__(self) -> MosquittoBroker:
        if self._process is not None:
            raise RuntimeError("this MosquittoBroker is already running")
        try:
            for delay in self._start_steps():
                await asyncio.sleep(delay)
        except BaseException:
            # Also on cancellation: stop what was started (SIGTERM is answered in milliseconds).
            self._stop()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # The wait for the process to end runs in a worker thread, to completion even if cancelled.
        await _run_to_completion(asyncio.to_thread(self._stop))


def _accepts_connections(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


# --------------------------------------------------------------------------------------------
# --broker URL
# --------------------------------------------------------------------------------------------
