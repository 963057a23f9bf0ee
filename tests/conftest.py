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
- no silent skips: a test that always skips checks nothing, so a skip whose reason is not in
  ALLOWED_SKIPS (a fact about the machine, never about the parameters) fails the run; some are
  allowed only outside CI (env CI set).
- two xdist workers (pyproject.toml's addopts), each running whole test files: these hooks run
  in every worker, so the tiers and the skip rule hold as in a serial run (`-n 0`). Each worker
  collects every test, so a test's id must not depend on random bytes or set order.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Generator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from shuffledp.brokers.embedded import EmbeddedBroker
from shuffledp.brokers.mosquitto import MosquittoBroker, find_mosquitto
from shuffledp.protocol.mqtt import parse_broker_url
from tests.paths import INTEGRATION_TESTS, REFERENCE_TESTS, SHARED_DATA

#: The mark every test of a tier folder carries (tests/paths.py).
TIER_MARKS = {REFERENCE_TESTS: "slow", INTEGRATION_TESTS: "integration"}

#: The only skips a run may report: (a phrase of the reason, allowed under CI too). Each is a
#: property of the machine the tests run on; any other skip is reported as a failure (a test that
#: always skips is a defect: generate only the cases that can run).
ALLOWED_SKIPS = (
    ("mosquitto is not installed", False),  # broker tests (tests/conftest.py require_mosquitto)
    ("mosquitto_passwd is not installed", False),
    # --- helper "browser" (issue 27): the browser round needs node, chromium, websockify and
    # `npm ci` in clients/js; allowed outside CI only (.ci/run installs them).
    ("the browser round needs", False),
    ("check-in slices are not at", False),  # the real Gowalla slices in ../shared/data
    ("no C compiler", False),  # the Mosquitto bounds plugin is compiled at first use
    ("cannot build the Mosquitto bounds plugin", False),
    ("root may write anywhere", True),  # a file-permission check root cannot fail
    ("file modes are POSIX", True),
    ("needs an extended long double (x86)", True),  # the k = 2 engines' long double paths
    ("measured on diffprivlib 0.6.6", True),  # the dependency-floor run has an older one
    ("not a git work tree", True),  # a source tree without .git
    ("no IPv4 address besides 127.x", True),
    ("keeps the status of a caught KeyboardInterrupt anyway", True),
    ("needs root for network namespaces", False),  # tests/integration/test_netns_deployment.py
)


def in_ci() -> bool:
    """Whether this run is CI (env CI set to anything but "", 0, false, no)."""
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def skip_allowed(reason: str) -> bool:
    """Whether a skip with this reason is in ALLOWED_SKIPS (under CI, only the CI-allowed)."""
    return any(phrase in reason and (ci_too or not in_ci()) for phrase, ci_too in ALLOWED_SKIPS)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    """Report a skip outside ALLOWED_SKIPS as a failure, naming the reason."""
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    if not skip_allowed(reason):
        report.outcome = "failed"
        report.longrepr = (
            f"{reason}: a skip outside tests/conftest.py ALLOWED_SKIPS (a test that always "
            "skips checks nothing: generate only the cases that can run)"
        )


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
        if in_ci():
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
