"""`shuffledp broker`: the embedded MQTT broker in the foreground, on 127.0.0.1 unless --listen.

For running the components (`shuffledp hop`, `analyzer`, `clients`) by hand against one broker
without installing Mosquitto. Prints one line when it accepts connections and runs until Ctrl-C,
SIGTERM or SIGHUP, then exits with 128 + the signal's number (130, 143, 129) after one line. A
port in use and an amqtt failure are each one line with exit status 1
(:class:`~shuffledp.brokers.ports.PortInUseError`, :class:`~shuffledp.errors.BrokerError`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shuffledp.brokers.ports import DEFAULT_MQTT_PORT, LOOPBACK
from shuffledp.cli.argtypes import integer
from shuffledp.cli.help import add_command
from shuffledp.cli.signals import received_signal
from shuffledp.errors import InvalidParameterError

if TYPE_CHECKING:
    from shuffledp.brokers.embedded import EmbeddedBroker


def add_parser(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "broker",
        help="run the embedded MQTT broker until Ctrl-C",
        description="Run the embedded MQTT broker (amqtt) in the foreground, on 127.0.0.1 "
        "unless --listen, until Ctrl-C, SIGTERM or SIGHUP. For large runs prefer Mosquitto: "
        "mosquitto -c KEYS/access/mosquitto.conf (made by shuffledp keys init KEYS)",
        examples=[
            "shuffledp broker",
            "shuffledp broker --port 1884 --verbose",
            "shuffledp broker --keys /tmp/shuffledp-keys   # accounts and ACLs of keys init",
            "shuffledp broker --keys /tmp/shuffledp-keys --listen 0.0.0.0   # other machines",
        ],
    )
    p.add_argument(
        "--port",
        type=integer(1, 65535),
        default=DEFAULT_MQTT_PORT,
        metavar="PORT",
        help="TCP port",
    )
    p.add_argument(
        "--listen",
        type=listen_address,
        default=LOOPBACK,
        metavar="ADDRESS",
        help="IP address to listen on: 127.0.0.1 (this host only), 0.0.0.0 (every IPv4 "
        "interface: components on other machines), or one interface's address; another address "
        "than the loopback needs --keys (an open broker on a network would accept anyone)",
    )
    p.add_argument(
        "--keys",
        type=Path,
        metavar="DIR",
        help="key directory made by `shuffledp keys init`: enforce its broker accounts and topic "
        "ACLs (DIR/access/passwd and acl); without it the broker is open to anyone on this host",
    )
    p.add_argument("--verbose", action="store_true", help="log connections (amqtt at INFO)")
    p.set_defaults(func=run)


def listen_address(text: str) -> str:
    """--listen: an IPv4 or IPv6 address (argparse names the flag in the error)."""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be an IP address such as 127.0.0.1 or 0.0.0.0, got {text!r}"
        ) from None


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted; errors (bad --keys, port in use, amqtt failure) propagate as
    ShuffledpError for main() to report in one line."""
    from shuffledp.brokers.embedded import EmbeddedBroker
    from shuffledp.security.access import access_directory

    if args.verbose:
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s"
        )
    if args.keys is None and not ipaddress.ip_address(args.listen).is_loopback:
        raise InvalidParameterError(
            f"--listen {args.listen} needs --keys DIR (accounts and ACLs): an open broker on a "
            "network interface would accept anyone"
        )
    access = None if args.keys is None else access_directory(args.keys)
    broker = EmbeddedBroker(args.port, verbose=args.verbose, access_dir=access, host=args.listen)
    try:
        signum = asyncio.run(_serve(broker))
    except KeyboardInterrupt:  # a signal before the handlers were set (see cli.signals)
        signum = received_signal() or signal.SIGINT
    print(f"shuffledp broker: stopped by {signal.Signals(signum).name}", file=sys.stderr)
    return 128 + signum


async def _serve(broker: EmbeddedBroker) -> int:
    """Serve until SIGINT, SIGTERM or SIGHUP; the signal's number."""
    loop = asyncio.get_running_loop()
    stopped_by: asyncio.Future[int] = loop.create_future()

    def stop(signum: int) -> None:
        if not stopped_by.done():
            stopped_by.set_result(signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError):  # Windows: Ctrl-C stays KeyboardInterrupt
            loop.add_signal_handler(sig, stop, sig)
    async with broker:
        print(f"shuffledp broker: listening on {broker.url}", flush=True)
        mode = (
            "accounts and ACLs enforced" if broker.access_dir is not None else "open: no accounts"
        )
        print(f"shuffledp broker: {mode}", file=sys.stderr, flush=True)
        return await stopped_by
