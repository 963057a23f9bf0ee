"""The ceiling of one Mosquitto: client reports to hop 0, with the project's accounts, ACL and
per-role bounds plugin (what `shuffledp keys init` configures).

Usage::

    .venv/bin/python bench/broker_ceiling.py                       # 2 publishers, 60,000 messages
    .venv/bin/python bench/broker_ceiling.py --publishers 1 2 4 --messages 100000

For each publisher count P it starts a Mosquitto enforcing a fresh key directory's accounts, ACL
and bounds plugin (``MosquittoBroker(access_dir=...)``), one consumer logged in as ``hop-0``
subscribed to hop 0's topic (QoS 1, as hop 0), and P processes logged in as ``clients-<j>``
that publish their share of ``--messages`` payloads of ``--size`` bytes (default: an
authenticated report's size with 3 hops) to hop 0's topic at QoS 1 with up to
``--in-flight`` unacknowledged each (bare paho-mqtt: lighter than the client processes, so as to
load the broker). It prints one JSON object per run:

- ``publishers``, ``accounts`` (false for ``--open``'s comparison run on an open broker),
  ``message_bytes``, ``messages``, ``received`` (distinct payloads the consumer
  got: all of them, or the run says it is not a ceiling);
- ``msgs_per_s``: messages received per second, from the first receipt to the last;
- ``broker_cpu_percent``: the broker's CPU time over that wall time (100 = one core: Mosquitto
  is single-threaded, so that is its ceiling); ``broker_us_per_msg`` its CPU per message, and
  ``broker_ceiling_msgs_per_s`` = 1e6 / that, the rate one saturated core would carry (an
  extrapolation when the broker is not saturated: on a small machine the Python publishers and
  consumer run out of CPU first, which ``publishers_cpu_percent`` and ``consumer_cpu_percent``
  show);
- ``load_1min``: the machine's load average at the end (other work on the machine slows all).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion

from shuffledp.brokers.mosquitto import MosquittoBroker
from shuffledp.protocol.client_auth import ENVELOPE_SIZE
from shuffledp.protocol.mqtt import MqttTransport, parse_broker_url
from shuffledp.protocol.onion import message_length
from shuffledp.protocol.topics import ingress_topic
from shuffledp.security.access import load_password

ROUND = 1
REPORT_BYTES = ENVELOPE_SIZE + message_length(0, 3)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _publisher(
    url: str, keys: str, prefix: str, j: int, count: int, size: int, inflight: int
) -> None:
    """One client process: ``count`` distinct payloads to hop 0's topic at QoS 1 (a
    subprocess). Bare paho-mqtt (the library under aiomqtt) rather than the pipeline's asyncio
    transport, which spends several times the broker's CPU per publish: the point is to load
    the broker."""
    name = f"clients-{j}"
    host, port = parse_broker_url(url)
    done = threading.Event()
    # At most `inflight` publishes handed to paho and not acknowledged: paho rescans its whole
    # list of queued messages at each acknowledgement, quadratic with everything queued at once.
    slots = threading.BoundedSemaphore(inflight)
    acked = 0

    def on_publish(*_: Any) -> None:
        nonlocal acked  # paho calls back from its network thread: a counter, no closure state
        acked += 1
        slots.release()
        if acked == count:
            done.set()

    client = paho.Client(CallbackAPIVersion.VERSION2, client_id=name)
    if keys:  # "": the open broker of --open
        client.username_pw_set(name, load_password(Path(keys), name))
    client.max_inflight_messages_set(inflight)
    client.on_publish = on_publish
    client.connect(host, port)
    client.loop_start()
    topic, body = ingress_topic(prefix, ROUND, 0), os.urandom(size - 8)
    for i in range(count):
        slots.acquire()
        client.publish(topic, i.to_bytes(4, "big") + j.to_bytes(4, "big") + body, qos=1)
    done.wait(120)
    client.disconnect()
    client.loop_stop()


async def _consume(
    url: str, keys: str, prefix: str, total: int, subscribed: Any
) -> tuple[int, float, float]:
    """Receive as hop 0 until ``total`` distinct payloads came (or 20 s of silence): (distinct,
    monotonic times of the first and of the last)."""
    seen: set[bytes] = set()
    first = last = time.monotonic()
    async with MqttTransport(
        url, client_id="hop-0", username="hop-0" if keys else None,
        password=load_password(Path(keys), "hop-0") if keys else None,
        max_in_flight=1000,
    ) as transport:  # fmt: skip
        await transport.subscribe(ingress_topic(prefix, ROUND, 0))
        subscribed.set()
        messages = transport.messages()
        while len(seen) < total:
            try:
                async with asyncio.timeout(20):
                    message = await anext(messages)
            except TimeoutError:
                break
            last = time.monotonic()
            if not seen:
                first = last
            seen.add(message.payload[:8])
    return len(seen), first, last


def run_once(
    publishers: int, messages: int, size: int, inflight: int, *, accounts: bool = True
) -> dict[str, Any]:
    """One run (module docstring); ``accounts=False``: an open broker without accounts, ACL
    or plugin, for comparison."""
    with tempfile.TemporaryDirectory(prefix="broker-ceiling-") as tmp:
        keys, prefix = Path(tmp) / "keys", f"bench/ceiling-{secrets.token_hex(3)}"
        subprocess.run(
            [sys.executable, "-m", "shuffledp", "keys", "init", str(keys), "--hops", "3",
             "--clients", str(publishers), "--prefix", prefix],
            check=True, capture_output=True,
        )  # fmt: skip
        with MosquittoBroker(access_dir=keys / "access" if accounts else None) as broker:
            login = str(keys) if accounts else ""  # "": log in as nobody
            return asyncio.run(
                _measure(broker, login, prefix, publishers, messages, size, inflight)
            )


async def _measure(
    broker: MosquittoBroker, keys: str, prefix: str, publishers: int, messages: int, size: int,
    inflight: int,
) -> dict[str, Any]:  # fmt: skip
    assert broker.pid is not None
    shares = [messages // publishers + (j < messages % publishers) for j in range(publishers)]
    subscribed = asyncio.Event()
    consumer = asyncio.create_task(_consume(broker.url, keys, prefix, messages, subscribed))
    await subscribed.wait()
    context = multiprocessing.get_context("spawn")
    procs = [
        context.Process(
            target=_publisher, args=(broker.url, keys, prefix, j, shares[j], size, inflight)
        )
        for j in range(publishers)
    ]
    cpu_before, consumer_before = _cpu_seconds(broker.pid), time.process_time()
    children_before = os.times()
    for proc in procs:
        proc.start()
    received, first, last = await consumer
    wall = last - first  # not the publishers' start-up (spawn, imports, login)
    broker_cpu = _cpu_seconds(broker.pid) - cpu_before
    consumer_cpu = time.process_time() - consumer_before
    for proc in procs:
        await asyncio.to_thread(proc.join, 60)
    children = os.times()
    publisher_cpu = (children.children_user - children_before.children_user) + (
        children.children_system - children_before.children_system
    )
    return {
        "publishers": publishers,
        "accounts": bool(keys),
        "message_bytes": size,
        "messages": messages,
        "received": received,
        "wall_s": round(wall, 3),
        "msgs_per_s": round(received / wall),
        "broker_cpu_percent": round(100 * broker_cpu / wall, 1),
        "broker_us_per_msg": round(1e6 * broker_cpu / received, 2),
        "broker_ceiling_msgs_per_s": round(received / broker_cpu) if broker_cpu else None,
        "publishers_cpu_percent": round(100 * publisher_cpu / wall, 1),
        "consumer_cpu_percent": round(100 * consumer_cpu / wall, 1),
        "bounds": broker.bounds,
        "load_1min": round(os.getloadavg()[0], 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--publishers", type=int, nargs="+", default=[2])
    parser.add_argument("--messages", type=int, default=60_000)
    parser.add_argument("--size", type=int, default=REPORT_BYTES, help="payload bytes (>= 8)")
    parser.add_argument("--in-flight", type=int, default=1000, help="per publisher")
    parser.add_argument(
        "--open", action="store_true", help="also an open broker (no accounts, ACL, plugin)"
    )
    args = parser.parse_args()
    if args.size < 8 or args.messages < 1 or min(args.publishers) < 1:
        parser.error("--size must be >= 8, --messages and --publishers >= 1")
    for publishers in args.publishers:
        print(
            json.dumps(run_once(publishers, args.messages, args.size, args.in_flight)), flush=True
        )
        if args.open:
            run = run_once(publishers, args.messages, args.size, args.in_flight, accounts=False)
            print(json.dumps(run), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
