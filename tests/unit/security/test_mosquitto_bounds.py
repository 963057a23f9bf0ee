"""The Mosquitto bounds plugin's build and configuration lines (shuffledp/security/
mosquitto_bounds.py): never silent when it cannot be built."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from shuffledp.brokers.mosquitto import write_mosquitto_config
from shuffledp.protocol.topics import retains_status
from shuffledp.security import mosquitto_bounds
from shuffledp.security.access import init_access
from shuffledp.security.mosquitto_bounds import (
    STAGE_ACCOUNTS,
    PluginBuild,
    bounds_settings,
    build_bounds_plugin,
)


def test_no_compiler_is_a_reason_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    build = build_bounds_plugin()
    assert build.path is None
    assert "no C compiler" in build.reason
    assert "NOT enforced" in build.description and "no C compiler" in build.description


def test_missing_headers_name_the_package(tmp_path: Path) -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    build = build_bounds_plugin(include_dirs=(str(tmp_path),), cache=tmp_path / "cache")
    assert build.path is None
    assert "mosquitto_plugin.h" in build.reason and "mosquitto-dev" in build.reason


def test_a_failed_compilation_is_reported_and_leaves_no_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    headers = tmp_path / "include"
    headers.mkdir()
    for name in mosquitto_bounds.HEADERS:
        (headers / name).write_text("/* empty */\n")
    broken = tmp_path / "broken.c"
    broken.write_text("this is not C;\n")
    monkeypatch.setattr(mosquitto_bounds, "SOURCE", broken)
    build = build_bounds_plugin(include_dirs=(str(headers),), cache=tmp_path / "cache")
    assert build.path is None and "failed to compile broken.c" in build.reason
    assert not list((tmp_path / "cache").rglob("*.so"))


def test_without_the_plugin_the_config_says_what_is_not_enforced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    init_access(tmp_path, hops=1, client_processes=1, prefix="p")
    missing = PluginBuild(None, "no C compiler: cc or gcc not found (apt-get install gcc)")
    with caplog.at_level(logging.WARNING, logger="shuffledp.brokers"):
        path = write_mosquitto_config(
            tmp_path, 1883, access_dir=tmp_path / "access", bounds_plugin=missing
        )
    text = path.read_text()
    assert "\nplugin " not in text and "plugin_opt_" not in text
    assert "NOT loaded" in text and "# no C compiler: cc or gcc not found" in text
    assert "NOT enforced" in caplog.text and "no C compiler" in caplog.text
    assert "max_packet_size 4194304" in text  # the global bound stays


def test_with_the_plugin_the_config_loads_it_with_the_client_bound(tmp_path: Path) -> None:
    library = tmp_path / "lib.so"
    text = bounds_settings(16384, PluginBuild(library))
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines == [
        f"plugin {library}",
        "plugin_opt_client_payload_bytes 16384",
        f"plugin_opt_stage_accounts {STAGE_ACCOUNTS}",
    ]


def test_only_client_processes_publish_their_status_unretained() -> None:
    assert not retains_status("clients-0") and not retains_status("clients-12")
    assert retains_status("hop-0") and retains_status("analyzer") and retains_status("monitor")
    assert retains_status("clients-x")  # not a client account's name
