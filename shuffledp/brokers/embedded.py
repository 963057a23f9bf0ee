"""The embedded MQTT broker: amqtt inside the current event loop, on 127.0.0.1 only.

No setup, fine for the default runs (amqtt 0.12 with aiomqtt: ~2,600 QoS 1 messages/s with the
broker in a process of its own, measured when the transport was chosen; ~1,400/s when broker,
publisher and subscriber share one event loop). For large runs and the integration tests,
:class:`shuffledp.brokers.mosquitto.MosquittoBroker` starts a Mosquitto instead.

What depends on amqtt's internals (configuration, plugins, patches, the exact version they were
written for) is in :mod:`shuffledp.brokers.amqtt_compat`, imported when a broker starts.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from types import TracebackType
from typing import Any

from shuffledp.brokers.files import check_access_dir
from shuffledp.brokers.ports import (
    LOOPBACK,
    PORT_ATTEMPTS,
    PortInUseError,
    check_port,
    free_loopback_port,
)
from shuffledp.brokers.shielded import run_to_completion

__all__ = ["EmbeddedBroker"]

_AMQTT_LOGGERS = ("amqtt", "transitions")


class EmbeddedBroker:
    """amqtt's MQTT 3.1.1 broker in the running event loop, on 127.0.0.1 only.

    ``access_dir`` (a key directory's ``access/``, :mod:`shuffledp.security.access`): accounts and
    topic ACLs enforced (no anonymous client); without it the broker is open (loopback only).

    ``async with EmbeddedBroker() as broker:`` starts it on a free port (or `port`); it accepts
    connections when the body runs, at ``broker.url``. Leaving the block stops it, also when the
    task is cancelled. amqtt's loggers are set to WARNING (INFO with ``verbose=True``). Entering
    raises PortInUseError if a given `port` is taken and BrokerError if amqtt fails otherwise
    (or is not the version :mod:`shuffledp.brokers.amqtt_compat` was written for).

    ``host``: the address to listen on (default 127.0.0.1; ``shuffledp broker --listen``, which
    refuses another address without accounts).
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        verbose: bool = False,
        access_dir: str | os.PathLike[str] | None = None,
        host: str = LOOPBACK,
    ) -> None:
        self.host = host
        self._fixed_port = port is not None
        self._port = check_port(port) if port is not None else free_loopback_port()
        self._verbose = verbose
        self._access_dir = None if access_dir is None else check_access_dir(access_dir)
        self._broker: Any = None

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"mqtt://{host}:{self._port}"

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
            await run_to_completion(self._start_on_some_port())
        except asyncio.CancelledError:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def _start_on_some_port(self) -> None:
        from shuffledp.brokers.amqtt_compat import start_amqtt

        for attempt in range(PORT_ATTEMPTS):
            try:
                self._broker = await start_amqtt(self._port, self._access_dir, self.host)
                return
            except PortInUseError:
                if self._fixed_port or attempt == PORT_ATTEMPTS - 1:
                    raise
                self._port = free_loopback_port()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        broker, self._broker = self._broker, None
        if broker is not None:
            await run_to_completion(broker.shutdown())
