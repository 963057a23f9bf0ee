"""`--broker URL[,URL...]` of `shuffledp hop|analyzer|clients`: one broker, or several.

Past the ceiling of one broker (docs/deployment.md, "Several brokers"), every component of a
round is given the same comma-separated list of B broker URLs, and each takes its part:

- client process ``clients-<j>`` connects to broker ``j mod B`` (its slice of the clients);
- hop 0 connects to every broker (:class:`~shuffledp.protocol.fanin.FanInTransport`): it takes
  the reports and claims of all, publishes its status and receipts on all, and its output on
  the first only;
- the later hops and the analyzer connect to the first broker.

With one URL everything is as before.
"""

from __future__ import annotations

from collections.abc import Callable

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.fanin import FanInTransport
from shuffledp.protocol.mqtt import MqttTransport, parse_broker_address

__all__ = ["MAX_BROKERS", "broker_urls", "client_broker", "hop_connection"]

#: At most this many brokers in one --broker list (hop 0 holds a connection to each).
MAX_BROKERS = 64


def broker_urls(text: str) -> tuple[str, ...]:
    """The URLs of ``--broker URL[,URL...]``, each checked (:func:`parse_broker_address`);
    InvalidParameterError for an empty entry, a repeated URL, more than :data:`MAX_BROKERS`, or
    a mix of mqtt:// and mqtts:// (one --tls-ca serves all or none)."""
    urls = tuple(text.split(","))
    if len(urls) > MAX_BROKERS:
        raise InvalidParameterError(
            f"--broker must list at most {MAX_BROKERS} URLs, got {len(urls)}"
        )
    if any(not url for url in urls):
        raise InvalidParameterError(
            f"--broker must be URL or URL,URL,... without empty entries, got {text!r}"
        )
    if len(set(urls)) != len(urls):
        raise InvalidParameterError(f"--broker must not list a URL twice, got {text!r}")
    if len({parse_broker_address(url).tls for url in urls}) > 1:
        raise InvalidParameterError(
            f"--broker must list only mqtt:// or only mqtts:// URLs, got {text!r}"
        )
    return urls


def client_broker(urls: tuple[str, ...], process: int) -> str:
    """The broker of client process ``clients-<process>``: ``urls[process mod B]``."""
    return urls[process % len(urls)]


def hop_connection(
    urls: tuple[str, ...],
    hop_index: int,
    egress: str,
    connect: Callable[[str], MqttTransport],
) -> MqttTransport | FanInTransport:
    """Hop ``hop_index``'s connection: ``connect(url)`` to the first broker, or, for hop 0 given
    several, one to each joined in a :class:`FanInTransport` whose output topic ``egress``
    goes to the first only (an async context manager either way)."""
    if hop_index != 0 or len(urls) == 1:
        return connect(urls[0])
    return FanInTransport([connect(url) for url in urls], primary_only=(egress,))
