"""A round you can trust end to end, with plain command lines and one Mosquitto configured by
`shuffledp keys init` (the fault bench's harness, simulations/faults/harness.py): the
analyzer rerun after the round leaves the published report as it was and exits 6 with one line.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from shuffledp.protocol.delivery import EXIT_PUBLISHED
from shuffledp.protocol.mqtt import MqttTransport
from shuffledp.protocol.topics import report_topic
from shuffledp.security.access import load_password
from shuffledp.security.client_ids import random_client_id
from shuffledp.simulations.faults.harness import FaultRound, RoundSpec
from tests.conftest import require_mosquitto

N = 300


async def retained_report(r: FaultRound) -> dict[str, Any]:
    """The round's retained report, read as the monitor."""
    async with MqttTransport(
        r.url,
        client_id=random_client_id("monitor"),
        username="monitor",
        password=load_password(r.keys, "monitor"),
    ) as monitor:
        await monitor.subscribe(report_topic(r.prefix, r.spec.round_id))
        async with asyncio.timeout(5):
            message = await anext(monitor.messages())
    report: dict[str, Any] = json.loads(message.payload)
    return report


@pytest.mark.integration
@pytest.mark.asyncio
async def test_an_analyzer_rerun_never_replaces_the_published_report(tmp_path: Path) -> None:
    require_mosquitto()
    spec = RoundSpec(n=N, deadline=12.0, client_processes=1)
    async with FaultRound(spec, tmp_path, broker="keys-init", clients_per_process=None) as r:
        await r.start_round()
        outcome = await r.finish()
        assert outcome.exit_status == 0, outcome
        assert outcome.report is not None and outcome.report["n_received"] == N
        before = await retained_report(r)
        rerun = await r.restart("analyzer")  # the same arguments, after the round
        async with asyncio.timeout(30):  # it refuses at once, not after its 12 s deadline
            await rerun.process.wait()
        assert rerun.returncode == EXIT_PUBLISHED
        err = rerun.stderr.read_text().strip().splitlines()
        (line,) = [text for text in err if text.startswith("shuffledp analyzer:")]
        assert line.startswith(
            f"shuffledp analyzer: error: round 1 already has a published report ({N} of {N} "
            f"received); this run derived another (0 of {N} received, refused)"
        )
        assert not rerun.stdout.read_text().strip()  # no report printed: none published
        after = await retained_report(r)
        assert after == before and after["n_received"] == N
