"""The fault bench's round-trust scenarios (issue 23's table): a stage started with a flag that
contradicts the round manifest, frames forged on a hop's input, a leaked client process key
reporting for an id it does not host. Each runs as an operator would, on a
:class:`~shuffledp.simulations.faults.harness.FaultRound`, and returns its notes; the runner
judges the round by its counts (every genuine report counted once, nothing lost).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
from typing import Any

from nacl.signing import SigningKey

from shuffledp.protocol.end_statement import EndStatement
from shuffledp.protocol.frames import FrameSigner, encode_batch, encode_end
from shuffledp.protocol.mqtt import MqttTransport
from shuffledp.protocol.onion import message_length
from shuffledp.protocol.runtime import decode_json
from shuffledp.protocol.topics import ingress_topic, report_topic, status_topic
from shuffledp.security.access import load_password
from shuffledp.security.manifests import load_round_manifest
from shuffledp.simulations.faults.attacks import fill_round
from shuffledp.simulations.faults.harness import FaultRound

__all__ = [
    "attack_before_clients",
    "broker_kill9",
    "extra_report",
    "forged_frames",
    "forged_left",
    "monitor_forge",
    "rerun_analyzer",
    "second_stage",
    "wrong_flags",
]

Notes = dict[str, Any]

WRONG_FLAGS: dict[str, tuple[str, ...]] = {
    "hop-1": ("--expected", "{short}"),
    "analyzer": ("--k", "10"),
}
"""The wrong starts (issue 23's rows 1-3): hop 1 with --expected below the round's n, the
analyzer with --k 10 for 15 values, then with --eps0 1 for clients that use 4."""


def _login(r: FaultRound, identity: str) -> MqttTransport:
    """A connection of the round's broker under ``identity``'s account (an attacker holding
    it), with a fresh client id of that identity's namespace."""
    return MqttTransport(
        r.url,
        client_id=f"sdp-{identity}-{secrets.token_hex(8)}",
        username=identity,
        password=load_password(r.keys, identity),
    )


async def _refused_start(r: FaultRound, name: str, args: list[str]) -> str | None:
    """Start ``name`` with ``args`` and wait for it to refuse: its one line, or None if it did
    not exit with status 2 within 30 s (it is then killed)."""
    component = await r.start(name, args)
    try:
        await asyncio.wait_for(component.process.wait(), 30)
    except TimeoutError:
        await r.kill(name)
        return None
    component.killed_by_bench = True  # its refusal is the scenario's point, not a failure
    return component.last_line() if component.returncode == 2 else None


async def wrong_flags(r: FaultRound, quick: bool) -> Notes:
    """Hop 1 started with --expected n * 3/4, the analyzer with --k 10 and then with --eps0 1:
    each must refuse to start in one line naming the field; then the round runs with the right
    processes and every report is counted."""
    short = str(r.spec.n * 3 // 4)
    starts = [
        ("hop-1", ["hop", *r.common(), "--index", "1", "--expected", short]),
        ("analyzer", ["analyzer", *r.common(), "--k", "10"]),
        ("analyzer", ["analyzer", *r.common(), "--eps0", "1"]),
    ]
    refusals = [await _refused_start(r, name, args) for name, args in starts]
    await r.start_round()
    fields = ("expected", "k", "eps0")
    named = all(
        line is not None and f"contradicts the manifest's {field} =" in line
        for line, field in zip(refusals, fields, strict=True)
    )
    return {"injected": named, "refused_at_start": refusals}


async def forged_frames(r: FaultRound, quick: bool) -> Notes:
    """With hop 0's broker account and a signing key of its own, before hop 0 starts: an END
    frame announcing three quarters of the batch and a garbage data frame 0 on hop 1's
    input. Both must be refused (forged-end, forged-frame) and the real batch counted."""
    await r.start_analyzer()
    for index in range(r.spec.hops - 1, 0, -1):
        await r.start_hop(index)
    await r.until(lambda: r.state("hop-1") == "ready", "hop-1 to be ready", r.spec.deadline)
    published = await _publish_forgeries(r, r.spec.n * 3 // 4)
    await r.start_hop(0)
    for index in range(r.spec.client_processes):
        await r.start_clients(index)
    return {"injected": published == 2, "forged_frames_published": published}


async def _publish_forgeries(r: FaultRound, short: int) -> int:
    manifest = load_round_manifest(r.manifest, r.keys)
    item = message_length(1, manifest.n_hops)
    stranger = FrameSigner(
        manifest_digest=manifest.digest,
        round_id=r.spec.round_id,
        sender=0,
        signing_key=SigningKey.generate(),
    )
    log = {"accepted": short, "forwarded": short, "rejected": {}}
    statement = EndStatement(
        stage="hop-0", accepted=short, forwarded=short, frames=1, rejected={}, aborted=None,
        upstream_end=None, stages={"hop-0": log},
    )  # fmt: skip
    frames = [
        encode_end(signer=stranger, item_length=item, statement=statement),
        encode_batch([os.urandom(item) for _ in range(short)], signer=stranger, item_length=item)[
            0
        ],
    ]
    async with _login(r, "hop-0") as transport:
        for frame in frames:
            await transport.publish(ingress_topic(r.prefix, r.spec.round_id, 1), frame)
    return len(frames)


async def attack_before_clients(
    r: FaultRound, *, process: int, first_client: int, count: int
) -> int:
    """Start the analyzer and the hops, and once hop 0 is ready publish ``count`` authentic
    reports with client process ``process``'s key for its ids from ``first_client`` on (before
    any genuine client process starts); returns how many the broker acknowledged."""
    spec = r.spec
    await r.start_round(clients=False)
    await r.until(lambda: r.state("hop-0") == "ready", "hop-0 to be ready", spec.deadline)
    return await fill_round(
        r.url,
        r.keys,
        prefix=r.prefix,
        round_id=spec.round_id,
        k=spec.k,
        eps0=spec.eps0,
        process=process,
        first_client=first_client,
        count=count,
        manifest_digest=load_round_manifest(r.manifest, r.keys).digest,
    )


async def extra_report(r: FaultRound, quick: bool) -> Notes:
    """The key of the last client process, before the genuine ones start, reports for the one
    id past the clients it hosts (each process used to be enrolled for ceil(n / C) ids, so at
    odd n that id was enrolled and pushed an honest report out as batch-full)."""
    spec = r.spec
    process = spec.client_processes - 1
    published = await attack_before_clients(
        r, process=process, first_client=spec.counts()[process], count=1
    )
    for index in range(spec.client_processes):
        await r.start_clients(index)
    return {"injected": published == 1, "attack_published": published}


async def _wait_exit(r: FaultRound, name: str, seconds: float) -> tuple[int | None, str]:
    """(exit status, last line) of component ``name`` within ``seconds`` (None: still running,
    then killed)."""
    component = r.components[name]
    try:
        await asyncio.wait_for(component.process.wait(), seconds)
    except TimeoutError:
        await r.kill(name)
        return None, ""
    component.killed_by_bench = True  # its exit is what the scenario measures
    return component.returncode, component.last_line()


async def second_stage(r: FaultRound, quick: bool) -> Notes:
    """Once the round runs, a second hop 0 and a second analyzer start with the same arguments
    (the same identities): each must exit with one line on its own (it used to take the
    connection over and back forever), and the round must count every report."""
    await r.start_round(paced=True)
    await r.until(lambda: r.accepted("hop-0") > 0, "hop-0 to accept", r.spec.deadline)
    outcomes: dict[str, Any] = {}
    for stage in ("hop-0", "analyzer"):
        name = f"{stage}-second"
        await r.start(name, r.components[stage].args)
        status, line = await _wait_exit(r, name, 30)
        outcomes[name] = {"exit": status, "line": line}
    ok = all(o["exit"] not in (None, 0) and o["line"] for o in outcomes.values())
    return {"injected": ok, "second_processes": outcomes}


async def monitor_forge(r: FaultRound, quick: bool) -> Notes:
    """Before the round, the monitor account publishes a retained fake report (n_received 1)
    and a fake `done` status of hop 1: with the read-only monitor neither may reach anyone (a
    retained fake report would stop the analyzer from publishing the real one)."""
    fake = json.dumps({"round": r.spec.round_id, "n_received": 1, "forged": True}).encode()
    status = json.dumps({"stage": "hop-1", "state": "done", "forged": True}).encode()
    async with _login(r, "monitor") as transport:
        with contextlib.suppress(Exception):  # Mosquitto may cut the publisher off: the point
            await transport.publish(report_topic(r.prefix, r.spec.round_id), fake, retain=True)
            await transport.publish(
                status_topic(r.prefix, r.spec.round_id, "hop-1"), status, retain=True
            )
    await r.start_round()
    return {"injected": True, "forged": ["report", "status/hop-1"]}


async def retained_report(r: FaultRound) -> dict[str, Any] | None:
    """The report retained on the round's report topic (read as the monitor), or None."""
    async with _login(r, "monitor") as transport:
        await transport.subscribe(report_topic(r.prefix, r.spec.round_id))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(3):
                async for message in transport.messages():
                    body = decode_json(message.payload)
                    return body if isinstance(body, dict) else None
    return None


async def forged_left(r: FaultRound) -> Notes:
    """After `monitor-forge`: the retained report must be the analyzer's."""
    report = await retained_report(r)
    genuine = report is not None and not report.get("forged")
    return {"retained_report_genuine": genuine, "injected": genuine}


async def rerun_analyzer(r: FaultRound) -> Notes:
    """After the round: the analyzer run again with the same arguments must not replace the
    published report (it used to publish an error with 0 received over it): it refuses in one
    line, or re-derives the identical report; the retained report still counts n."""
    await r.start("analyzer-rerun", r.components["analyzer"].args)
    status, line = await _wait_exit(r, "analyzer-rerun", 60)
    report = await retained_report(r)
    kept = report is not None and report.get("n_received") == r.spec.n
    return {
        "rerun_exit": status,
        "rerun_line": line,
        "retained_n_received": None if report is None else report.get("n_received"),
        "injected": kept and status is not None,
    }


async def broker_kill9(r: FaultRound, quick: bool) -> Notes:
    """Every component with --reconnect 30; once hop 0 has forwarded its batch (status
    `done`), the broker is killed with SIGKILL (its sessions, queues and retained statuses
    gone) and started again. Hop 1 must not trust hop 2's `ready` from before the crash: it
    waits for a new one. Every report counted, or a loss that names the leg where it happened."""
    again = ("--reconnect", "30")
    await r.start_round(hop_args=again, analyzer_args=again, client_args=again)
    await r.until(lambda: r.state("hop-0") == "done", "hop-0 to forward", r.spec.deadline)
    assert r.broker is not None
    await asyncio.to_thread(r.broker.kill)
    await asyncio.sleep(0.3)
    await asyncio.to_thread(r.broker.start)
    return {"injected": True, "killed_after": "hop-0 done"}
