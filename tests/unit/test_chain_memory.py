"""Issue 23 item 3: the analyzer checks the whole chain of signed END statements, as whole rounds
over the in-memory broker.

A malicious hop holds its own broker account and signing key, so it can sign whatever END it
likes; what it cannot do is sign for another hop. Here hop 1 runs the real hop code, and its
connection re-signs the END it publishes after a change (the hop's key, nothing more):

- it rewrites hop 0's statement in the chain it carries (hop 0's accepted lowered) or drops it:
  the analyzer refuses the round in one line naming hop 0, publishes no histogram, and its
  command would exit with status 3;
- it drops 500 of 2,000 reports and signs counts that agree with what it forwarded (accepted
  1,500, nothing rejected): the chain verifies, and the leg from hop 0 (which signed 2,000
  forwarded) to hop 1 is short by 500: the loss's line, exit status 5;
- an honest round: the report's stages are exactly each hop's signed statement.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import pytest

from shuffledp.cli.components import _analyzer_exit_status
from shuffledp.protocol.end_chain import verify_chain
from shuffledp.protocol.end_statement import EndStatement
from shuffledp.protocol.frames import HEADER, KIND_END, SIGNATURE_SIZE, encode_end
from shuffledp.protocol.transport import MemoryBroker, MemoryTransport, Message
from shuffledp.randomness import SeededRandom
from shuffledp.shuffler.service import run_hop
from tests.binding import MANIFEST_DIGEST, frame_assembler, frame_signer, hop_verify_keys
from tests.unit.test_services_memory import (
    CLIENT_SEED,
    HOPS,
    K,
    clients,
    expected_histogram,
    hop_settings,
    pipeline,
    start_in_order,
    values_for,
)

Change = Callable[[EndStatement, tuple[str, ...]], tuple[EndStatement, tuple[str, ...]]]
ORDER = ["analyzer", "hop-2", "hop-1", "hop-0", "clients"]
EXIT_REFUSED, EXIT_LOST = 3, 5


class Resigning:
    """Hop ``sender``'s connection as the hop itself could misuse it: every END frame it
    publishes is signed again (with the hop's own key) after ``change`` (its statement, the
    upstream chain it carries) -> (statement, upstream chain); ``ends`` keeps what went out."""

    def __init__(self, inner: MemoryTransport, *, sender: int, round_id: int, change: Change):
        self._inner, self._sender, self._round, self._change = inner, sender, round_id, change
        self.ends: list[bytes] = []

    async def publish(self, topic: str, payload: bytes, *, retain: bool = False) -> None:
        if len(payload) > HEADER.size and payload[5] == KIND_END:
            payload = self._resign(payload)
            self.ends.append(payload)
        await self._inner.publish(topic, payload, retain=retain)

    async def subscribe(self, topic_filter: str) -> None:
        await self._inner.subscribe(topic_filter)

    def messages(self) -> AsyncIterator[Message]:
        return self._inner.messages()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _resign(self, end: bytes) -> bytes:
        fields = HEADER.unpack_from(end)
        frames, messages, item_length = fields[6], fields[7], fields[8]
        body = json.loads(end[HEADER.size : len(end) - SIGNATURE_SIZE])
        statement = EndStatement.from_json(
            body, sender=self._sender, frames=frames, messages=messages
        )
        core, chain = self._change(statement.core(), statement.chain[:-1])
        return encode_end(
            signer=frame_signer(self._sender, self._round),
            item_length=item_length,
            statement=core,
            upstream_chain=chain,
        )


def as_is(statement: EndStatement, chain: tuple[str, ...]) -> tuple[EndStatement, tuple[str, ...]]:
    return statement, chain


def lower_hop_0(
    statement: EndStatement, chain: tuple[str, ...]
) -> tuple[EndStatement, tuple[str, ...]]:
    """Hop 0's STATEMENT frame with accepted and forwarded lowered by 100 (header and body),
    hop 0's signature kept: hop 1 cannot sign for hop 0."""
    frame = bytes.fromhex(chain[0])
    fields = list(HEADER.unpack_from(frame))
    body = json.loads(frame[HEADER.size : len(frame) - SIGNATURE_SIZE])
    body["accepted"] = body["forwarded"] = body["accepted"] - 100
    log = body["stages"]["hop-0"]
    log["accepted"] = log["forwarded"] = body["accepted"]
    fields[7] = body["forwarded"]
    raw = json.dumps(body, separators=(",", ":")).encode()
    forged = HEADER.pack(*fields) + raw + frame[len(frame) - SIGNATURE_SIZE :]
    return statement, (forged.hex(), *chain[1:])


def drop_hop_0(
    statement: EndStatement, chain: tuple[str, ...]
) -> tuple[EndStatement, tuple[str, ...]]:
    return statement, chain[1:]


def silent_drop(
    statement: EndStatement, chain: tuple[str, ...]
) -> tuple[EndStatement, tuple[str, ...]]:
    """Signs what it forwarded as all it had: no batch-full, no loss in its log."""
    log = {
        key: value
        for key, value in statement.stages[statement.stage].items()
        if key not in ("lost", "loss", "loss_accepted", "should_have")
    }
    rejected = dict.fromkeys(statement.rejected, 0)
    log["rejected"] = rejected
    quiet = replace(statement, rejected=rejected, stages={statement.stage: log})
    return quiet, chain


def round_with_hop_1(
    change: Change, *, n: int, round_id: int, hop1_expected: int | None = None
) -> tuple[dict[str, Any], Resigning]:
    broker = MemoryBroker()
    stages = pipeline(broker, round_id=round_id, expected_size=n)
    stages["hop-1"].close()
    transport = Resigning(broker.connect(), sender=1, round_id=round_id, change=change)
    settings = hop_settings(
        1,
        round_id=round_id,
        expected_size=hop1_expected or n,
        accept_loss=hop1_expected is not None,
    )
    stages["hop-1"] = run_hop(transport, settings, HOPS[1].private, rng=SeededRandom(7))
    stages["clients"] = clients(broker, values_for(n), round_id=round_id, seed=CLIENT_SEED)
    return stages, transport


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("change", "why"),
    [
        (
            lower_hop_0,
            "hop-0's statement in the chain is not genuine: its signature does not verify "
            "with hop-0's key",
        ),
        (drop_hop_0, "hop-1 carries no signed statement of hop-0"),
    ],
    ids=["rewritten", "dropped"],
)
async def test_a_hop_that_rewrites_or_drops_an_upstream_statement_is_refused_naming_it(
    change: Change, why: str
) -> None:
    n, round_id = 300, 41
    stages, _ = round_with_hop_1(change, n=n, round_id=round_id)
    outcome = await start_in_order(stages, ORDER)
    report = outcome.report
    line = f"the round was refused: the chain of signed END statements breaks at hop-0: {why}"
    assert report["error"] == line
    assert report["histogram"] == [0] * K and report["privacy"]["eps"] is None
    assert set(report["stages"]) == {"analyzer"}  # no hop's unverified log is shown
    assert report["stages"]["analyzer"]["received"] == n  # every report arrived, all the same
    assert _analyzer_exit_status(report) == EXIT_REFUSED


@pytest.mark.asyncio
async def test_a_hop_that_drops_500_and_signs_honest_counts_is_a_loss_on_its_leg() -> None:
    n, round_id = 2_000, 42
    stages, hop1 = round_with_hop_1(silent_drop, n=n, round_id=round_id, hop1_expected=1_500)
    outcome = await start_in_order(stages, ORDER)
    report = outcome.report
    # What hop 1 signed agrees with what it forwarded: nothing for hop 2 to notice.
    signed = frame_assembler(round_id, 1)
    list(signed.add(hop1.ends[0]))
    assert signed.statement is not None
    assert (signed.statement.accepted, signed.statement.forwarded) == (1_500, 1_500)
    assert not any(signed.statement.rejected.values())
    line = "lost 500 of 2,000 reports between hop-0 and hop-1"
    assert report["delivery"]["message"] == line
    assert report["error"] == f"the round was refused: {line}"
    assert report["delivery"]["lost"] == 500 and report["delivery"]["counted"] == 1_500
    assert report["stages"]["analyzer"]["received"] == 1_500
    assert report["histogram"] == [0] * K and report["n_received"] == 0
    legs = report["delivery"]["legs"]
    assert [(leg["sink"], leg["sent"], leg["counted"]) for leg in legs] == [
        ("hop-0", 2_000, 2_000),
        ("hop-1", 2_000, 1_500),
        ("hop-2", 1_500, 1_500),
        ("analyzer", 1_500, 1_500),
    ]
    assert _analyzer_exit_status(report) == EXIT_LOST


@pytest.mark.asyncio
async def test_an_honest_round_reports_each_hops_signed_statement() -> None:
    n, round_id = 300, 43
    broker = MemoryBroker()
    stages = pipeline(broker, round_id=round_id, expected_size=n)
    stages["hop-2"].close()  # the same hop 2, its END frames kept as they went out
    hop2 = Resigning(broker.connect(), sender=2, round_id=round_id, change=as_is)
    settings = hop_settings(2, round_id=round_id, expected_size=n)
    stages["hop-2"] = run_hop(hop2, settings, HOPS[2].private, rng=SeededRandom(102))
    stages["clients"] = clients(broker, values_for(n), round_id=round_id, seed=CLIENT_SEED)
    outcome = await start_in_order(stages, ORDER)
    report = outcome.report
    assert "error" not in report and report["delivery"]["lost"] == 0
    assert report["histogram"] == expected_histogram(values_for(n), CLIENT_SEED)
    assert _analyzer_exit_status(report) == 0
    taken = frame_assembler(round_id, 2)  # the END the analyzer verified
    list(taken.add(hop2.ends[0]))
    assert taken.statement is not None
    statements = verify_chain(
        taken.statement,
        verify_keys=hop_verify_keys(3),
        manifest_digest=MANIFEST_DIGEST,
        round_id=round_id,
    )
    assert [s.stage for s in statements] == ["hop-0", "hop-1", "hop-2"]
    for statement in statements:
        assert report["stages"][statement.stage] == statement.stages[statement.stage]
        assert report["stages"][statement.stage]["accepted"] == n
    assert statements[0].upstream_end is None
    assert all(s.upstream_end is not None for s in statements[1:])
    # What the hops logged after their END (receipts, timings) is not what the report shows.
    assert outcome.hop(0).log is not report["stages"]["hop-0"]
