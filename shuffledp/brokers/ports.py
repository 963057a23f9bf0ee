"""Loopback ports for the brokers: picking a free one, checking one, seeing one accept.

Every broker of the package listens on 127.0.0.1 only (:data:`LOOPBACK`), never on 0.0.0.0: the
simulations run on one machine, and an anonymous broker must not be reachable from the network.
"""

from __future__ import annotations

import socket

from shuffledp.errors import BrokerError, InvalidParameterError

__all__ = [
    "DEFAULT_MQTT_PORT",
    "LOOPBACK",
    "PORT_ATTEMPTS",
    "PortInUseError",
    "accepts_connections",
    "check_port",
    "free_loopback_port",
    "port_in_use",
]

LOOPBACK = "127.0.0.1"
DEFAULT_MQTT_PORT = 1883
PORT_ATTEMPTS = 3
"""Attempts at a fresh free port when the one picked was taken meanwhile (port chosen by us)."""


class PortInUseError(BrokerError):
    """The broker's port on 127.0.0.1 is taken by another program (not a broker crash)."""


def free_loopback_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now (the OS picks it; another process may take
    it before the caller binds it, which the brokers handle by retrying)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
    return port


def check_port(port: int, name: str = "--port") -> int:
    """``port`` if it is an integer in 1..65535, else InvalidParameterError naming ``name``."""
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise InvalidParameterError(f"{name} must be an integer in 1..65535, got {port!r}")
    return port


def port_in_use(port: int, what: str) -> PortInUseError:
    """The error for ``what`` (a broker) finding ``port`` taken."""
    return PortInUseError(
        f"{what}: port {port} on {LOOPBACK} is already in use (another broker running? choose "
        f"another port)"
    )


def accepts_connections(host: str, port: int) -> bool:
    """Whether a TCP connection to (host, port) succeeds within half a second."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False
