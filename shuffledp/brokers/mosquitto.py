"""Mosquitto for the pipeline: its configuration, finding the binary, and a launcher.

- :data:`MOSQUITTO_CONFIG_TEMPLATE` / :func:`write_mosquitto_config`: the project's Mosquitto 2.x
  configuration (loopback listener, delivery settings, optional accounts, ACL and TLS). Without
  accounts it is an open broker, labelled as for tests only (the test suite's and CI's broker).
- :func:`deploy_mosquitto_config`: what ships as ``deploy/mosquitto.conf``, the same settings
  with the accounts, ACL and bounds plugin of a key directory at :data:`DEPLOY_KEYS`
  (``mosquitto -c deploy/mosquitto.conf`` refuses to start until ``shuffledp keys init`` has
  made it): never an anonymous open broker.
- :class:`MosquittoBroker` starts ``mosquitto -c CONF`` as a child process on a free loopback
  port; for large runs and the integration tests.

Bounds (:mod:`shuffledp.security.broker_limits`): ``max_packet_size`` (a stage's largest packet,
4 MiB), bounded queues per client, persistence on (off for :class:`MosquittoBroker`, which is
never restarted); with accounts, ``use_username_as_clientid`` (no account connects under
another's client id) and the per-role bounds plugin (:mod:`shuffledp.security.mosquitto_bounds`:
no retained message and no payload over the report size from a client account), compiled at
first use, or comment lines saying why it is not loaded. See the template.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from types import TracebackType

from shuffledp.brokers.files import check_access_dir, check_tls_dir
from shuffledp.brokers.ports import (
    LOOPBACK,
    PORT_ATTEMPTS,
    accepts_connections,
    check_port,
    free_loopback_port,
    port_in_use,
)
from shuffledp.brokers.shielded import run_to_completion
from shuffledp.errors import BrokerError, InvalidParameterError
from shuffledp.security.access import (
    MOSQUITTO_DELIVERY_SETTINGS,
    MOSQUITTO_LISTENER_ACCOUNT_SETTINGS,
)
from shuffledp.security.mosquitto_bounds import PluginBuild, bounds_settings, build_bounds_plugin

__all__ = [
    "DEPLOY_KEYS",
    "MOSQUITTO_CONFIG_TEMPLATE",
    "MOSQUITTO_FALLBACKS",
    "MosquittoBroker",
    "deploy_mosquitto_config",
    "find_mosquitto",
    "write_mosquitto_config",
]

OPEN_CONFIG_HEADER = """\
# FOR TESTS ONLY: an open Mosquitto (anonymous clients, no ACL) for shuffledp's test suite and
# CI (made by write_mosquitto_config in shuffledp/brokers/mosquitto.py). Do not deploy it: any
# process on this machine could publish a fake report or a stage's status. Deploy
# deploy/mosquitto.conf or the mosquitto.conf of `shuffledp keys init` (accounts and ACLs).
# No per-role bounds plugin (shuffledp/security/mosquitto_bounds.c): it tells client accounts
# from stage accounts and defers to an acl_file, and here there are neither.
"""

SECURED_CONFIG_HEADER = """\
# Mosquitto 2.x configuration for shuffledp (made by write_mosquitto_config in
# shuffledp/brokers/mosquitto.py): the accounts and topic ACLs of a `shuffledp keys init`
# key directory; no anonymous client is accepted.
"""

DEPLOY_CONFIG_HEADER = """\
# Mosquitto 2.x configuration for shuffledp (shuffledp/brokers/mosquitto.py,
# deploy_mosquitto_config): the accounts, topic ACL and per-role bounds of the key directory
# {keys}, made by
#   shuffledp keys init {keys} --hops 3
# (Mosquitto refuses to start until it exists; `keys init` also writes this configuration with
# its own paths, as {keys}/access/mosquitto.conf). No anonymous client is accepted.
# Run: mosquitto -c deploy/mosquitto.conf   then each component with --keys {keys}
"""

MOSQUITTO_CONFIG_TEMPLATE = f"""\
#
# Security settings (allow_anonymous) apply to every listener alike; set before any listener.
per_listener_settings false
# Listen on port {{port}} of the loopback interface only: nothing off this machine can connect.
listener {{port}} 127.0.0.1
# Anonymous clients, no ACL: tests only (see above).
allow_anonymous true
{MOSQUITTO_DELIVERY_SETTINGS}# Keep sessions, subscriptions and queued messages across a restart, in mosquitto.db (in the
# directory mosquitto starts in unless persistence_location says; saved every 300 s and on a
# graceful stop): a restarted broker still holds what the stages had not received.
persistence true
autosave_interval 300
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
    persistence_location: str | os.PathLike[str] | None = None,
    persistence: bool = True,
    bounds_plugin: PluginBuild | None = None,
) -> Path:
    """Write `directory`/mosquitto.conf for a listener on 127.0.0.1:`port`; return its path.
    ``persistence_location``: the directory of its mosquitto.db (default: where mosquitto
    starts); ``persistence=False`` saves nothing (a broker that is never restarted).
    With ``access_dir`` (:mod:`shuffledp.security.access`), anonymous clients are refused, the
    accounts and ACL of that directory apply (its passwd and acl files) and so do the per-role
    bounds of :mod:`shuffledp.security.mosquitto_bounds` (``bounds_plugin``, default: built now or
    taken from its cache; without it the file says what is not enforced and why). With ``tls_dir`` (a
    key directory's ``tls/``, :mod:`shuffledp.security.tls`) and ``tls_port``, a second listener on
    127.0.0.1:`tls_port` speaks MQTT over TLS with that directory's server certificate; the
    same security settings apply to both listeners."""
    from shuffledp.security.tls import mosquitto_tls_listener

    path = Path(directory) / "mosquitto.conf"
    text = MOSQUITTO_CONFIG_TEMPLATE.format(port=check_port(port))
    if not persistence:
        text = text.replace("persistence true\n", "persistence false\n", 1)
    elif persistence_location is not None:
        location = os.path.join(os.path.abspath(persistence_location), "")
        text = text.replace(
            "persistence true\n", f"persistence true\npersistence_location {location}\n", 1
        )
    if access_dir is not None:
        text = _with_accounts(text, port, check_access_dir(access_dir), bounds_plugin)
        text = SECURED_CONFIG_HEADER + text
    else:
        text = OPEN_CONFIG_HEADER + text
    if (tls_dir is None) != (tls_port is None):
        raise InvalidParameterError(
            f"tls_dir and tls_port must be given together (both or neither), got tls_dir "
            f"{tls_dir!r} and tls_port {tls_port!r}"
        )
    if tls_dir is not None and tls_port is not None:
        text += "# MQTT over TLS (shuffledp.security.tls), loopback only like the listener above.\n"
        text += mosquitto_tls_listener(
            check_tls_dir(tls_dir), check_port(tls_port), bind_address=LOOPBACK
        )
        if access_dir is not None:
            text += MOSQUITTO_LISTENER_ACCOUNT_SETTINGS
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


DEPLOY_KEYS = "/etc/shuffledp/keys"
"""The key directory ``deploy/mosquitto.conf`` names (``shuffledp keys init /etc/shuffledp/keys``)."""
DEPLOY_HOPS = 3
"""The hops ``deploy/mosquitto.conf`` bounds a client's payload for (``keys init``'s default)."""


def deploy_mosquitto_config(keys: str = DEPLOY_KEYS) -> str:
    """The text of ``deploy/mosquitto.conf``: the template on port 1883 with the accounts, ACL
    and bounds plugin of the key directory ``keys`` (absolute; nothing is read from it: a
    Mosquitto started before ``keys init`` made it fails on the missing password file), persisting
    in its ``access/``. Never an anonymous open broker."""
    from shuffledp.security.broker_limits import client_payload_bytes
    from shuffledp.security.mosquitto_bounds import LIBRARY

    access = Path(keys) / "access"
    text = MOSQUITTO_CONFIG_TEMPLATE.format(port=1883)
    location = os.path.join(access, "")
    text = text.replace(
        "persistence true\n", f"persistence true\npersistence_location {location}\n", 1
    )
    plugin = PluginBuild(access / LIBRARY)
    text = _with_accounts(text, 1883, access, plugin, client_payload_bytes(DEPLOY_HOPS))
    return DEPLOY_CONFIG_HEADER.format(keys=keys) + text


def _with_accounts(
    text: str,
    port: int,
    root: Path,
    bounds_plugin: PluginBuild | None,
    client_payload: int | None = None,
) -> str:
    """``text`` with the accounts and ACL of the access directory ``root``, the bounds plugin
    (or the lines saying why it is not loaded; ``client_payload``: the client accounts' bound,
    by default that of ``root``'s hops), no anonymous clients, and client ids tied to accounts
    on the plain listener."""
    from shuffledp.security.access import mosquitto_auth_settings
    from shuffledp.security.broker_limits import deployment_client_payload

    if client_payload is None:
        client_payload = deployment_client_payload(root)
    settings = mosquitto_auth_settings(root)
    settings += bounds_settings(client_payload, bounds_plugin)
    text = text.replace("per_listener_settings false\n", settings, 1)
    text = text.replace("# Anonymous clients, no ACL: tests only (see above).\n", "", 1)
    text = text.replace("allow_anonymous true\n", "", 1)
    listener = f"listener {port} {LOOPBACK}\n"
    return text.replace(listener, listener + MOSQUITTO_LISTENER_ACCOUNT_SETTINGS, 1)


MOSQUITTO_FALLBACKS: tuple[str, ...] = ("/usr/sbin/mosquitto",)
"""Where to look for mosquitto when it is not on PATH (Debian installs it in /usr/sbin, which a
normal user's PATH may lack)."""


def find_mosquitto() -> str | None:
    """Path of the mosquitto binary: on PATH, else one of :data:`MOSQUITTO_FALLBACKS`; None if
    absent."""
    found = shutil.which("mosquitto")
    if found is not None:
        return found
    for fallback in MOSQUITTO_FALLBACKS:
        if os.access(fallback, os.X_OK):
            return fallback
    return None


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
        self._port = check_port(port) if port is not None else free_loopback_port()
        self._binary = binary
        self._access_dir = None if access_dir is None else check_access_dir(access_dir)
        self._tls_dir = None if tls_dir is None else check_tls_dir(tls_dir)
        self._tls_port = None if tls_dir is None else self._free_port_but_plain()
        self._tmpdir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._bounds: PluginBuild | None = None

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
    def pid(self) -> int | None:
        """The mosquitto process's id while it runs (None before it starts and once stopped):
        for measuring its CPU (bench/broker_ceiling.py)."""
        process = self._process
        return None if process is None or process.poll() is not None else process.pid

    @property
    def bounds(self) -> str:
        """What this broker enforces per role (with ``access_dir``: the bounds plugin, or what is
        not enforced and why; :mod:`shuffledp.security.mosquitto_bounds`), once started."""
        if self._access_dir is None:
            return "open broker: no accounts, no per-role bounds"
        if self._bounds is None:
            return "not started yet"
        return self._bounds.description

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
        """Start mosquitto; yield seconds to sleep while waiting for its port; raise on failure.
        A port taken meanwhile by another program is retried on fresh ports (not a fixed one)."""
        binary = self._mosquitto_binary()
        for attempt in range(PORT_ATTEMPTS):
            process = self._launch(binary)
            failure = yield from self._await_listening(process)
            if failure is None:
                return
            self._give_up_or_retry(binary, failure, may_retry=attempt < PORT_ATTEMPTS - 1)

    def _mosquitto_binary(self) -> str:
        """The executable to start: ``binary`` or :func:`find_mosquitto`; BrokerError if none."""
        binary = self._binary or find_mosquitto()
        if binary is None or not os.access(binary, os.X_OK):
            raise BrokerError(
                f"mosquitto not found ({binary or 'looked on PATH and at /usr/sbin/mosquitto'}); "
                f"install it (apt-get install mosquitto) or use the embedded broker"
            )
        return binary

    def _launch(self, binary: str) -> subprocess.Popen[bytes]:
        """Write the configuration into a fresh temporary directory and start mosquitto on it,
        its output going to ``mosquitto.log`` there."""
        self._tmpdir = Path(tempfile.mkdtemp(prefix="shuffledp-mosquitto-"))
        if self._access_dir is not None and self._bounds is None:
            self._bounds = build_bounds_plugin()
        config = write_mosquitto_config(
            self._tmpdir,
            self._port,
            access_dir=self._access_dir,
            tls_dir=self._tls_dir,
            tls_port=self._tls_port,
            # Nothing restarts this broker and its folder goes when it stops: saving its
            # state would only cost time (a save stalls the broker while it writes).
            persistence=False,
            bounds_plugin=self._bounds,
        )
        with open(self._tmpdir / "mosquitto.log", "wb") as log:
            self._process = subprocess.Popen(
                [binary, "-c", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C in the terminal reaches us, not it
            )
        return self._process

    def _listening(self) -> bool:
        """Whether the plain port (and the TLS port, if any) accepts connections."""
        return accepts_connections(self.host, self._port) and (
            self._tls_port is None or accepts_connections(self.host, self._tls_port)
        )

    def _await_listening(
        self, process: subprocess.Popen[bytes]
    ) -> Generator[float, None, str | None]:
        """Yield pauses until ``process`` listens on its ports (then return None) or fails:
        then return why (it exited, or did not listen within START_TIMEOUT)."""
        deadline = time.monotonic() + self.START_TIMEOUT
        while True:
            code = process.poll()
            if code is not None:
                return f"exited with code {code}"
            if self._listening():
                # Could be another program on a port just taken: ours must still be running.
                yield 0.05
                code = process.poll()
                return None if code is None else f"exited with code {code}"
            if time.monotonic() > deadline:
                return f"did not accept connections within {self.START_TIMEOUT:g} s"
            yield 0.02

    def _give_up_or_retry(self, binary: str, failure: str, *, may_retry: bool) -> None:
        """Stop the failed mosquitto; if its port was in use and ``may_retry`` (ports not fixed),
        take fresh ports and return; else raise the error (port in use, or BrokerError with
        ``failure`` and mosquitto's output)."""
        output = self.log().strip()
        self._stop()
        in_use = "address already in use" in output.lower()
        if in_use and not self._fixed_port and may_retry:
            self._port = free_loopback_port()
            if self._tls_port is not None:
                self._tls_port = self._free_port_but_plain()
            return
        if in_use:
            raise port_in_use(self._port, f"mosquitto ({binary})")
        raise BrokerError(
            f"mosquitto ({binary}) on {self.host}:{self._port} {failure}; its output: "
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
        await run_to_completion(asyncio.to_thread(self._stop))
