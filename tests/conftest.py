"""Shared fixtures: MQTT brokers on 127.0.0.1 for the integration tests.

- `embedded_broker_url`: an EmbeddedBroker (amqtt) on a free port, running in the test's own
  event loop (so only `@pytest.mark.asyncio` tests can use it).
- `mosquitto_url`: $SHUFFLEDP_MOSQUITTO_URL if set, else a Mosquitto child process on a free port
  with the project's configuration. Without mosquitto installed the test is skipped, except in CI
  (env CI set), where it fails: CI must never skip the broker tests silently.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from shuffledp.simulations.broker import (
    EmbeddedBroker,
    MosquittoBroker,
    find_mosquitto,
    parse_broker_url,
)


def require_mosquitto() -> None:
    """Skip the calling test if mosquitto is not installed (fail instead under CI)."""
    if find_mosquitto() is None:
        message = "mosquitto is not installed (apt-get install mosquitto)"
        if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
            pytest.fail(f"{message}; CI must run the Mosquitto tests")
        pytest.skip(message)


@pytest_asyncio.fixture
async def embedded_broker_url() -> AsyncIterator[str]:
    async with EmbeddedBroker() as broker:
        yield broker.url


@pytest.fixture
def mosquitto_url() -> Iterator[str]:
    external = os.environ.get("SHUFFLEDP_MOSQUITTO_URL")
    if external:
        parse_broker_url(external)
        yield external
        return
    require_mosquitto()
    with MosquittoBroker() as broker:
        yield broker.url
