"""`simulate --browser-clients N` is validated before anything starts: N in [0, --n], not with
--chaos, and each missing tool named in one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from shuffledp.errors import InvalidParameterError, OperationalError
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


def test_the_driver_config_is_private_and_never_replaced(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.json"
    manifest.write_text("{}", encoding="utf-8")
    tools = browser.BrowserTools(node="node", chromium="chromium", websockify="websockify")
    kwargs = dict(
        tools=tools,
        ws_url="ws://127.0.0.1:1",
        manifest=manifest,
        trusted_coordinator=bytes(32),
        round_id=2**63,
        processes=[{"name": "clients-2", "password": "secret", "values": [1, 0]}],
        accept_loss=False,
        out=tmp_path / "summary.json",
    )
    path = browser.write_config(tmp_path / "browser.json", **kwargs)  # type: ignore[arg-type]
    assert path.stat().st_mode & 0o777 == 0o600
    assert '"roundId": "9223372036854775808"' in path.read_text()  # a string: past 2^53
    with pytest.raises(FileExistsError):
        browser.write_config(path, **kwargs)  # type: ignore[arg-type]


def test_a_missing_summary_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(OperationalError, match="the browser driver wrote no summary"):
        browser.read_summary(tmp_path / "none.json", clients=3, bridge="b")


def test_browser_clients_with_hop_workers_is_refused() -> None:
    # The JavaScript client publishes to a one-process hop 0's topic, never a peeler's.
    with pytest.raises(InvalidParameterError, match="--hop-workers > 1"):
        SimulationOptions(n=100, browser_clients=10, hop_workers=2)
