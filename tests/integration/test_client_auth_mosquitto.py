"""A whole authenticated round on Mosquitto, from an existing key directory: `keys init` and
`simulate --keys` as processes (envelopes, hop 0's checks and in-memory rounds:
tests/unit/protocol/test_client_auth.py)."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from shuffledp.brokers.mosquitto import MosquittoBroker
from tests.conftest import require_mosquitto
from tests.unit.test_services_memory import nonzero


def _shuffledp(*args: str) -> list[str]:
    return [sys.executable, "-m", "shuffledp", *args]


@pytest.mark.integration
def test_simulate_with_an_existing_key_directory_on_mosquitto_with_accounts(
    tmp_path: Path,
) -> None:
    """`keys init` + Mosquitto enforcing that directory's accounts and ACL + `simulate --keys`:
    every component logs in with its own account, every report is authenticated, none lost."""
    require_mosquitto()
    keys = tmp_path / "keys"
    prefix = f"test/auth-{secrets.token_hex(4)}"
    init = subprocess.run(
        _shuffledp(
            "keys",
            "init",
            str(keys),
            "--hops",
            "2",
            "--clients",
            "2",
            "--clients-per-process",
            "150",
            "--prefix",
            prefix,
        ),
        capture_output=True,
        text=True,
        check=False,
    )
    assert init.returncode == 0, init.stderr
    with MosquittoBroker(access_dir=keys / "access") as broker:

        def simulate(n: int, *extra: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                _shuffledp(
                    "simulate", "--keys", str(keys), "--broker", broker.url, "--n", str(n),
                    "--k", "4", "--json", "--quiet", *extra,
                ),
                capture_output=True, text=True, timeout=180, check=False,
            )  # fmt: skip

        done = simulate(300, "--seed", "3")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["n_received"] == 300
        assert nonzero(report["rejected"]) == {}
        assert report["stages"]["hop-0"]["clients_authenticated"] is True
        assert report["simulation"]["keys"] == str(keys)
        assert report["simulation"]["topic_prefix"] == prefix
        assert report["simulation"]["n_hops"] == 2  # from the key directory
        assert report["round"] != 1  # a fresh random round id under an existing directory

        # The enrolment is each round's manifest's, exactly the clients each process hosts
        # (151 + 150 here), whatever access.json's --clients-per-process says.
        done = simulate(301, "--seed", "4")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["n_received"] == 301
