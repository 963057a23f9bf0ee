"""Shared fixtures: MQTT brokers on 127.0.0.1 for the integration tests, and the real data.

- `embedded_broker_url`: an EmbeddedBroker (amqtt) on a free port, running in the test's own
  event loop (so only `@pytest.mark.asyncio` tests can use it).
- `mosquitto_url`: $SHUFFLEDP_MOSQUITTO_URL if set, else a Mosquitto child process on a free port
  with the open test configuration (write_mosquitto_config without accounts). Without mosquitto
  installed the test is skipped, except in CI (env CI set), where it fails: CI must never skip
  the broker tests silently.
- tests marked `shared_data` read the real Gowalla slices in ../shared/data: skipped where the
  folder is absent, a failure in CI.
- the tiers: every test under tests/reference/ is marked `slow` and every test under
  tests/integration/ `integration`, so the fast loop
  `python -m pytest -m "not slow and not integration"` runs tests/unit/ less its `slow` tests.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from shuffledp.brokers.embedded import EmbeddedBroker
from shuffledp.brokers.mosquitto import MosquittoBroker, find_mosquitto
from shuffledp.protocol.mqtt import parse_broker_url
from tests.paths import INTEGRATION_TESTS, REFERENCE_TESTS, SHARED_DATA

#: The mark every test of a tier folder carries (tests/paths.py).
TIER_MARKS = {REFERENCE_TESTS: "slow", INTEGRATION_TESTS: "integration"}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its tier folder's mark (TIER_MARKS)."""
    for item in items:
        path = item.path.resolve()  # REPO_ROOT is resolved too (a checkout behind a symlink)
        for folder, mark in TIER_MARKS.items():
            if path.is_relative_to(folder):
                item.add_marker(mark)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked ``shared_data`` read the real check-in slices: skipped where they are absent
    (a clone outside the workplace), except in CI (env CI set), where that is a failure."""
    if item.get_closest_marker("shared_data") is not None and not SHARED_DATA.is_dir():
        message = f"the real check-in slices are not at {SHARED_DATA}"
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI must have them)")
        pytest.skip(message)


def default_sigint() -> None:
    """``preexec_fn`` for a child that a test interrupts with SIGINT (a Ctrl-C).

    A process started in the background by a non-interactive shell (``cmd &`` in a script, as CI
    runners and nohup do) inherits SIGINT *ignored*, and Python then leaves it ignored, so the
    child would never see the test's Ctrl-C (the Ctrl-C tests failed exactly that way in a
    backgrounded CI run). The child gets the default disposition back, as in a terminal.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


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
