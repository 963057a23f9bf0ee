"""`--broker auto` (the default of `shuffledp simulate`): Mosquitto when the binary is
installed, else the embedded broker; with a fake PATH, so nothing is started."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import shuffledp.brokers.mosquitto as mosquitto_module
from shuffledp.cli.main import build_parser
from shuffledp.simulations.pipeline.broker_choice import (
    AUTO,
    EMBEDDED,
    MOSQUITTO,
    BrokerChoice,
    resolve_broker,
)
from shuffledp.simulations.pipeline.simulate import SimulationOptions


@pytest.fixture
def fake_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty directory as the only PATH entry, and no fallback location."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(mosquitto_module, "MOSQUITTO_FALLBACKS", (str(tmp_path / "sbin/x"),))
    return bin_dir


def _install_fake_mosquitto(bin_dir: Path) -> Path:
    binary = bin_dir / "mosquitto"
    binary.write_text("#!/bin/sh\nexit 0\n")
    os.chmod(binary, 0o755)
    return binary


def test_auto_picks_mosquitto_when_the_binary_is_on_path(fake_path: Path) -> None:
    binary = _install_fake_mosquitto(fake_path)
    for value in (AUTO, None):
        choice = resolve_broker(value)
        assert choice == BrokerChoice(
            kind=MOSQUITTO, binary=str(binary), reason=f"auto: mosquitto found at {binary}"
        )


def test_auto_falls_back_to_the_embedded_broker_without_the_binary(fake_path: Path) -> None:
    (fake_path / "mosquitto").write_text("not executable")  # a file that is no binary
    choice = resolve_broker(AUTO)
    assert choice.kind == EMBEDDED and choice.binary is None
    assert "mosquitto is not installed" in choice.reason


def test_auto_uses_the_fallback_location_off_path(
    fake_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sbin = tmp_path / "sbin"
    sbin.mkdir()
    binary = _install_fake_mosquitto(sbin)
    monkeypatch.setattr(mosquitto_module, "MOSQUITTO_FALLBACKS", (str(binary),))
    assert resolve_broker(AUTO).binary == str(binary)


def test_explicit_choices_do_not_look(fake_path: Path) -> None:
    assert resolve_broker(EMBEDDED).kind == EMBEDDED
    assert resolve_broker(MOSQUITTO).kind == MOSQUITTO  # starting it says if it is missing
    url = resolve_broker("mqtt://127.0.0.1:1883")
    assert (url.kind, url.url) == ("url", "mqtt://127.0.0.1:1883")


def test_auto_is_the_default_of_simulate_and_stream() -> None:
    parser = build_parser()
    assert parser.parse_args(["simulate"]).broker == AUTO
    assert parser.parse_args(["stream", "--dataset", "synthetic"]).broker == AUTO
    assert SimulationOptions().broker is None  # None means auto (resolve_broker(None))


def test_chaos_needs_mosquitto_and_auto_says_so_without_it(fake_path: Path) -> None:
    with pytest.raises(ValueError, match="install mosquitto"):
        SimulationOptions(n=100, chaos=True)
    _install_fake_mosquitto(fake_path)
    assert SimulationOptions(n=100, chaos=True).chaos  # auto finds Mosquitto: allowed
