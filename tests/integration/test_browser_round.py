"""`shuffledp simulate --browser-clients N`: a live round where N clients run the JavaScript
client (clients/js/) in headless Chromium and the rest are Python; every report is counted
and the round log says how many came from the browser, and which browser ran them."""

from __future__ import annotations

import asyncio

import pytest

from shuffledp.cli.simulate import format_report
from shuffledp.errors import InvalidParameterError
from shuffledp.simulations.pipeline.records import RoundLog
from shuffledp.simulations.pipeline.simulate import SimulationOptions, run_simulation


def _require_tools() -> None:
    from shuffledp.simulations.pipeline.browser import find_tools

    try:
        find_tools()
    except InvalidParameterError as exc:
        pytest.skip(f"the browser round needs its tools: {exc}")


# Mosquitto (through "auto" where it is installed, as in CI) and the embedded amqtt broker:
# each enforces the accounts its own way (the embedded one also wants the account's client-id
# namespace, sdp-clients-<j>-...).
@pytest.mark.parametrize("broker", ["auto", "embedded"])
def test_a_round_with_a_hundred_clients_in_the_browser_counts_every_report(broker: str) -> None:
    _require_tools()
    options = SimulationOptions(
        n=300, k=5, eps0=2.0, hops=2, browser_clients=100, seed=27, broker=broker
    )
    log = asyncio.run(run_simulation(options))
    assert log["n_received"] == 300  # counted == sent: 200 Python reports and 100 browser ones
    assert sum(log["histogram"]) == 300
    assert not any(log["rejected"].values())
    browser = log["simulation"]["browser"]
    assert browser["clients"] == 100
    assert browser["sent"] == 100
    assert browser["processes"] == 1
    assert browser["confirmed_by_hop_0"] == 100  # hop 0's receipts (it owes them: early claim)
    assert browser["unconfirmed"] == 0
    assert "Chrome/" in browser["browser"]
    assert "libsodium-wrappers" in browser["runtime"] and "mqtt" in browser["runtime"]
    assert "HeadlessChrome" in browser["user_agent"]
    assert browser["peak_memory_bytes"] > 0
    assert log["simulation"]["client_processes"] == 3
    clients_leg = log["delivery"]["legs"][0]
    assert (clients_leg["sent"], clients_leg["counted"]) == (300, 300)
    text = format_report(RoundLog.from_json(log))  # what `shuffledp simulate` prints
    assert "browser: 100 of the 300 clients ran in headless Chrome/" in text
    assert "sent 100 reports (hop 0 confirmed 100;" in text
