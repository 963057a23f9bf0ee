"""One round of the fault bench, run as an operator runs it: the command line, one process each.

``async with FaultRound(spec, workdir, broker=...) as round_:`` makes a key directory with
``shuffledp keys init`` (its accounts, ACLs, client keys and Mosquitto configuration), starts a
Mosquitto (:mod:`~shuffledp.simulations.faults.brokers`: a plain one or the one `keys init`
configures) on a free loopback port, and follows the round's status and progress topics as the
``monitor`` account. A scenario then starts the analyzer, the hops and the client processes
(``shuffledp analyzer|hop|clients``, each in its own process group, with the arguments of the
command line and nothing else), waits for what it needs (:meth:`FaultRound.until`), injects its
fault (signals, restarts, a broker restart, an attacker), and :meth:`FaultRound.finish` waits for
the analyzer's report and collects every exit status. Leaving the block kills every process
group still running and stops the broker, also on an error or a cancellation.

The scenarios and the rows they give are in :mod:`~shuffledp.simulations.faults.scenarios`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shuffledp.brokers.ports import free_loopback_port
from shuffledp.errors import OperationalError
from shuffledp.protocol.mqtt import MqttTransport
from shuffledp.protocol.runtime import decode_json
from shuffledp.protocol.topics import progress_topic, status_topic
from shuffledp.security.access import load_password
from shuffledp.simulations.faults.brokers import MosquittoProcess, keys_init_config, plain_config
from shuffledp.validation import require_int, require_positive

__all__ = ["Component", "FaultRound", "RoundOutcome", "RoundSpec"]

#: Seconds a round may go on after a hop failed before the bench stops waiting for a report.
STUCK_SECONDS = 15.0
#: Seconds the other components get to finish once the analyzer has exited.
GRACE_SECONDS = 5.0
#: With ``paced`` clients, sending takes about this long, so that a fault lands mid-round.
SEND_SECONDS = 3.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundSpec:
    """A round of the bench: n reports over ``client_processes`` processes and ``hops`` hops,
    every stage with ``deadline`` seconds (``--deadline`` of the hops and the analyzer)."""

    n: int
    deadline: float
    hops: int = 3
    client_processes: int = 2
    k: int = 15
    eps0: float = 4.0
    round_id: int = 1

    def __post_init__(self) -> None:
        require_int("--n", self.n, 2)
        require_positive("--deadline", self.deadline)
        require_int("hops", self.hops, 1, 64)
        require_int("client_processes", self.client_processes, 1, self.n)

    def counts(self) -> list[int]:
        """The clients each process hosts (as `simulate` splits them: sizes differ by <= 1)."""
        base, extra = divmod(self.n, self.client_processes)
        return [base + (1 if j < extra else 0) for j in range(self.client_processes)]


@dataclass(slots=True)
class Component:
    """A running (or finished) ``shuffledp`` process and its output files."""

    name: str
    args: list[str]
    process: asyncio.subprocess.Process
    stdout: Path
    stderr: Path
    killed_by_bench: bool = False

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def last_line(self) -> str:
        """Its one-line error: the last stderr line the command line wrote as ``shuffledp
        <command>: ...`` (an error, a refusal), else its last line; prefixed ``Traceback:`` if
        it printed one."""
        try:
            text = self.stderr.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        own = [line for line in lines if line.startswith("shuffledp ")]
        last = own[-1] if own else (lines[-1] if lines else "")
        return f"Traceback: {last}" if "Traceback (most recent call last)" in text else last


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundOutcome:
    """What :meth:`FaultRound.finish` saw: the analyzer's report (None: none printed), its exit
    status (None: it did not exit), the other components' non-zero exits (not killed by the
    bench), their first message, the components still running at the end, the wall time from
    the first launch, and the clients' own count of what they sent."""

    report: dict[str, Any] | None
    exit_status: int | None
    other_exits: dict[str, int]
    message: str
    still_running: list[str]
    wall_seconds: float
    clients_sent: int | None
    status: dict[str, dict[str, Any]] = field(default_factory=dict)


async def _setup_command(args: list[str]) -> None:
    """Run ``shuffledp ARGS`` (a set-up step: ``keys init``, ``round init``) to its end;
    OperationalError with its one line if it fails."""
    process = await asyncio.create_subprocess_exec(
        *_shuffledp(args),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    _, err = await process.communicate()
    if process.returncode != 0:
        raise OperationalError(f"shuffledp {' '.join(args[:2])} failed: {err.decode().strip()}")


class FaultRound:
    """A key directory, a Mosquitto and the round's processes (module docstring).

    ``broker``: ``"plain"`` or ``"keys-init"``; ``clients_per_process``: the enrolment passed to
    ``keys init --clients-per-process`` (None: its default)."""

    def __init__(
        self,
        spec: RoundSpec,
        workdir: Path,
        *,
        broker: str,
        clients_per_process: int | None,
    ) -> None:
        if broker not in ("plain", "keys-init"):
            raise ValueError(f"broker must be 'plain' or 'keys-init', got {broker!r}")
        self.spec = spec
        self.workdir = workdir
        self.broker_kind = broker
        self.clients_per_process = clients_per_process
        self.keys = workdir / "keys"
        self.prefix = f"faultbench/{secrets.token_hex(4)}"
        self.components: dict[str, Component] = {}
        self.retired: list[Component] = []
        self.progress: dict[str, dict[str, Any]] = {}
        self.status: dict[str, dict[str, Any]] = {}
        self.seen_at: dict[tuple[str, str], float] = {}
        self.broker: MosquittoProcess | None = None
        self.started_at: float | None = None
        self.manifest = workdir / "round.json"
        self.deadline = spec.deadline
        """The round manifest's deadline (a scenario may shorten it before the first start)."""
        self._manifest_written = False
        self._monitor: asyncio.Task[None] | None = None
        self._monitor_ready = False

    @property
    def url(self) -> str:
        assert self.broker is not None
        return self.broker.url

    async def __aenter__(self) -> FaultRound:
        try:
            await self._keys_init()
            port = free_loopback_port()
            config = (
                plain_config(port)
                if self.broker_kind == "plain"
                else keys_init_config(self.keys, port)
            )
            (self.workdir / "broker").mkdir()
            self.broker = MosquittoProcess(self.workdir / "broker", config, port)
            await asyncio.to_thread(self.broker.start)
            self._monitor = asyncio.create_task(self._follow(), name="faultbench-monitor")
            await self.until(lambda: self._monitor_ready, "the monitor to subscribe", 20)
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop_all()
        if self._monitor is not None:
            self._monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._monitor
            self._monitor = None
        if self.broker is not None:
            await asyncio.to_thread(self.broker.stop)

    async def _keys_init(self) -> None:
        """``shuffledp keys init`` as an operator runs it (the enrolment if one is given)."""
        args = ["keys", "init", str(self.keys), "--hops", str(self.spec.hops)]
        args += ["--clients", str(self.spec.client_processes), "--prefix", self.prefix]
        if self.clients_per_process is not None:
            args += ["--clients-per-process", str(self.clients_per_process)]
        await _setup_command(args)

    # -- following the round ------------------------------------------------------------------

    async def _follow(self) -> None:
        """Keep the latest progress and status of every stage, as ``monitor``; reconnect after
        the broker goes away (a scenario restarts it)."""
        spec = self.spec
        while True:
            try:
                async with MqttTransport(
                    self.url,
                    client_id=f"sdp-faultbench-{secrets.token_hex(4)}",
                    username="monitor",
                    password=load_password(self.keys, "monitor"),
                ) as monitor:
                    await monitor.subscribe(progress_topic(self.prefix, spec.round_id, "+"))
                    await monitor.subscribe(status_topic(self.prefix, spec.round_id, "+"))
                    self._monitor_ready = True
                    async for message in monitor.messages():
                        self._note(message.topic, message.payload)
            except asyncio.CancelledError:
                raise
            except Exception:
                await asyncio.sleep(0.2)

    def _note(self, topic: str, payload: bytes) -> None:
        body = decode_json(payload)
        if body is None:
            return
        stage = topic.rsplit("/", 1)[-1]
        if "/progress/" in topic:
            self.progress[stage] = body
        else:
            self.status[stage] = body
            self.seen_at.setdefault((stage, str(body.get("state"))), time.monotonic())

    def accepted(self, stage: str) -> int:
        """``accepted`` of the stage's latest progress (0 before any)."""
        return int(self.progress.get(stage, {}).get("accepted", 0))

    def state(self, stage: str) -> str | None:
        return self.status.get(stage, {}).get("state")

    async def until(self, predicate: Callable[[], bool], what: str, timeout: float) -> None:
        """Return once ``predicate()``; OperationalError naming ``what`` after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise OperationalError(f"waited {timeout:g} s for {what}")
            await asyncio.sleep(0.01)

    # -- the processes ------------------------------------------------------------------------

    def common(self) -> list[str]:
        return [
            *("--broker", self.url, "--keys", str(self.keys)),
            *("--manifest", str(self.manifest)),
        ]

    async def _round_init(self) -> None:
        """``shuffledp round init`` as an operator runs it: the one manifest every component of
        the round runs from (k, eps0, n, the exact enrolment, the deadline)."""
        spec = self.spec
        args = ["round", "init", str(self.manifest), "--keys", str(self.keys)]
        args += ["--prefix", self.prefix, "--round-ids", str(spec.round_id)]
        args += ["--k", str(spec.k), "--eps0", repr(spec.eps0), "--deadline", repr(self.deadline)]
        args += ["--process-clients", ",".join(str(count) for count in spec.counts())]
        await _setup_command(args)
        self._manifest_written = True

    async def start(self, name: str, args: list[str]) -> Component:
        """Start ``shuffledp ARGS`` as component ``name`` (replacing a finished one); the
        round's manifest is written before the first start."""
        if not self._manifest_written:
            await self._round_init()
        if self.started_at is None:
            self.started_at = time.monotonic()
        old = self.components.get(name)
        if old is not None:
            self.retired.append(old)
        tag = f"{name}-{len(self.retired)}"
        out, err = self.workdir / f"{tag}.out", self.workdir / f"{tag}.err"
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            process = await asyncio.create_subprocess_exec(
                *_shuffledp(args),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
            )
        component = Component(name, list(args), process, out, err)
        self.components[name] = component
        return component

    async def start_analyzer(self, *extra: str) -> Component:
        return await self.start("analyzer", ["analyzer", *self.common(), "--json", *extra])

    async def start_hop(self, index: int, *extra: str) -> Component:
        return await self.start(
            f"hop-{index}", ["hop", *self.common(), "--index", str(index), *extra]
        )

    async def start_clients(self, index: int, *extra: str, paced: bool = False) -> Component:
        """Client process ``clients-<index>`` with its share of the n reports (synthetic
        values); ``paced``: at a rate that makes sending last about SEND_SECONDS."""
        spec = self.spec
        count = spec.counts()[index]
        args = ["clients", *self.common()]
        args += ["--values", "synthetic", "--name", f"clients-{index}"]
        args += ["--ready-timeout", repr(min(60.0, self.deadline))]
        if paced:
            args += ["--rate", repr(max(1.0, count / SEND_SECONDS))]
        return await self.start(f"clients-{index}", [*args, *extra])

    async def start_round(
        self,
        *,
        hop_args: tuple[str, ...] = (),
        analyzer_args: tuple[str, ...] = (),
        client_args: tuple[str, ...] = (),
        paced: bool = False,
        clients: bool = True,
    ) -> None:
        """The analyzer, the hops, and (unless ``clients`` is false) the client processes, in
        `simulate`'s order; the hops' state directories (``{state}`` in ``hop_args``) are
        per hop."""
        await self.start_analyzer(
            *(a.format(state=self.state_dir("analyzer")) for a in analyzer_args)
        )
        for index in range(self.spec.hops):
            state = self.state_dir(f"hop-{index}")
            await self.start_hop(index, *(a.format(state=state) for a in hop_args))
        if clients:
            for index in range(self.spec.client_processes):
                await self.start_clients(index, *client_args, paced=paced)

    def state_dir(self, stage: str) -> Path:
        return self.workdir / f"state-{stage}"

    def journal_bytes(self, stage: str) -> int:
        """Bytes of ``stage``'s journal(s) in its state directory (0 if none)."""
        return sum(p.stat().st_size for p in self.state_dir(stage).glob("*.journal"))

    def signal(self, name: str, sig: signal.Signals) -> None:
        """Send ``sig`` to component ``name``'s process group (nothing if it has exited)."""
        component = self.components[name]
        if component.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(component.process.pid, sig)

    async def kill(self, name: str) -> bool:
        """SIGKILL component ``name`` (its exit is then not held against the run); False if it
        had already exited."""
        component = self.components[name]
        if component.returncode is not None:
            return False
        component.killed_by_bench = True
        self.signal(name, signal.SIGKILL)
        await component.process.wait()
        return True

    async def restart(self, name: str) -> Component:
        """Start component ``name`` again with the same arguments."""
        return await self.start(name, self.components[name].args)

    async def stop_all(self) -> None:
        """SIGKILL every component still running (their process groups) and reap them."""
        for component in [*self.components.values(), *self.retired]:
            if component.returncode is None:
                component.killed_by_bench = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(component.process.pid, signal.SIGKILL)
                with contextlib.suppress(Exception):
                    await component.process.wait()

    # -- the end of the round -----------------------------------------------------------------

    async def finish(self) -> RoundOutcome:
        """Wait for the analyzer to exit (at most (hops + 2) deadlines + 60 s, or STUCK_SECONDS
        after a hop failed: downstream of it nothing can complete), give the others GRACE_SECONDS to finish, stop what
        still runs, and collect the outcome."""
        spec = self.spec
        begun = self.started_at if self.started_at is not None else time.monotonic()
        timeout = (spec.hops + 2) * spec.deadline + 60.0
        stuck: float | None = None
        while self.components["analyzer"].returncode is None:
            now = time.monotonic()
            if stuck is None and any(c.name.startswith("hop-") for c in self._failures()):
                stuck = now
            if (stuck is not None and now - stuck > STUCK_SECONDS) or now - begun > timeout:
                break
            await asyncio.sleep(0.1)
        ended = time.monotonic()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(GRACE_SECONDS):
                for component in self.components.values():
                    await component.process.wait()
        running = [c.name for c in self.components.values() if c.returncode is None]
        await self.stop_all()
        return self._outcome(ended - begun, running)

    def _failures(self) -> list[Component]:
        return [
            c
            for c in self.components.values()
            if c.returncode not in (None, 0) and not c.killed_by_bench
        ]

    def _outcome(self, wall: float, running: list[str]) -> RoundOutcome:
        analyzer = self.components["analyzer"]
        exit_status = None if analyzer.killed_by_bench else analyzer.returncode
        failures = [c for c in self._failures() if c.name != "analyzer"]
        first = [analyzer] if exit_status not in (None, 0) else []
        message = next((c.last_line() for c in [*first, *failures] if c.last_line()), "")
        said = [
            self.status.get(f"clients-{j}", {}).get("sent")
            for j in range(self.spec.client_processes)
        ]
        sent = [int(s) for s in said if isinstance(s, int)]
        return RoundOutcome(
            report=_read_report(analyzer.stdout),
            exit_status=exit_status,
            other_exits={c.name: int(c.returncode or 0) for c in failures},
            message=message,
            still_running=running,
            wall_seconds=round(wall, 3),
            clients_sent=sum(sent) if len(sent) == len(said) else None,
            status={k: dict(v) for k, v in self.status.items()},
        )


def _read_report(path: Path) -> dict[str, Any] | None:
    """The JSON report the analyzer printed on its last stdout line, or None."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        with contextlib.suppress(ValueError):
            report = json.loads(line)
            if isinstance(report, dict):
                return report
    return None


def _shuffledp(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "shuffledp", *args]
