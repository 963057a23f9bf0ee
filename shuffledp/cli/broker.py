"""`shuffledp broker`: the embedded MQTT broker in the foreground, on 127.0.0.1 only.

For running the components (`shuffledp hop`, `analyzer`, `clients`) by hand against one broker
without installing Mosquitto. Prints one line when it accepts connections and runs until Ctrl-C or
SIGTERM, then exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from typing import Any

from shuffledp.brokers.embedded import DEFAULT_MQTT_PORT, EmbeddedBroker


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "broker",
        help="run the embedded MQTT broker (127.0.0.1 only) until Ctrl-C",
        description="Run the embedded MQTT broker (amqtt) on 127.0.0.1 in the foreground until "
        "Ctrl-C or SIGTERM. For large runs prefer Mosquitto: mosquitto -c deploy/mosquitto.conf",
    )
    p.add_argument(
        "--port",
        type=int,
        default=DEFAULT_MQTT_PORT,
        help=f"TCP port on 127.0.0.1 (default {DEFAULT_MQTT_PORT})",
    )
    p.add_argument(
        "--keys",
        help="key directory made by `shuffledp keys init`: enforce its broker accounts and topic "
        "ACLs (KEYS/access/passwd and acl); without it the broker is open to anyone on this host",
    )
    p.add_argument("--verbose", action="store_true", help="log connections (amqtt at INFO)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.verbose:
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s"
        )
    from shuffledp.security.access import access_directory

    access = None if args.keys is None else access_directory(args.keys)
    # InvalidParameterError: bad port; AccessError: missing passwd/acl
    broker = EmbeddedBroker(args.port, verbose=args.verbose, access_dir=access)
    try:
        asyncio.run(_serve(broker))
    except KeyboardInterrupt:  # Ctrl-C before the signal handlers were in place
        pass
    except RuntimeError as exc:  # port in use, or amqtt refused to start
        print(f"shuffledp broker: error: {exc}", file=sys.stderr)
        return 1
    return 0


def args_keys_set(broker: EmbeddedBroker) -> bool:
    """Whether ``broker`` enforces accounts and ACLs."""
    return broker.access_dir is not None


async def _serve(broker: EmbeddedBroker) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):  # Windows: Ctrl-C stays KeyboardInterrupt
            loop.add_signal_handler(sig, stop.set)
    async with broker:
        print(f"shuffledp broker: listening on {broker.url}", flush=True)
        mode = "accounts and ACLs enforced" if args_keys_set(broker) else "open: no accounts"
        print(f"shuffledp broker: {mode}", file=sys.stderr, flush=True)
        await stop.wait()
