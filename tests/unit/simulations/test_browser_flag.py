"""`simulate --browser-clients N` is validated before anything starts: N in [0, --n], not with
--chaos, and each missing tool named in one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from shuffledp.errors import InvalidParameterError
from shuffledp.simulations.pipeline import browser
from shuffledp.simulations.pipeline.simulate import SimulationOptions


def test_more_browser_clients_than_n_is_refused() -> None:
    with pytest.raises(InvalidParameterError, match=r"--browser-clients must be in \[0, --n\]"):
        SimulationOptions(n=100, browser_clients=101)


def test_negative_browser_clients_is_refused() -> None:
    with pytest.raises(InvalidParameterError, match="--browser-clients"):
        SimulationOptions(n=100, browser_clients=-1)


@pytest.mark.parametrize("missing", ["node", "chromium", "websockify"])
def test_a_missing_tool_is_named(monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    real = shutil.which
    monkeypatch.setattr(
        shutil, "which", lambda name: None if name == missing else real(name) or name
    )
    with pytest.raises(InvalidParameterError, match=f"--browser-clients needs {missing} on PATH"):
        SimulationOptions(n=100, browser_clients=10)


def test_missing_npm_packages_say_npm_ci(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(browser, "JS_DIR", tmp_path)
    with pytest.raises(InvalidParameterError, match="run `npm ci` there"):
        SimulationOptions(n=100, browser_clients=10)


def test_zero_browser_clients_needs_no_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert SimulationOptions(n=100, browser_clients=0).total_client_processes == 2
