"""A round you can trust end to end, with plain command lines and one Mosquitto configured by
`shuffledp keys init` (the fault bench's harness, simulations/faults/harness.py): the
analyzer rerun after the round leaves the published report as it was and exits 6 with one line;
a second hop 0 or analyzer exits with one line and the round goes on; two connections of one
stage account from "two machines" end with one stopping.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from shuffledp.brokers.mosquitto import MosquittoBroker
from shuffledp.protocol.delivery import EXIT_PUBLISHED
from shuffledp.protocol.mqtt import (
    TAKEOVER_LIMIT,
    TAKEOVER_WINDOW,
    IdentityInUseError,
    MqttTransport,
)
from shuffledp.protocol.topics import report_topic
from shuffledp.security.access import init_access, load_password
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


@pytest.mark.integration
@pytest.mark.asyncio
async def test_a_second_process_with_a_stage_identity_exits_with_one_line(tmp_path: Path) -> None:
    """A second hop 0 and a second analyzer, started with the same arguments while the round's
    processes wait for their clients: each exits with status 1 and one line naming its
    account, and the round then completes with the first ones, every report counted."""
    require_mosquitto()
    spec = RoundSpec(n=N, deadline=20.0, client_processes=1)
    async with FaultRound(spec, tmp_path, broker="keys-init", clients_per_process=None) as r:
        await r.start_round(clients=False)
        await r.until(lambda: r.state("hop-0") == "ready", "hop 0 ready", 30)
        await r.until(lambda: r.state("analyzer") == "ready", "the analyzer ready", 30)
        seconds = {}
        for stage in ("hop-0", "analyzer"):
            second = await r.start(f"{stage}-again", r.components[stage].args)
            async with asyncio.timeout(30):
                await second.process.wait()
            seconds[stage] = second
        for stage, second in seconds.items():
            assert second.returncode == 1, second.stderr.read_text()
            own = [t for t in second.stderr.read_text().splitlines() if t.startswith("shuffledp")]
            assert own == [own[0]] and own[0].startswith(
                f"shuffledp {stage.split('-')[0]}: error: another process on this machine is "
                f"connected to {r.url} as user {stage!r} with this client id (lock "
            ), own
            assert "Traceback" not in second.stderr.read_text()
            assert r.components[stage].returncode is None  # the first one runs on
        assert r.components["hop-0"].stderr.read_text().count("reconnecting") == 0  # untouched
        await r.start_clients(0)
        outcome = await r.finish()
    assert outcome.exit_status == 0, outcome
    assert outcome.report is not None and outcome.report["n_received"] == N
    assert outcome.other_exits == {"hop-0-again": 1, "analyzer-again": 1}, outcome  # ours only


@pytest.mark.integration
@pytest.mark.asyncio
async def test_two_connections_of_one_stage_account_end_with_one_stopping(tmp_path: Path) -> None:
    """As from two machines (no shared lock: two client ids), two exclusive connections as
    hop-0 on a Mosquitto that ties ids to accounts take the connection from each other; within
    TAKEOVER_LIMIT takeovers one stops with IdentityInUseError naming the account, and the
    other keeps a working connection. A plain (non-exclusive) transport would take it back
    forever (tests/integration/test_access_brokers.py)."""
    require_mosquitto()
    init_access(tmp_path, hops=1, client_processes=1, prefix="takeover")
    topic = "takeover/round/1/hop/0"

    def hop0() -> MqttTransport:
        return MqttTransport(
            broker.url,
            client_id=random_client_id("hop-0"),
            username="hop-0",
            password=load_password(tmp_path, "hop-0"),
            persistent_session=True,
            reconnect_timeout=20,
            exclusive=True,
        )

    async def hold(transport: MqttTransport) -> None:
        await transport.subscribe(topic)
        async for _ in transport.messages():
            pass

    async with (
        MosquittoBroker(access_dir=tmp_path / "access") as broker,
        hop0() as first,
        hop0() as second,
    ):
        tasks = [asyncio.create_task(hold(t)) for t in (first, second)]
        done, _ = await asyncio.wait(tasks, timeout=30, return_when=asyncio.FIRST_COMPLETED)
        assert len(done) == 1, "neither stopped within 30 s"
        (stopped,) = done
        with pytest.raises(IdentityInUseError) as raised:
            stopped.result()
        line = str(raised.value)
        assert "\n" not in line and line.startswith(
            f"another process is connected to {broker.url} as user 'hop-0' (this connection "
            f"was taken over {TAKEOVER_LIMIT} times in {TAKEOVER_WINDOW:g} s)"
        )
        running = tasks[1 - tasks.index(stopped)]
        loser, survivor = (first, second) if stopped is tasks[0] else (second, first)
        await asyncio.sleep(1.0)
        assert not running.done()  # still connected: it was not taken over again
        with pytest.raises(IdentityInUseError):  # the stopped one never reconnects
            await loser.publish(topic, b"x")
        await survivor.publish(topic, b"still here")
        running.cancel()
