"""What an attacker holding one client process's broker account (and, for :func:`fill_round`,
its client key) can do to a round; the fault bench's scenarios run these against real brokers.

- :func:`guessable_client_id`: the MQTT client id a stage with a persistent session used
  (``sdp-<stage>-`` and 12 hex digits of SHA-256 of the prefix and round): computable by anyone
  who knows the prefix and round, which are in every topic.
- :func:`takeover_burst`: connect again and again under given client ids (CleanSession = 1,
  which also throws away the session the broker kept under that id).
- :func:`publish_junk`: oversized messages to a topic, then retained ones on other topics.
- :func:`count_retained`: the retained messages a broker holds under a topic filter.
- :func:`fill_round`: authentic reports of clients the process does not host, sealed with its
  key, published to hop 0 (a key directory enrolling more clients per process than it hosts
  accepts them).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiomqtt

from shuffledp.clients.client import make_client_messages
from shuffledp.protocol.mqtt import MqttTransport, parse_broker_address
from shuffledp.protocol.topics import ingress_topic
from shuffledp.protocol.transport import publish_all
from shuffledp.randomness import default_source
from shuffledp.security.access import load_password, load_process_credentials
from shuffledp.security.keys import load_public_directory
from shuffledp.simulations.data.datasets import synthetic_values

__all__ = [
    "count_retained",
    "fill_round",
    "guessable_client_id",
    "publish_junk",
    "takeover_burst",
]

_QUIET = logging.getLogger("shuffledp.faults.attacker")
_QUIET.setLevel(logging.CRITICAL)  # the broker cutting an attacker off is the expected outcome
CONNECT_TIMEOUT = 10.0
PUBLISH_TIMEOUT = 10.0
"""Seconds an attacker's QoS 1 publish may wait for its acknowledgement. A broker that takes a
16 MB message on loopback acknowledges it within a second; Mosquitto drops an oversized packet
without a word to aiomqtt, so the publish ends by this timeout (60 s made the junk row of the
fault bench take a minute)."""


def guessable_client_id(prefix: str, round_id: int, stage: str) -> str:
    """``sdp-<stage>-sha256(prefix NUL round)[:12]``: the session client id of a stage run with
    ``--state-dir`` or ``--reconnect`` before issue 13 (anyone can compute it)."""
    digest = hashlib.sha256(f"{prefix}\0{round_id}".encode()).hexdigest()[:12]
    return f"sdp-{stage}-{digest}"


def _client(url: str, identifier: str, username: str, password: str) -> aiomqtt.Client:
    address = parse_broker_address(url)
    return aiomqtt.Client(
        address.host,
        address.port,
        identifier=identifier,
        logger=_QUIET,
        username=username,
        password=password,
        clean_session=True,
        timeout=CONNECT_TIMEOUT,
    )


async def takeover_burst(
    url: str,
    client_ids: Sequence[str],
    *,
    username: str,
    password: str,
    rounds: int = 10,
    hold: float = 0.05,
) -> dict[str, int]:
    """``rounds`` times, connect under each of ``client_ids`` (as ``username``), hold the
    connection ``hold`` seconds and leave; returns how many connections the broker accepted and
    refused."""
    counts = {"connected": 0, "refused": 0}
    for _ in range(rounds):
        for identifier in client_ids:
            try:
                async with _client(url, identifier, username, password):
                    counts["connected"] += 1
                    await asyncio.sleep(hold)
            except aiomqtt.MqttError:
                counts["refused"] += 1
    return counts


async def publish_junk(
    url: str,
    *,
    username: str,
    password: str,
    topic: str,
    count: int,
    retained_topics: Sequence[str],
    size: int,
) -> dict[str, Any]:
    """Publish ``count`` messages of ``size`` bytes to ``topic`` (QoS 1), then one retained
    message of ``size`` bytes to each of ``retained_topics``; returns how many went out and the
    broker's error if it cut the attacker off."""
    payload = secrets.token_bytes(size)
    done = {"published": 0, "retained": 0}
    error = ""
    try:
        async with _client(url, f"junk-{secrets.token_hex(4)}", username, password) as client:
            for _ in range(count):
                await client.publish(topic, payload, qos=1, timeout=PUBLISH_TIMEOUT)
                done["published"] += 1
            for other in retained_topics:
                await client.publish(other, payload, qos=1, retain=True, timeout=PUBLISH_TIMEOUT)
                done["retained"] += 1
    except aiomqtt.MqttError as exc:
        error = str(exc) or type(exc).__name__
    return {**done, "error": error}


async def count_retained(
    url: str, *, username: str, password: str, topic_filter: str, wait: float = 2.0
) -> int | None:
    """Retained non-empty messages under ``topic_filter`` (those the broker sends on
    subscribing, within ``wait`` seconds); None if ``username`` cannot connect."""
    found = 0
    try:
        async with _client(url, f"count-{secrets.token_hex(4)}", username, password) as client:
            await client.subscribe(topic_filter, qos=1)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    async for message in client.messages:
                        if message.retain and message.payload:
                            found += 1
    except aiomqtt.MqttError:
        return None
    return found


async def fill_round(
    url: str,
    keys: Path,
    *,
    prefix: str,
    round_id: int,
    k: int,
    eps0: float,
    process: int,
    first_client: int,
    count: int,
    manifest_digest: bytes,
) -> int:
    """Publish ``count`` authentic reports of clients ``first_client`` .. ``first_client +
    count - 1`` of client process ``process`` (its key and broker account) to hop 0; returns
    how many the broker acknowledged."""
    directory = load_public_directory(keys)
    credentials = load_process_credentials(keys, process)
    values = synthetic_values(count, k, default_source(None))

    def seal() -> list[bytes]:
        return make_client_messages(
            values,
            k=k,
            eps0=eps0,
            round_id=round_id,
            manifest_digest=manifest_digest,
            hop_public_keys=directory.hop_keys,
            analyzer_public_key=directory.analyzer_key,
            credentials=[credentials.credential(first_client + i) for i in range(count)],
        )

    messages = await asyncio.to_thread(seal)
    name = f"clients-{process}"
    topic = ingress_topic(prefix, round_id, 0)
    async with MqttTransport(
        url,
        client_id=f"filler-{secrets.token_hex(4)}",
        username=name,
        password=load_password(keys, name),
    ) as transport:
        return await publish_all(transport, ((topic, m) for m in messages), max_in_flight=128)
