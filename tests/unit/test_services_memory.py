"""Whole rounds of the services (run_clients, run_hop, run_analyzer) over the in-memory broker.

Each stage gets its own ``broker.connect()`` and all run concurrently in one TaskGroup, as the
processes of a deployment would on one MQTT broker. What is checked:
- a clean round counts every report exactly once (the analyzer's histogram is exactly the
  histogram of the clients' seeded k-RR draws), whatever order the stages start in (the ready
  handshake);
- junk injected at hop 0 is rejected and counted by reason, exactly;
- crashed clients: hop 0 closes at its deadline, the guarantee is computed for the reports that
  arrived;
- below the minimum batch hop 0 refuses, and every later stage stops at once (aborted END);
- a message of another round is counted wrong-round by the analyzer;
- clients and hops give up (NotReadyError) when their downstream never becomes ready, and send
  nothing; clients check their values before sending anything; settings are validated.

k-RR and permutations are seeded (SeededRandom): no test here is statistical.
"""

from __future__ import annotations

import asyncio
import json
import struct
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from shuffledp.accountant import ShuffledKRR, Tight, eps_for_delta
from shuffledp.analyzer.service import AnalyzerSettings, run_analyzer
from shuffledp.clients.client import make_client_messages
from shuffledp.clients.krr import krr_randomize
from shuffledp.clients.service import ClientSettings, run_clients
from shuffledp.errors import InvalidParameterError
from shuffledp.protocol import REJECTION_REASONS, generate_keypair, message_length
from shuffledp.protocol.client_auth import ClientVerifier
from shuffledp.protocol.runtime import NotReadyError, decode_json, publish_state
from shuffledp.protocol.topics import (
    analyzer_topic,
    ingress_topic,
    report_topic,
    status_topic,
)
from shuffledp.protocol.transport import MemoryBroker, MemoryTransport, Message, publish_all
from shuffledp.randomness import SeededRandom
from shuffledp.shuffler.hop import HOP_REJECTION_REASONS
from shuffledp.shuffler.service import HopResult, HopSettings, run_hop
from tests.binding import (
    HOP_SIGNING_KEYS,
    MANIFEST_DIGEST,
    analyzer_binding,
    hop_binding,
    hop_verify_keys,
)


@pytest.fixture(autouse=True)
def short_drain(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stages past their deadline wait DRAIN_QUIET seconds without input before closing; 0.2 s
    instead of 1 s keeps these whole rounds fast (what is tested does not depend on its length;
    tests/unit/protocol/test_stage.py tests the drain itself)."""
    monkeypatch.setattr("shuffledp.protocol.stage.DRAIN_QUIET", 0.2)


PREFIX = "test/sdp"
K = 5
EPS0 = 2.0
H = 3
HOPS = [generate_keypair() for _ in range(H)]
ANALYZER = generate_keypair()
HOP_PUBLIC = [kp.public for kp in HOPS]
LONG = 30.0  # a deadline no test waits for: a stage that hits it has failed to stop promptly


def values_for(n: int) -> npt.NDArray[np.int64]:
    return (np.arange(n) * 7 % K).astype(np.int64)


def expected_histogram(values: npt.NDArray[np.int64], seed: int) -> list[int]:
    """The histogram of the k-RR reports clients seeded with ``seed`` draw (one draw per value,
    in order, as make_client_messages does for up to 1,000 values)."""
    reports = krr_randomize(values, K, EPS0, SeededRandom(seed))
    return [int(c) for c in np.bincount(reports, minlength=K)]


def eps_at(n: int) -> float:
    return float(eps_for_delta(Tight(), ShuffledKRR(n=n, k=K, eps0=EPS0), 1e-6).eps)


# --- running stages ---------------------------------------------------------------------------


@dataclass(slots=True)
class Outcome:
    results: dict[str, Any] = field(default_factory=dict)
    finished: dict[str, float] = field(default_factory=dict)  # seconds after the first start

    @property
    def report(self) -> dict[str, Any]:
        report: dict[str, Any] = self.results["analyzer"]
        return report

    def hop(self, index: int) -> HopResult:
        result: HopResult = self.results[f"hop-{index}"]
        return result


async def start_in_order(
    stages: dict[str, Coroutine[Any, Any, Any]], order: list[str], *, gap: float = 0.0
) -> Outcome:
    """Run every stage concurrently, starting them in ``order`` with ``gap`` seconds between."""
    assert sorted(order) == sorted(stages)
    outcome = Outcome()
    started = time.monotonic()

    async def run(name: str, stage: Coroutine[Any, Any, Any]) -> None:
        outcome.results[name] = await stage
        outcome.finished[name] = time.monotonic() - started

    pending = dict(stages)
    try:
        async with asyncio.TaskGroup() as group:
            for position, name in enumerate(order):
                if position and gap:
                    await asyncio.sleep(gap)
                group.create_task(run(name, pending.pop(name)), name=name)
    finally:
        for stage in pending.values():  # not started because another stage failed
            stage.close()
    return outcome


def hop_settings(
    index: int,
    *,
    round_id: int,
    expected_size: int,
    min_batch: int = 1,
    deadline: float = LONG,
    ready_timeout: float = LONG,
    n_hops: int = H,
    accept_loss: bool = False,
) -> HopSettings:
    return HopSettings(
        prefix=PREFIX,
        round_id=round_id,
        hop_index=index,
        n_hops=n_hops,
        expected_size=expected_size,
        min_batch=min_batch,
        deadline=deadline,
        ready_timeout=ready_timeout,
        accept_loss=accept_loss,
        **hop_binding(index),
    )


def pipeline(
    broker: MemoryBroker,
    *,
    round_id: int,
    expected_size: int,
    hop0_min_batch: int = 1,
    hop0_deadline: float = LONG,
    hop_seed: int = 100,
    accept_loss: bool = False,
    hop0_verifier: ClientVerifier | None = None,
) -> dict[str, Coroutine[Any, Any, Any]]:
    """The H hops and the analyzer of a round, each on its own connection (``accept_loss``:
    every stage publishes a smaller round knowingly; ``hop0_verifier``: hop 0 checks client
    authenticators)."""
    stages: dict[str, Coroutine[Any, Any, Any]] = {}
    for index in range(H):
        settings = hop_settings(
            index,
            round_id=round_id,
            expected_size=expected_size,
            min_batch=hop0_min_batch if index == 0 else 1,
            deadline=hop0_deadline if index == 0 else LONG,
            accept_loss=accept_loss,
        )
        stages[f"hop-{index}"] = run_hop(
            broker.connect(),
            settings,
            HOPS[index].private,
            rng=SeededRandom(hop_seed + index),
            verifier=hop0_verifier if index == 0 else None,
        )
    analyzer = AnalyzerSettings(
        prefix=PREFIX,
        round_id=round_id,
        k=K,
        eps0=EPS0,
        n_hops=H,
        n_expected=expected_size,
        deadline=LONG,
        accept_loss=accept_loss,
        **analyzer_binding(H),
    )
    stages["analyzer"] = run_analyzer(broker.connect(), analyzer, ANALYZER.private)
    return stages


def clients(
    broker: MemoryBroker,
    values: npt.NDArray[np.int64],
    *,
    round_id: int,
    seed: int,
    ready_timeout: float = LONG,
) -> Coroutine[Any, Any, dict[str, Any]]:
    settings = ClientSettings(
        prefix=PREFIX,
        round_id=round_id,
        k=K,
        eps0=EPS0,
        ready_timeout=ready_timeout,
        manifest_digest=MANIFEST_DIGEST,
    )
    return run_clients(
        broker.connect(),
        settings,
        values,
        hop_public_keys=HOP_PUBLIC,
        analyzer_public_key=ANALYZER.public,
        rng=SeededRandom(seed),
    )


async def wait_ready(transport: MemoryTransport, round_id: int, stage: str) -> None:
    """Return once ``stage`` announced ready (as run_clients waits for hop 0)."""
    topic = status_topic(PREFIX, round_id, stage)
    await transport.subscribe(topic)
    async with asyncio.timeout(10):
        async for message in transport.messages():
            body = decode_json(message.payload)
            if message.topic == topic and body is not None and body.get("state") == "ready":
                return


async def publisher(broker: MemoryBroker, round_id: int, topic: str, payloads: list[bytes]) -> int:
    """Wait for hop 0 of ``round_id``, then publish ``payloads`` to ``topic`` in order."""
    transport = broker.connect()
    await wait_ready(transport, round_id, "hop-0")
    return await publish_all(transport, ((topic, p) for p in payloads), max_in_flight=16)


async def spy(broker: MemoryBroker) -> MemoryTransport:
    """A connection that receives everything published from now on."""
    transport = broker.connect()
    await transport.subscribe("#")
    return transport


def received(transport: MemoryTransport) -> list[Message]:
    out: list[Message] = []
    while not transport._queue.empty():
        out.append(transport._queue.get_nowait())
    return out


async def status_watch(broker: MemoryBroker, round_id: int) -> MemoryTransport:
    """A connection that sees every stage's status messages from now on."""
    transport = broker.connect()
    await transport.subscribe(status_topic(PREFIX, round_id, "+"))
    return transport


async def final_states(watch: MemoryTransport, round_id: int) -> dict[str, dict[str, Any]]:
    """Every stage's last status (its body) as ``watch`` saw it. Checks on the way that every
    stage cleared its retained status when it ended (an empty payload last, and nothing
    retained for a late subscriber): no stale 'ready' is left on the broker."""
    history: dict[str, list[dict[str, Any] | None]] = {}
    for message in received(watch):
        body = decode_json(message.payload) if message.payload else None
        assert message.payload == b"" or body is not None
        history.setdefault(message.topic.rsplit("/", 1)[1], []).append(body)
    states: dict[str, dict[str, Any]] = {}
    for stage, bodies in history.items():
        assert bodies[-1] is None, f"{stage} did not clear its status: {bodies}"
        last = [body for body in bodies if body is not None][-1]
        states[stage] = last
    late = watch._broker.connect()
    await late.subscribe(status_topic(PREFIX, round_id, "+"))
    assert received(late) == []
    return states


def nonzero(counts: dict[str, int]) -> dict[str, int]:
    return {reason: count for reason, count in counts.items() if count}


# --- a clean round, any start order -----------------------------------------------------------

N = 600
CLIENT_SEED = 20260101


async def clean_round(
    order: list[str], round_id: int
) -> tuple[Outcome, MemoryBroker, MemoryTransport]:
    broker = MemoryBroker()
    watch = await status_watch(broker, round_id)
    values = values_for(N)
    stages = pipeline(broker, round_id=round_id, expected_size=N)
    stages["clients"] = clients(broker, values, round_id=round_id, seed=CLIENT_SEED)
    return await start_in_order(stages, order, gap=0.05), broker, watch


@pytest.mark.slow
@pytest.mark.asyncio
async def test_clean_round_counts_every_report_once_in_any_start_order() -> None:
    downstream_first = ["analyzer", "hop-2", "hop-1", "hop-0", "clients"]
    clients_first = ["clients", "hop-0", "hop-1", "hop-2", "analyzer"]
    expected = expected_histogram(values_for(N), CLIENT_SEED)
    reports = []
    for round_id, order in enumerate([downstream_first, clients_first], start=1):
        outcome, broker, watch = await clean_round(order, round_id)
        report = outcome.report
        reports.append(report)
        assert outcome.results["clients"]["sent"] == N
        assert report["n_received"] == N == sum(report["histogram"])
        assert report["histogram"] == expected  # exactly the clients' draws: none lost or doubled
        assert report["n_expected"] == N
        assert nonzero(report["rejected"]) == {}
        assert set(HOP_REJECTION_REASONS) | set(REJECTION_REASONS) <= set(report["rejected"])
        for index in range(H):
            hop = outcome.hop(index)
            assert hop.refused is None
            log = report["stages"][f"hop-{index}"]
            assert log["accepted"] == N == log["forwarded"] == hop.log["accepted"]
            assert nonzero(log["rejected"]) == {}
            assert log["timed_out"] is False
            if index > 0:
                assert log["upstream_complete"] is True
                assert nonzero(log["frames_rejected"]) == {}
        analyzer_log = report["stages"]["analyzer"]
        assert analyzer_log["received"] == N
        assert nonzero(analyzer_log["rejected"]) == {}
        assert analyzer_log["timed_out"] is False and analyzer_log["upstream_complete"] is True
        assert "error" not in report and "warning" not in report
        privacy = report["privacy"]
        assert privacy["n"] == N
        assert privacy["eps"] == pytest.approx(eps_at(N), rel=1e-12)
        assert privacy["delta"] <= 1e-6
        assert "seeded-pcg64(seed=100)" in report["randomness"]
        # The retained report is the returned one; every stage ended "done" (then cleared).
        late = broker.connect()
        await late.subscribe(report_topic(PREFIX, round_id))
        (retained,) = received(late)
        assert json.loads(retained.payload) == report
        states = await final_states(watch, round_id)
        assert {stage: body["state"] for stage, body in states.items()} == {
            "clients-0": "done",
            "hop-0": "done",
            "hop-1": "done",
            "hop-2": "done",
            "analyzer": "done",
        }
    first, second = reports
    for key in ("n_received", "histogram", "rejected", "privacy"):
        assert first[key] == second[key], key


# --- junk at hop 0 ----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_junk_at_hop_0_is_counted_by_reason_exactly() -> None:
    n, round_id, seed = 300, 5, 77
    values = values_for(n)
    genuine = make_client_messages(
        values,
        k=K,
        eps0=EPS0,
        round_id=round_id,
        hop_public_keys=HOP_PUBLIC,
        analyzer_public_key=ANALYZER.public,
        rng=SeededRandom(seed),
        manifest_digest=MANIFEST_DIGEST,
    )
    length = message_length(0, H)
    gen = np.random.default_rng(11)
    wrong_length = [
        gen.bytes(int(size))
        for size in gen.choice(
            np.r_[1 : length - 1, length + 1 : 2 * length], size=60, replace=True
        )
    ]
    assert all(len(m) != length for m in wrong_length)
    random_right_length = [gen.bytes(length) for _ in range(30)]
    copies = [genuine[int(i)] for i in gen.choice(n - 1, size=40, replace=False)]
    stream = genuine[:-1] + wrong_length + random_right_length + copies
    stream = [stream[int(i)] for i in gen.permutation(len(stream))]
    # The last genuine message goes last: hop 0 stops reading once its batch is full, so junk
    # sent after that would not be counted at all.
    stream.append(genuine[-1])

    broker = MemoryBroker()
    stages = pipeline(broker, round_id=round_id, expected_size=n)
    stages["junk"] = publisher(broker, round_id, ingress_topic(PREFIX, round_id, 0), stream)
    outcome = await start_in_order(stages, list(stages))
    assert outcome.results["junk"] == n + 130
    report = outcome.report
    expected = {"wrong-length": 60, "decryption-failed": 30, "duplicate": 40}
    assert nonzero(report["rejected"]) == expected
    assert nonzero(report["stages"]["hop-0"]["rejected"]) == expected
    assert report["stages"]["hop-0"]["accepted"] == n
    for index in (1, 2):
        assert nonzero(report["stages"][f"hop-{index}"]["rejected"]) == {}
    assert report["n_received"] == n
    assert report["histogram"] == expected_histogram(values, seed)
    assert report["privacy"]["n"] == n


# --- crashed clients --------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.asyncio
async def test_crashed_clients_hop_0_closes_at_deadline_and_privacy_is_for_n_received() -> None:
    expected_size, sent, round_id, seed = 600, 500, 9, 31
    values = values_for(sent)
    broker = MemoryBroker()
    stages = pipeline(
        broker,
        round_id=round_id,
        expected_size=expected_size,
        hop0_min_batch=300,
        hop0_deadline=1.5,
        accept_loss=True,
    )
    stages["clients"] = clients(broker, values, round_id=round_id, seed=seed)
    outcome = await start_in_order(stages, list(stages))
    assert outcome.results["clients"]["sent"] == sent
    hop0 = outcome.hop(0)
    assert hop0.refused is None
    assert hop0.log["timed_out"] is True
    assert 1.5 <= hop0.log["collect_seconds"] < 3.0
    assert hop0.log["accepted"] == sent == hop0.log["forwarded"]
    for index in (1, 2):
        log = outcome.hop(index).log
        assert log["timed_out"] is False and log["upstream_complete"] is True
        assert log["accepted"] == sent
    report = outcome.report
    assert report["n_expected"] == expected_size
    assert report["n_received"] == sent == sum(report["histogram"])
    assert report["histogram"] == expected_histogram(values, seed)
    # Published knowingly (accept_loss), and the report says so.
    assert "error" not in report
    line = "lost 100 of 600 reports between clients and hop-0"
    assert report["warning"].startswith(line) and "--accept-loss" in report["warning"]
    assert report["delivery"]["lost"] == 100 and report["delivery"]["loss_accepted"] is True
    assert report["delivery"]["counted"] == sent
    privacy = report["privacy"]
    assert privacy["n"] == sent
    assert privacy["eps"] == pytest.approx(eps_at(sent), rel=1e-12)
    assert privacy["eps"] > eps_at(expected_size) * 1.01  # fewer reports, weaker guarantee
    # The analyzer ended promptly after hop 0's deadline, not at its own.
    assert outcome.finished["analyzer"] < 1.5 + 5.0


@pytest.mark.slow
@pytest.mark.asyncio
async def test_crashed_clients_with_one_deadline_for_every_stage() -> None:
    expected_size, sent, round_id, deadline = 600, 500, 10, 1.5
    broker = MemoryBroker()
    stages: dict[str, Coroutine[Any, Any, Any]] = {}
    for index in range(H):
        settings = hop_settings(
            index,
            round_id=round_id,
            expected_size=expected_size,
            min_batch=300,
            deadline=deadline,
            accept_loss=True,
        )
        stages[f"hop-{index}"] = run_hop(broker.connect(), settings, HOPS[index].private)
    analyzer = AnalyzerSettings(
        prefix=PREFIX,
        round_id=round_id,
        k=K,
        eps0=EPS0,
        n_hops=H,
        n_expected=expected_size,
        deadline=deadline,
        accept_loss=True,
        **analyzer_binding(H),
    )
    stages["analyzer"] = run_analyzer(broker.connect(), analyzer, ANALYZER.private)
    stages["clients"] = clients(broker, values_for(sent), round_id=round_id, seed=4)
    # The order `shuffledp simulate` starts its processes in.
    order = ["analyzer", "hop-0", "hop-1", "hop-2", "clients"]
    outcome = await start_in_order(stages, order, gap=0.05)
    assert outcome.hop(0).log["accepted"] == sent
    assert outcome.hop(0).log["timed_out"] is True
    assert outcome.report["n_received"] == sent


# --- below the minimum batch ------------------------------------------------------------------


@pytest.mark.asyncio
async def test_below_min_batch_hop_0_refuses_and_later_stages_stop_promptly() -> None:
    round_id, sent = 13, 100
    broker = MemoryBroker()
    watch = await status_watch(broker, round_id)
    stages = pipeline(
        broker,
        round_id=round_id,
        expected_size=600,
        hop0_min_batch=300,
        hop0_deadline=1.0,
        accept_loss=True,  # the loss is accepted: the minimum batch is what refuses
    )
    stages["clients"] = clients(broker, values_for(sent), round_id=round_id, seed=3)
    outcome = await start_in_order(stages, list(stages))
    hop0 = outcome.hop(0)
    assert hop0.refused is not None
    assert "min_batch = 300" in hop0.refused and "accepted 100" in hop0.refused
    assert hop0.log["timed_out"] is True
    assert hop0.log["accepted"] == sent and hop0.log["forwarded"] == 0
    for index in (1, 2):
        hop = outcome.hop(index)
        assert hop.refused is not None and hop.refused.startswith("upstream refused the round")
        assert "min_batch = 300" in hop.refused
        assert hop.log["timed_out"] is False and hop.log["forwarded"] == 0
    # Everyone after hop 0 stopped on the aborted END, far before their own deadline (LONG).
    hop0_end = outcome.finished["hop-0"]
    assert 1.0 <= hop0_end < 4.0
    for stage in ("hop-1", "hop-2", "analyzer"):
        assert outcome.finished[stage] < hop0_end + 2.0, outcome.finished
    report = outcome.report
    assert "min_batch = 300" in report["error"]
    assert report["n_received"] == 0 and report["histogram"] == [0] * K
    assert report["privacy"]["n"] == 0 and report["privacy"]["eps"] is None
    states = await final_states(watch, round_id)
    assert {stage: body["state"] for stage, body in states.items()} == {
        "clients-0": "done",
        "hop-0": "refused",
        "hop-1": "refused",
        "hop-2": "refused",
        "analyzer": "refused",
    }


# --- another round's messages -----------------------------------------------------------------


@pytest.mark.asyncio
async def test_message_of_another_round_is_counted_wrong_round_by_the_analyzer() -> None:
    round_id, n, stale = 1, 100, 20
    values = values_for(n)
    other_round = make_client_messages(
        values_for(stale),
        k=K,
        eps0=EPS0,
        round_id=2,
        hop_public_keys=HOP_PUBLIC,
        analyzer_public_key=ANALYZER.public,
        rng=SeededRandom(8),
        manifest_digest=MANIFEST_DIGEST,
    )
    broker = MemoryBroker()
    stages = pipeline(broker, round_id=round_id, expected_size=n + stale)
    stages["clients"] = clients(broker, values, round_id=round_id, seed=21)
    stages["stale"] = publisher(broker, round_id, ingress_topic(PREFIX, 1, 0), other_round)
    outcome = await start_in_order(stages, list(stages))
    report = outcome.report
    for index in range(H):  # hops cannot read the round: they forward all of them
        assert report["stages"][f"hop-{index}"]["accepted"] == n + stale
    assert nonzero(report["stages"]["analyzer"]["rejected"]) == {"wrong-round": stale}
    assert nonzero(report["rejected"]) == {"wrong-round": stale}
    assert report["n_received"] == n
    assert report["histogram"] == expected_histogram(values, 21)
    assert report["privacy"]["n"] == n


@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_nested_json_end_frame_at_hop_1_is_one_malformed_frame() -> None:
    round_id, n = 3, 50
    values = values_for(n)
    hostile = struct.pack(">4sBBQIII", b"SDPF", 1, 2, round_id, 0, 0, 1) + b"[" * 100_000

    async def inject() -> int:
        transport = broker.connect()
        await wait_ready(transport, round_id, "hop-1")
        await transport.publish(ingress_topic(PREFIX, round_id, 1), hostile)
        return 1

    broker = MemoryBroker()
    stages = pipeline(broker, round_id=round_id, expected_size=n)
    stages["inject"] = inject()
    stages["clients"] = clients(broker, values, round_id=round_id, seed=5)
    outcome = await start_in_order(stages, list(stages), gap=0.05)
    report = outcome.report
    assert nonzero(report["rejected"]) == {"malformed-frame": 1}
    assert report["n_received"] == n
    assert report["histogram"] == expected_histogram(values, 5)


# --- not ready --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_clients_raise_not_ready_without_hop_0_and_publish_nothing() -> None:
    round_id = 4
    broker = MemoryBroker()
    watcher = await spy(broker)
    watch = await status_watch(broker, round_id)
    started = time.monotonic()
    with pytest.raises(NotReadyError, match="hop-0"):
        await clients(broker, values_for(50), round_id=round_id, seed=1, ready_timeout=0.5)
    elapsed = time.monotonic() - started
    assert 0.5 <= elapsed < 2.0
    seen = received(watcher)
    ingress = ingress_topic(PREFIX, round_id, 0)
    assert [m for m in seen if m.topic == ingress] == []
    assert {m.topic for m in seen} == {status_topic(PREFIX, round_id, "clients-0")}
    states = await final_states(watch, round_id)
    assert states["clients-0"]["state"] == "failed"


@pytest.mark.asyncio
@pytest.mark.parametrize("bad", [-1, K, 1000])
async def test_clients_reject_a_value_outside_range_before_sending_anything(bad: int) -> None:
    round_id = 6
    broker = MemoryBroker()
    # hop 0 is ready: clients that did not check first would send.
    await publish_state(broker.connect(), PREFIX, round_id, "hop-0", "ready")
    watcher = await spy(broker)
    assert [m.topic for m in received(watcher)] == [status_topic(PREFIX, round_id, "hop-0")]
    published = broker.published
    values = np.array([0, 1, bad, 2], dtype=np.int64)
    started = time.monotonic()
    with pytest.raises(InvalidParameterError, match=rf"\[0, k\).*got {bad}"):
        await clients(broker, values, round_id=round_id, seed=1)
    assert time.monotonic() - started < 1.0
    assert broker.published == published
    assert received(watcher) == []


@pytest.mark.asyncio
@pytest.mark.parametrize("n_hops", [1, 2])
async def test_hop_raises_not_ready_if_its_downstream_never_becomes_ready(n_hops: int) -> None:
    round_id, n = 8, 5
    broker = MemoryBroker()
    watcher = await spy(broker)
    watch = await status_watch(broker, round_id)
    messages = make_client_messages(
        values_for(n),
        k=K,
        eps0=EPS0,
        round_id=round_id,
        hop_public_keys=HOP_PUBLIC[:n_hops],
        analyzer_public_key=ANALYZER.public,
        rng=SeededRandom(2),
        manifest_digest=MANIFEST_DIGEST,
    )
    settings = hop_settings(0, round_id=round_id, expected_size=n, ready_timeout=0.3, n_hops=n_hops)
    egress = settings.egress
    assert egress == (
        analyzer_topic(PREFIX, round_id) if n_hops == 1 else ingress_topic(PREFIX, round_id, 1)
    )
    feed = asyncio.create_task(
        publisher(broker, round_id, ingress_topic(PREFIX, round_id, 0), messages)
    )
    started = time.monotonic()
    with pytest.raises(NotReadyError, match="hop-1" if n_hops == 2 else "analyzer"):
        await run_hop(broker.connect(), settings, HOPS[0].private)
    assert 0.3 <= time.monotonic() - started < 3.0
    assert await feed == n
    assert [m for m in received(watcher) if m.topic == egress] == []
    states = await final_states(watch, round_id)
    assert states["hop-0"]["state"] == "failed"
    assert "not ready" in states["hop-0"]["error"]


# --- settings ---------------------------------------------------------------------------------

HOP_OK: dict[str, Any] = {
    "prefix": PREFIX,
    "round_id": 1,
    "hop_index": 0,
    "n_hops": 3,
    "expected_size": 100,
    "min_batch": 50,
    "deadline": 10.0,
    **hop_binding(0),
}


@pytest.mark.parametrize(
    ("change", "field_name"),
    [
        ({"prefix": "a/#"}, "prefix"),
        ({"prefix": ""}, "prefix"),
        ({"round_id": -1}, "round_id"),
        ({"round_id": 2**64}, "round_id"),
        ({"n_hops": 0}, "n_hops"),
        ({"hop_index": 3}, "hop_index"),
        ({"hop_index": -1}, "hop_index"),
        ({"expected_size": 0}, "expected_size"),
        ({"min_batch": 0}, "min_batch"),
        ({"min_batch": 101}, "min_batch"),
        ({"min_batch": 1.5}, "min_batch"),
        ({"deadline": 0.0}, "deadline"),
        ({"deadline": float("nan")}, "deadline"),
        ({"deadline": float("inf")}, "deadline"),
        ({"ready_timeout": -1.0}, "ready_timeout"),
        ({"manifest_digest": bytes(31)}, "manifest_digest must be the 32-byte digest"),
        ({"manifest_digest": MANIFEST_DIGEST.hex()}, "manifest_digest"),
        ({"signing_key": None}, "signing_key must be a nacl.signing.SigningKey"),
        ({"signing_key": HOP_SIGNING_KEYS[0].verify_key}, "signing_key must be"),
        ({"upstream_verify_key": HOP_SIGNING_KEYS[0].verify_key}, "must be None at hop 0"),
        ({"hop_index": 1, "upstream_verify_key": None}, "hop-0's signing key"),
        ({"hop_index": 2, "upstream_verify_key": HOP_SIGNING_KEYS[1]}, "hop-1's signing key"),
    ],
)
def test_hop_settings_reject_bad_values(change: dict[str, Any], field_name: str) -> None:
    HopSettings(**HOP_OK)  # the baseline is valid
    with pytest.raises(InvalidParameterError, match=field_name):
        HopSettings(**{**HOP_OK, **change})


ANALYZER_OK: dict[str, Any] = {
    "prefix": PREFIX,
    "round_id": 1,
    "k": 5,
    "eps0": 2.0,
    "n_hops": 3,
    "n_expected": 100,
    "deadline": 10.0,
    **analyzer_binding(3),
}


@pytest.mark.parametrize(
    ("change", "field_name"),
    [
        ({"prefix": "$SYS"}, "prefix"),
        ({"round_id": True}, "round_id"),
        ({"k": 1}, "k must"),
        ({"k": 2**32 + 1}, "k must"),
        ({"eps0": 0.0}, "eps0"),
        ({"eps0": float("inf")}, "eps0"),
        ({"n_hops": 0}, "n_hops"),
        ({"n_expected": 0}, "n_expected"),
        ({"deadline": -1.0}, "deadline"),
        ({"target_delta": 1.0}, "delta"),
        ({"target_delta": 0.0}, "delta"),
        ({"eps": -0.5}, "eps"),
        ({"manifest_digest": b""}, "manifest_digest must be the 32-byte digest"),
        ({"hop_verify_keys": None}, "hop_verify_keys must be a tuple of n_hops = 3"),
        ({"hop_verify_keys": hop_verify_keys(2)}, "hop_verify_keys must be a tuple of n_hops = 3"),
        ({"hop_verify_keys": list(hop_verify_keys(3))}, "hop_verify_keys must be a tuple"),
        (
            {"hop_verify_keys": (*hop_verify_keys(2), HOP_SIGNING_KEYS[2])},
            r"hop_verify_keys\[2\] \(hop-2's signing key\) must be a nacl.signing.VerifyKey",
        ),
    ],
)
def test_analyzer_settings_reject_bad_values(change: dict[str, Any], field_name: str) -> None:
    AnalyzerSettings(**ANALYZER_OK)
    with pytest.raises(InvalidParameterError, match=field_name):
        AnalyzerSettings(**{**ANALYZER_OK, **change})


CLIENT_OK: dict[str, Any] = {
    "prefix": PREFIX,
    "round_id": 1,
    "k": 5,
    "eps0": 2.0,
    "manifest_digest": MANIFEST_DIGEST,
}


@pytest.mark.parametrize(
    ("change", "field_name"),
    [
        ({"prefix": "a//b"}, "prefix"),
        ({"round_id": -3}, "round_id"),
        ({"k": 0}, "k must"),
        ({"eps0": -1.0}, "eps0"),
        ({"max_in_flight": 0}, "max_in_flight"),
        ({"max_in_flight": 65536}, "max_in_flight"),
        ({"ready_timeout": 0.0}, "ready_timeout"),
        ({"name": ""}, "name"),
        ({"name": "clients/0"}, "name"),
        ({"name": "a b"}, "name"),
        ({"manifest_digest": None}, "manifest_digest must be the 32-byte digest"),
    ],
)
def test_client_settings_reject_bad_values(change: dict[str, Any], field_name: str) -> None:
    ClientSettings(**CLIENT_OK)
    with pytest.raises(InvalidParameterError, match=field_name):
        ClientSettings(**{**CLIENT_OK, **change})
