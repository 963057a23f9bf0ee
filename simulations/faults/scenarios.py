"""The fault bench's scenarios (issue 13's table): each starts a round on a
:class:`~shuffledp.simulations.faults.harness.FaultRound`, injects one fault while it runs, and
returns what it measured besides the counts (its notes). The round is then finished and judged
by :mod:`~shuffledp.simulations.faults.runner`.

Every scenario uses the command line's defaults except what it names; ``paced`` client processes
send for about 3 s (``--rate``), so that a fault timed on hop 0's progress lands mid-round at
any n.
"""

from __future__ import annotations

import asyncio
import re
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shuffledp.protocol.journal import RECORD_HEAD
from shuffledp.protocol.topics import ingress_topic
from shuffledp.security.access import load_password
from shuffledp.simulations.faults.attacks import (
    count_retained,
    guessable_client_id,
    publish_junk,
    takeover_burst,
)
from shuffledp.simulations.faults.harness import SEND_SECONDS, FaultRound
from shuffledp.simulations.faults.trust import (
    attack_before_clients,
    broker_kill9,
    extra_report,
    forged_frames,
    forged_left,
    monitor_forge,
    rerun_analyzer,
    second_stage,
    wrong_flags,
)

__all__ = ["SCENARIOS", "Scenario"]

Notes = dict[str, Any]
STATE = ("--state-dir", "{state}")
JOURNAL_STEM = b"shuffledp-hop-journal/"
"""How a journal file with a magic line begins."""
JUNK_BYTES = 16_000_000
"""The first junk messages: 16 MB, over the 4 MiB packet limit of the generated configuration
(Mosquitto disconnects the sender at the first)."""
UNDER_BOUND_JUNK_BYTES = 4_000_000
"""The second junk messages: 4 MB, under Mosquitto's global 4 MiB packet limit but far over a
client account's payload bound (the bounds plugin's to refuse)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """``run(round, quick)`` starts the round and injects the fault (returns notes);
    ``after(round)``, if any, measures once the round is over (the broker still running).
    ``unrepairable``: nothing can bring the missing reports back, so a loud failure naming the
    loss is the target. ``must_inject``: below. ``enrolment``: ``"exact"`` (``keys init --clients-per-process``, the
    clients each process hosts, as `simulate` does) or ``"default"`` (what `keys init` enrols
    without the flag)."""

    name: str
    title: str
    broker: str
    run: Callable[[FaultRound, bool], Awaitable[Notes]]
    unrepairable: bool = False
    enrolment: str = "exact"
    must_inject: bool = False
    """The row fails unless the scenario says its fault happened (``injected``): a refusal at
    start that did not come, a forged frame that was not published."""
    after: Callable[[FaultRound], Awaitable[Notes]] | None = None


async def _wait_accepted(r: FaultRound, fraction: float) -> int:
    """Wait until hop 0's progress shows ``fraction`` of n accepted; returns that count."""
    target = max(1, int(fraction * r.spec.n))
    await r.until(
        lambda: r.accepted("hop-0") >= target, f"hop-0 to accept {target}", r.spec.deadline
    )
    return r.accepted("hop-0")


async def plain(r: FaultRound, quick: bool) -> Notes:
    await r.start_round()
    return {"injected": True}


async def pause_hop0(r: FaultRound, quick: bool) -> Notes:
    """SIGSTOP hop 0 for 1 s as soon as a client process starts sending, then SIGCONT."""
    await r.start_round()
    names = [f"clients-{j}" for j in range(r.spec.client_processes)]
    await r.until(
        lambda: any(r.state(name) == "working" for name in names),
        "a client process to start sending",
        r.spec.deadline,
    )
    r.signal("hop-0", signal.SIGSTOP)
    at = r.accepted("hop-0")
    await asyncio.sleep(1.0)
    r.signal("hop-0", signal.SIGCONT)
    return {"injected": True, "paused_at_accepted": at}


def stall_deadline(r: FaultRound) -> float:
    """Hop 0's --deadline in `stall-hop0`: long enough for 60 % of n to arrive (paced)."""
    return min(r.spec.deadline, 10.0 + r.spec.n / 2000)


async def stall_hop0(r: FaultRound, quick: bool) -> Notes:
    """Hop 0 (a short --deadline) is stopped with SIGSTOP once it accepted 60 % of n and
    continued 1 s after its deadline; the broker (the keys-init configuration, no queue
    limit) holds the rest meanwhile."""
    deadline = stall_deadline(r)
    # The manifest's deadline, for every stage: the later ones count it from their upstream's
    # first frame, so only hop 0's matters here.
    r.deadline = deadline
    await r.start_analyzer()
    await r.start_hop(0)
    for index in range(1, r.spec.hops):
        await r.start_hop(index)
    for index in range(r.spec.client_processes):
        await r.start_clients(index, paced=True)
    at = await _wait_accepted(r, 0.6)
    r.signal("hop-0", signal.SIGSTOP)
    ready = r.seen_at.get(("hop-0", "ready"), time.monotonic())
    await asyncio.sleep(max(0.0, ready + deadline + 1.0 - time.monotonic()))
    r.signal("hop-0", signal.SIGCONT)
    return {"injected": True, "stalled_at_accepted": at, "hop0_deadline": deadline}


async def broker_restart(r: FaultRound, quick: bool) -> Notes:
    """The keys-init Mosquitto stopped (SIGTERM) once hop 0 accepted a quarter of n, and
    started again 0.5 s later; every component has --reconnect 30. Hop 0 is held (SIGSTOP) for
    the 0.5 s before the stop, so that the broker holds reports for it when it stops, at any n
    (a loaded round's hop 0 is behind anyway; with paced clients at small n it would not be,
    and what the restart costs would be down to luck)."""
    again = ("--reconnect", "30")
    await r.start_round(hop_args=again, analyzer_args=again, client_args=again, paced=True)
    at = await _wait_accepted(r, 0.25)
    assert r.broker is not None
    r.signal("hop-0", signal.SIGSTOP)
    await asyncio.sleep(0.5)
    stopped = time.monotonic()
    await asyncio.to_thread(r.broker.stop)
    r.signal("hop-0", signal.SIGCONT)
    await asyncio.sleep(0.5)
    await asyncio.to_thread(r.broker.start)
    down = round(time.monotonic() - stopped, 3)
    return {"injected": True, "restarted_at_accepted": at, "down_seconds": down}


def flip_length_bit(path: Path) -> Notes:
    """Flip bit 32 of the length field (the first field of every record head, a big-endian u64)
    of the middle record after the header of the journal at ``path``: the length then points
    far past the end of the file. Returns where."""
    data = bytearray(path.read_bytes())
    # A journal format that begins with a magic line (format 2 on) has its records after it.
    offset = data.index(b"\n") + 1 if data.startswith(JOURNAL_STEM) and b"\n" in data else 0
    starts: list[int] = []
    while offset + RECORD_HEAD.size <= len(data):
        length = int(RECORD_HEAD.unpack_from(data, offset)[0])
        if offset + RECORD_HEAD.size + length > len(data):
            break  # a torn last record
        starts.append(offset)
        offset += RECORD_HEAD.size + length
    if len(starts) < 3:
        return {"injected": False, "error": f"{path.name}: only {len(starts)} records"}
    chosen = starts[1 + (len(starts) - 1) // 2]
    data[chosen + 3] ^= 0x01  # big-endian u64: byte 3 holds bits 32..39
    path.write_bytes(bytes(data))
    return {
        "injected": True,
        "records": len(starts),
        "flipped_record_at_byte": chosen,
        "bytes_after_it": len(data) - chosen,
    }


async def journal_bitflip(r: FaultRound, quick: bool) -> Notes:
    """Hops with --state-dir; hop 0 killed (SIGKILL) once it accepted half of n, one bit of a
    journal record's length flipped, hop 0 restarted with the same arguments."""
    await r.start_round(hop_args=STATE, paced=True)
    at = await _wait_accepted(r, 0.5)
    await r.kill("hop-0")
    journals = sorted(r.state_dir("hop-0").glob("*.journal"))
    notes = flip_length_bit(journals[0]) if journals else {"injected": False}
    await r.restart("hop-0")
    return {**notes, "killed_at_accepted": at}


async def takeover(r: FaultRound, quick: bool) -> Notes:
    """Hops and the analyzer with --state-dir (persistent sessions); once hop 0 accepted a
    quarter of n, the clients-0 account connects 10 times under each of hop 0's and the
    analyzer's session client ids."""
    await r.start_round(hop_args=STATE, analyzer_args=STATE, paced=True)
    at = await _wait_accepted(r, 0.25)
    ids = [guessable_client_id(r.prefix, r.spec.round_id, s) for s in ("hop-0", "analyzer")]
    burst = await takeover_burst(
        r.url, ids, username="clients-0", password=load_password(r.keys, "clients-0")
    )
    return {"injected": True, "at_accepted": at, **burst}


async def junk(r: FaultRound, quick: bool) -> Notes:
    """Once hop 0 accepted a quarter of n, the clients-0 account publishes 40 x 16 MB to hop
    0's topic and a retained 16 MB message to hop 0's topic of 20 other rounds (10 and 5 with
    --quick), then, on a new connection, the same with 4 MB messages (under Mosquitto's global
    packet limit)."""
    await r.start_round(paced=True)
    at = await _wait_accepted(r, 0.25)
    count, retained = (10, 5) if quick else (40, 20)
    spec = r.spec
    others = [ingress_topic(r.prefix, spec.round_id + 1000 + i, 0) for i in range(retained)]
    notes: Notes = {"injected": True, "at_accepted": at, "junk_bytes": JUNK_BYTES}
    for size, label in ((JUNK_BYTES, ""), (UNDER_BOUND_JUNK_BYTES, "under_bound_")):
        sent = await publish_junk(
            r.url,
            username="clients-0",
            password=load_password(r.keys, "clients-0"),
            topic=ingress_topic(r.prefix, spec.round_id, 0),
            count=count,
            retained_topics=others,
            size=size,
        )
        notes.update({f"{label}{key}": value for key, value in sent.items()})
    return notes


async def junk_left(r: FaultRound) -> Notes:
    """Retained junk the broker still holds after the round (read with hop 0's account), whether
    the broker loaded the bounds plugin, and how many publishes it refused at least (the last
    count it logged: it logs its 1st, 2nd, 4th, 8th, ... refusal)."""
    left = await count_retained(
        r.url,
        username="hop-0",
        password=load_password(r.keys, "hop-0"),
        topic_filter=f"{r.prefix}/round/+/hop/0",
    )
    assert r.broker is not None
    loaded = re.search(r"(?m)^plugin\s", r.broker.config_path.read_text()) is not None
    counts = [int(n) for n in re.findall(r"\((\d+) refused so far\)", r.broker.log())]
    return {
        "retained_left": left,
        "bounds_plugin": loaded,
        "refused_by_plugin_at_least": max(counts, default=0),
    }


async def fill(r: FaultRound, quick: bool) -> Notes:
    """`keys init` without --clients-per-process; before the genuine client processes start,
    the key of clients-1 seals n reports of clients it does not host (ids after its share) and
    publishes them to hop 0."""
    spec = r.spec
    published = await attack_before_clients(
        r, process=1 % spec.client_processes, first_client=max(spec.counts()), count=spec.n
    )

    def handled() -> bool:
        seen = r.progress.get("hop-0", {})
        offered = int(seen.get("accepted", 0)) + int(seen.get("rejected", 0))
        return offered >= published or r.state("hop-0") in ("done", "refused")

    await r.until(handled, "hop-0 to take the attacker's reports", spec.deadline)
    await asyncio.sleep(0.6)  # hop 0's final progress after it closed
    accepted = r.accepted("hop-0")
    for index in range(spec.client_processes):
        await r.start_clients(index)
    return {"injected": True, "attack_published": published, "attacker_accepted": accepted}


async def kill_hop(r: FaultRound, quick: bool) -> Notes:
    """Hops with --state-dir; hop 0 SIGKILLed once it accepted a third of n, restarted at once."""
    await r.start_round(hop_args=STATE, paced=True)
    at = await _wait_accepted(r, 1 / 3)
    killed = await r.kill("hop-0")
    await r.restart("hop-0")
    return {"injected": killed, "killed_at_accepted": at}


async def kill_analyzer(r: FaultRound, quick: bool) -> Notes:
    """The analyzer with --state-dir (a persistent session), SIGKILLed once hop 0 accepted half
    of n and restarted at once with the same arguments. (The last hop publishes only to a ready
    analyzer, and at small n its whole batch is one frame, so the kill lands before the frames:
    what is checked is that a restarted analyzer takes the round over.)"""
    await r.start_round(analyzer_args=STATE, paced=True)
    at = await _wait_accepted(r, 0.5)
    killed = await r.kill("analyzer")
    await r.restart("analyzer")
    return {"injected": killed, "killed_at_accepted": at}


async def kill_client(r: FaultRound, quick: bool) -> Notes:
    """A paced client process SIGKILLed half-way through its sending time (SEND_SECONDS / 2
    after it announced ``working``); no restart. (Its progress comes once per chunk of 1,000
    reports, too coarse to time the kill at small n.)"""
    await r.start_round(paced=True)
    name = f"clients-{r.spec.client_processes - 1}"
    await r.until(lambda: r.state(name) == "working", f"{name} to start sending", r.spec.deadline)
    began = r.seen_at[(name, "working")]
    await asyncio.sleep(max(0.0, began + SEND_SECONDS / 2 - time.monotonic()))
    killed = await r.kill(name)
    sent = r.progress.get(name, {}).get("sent")
    return {"injected": killed, "killed": name, "its_last_progress_sent": sent}


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(name="plain", title="plain Mosquitto", broker="plain", run=plain),
        Scenario(
            name="pause-hop0",
            title="plain Mosquitto, hop 0 paused (SIGSTOP) 1 s",
            broker="plain",
            run=pause_hop0,
        ),
        Scenario(
            name="stall-hop0",
            title="hop 0 stalled past its deadline, the broker holding everything",
            broker="keys-init",
            run=stall_hop0,
        ),
        Scenario(
            name="broker-restart",
            title="keys-init Mosquitto restarted, --reconnect everywhere",
            broker="keys-init",
            run=broker_restart,
        ),
        Scenario(
            name="journal-bitflip",
            title="a bit flipped in a hop 0 journal record's length, then restart",
            broker="keys-init",
            run=journal_bitflip,
            unrepairable=True,
        ),
        Scenario(
            name="takeover",
            title="takeover burst on hop 0's and the analyzer's client ids",
            broker="keys-init",
            run=takeover,
        ),
        Scenario(
            name="junk",
            title="16 MB and 4 MB messages to hop 0, retained ones on other rounds",
            broker="keys-init",
            run=junk,
            after=junk_left,
        ),
        Scenario(
            name="fill-round",
            title="one client-process key fills the round (keys init's enrolment)",
            broker="keys-init",
            run=fill,
            enrolment="default",
        ),
        Scenario(
            name="kill-hop",
            title="hop 0 SIGKILLed, restarted with its state dir",
            broker="keys-init",
            run=kill_hop,
        ),
        Scenario(
            name="kill-analyzer",
            title="analyzer SIGKILLed, restarted with its state dir",
            broker="keys-init",
            run=kill_analyzer,
        ),
        Scenario(
            name="kill-client",
            title="a client process SIGKILLed mid-send, not restarted",
            broker="keys-init",
            run=kill_client,
            unrepairable=True,
        ),
        Scenario(
            name="wrong-flags",
            title="hop 1 --expected 3n/4, analyzer --k 10, --eps0 1: refused, then right",
            broker="keys-init",
            run=wrong_flags,
            must_inject=True,
        ),
        Scenario(
            name="forged-frames",
            title="forged END and data frame 0 on hop 1's input before hop 0 starts",
            broker="keys-init",
            run=forged_frames,
            must_inject=True,
        ),
        Scenario(
            name="extra-report",
            title="a client process key reports for an id past its clients, first",
            broker="keys-init",
            run=extra_report,
            must_inject=True,
        ),
        Scenario(
            name="analyzer-rerun",
            title="the analyzer run again with the same arguments after the round",
            broker="keys-init",
            run=plain,
            after=rerun_analyzer,
            must_inject=True,
        ),
        Scenario(
            name="monitor-forge",
            title="the monitor publishes a retained fake report and a fake status first",
            broker="keys-init",
            run=monitor_forge,
            after=forged_left,
            must_inject=True,
        ),
        Scenario(
            name="broker-kill9",
            title="the broker SIGKILLed right after hop 0 forwarded, then started again",
            broker="keys-init",
            run=broker_kill9,
            unrepairable=True,
        ),
        Scenario(
            name="second-stage",
            title="a second hop 0 and a second analyzer with the same identities",
            broker="keys-init",
            run=second_stage,
            must_inject=True,
        ),
    )
}
