"""deploy/mosquitto.conf, the configuration a user copies, is not an anonymous open broker: run
by Mosquitto (with its key directory made by `keys init` and its port moved to a free one), it
refuses an anonymous client and accepts a deployment account."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from shuffledp.brokers.mosquitto import (
    DEPLOY_KEYS,
    deploy_mosquitto_config,
    find_mosquitto,
    write_mosquitto_config,
)
from shuffledp.brokers.ports import accepts_connections, free_loopback_port
from shuffledp.protocol.mqtt import MqttConnectionError, MqttTransport
from shuffledp.security.access import init_access, load_password
from shuffledp.security.client_ids import random_client_id
from tests.conftest import require_mosquitto
from tests.paths import REPO_ROOT


def _settings(text: str) -> dict[str, list[str]]:
    return {
        line.split()[0]: line.split()[1:]
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def test_deploy_config_requires_accounts_and_loads_the_bounds_plugin() -> None:
    shipped = (REPO_ROOT / "deploy" / "mosquitto.conf").read_text()
    assert shipped == deploy_mosquitto_config()
    settings = _settings(shipped)
    assert settings["allow_anonymous"] == ["false"]
    assert settings["password_file"] == [f"{DEPLOY_KEYS}/access/passwd"]
    assert settings["acl_file"] == [f"{DEPLOY_KEYS}/access/acl"]
    assert settings["plugin"] == [f"{DEPLOY_KEYS}/access/mosquitto_bounds.so"]
    lines = shipped.splitlines()
    assert lines.index("use_username_as_clientid true") > lines.index("listener 1883 127.0.0.1")


def test_only_the_open_test_configuration_is_labelled_for_tests(tmp_path: Path) -> None:
    init_access(tmp_path / "keys", hops=1, client_processes=1, prefix="label-test")
    secured = write_mosquitto_config(tmp_path, 1999, access_dir=tmp_path / "keys" / "access")
    text = secured.read_text()
    assert "FOR TESTS ONLY" not in text and _settings(text)["allow_anonymous"] == ["false"]
    open_text = write_mosquitto_config(tmp_path, 1999).read_text()
    assert open_text.startswith("# FOR TESTS ONLY") and "allow_anonymous true\n" in open_text


@pytest.mark.integration
@pytest.mark.asyncio
async def test_deploy_config_refuses_anonymous_clients(tmp_path: Path) -> None:
    require_mosquitto()
    binary = find_mosquitto()
    assert binary is not None
    keys = tmp_path / "keys"
    init_access(keys, hops=3, client_processes=1, prefix="deploy-test")
    port = free_loopback_port()
    text = deploy_mosquitto_config(str(keys)).replace("listener 1883 ", f"listener {port} ")
    if not (keys / "access" / "mosquitto_bounds.so").is_file():  # no compiler: said by keys init
        text = "\n".join(line for line in text.splitlines() if not line.startswith("plugin"))
    config = tmp_path / "mosquitto.conf"
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # else it drops to the mosquitto user
        text += "\nuser root\n"  # who cannot read the 0600 passwd and acl files
    config.write_text(text)
    url = f"mqtt://127.0.0.1:{port}"
    with (tmp_path / "mosquitto.log").open("w") as log:
        broker = subprocess.Popen([binary, "-c", str(config)], stderr=log)
    try:
        for _ in range(100):
            if accepts_connections("127.0.0.1", port):
                break
            await asyncio.sleep(0.1)
        with pytest.raises(MqttConnectionError, match="anonymously"):
            async with MqttTransport(url, client_id="anonymous-probe"):
                pass
        async with MqttTransport(  # the positive control: an account of its key directory
            url,
            client_id=random_client_id("hop-0"),
            username="hop-0",
            password=load_password(keys, "hop-0"),
        ) as hop0:
            await hop0.publish("deploy-test/round/1/status/hop-0", b'{"state": "ready"}')
    finally:
        broker.terminate()
        broker.wait(10)
