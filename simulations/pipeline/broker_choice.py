"""Which broker a simulation runs on: ``--broker auto`` (the default), ``mosquitto``,
``embedded`` or the URL of a running broker.

``auto`` is Mosquitto when the ``mosquitto`` binary is installed (on PATH, or Debian's
/usr/sbin/mosquitto: :func:`shuffledp.brokers.mosquitto.find_mosquitto`), because it is faster and
keeps MQTT sessions across reconnects; otherwise the embedded amqtt broker, which needs nothing
installed, so that ``shuffledp simulate`` stays one command on any machine. The choice and why
are in the report (``simulation.broker``).
"""

from __future__ import annotations

from dataclasses import dataclass

from shuffledp.errors import InvalidParameterError

__all__ = ["AUTO", "BROKER_CHOICES", "EMBEDDED", "MOSQUITTO", "BrokerChoice", "resolve_broker"]

AUTO = "auto"
EMBEDDED = "embedded"
MOSQUITTO = "mosquitto"
"""``broker`` value that makes the session start its own Mosquitto (loopback, free port, with
the session's accounts and ACLs unless auth is off)."""
BROKER_CHOICES = (AUTO, EMBEDDED, MOSQUITTO)


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerChoice:
    """What a ``--broker`` value resolves to: ``kind`` is ``embedded``, ``mosquitto`` (started
    by the session, ``binary``) or ``url`` (a running broker at ``url``); ``reason`` says why
    in words, for the report."""

    kind: str
    reason: str
    binary: str | None = None
    url: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in (EMBEDDED, MOSQUITTO, "url"):
            raise InvalidParameterError(
                f"broker kind must be embedded, mosquitto or url, got {self.kind!r}"
            )


def resolve_broker(value: str | None) -> BrokerChoice:
    """The broker a ``--broker`` value stands for (None is ``auto``). A URL is returned as
    given (checked elsewhere); ``mosquitto`` does not look for the binary (starting it says
    if it is missing)."""
    from shuffledp.brokers.mosquitto import find_mosquitto

    if value is None or value == AUTO:
        binary = find_mosquitto()
        if binary is not None:
            return BrokerChoice(
                kind=MOSQUITTO, binary=binary, reason=f"auto: mosquitto found at {binary}"
            )
        return BrokerChoice(kind=EMBEDDED, reason="auto: mosquitto is not installed")
    if value == EMBEDDED:
        return BrokerChoice(kind=EMBEDDED, reason="--broker embedded")
    if value == MOSQUITTO:
        return BrokerChoice(kind=MOSQUITTO, reason="--broker mosquitto")
    return BrokerChoice(kind="url", url=value, reason="--broker URL")
