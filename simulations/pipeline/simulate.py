"""`shuffledp simulate`: one full round, every component a separate OS process.

The launcher only does what an operator would: it makes a key directory (``shuffledp keys
init``), writes each client process's values to a file, starts a broker if none is given
(``--broker auto``: Mosquitto if installed, else the embedded amqtt broker, ``shuffledp broker``;
both on 127.0.0.1), starts the analyzer, the H hops and
the client processes (``shuffledp analyzer|hop|clients``) with a topic prefix of its own, shows
their progress (it listens to their progress topics like any observer), waits for the report on
the report topic, and adds what only a simulation knows: the true histogram and the utility of
every estimator against the central Gaussian baseline.

Everything it started is stopped when it returns, also on an error or Ctrl-C: child processes
get SIGTERM, then SIGKILL after a grace period; the temporary directory is removed. The
stages clear their own retained statuses; the round's report stays retained (written once, by
the analyzer only: the launcher's ``monitor`` account is read-only).

Access control (``options.auth``, the default): the key directory also gets broker accounts and
topic ACLs for the session's prefix (:mod:`shuffledp.security.access`); the embedded broker enforces them
(``shuffledp broker --keys``), every child logs in with its own account, and the launcher as
``monitor``. Each process hosts its even share of the round, and hop 0 enrols exactly that
(:data:`~shuffledp.security.access.EVEN_SHARE`). With an external broker the children log in with these fresh accounts too, which
an open broker accepts; ``auth=False`` makes everything connect anonymously (``--no-auth``).

TLS: with an external ``mqtts://`` broker every child and the launcher connect over TLS and
verify the broker's certificate against ``options.tls_ca`` (passed on as ``--tls-ca``), or the
system's trust store without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from shuffledp.accountant.mechanism import check_range, require_delta, require_eps
from shuffledp.analyzer.records import PublishedReport, Report
from shuffledp.analyzer.report import build_report
from shuffledp.errors import InvalidParameterError, OperationalError
from shuffledp.protocol.delivery import EXIT_LOST, ReportsLostError
from shuffledp.protocol.mqtt import MqttTransport, parse_broker_address, parse_broker_url
from shuffledp.protocol.record import MAX_K, MAX_ROUND_ID
from shuffledp.protocol.runtime import Inbox, decode_json
from shuffledp.protocol.topics import progress_topic, report_topic, status_topic
from shuffledp.randomness import default_source
from shuffledp.security.access import (
    EVEN_SHARE,
    MONITOR,
    init_access,
    load_access_settings,
    load_password,
    load_process_credentials,
)
from shuffledp.security.client_ids import random_client_id
from shuffledp.security.keys import COORDINATOR, init_key_directory, load_public_directory
from shuffledp.security.manifests import build_manifest, write_manifest
from shuffledp.simulations.data.datasets import check_dataset_sizes, resolve_dataset
from shuffledp.simulations.data.regions import Region
from shuffledp.simulations.pipeline.broker_choice import (
    BROKER_CHOICES,
    EMBEDDED,
    MOSQUITTO,
    BrokerChoice,
    resolve_broker,
)
from shuffledp.simulations.pipeline.records import (
    ChaosSummary,
    HopKill,
    RoundLog,
    RoundTimings,
    SimulationInfo,
)
from shuffledp.validation import require_int, require_positive

__all__ = [
    "PipelineSession",
    "RoundLossError",
    "RoundRefusedError",
    "SimulationError",
    "SimulationOptions",
    "run_simulation",
]


GRACE_SECONDS = 5.0
BRIDGE = "websockify"
"""Name of the WebSocket bridge among a round's children (--browser-clients)."""
EXIT_REFUSED = 3
"""Exit status of a stage command whose round was refused (shuffledp/cli/components.py)."""
BROKER_START_TIMEOUT = 20.0


class SimulationError(OperationalError):
    """A component failed or the round did not complete; the message says which and why."""


class RoundRefusedError(SimulationError):
    """The round was refused (below the minimum batch size): nothing was published."""


class RoundLossError(RoundRefusedError, ReportsLostError):
    """Genuine reports were lost and ``accept_loss`` was not set: the round was refused; the
    message is the loss's one line (how many, and between which stages). Exit status 5."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulationOptions:
    """What `shuffledp simulate` runs (validated on construction).

    ``dataset`` is a spec of :func:`shuffledp.simulations.data.datasets.resolve_dataset`
    (``synthetic``, ``uniform``, ``zipf:1.1``, ``histogram:3,0,5``, ``gowalla:PATH``, ...);
    ``region`` is required by ``gowalla:PATH`` and refused by the others. ``n`` None means the
    dataset's own size (every user of a check-in file, a histogram's sum; 10,000 for the
    generators). ``k`` must agree with the dataset when it fixes k (a region's cells, a
    histogram's counts): a conflict is an error, never a silent choice.
    """

    n: int | None = 10_000
    k: int = 15
    eps0: float = 4.0
    hops: int = 3
    #: W: every hop is W peelers and a mixer (``--hop-workers``, docs/hop-workers.md); 1: one
    #: process per hop. Needs at least W client processes (each peeler of hop 0 takes some).
    hop_workers: int = 1
    dataset: str = "synthetic"
    region: Region | None = None
    broker: str | None = None
    seed: int | None = None
    client_processes: int = 2
    target_delta: float = 1e-6
    eps: float | None = None
    min_batch: int | None = None
    deadline: float | None = None
    timeout: float | None = None
    round_id: int = 1
    auth: bool = True
    keys: Path | None = None
    chaos: bool = False
    #: The process --chaos kills with SIGKILL and restarts (``--chaos-kill``): ``hop-0`` (the
    #: one-process hop 0, or its mixer with --hop-workers > 1) or a peeler ``hop-0-pP``.
    chaos_kill: str = "hop-0"
    #: CA certificates (PEM) to verify an ``mqtts://`` broker with (``--tls-ca``); needs one.
    tls_ca: Path | None = None
    #: Publish a round with fewer reports than sent (``--accept-loss``; the report says so).
    accept_loss: bool = False
    #: C of the round manifest: clients the guarantee withstands as colluders (``--colluders``).
    colluders: int = 0
    #: Clients of the round run in headless Chromium (``--browser-clients``), the JavaScript
    #: client as one more client process (simulations/pipeline/browser.py).
    browser_clients: int = 0

    def __post_init__(self) -> None:
        if self.n is not None:
            require_int("n", self.n, 2)
        require_int("k", self.k, 2, MAX_K)
        require_positive("eps0", self.eps0)
        # The accountant's range, checked before anything is launched.
        check_range(self.n if self.n is not None else 2, self.eps0)
        require_int("hops", self.hops, 1, 64)
        self._check_hop_workers()
        if self.region is not None and not isinstance(self.region, Region):
            raise InvalidParameterError(f"region must be a Region, got {self.region!r}")
        check_dataset_sizes(self.dataset, n=self.n, k=self.k, region=self.region)
        self._check_broker()
        if self.seed is not None:
            require_int("seed", self.seed, 0)
        if not isinstance(self.accept_loss, bool):
            raise InvalidParameterError(
                f"--accept-loss must be True or False, got {self.accept_loss!r}"
            )
        require_int("client_processes", self.client_processes, 1, 64)
        if self.n is not None and self.client_processes > self.n:
            raise InvalidParameterError(
                f"--client-processes must be <= --n = {self.n}, got {self.client_processes}"
            )
        require_delta(self.target_delta)
        if self.eps is not None:
            require_eps(self.eps)
        if self.min_batch is not None:
            if self.n is None:
                require_int("min_batch", self.min_batch, 1)
            else:
                require_int("--min-batch", self.min_batch, 1, self.n, bound="[1, --n]")
        if self.deadline is not None:
            require_positive("deadline", self.deadline)
        if self.timeout is not None:
            require_positive("timeout", self.timeout)
        require_int("round_id", self.round_id, 0, MAX_ROUND_ID)
        self._check_colluders()
        self._check_browser_clients()
        if self.chaos and not self.auth:
            raise InvalidParameterError(
                "chaos needs client authentication (it injects second reports, which only "
                "authentication can refuse): drop --no-auth"
            )
        if self.keys is not None:
            self._check_key_directory()

    def _check_broker(self) -> None:
        """--broker, --chaos's need for MQTT sessions and --tls-ca's need for mqtts://."""
        if self.broker is not None and self.broker not in BROKER_CHOICES:
            parse_broker_url(self.broker)
        if self.chaos and resolve_broker(self.broker).kind == EMBEDDED:
            raise InvalidParameterError(
                "chaos kills and restarts a hop mid-round, which needs a broker that keeps MQTT "
                "sessions (the restarted hop must receive what arrived while it was down); the "
                "embedded amqtt broker does not: install mosquitto (--broker auto then uses it), "
                "or use --broker mosquitto or an external Mosquitto URL"
            )
        if self.tls_ca is not None:
            if self.broker in (None, *BROKER_CHOICES) or not parse_broker_address(self.broker).tls:
                raise InvalidParameterError(
                    f"--tls-ca {self.tls_ca} needs an mqtts:// broker (--broker "
                    f"mqtts://HOST[:PORT]), got --broker {self.broker!r}"
                )
            from shuffledp.security.tls import client_tls_context

            client_tls_context(self.tls_ca)  # TlsError naming the file, before anything starts

    def _check_hop_workers(self) -> None:
        require_int("--hop-workers", self.hop_workers, 1, 256, bound="[1, 256]")
        if self.hop_workers > self.client_processes:
            raise InvalidParameterError(
                f"--client-processes must be >= --hop-workers = {self.hop_workers} (each "
                f"peeler of hop 0 takes whole client processes), got {self.client_processes}"
            )
        if self.hop_workers > 1 and self.keys is not None:
            raise InvalidParameterError("--hop-workers > 1 runs with fresh keys (no --keys)")
        self._check_chaos_kill()

    def _check_chaos_kill(self) -> None:
        """``--chaos-kill``: hop 0 (its one process or its mixer) or one of its peelers."""
        kill = self.chaos_kill
        peelers = [f"hop-0-p{p}" for p in range(self.hop_workers)] if self.hop_workers > 1 else []
        if kill not in ("hop-0", *peelers):
            allowed = "hop-0" + (f" or hop-0-p0..hop-0-p{self.hop_workers - 1}" if peelers else "")
            raise InvalidParameterError(
                f"--chaos-kill must be {allowed} (a peeler needs --hop-workers > 1), got {kill!r}"
            )
        if kill != "hop-0" and not self.chaos:
            raise InvalidParameterError(f"--chaos-kill {kill} needs --chaos")

    def _check_colluders(self) -> None:
        if self.n is not None:
            require_int("--colluders", self.colluders, 0, self.n - 1, bound="[0, --n - 1]")
        else:
            require_int("--colluders", self.colluders, 0)

    def _check_browser_clients(self) -> None:
        """``--browser-clients`` in [0, --n], with the tools it needs (one line for what is
        missing), and not with --chaos (its hostile clients are the Python ones)."""
        if self.n is not None:
            require_int("--browser-clients", self.browser_clients, 0, self.n, bound="[0, --n]")
        else:
            require_int("--browser-clients", self.browser_clients, 0)
        if not self.browser_clients:
            return
        if self.chaos:
            raise InvalidParameterError(
                "--browser-clients cannot be combined with --chaos (the chaos clients are Python)"
            )
        if self.hop_workers > 1:
            raise InvalidParameterError(
                "--browser-clients cannot be combined with --hop-workers > 1 (the JavaScript "
                "client sends to a one-process hop 0's topic, not to a peeler's)"
            )
        from shuffledp.simulations.pipeline.browser import find_tools

        find_tools()

    @property
    def total_client_processes(self) -> int:
        """Client processes a round can have: the Python ones and the browser's."""
        return self.client_processes + (1 if self.browser_clients else 0)

    def _check_key_directory(self) -> None:
        """An existing key directory (``keys``) must fit the run: its hops, and with accounts
        its client processes and enrolment (checked before anything is launched, never
        discovered as a round full of rejections)."""
        assert self.keys is not None
        published = load_public_directory(self.keys)
        if published.n_hops != self.hops:
            raise InvalidParameterError(
                f"--hops must be the key directory's {published.n_hops} ({self.keys}), got "
                f"{self.hops}"
            )
        if not self.auth:
            return
        access = load_access_settings(self.keys)
        if self.total_client_processes > access.client_processes:
            browser = " plus 1 for --browser-clients" if self.browser_clients else ""
            raise InvalidParameterError(
                f"--client-processes{browser} must be <= the {access.client_processes} client "
                f"accounts of {self.keys}, got {self.total_client_processes}"
            )
        # The enrolment is each round's manifest's (exactly the clients each process hosts),
        # not access.json's: nothing more to check here.

    @property
    def effective_deadline(self) -> float:
        """Seconds a hop waits for its batch in a round of ``n`` reports."""
        return self.deadline_for(self._known_n())

    @property
    def effective_timeout(self) -> float:
        """Seconds a round of ``n`` reports may take before it is stopped."""
        return self.timeout_for(self._known_n())

    def _known_n(self) -> int:
        if self.n is None:
            raise InvalidParameterError(
                "n is the dataset's size here (n = None): use deadline_for(len(values)) and "
                "timeout_for(len(values))"
            )
        return self.n

    def deadline_for(self, n: int) -> float:
        """Seconds a hop waits for a batch of n: given, or generous for n (60 s + 2 ms/client)."""
        return self.deadline if self.deadline is not None else 60.0 + 0.002 * n

    def timeout_for(self, n: int) -> float:
        """Seconds a round of n reports may take before it is stopped."""
        if self.timeout is not None:
            return self.timeout
        return (self.hops + 2) * self.deadline_for(n) + 60.0


@dataclass(slots=True)
class _Child:
    name: str
    process: asyncio.subprocess.Process
    log_path: Path

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])


@dataclass(slots=True)
class _Progress:
    """What the launcher saw of each stage: latest progress counts and state."""

    counts: dict[str, dict[str, Any]] = field(default_factory=dict)
    states: dict[str, dict[str, Any]] = field(default_factory=dict)


ProgressCallback = Callable[[dict[str, dict[str, Any]], dict[str, dict[str, Any]]], None]


def _child_seed(seed: int, round_id: int, index: int) -> int:
    """An independent 63-bit seed for child ``index`` of round ``round_id`` of a run seeded
    with ``seed``."""
    state = np.random.SeedSequence([seed, round_id, index]).generate_state(1, dtype=np.uint64)[0]
    return int(state) >> 1


async def run_simulation(
    options: SimulationOptions, *, on_progress: ProgressCallback | None = None
) -> dict[str, Any]:
    """Run one full round (module docstring) and return the report (docs/report-schema.md) with
    ``true_histogram``, ``tv_distance``, ``timings`` and ``simulation``. Raises SimulationError
    if a component fails or the round does not complete within the timeout, and
    InvalidParameterError if the dataset cannot give the round (a check-in file with fewer
    users than ``n``, none in the region, an unreadable file).

    The dataset is resolved first (before any process starts) with the run's randomness (the
    OS CSPRNG, or ``seed``): ``simulation.dataset`` is its one-line label and
    ``simulation.dataset_details`` its facts (for check-ins: region, rows read, rejections by
    reason, rows outside the region, users, the one-report-per-user rule).
    """
    started = time.monotonic()
    dataset = resolve_dataset(
        options.dataset,
        n=options.n,
        k=options.k,
        region=options.region,
        rng=default_source(options.seed),
    )
    async with PipelineSession(options) as session:
        report = await session.run_round(
            dataset.values,
            round_id=options.round_id,
            dataset_label=dataset.label,
            on_progress=on_progress,
            started=started,
        )
    log = RoundLog.from_json(report)
    simulation = dataclasses.replace(log.simulation, dataset_details=dataset.details)
    return dataclasses.replace(log, simulation=simulation).to_json()


class PipelineSession:
    """A broker (``options.broker``: auto, Mosquitto if installed, else the embedded one; or
    as given: :mod:`~shuffledp.simulations.pipeline.broker_choice`) and a key directory for
    ``options.hops`` hops, kept for several rounds; each :meth:`run_round` launches the
    analyzer, the hops and the client processes for one round and stops them when it ends.

    ``async with PipelineSession(options) as session: await session.run_round(values, ...)``.
    Leaving the block stops the broker it started and removes the temporary directory, also on
    an error or cancellation. ``options.n`` is not used here: a round's n is ``len(values)``.
    """

    def __init__(self, options: SimulationOptions) -> None:
        self.options = options
        # An existing key directory's ACL is written for its own prefix; fresh keys get a
        # fresh prefix, so that concurrent runs on one broker never meet.
        self.prefix = (
            load_access_settings(options.keys).prefix
            if options.keys is not None and options.auth
            else f"shuffledp/sim-{secrets.token_hex(6)}"
        )
        self._workdir: Path | None = None
        self._broker_child: _Child | None = None
        self._mosquitto: Any = None  # a MosquittoBroker started for broker == "mosquitto"
        self._url: str | None = None
        self._broker_label = ""
        self._keys: Path | None = None

    @property
    def broker_url(self) -> str:
        if self._url is None:
            raise RuntimeError("PipelineSession is not running (use `async with`)")
        return self._url

    async def __aenter__(self) -> PipelineSession:
        self._workdir = Path(tempfile.mkdtemp(prefix="shuffledp-sim-"))
        try:
            if self.options.keys is not None:
                self._keys = Path(os.path.abspath(self.options.keys))
            else:
                self._keys = self._workdir / "keys"
                init_key_directory(self._keys, hops=self.options.hops)
            if self.options.auth and self.options.keys is None:
                init_access(
                    self._keys,
                    hops=self.options.hops,
                    client_processes=self.options.total_client_processes,
                    prefix=self.prefix,
                    # Each process's even share of every round: exactly the clients it hosts.
                    clients_per_process=EVEN_SHARE,
                    hop_workers=self.options.hop_workers,
                )
            await self._start_broker(resolve_broker(self.options.broker))
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def _start_broker(self, choice: BrokerChoice) -> None:
        """Start (or just use) the broker ``choice`` names; its label (what, where, why) goes
        into the report."""
        assert self._workdir is not None and self._keys is not None
        enforced = "accounts and ACLs enforced" if self.options.auth else "open"
        if choice.kind == EMBEDDED:
            self._broker_child, self._url = await _start_embedded_broker(
                self._workdir, self._keys if self.options.auth else None
            )
            self._broker_label = f"embedded amqtt at {self._url} ({enforced}; {choice.reason})"
        elif choice.kind == MOSQUITTO:
            from shuffledp.brokers.mosquitto import MosquittoBroker

            self._mosquitto = MosquittoBroker(
                binary=choice.binary,
                access_dir=self._keys / "access" if self.options.auth else None,
            )
            await self._mosquitto.__aenter__()
            self._url = self._mosquitto.url
            if self.options.auth:  # what the bounds plugin enforces, or why it does not
                enforced += f"; {self._mosquitto.bounds}"
            self._broker_label = f"Mosquitto at {self._url} ({enforced}; {choice.reason})"
        else:
            assert choice.url is not None
            self._url = choice.url
            self._broker_label = self._url

    async def __aexit__(self, *exc: object) -> None:
        if self._broker_child is not None:
            await _wait_or_kill(self._broker_child, 0.0)
            self._broker_child = None
        if self._mosquitto is not None:
            mosquitto, self._mosquitto = self._mosquitto, None
            await mosquitto.__aexit__(None, None, None)
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        self._url = None

    async def run_round(
        self,
        values: npt.ArrayLike,
        *,
        round_id: int,
        dataset_label: str,
        on_progress: ProgressCallback | None = None,
        started: float | None = None,
    ) -> dict[str, Any]:
        """One round over ``values`` (true values in [0, k), one per simulated client): its round
        log as JSON (``RoundLog.to_json()``, docs/report-schema.md; without
        ``simulation.dataset_details``). SimulationError if a component fails, the round is
        refused, or it does not complete within the timeout."""
        started = time.monotonic() if started is None else started
        if self._workdir is None or self._keys is None or self._url is None:
            raise RuntimeError("PipelineSession is not running (use `async with`)")
        require_int("round_id", round_id, 0)
        true_values = _round_values(values, self.options.k)
        workdir = self._workdir / f"round-{round_id}"
        workdir.mkdir(exist_ok=False)
        children: list[_Child] = []
        try:
            plan = self._plan(true_values, round_id, workdir)
            outcome = await self._launch_and_watch(plan, children, on_progress)
            await _stop_all([c for c in children if c.name == BRIDGE], 0.0)  # never exits
            await _stop_all(children, GRACE_SECONDS)
            published = PublishedReport.from_json(outcome.report)
            _check_delivery(published, plan.n, self.options.accept_loss)
            return self._final_report(plan, outcome, published, dataset_label, started)
        finally:
            await _stop_all(children, 0.0)
            shutil.rmtree(workdir, ignore_errors=True)

    def _plan(self, true_values: npt.NDArray[Any], round_id: int, workdir: Path) -> _RoundPlan:
        """The round's processes and their arguments (the value files written to ``workdir``);
        RoundRefusedError if n is below the minimum batch (then nothing is launched)."""
        options = self.options
        n = int(true_values.size)
        require_int("--browser-clients", options.browser_clients, 0, n, bound="[0, n]")
        python_values = true_values[: n - options.browser_clients]
        processes = min(options.client_processes, int(python_values.size))
        value_files = _write_value_files(python_values, processes, workdir) if processes else []
        deadline_seconds = options.deadline_for(n)
        min_batch = options.min_batch if options.min_batch is not None else max(1, n // 2)
        if n < min_batch:
            raise RoundRefusedError(
                f"round {round_id}: {n} reports is below the minimum batch size {min_batch}; "
                "the round is refused (nothing was sent or published)"
            )
        counts = [count for _, count in value_files]
        faults: _RoundFaults = (
            _Chaos(n, counts, kill=options.chaos_kill, workers=options.hop_workers)
            if options.chaos
            else _RoundFaults()
        )
        if options.browser_clients:
            counts.append(options.browser_clients)
        manifest = self._write_manifest(workdir, round_id, counts, min_batch, deadline_seconds)
        plan = _RoundPlan(
            round_id=round_id,
            n=n,
            processes=len(counts),
            truth=np.bincount(true_values, minlength=options.k),
            min_batch=min_batch,
            deadline_seconds=deadline_seconds,
            workdir=workdir,
            faults=faults,
        )
        common = [*self._common_args(round_id), "--manifest", str(manifest)]
        plan.specs.append(("analyzer", _analyzer_args(options, common)))
        for index in range(options.hops):
            plan.specs.extend(_hop_specs(options, plan, common, index))
        for index, (path, count) in enumerate(value_files):
            args = _client_args(options, plan, common, index, path, count)
            plan.specs.append((f"clients-{index}", args))
        if options.browser_clients:
            plan.browser = _BrowserPlan(
                process=processes, values=true_values[n - options.browser_clients :]
            )
        plan.manifest = manifest
        return plan

    def _write_manifest(
        self,
        workdir: Path,
        round_id: int,
        counts: list[int],
        min_batch: int,
        deadline_seconds: float,
    ) -> Path:
        """The round's signed manifest (every process runs from it), in ``workdir``."""
        options = self.options
        assert self._keys is not None
        signed = build_manifest(
            self._keys,
            prefix=self.prefix,
            rounds=(round_id,),
            k=options.k,
            eps0=options.eps0,
            clients=counts,
            min_batch=min_batch,
            deadline=deadline_seconds,
            delta=options.target_delta,
            colluders=options.colluders,
            client_auth=options.auth,
            hop_workers=options.hop_workers,
        )
        return write_manifest(workdir / "manifest.json", signed)

    def _common_args(self, round_id: int) -> list[str]:
        """The arguments every process of the round gets: broker, keys, prefix, round."""
        options = self.options
        common = ["--broker", self.broker_url, "--keys", str(self._keys), "--prefix", self.prefix]
        common += ["--round", str(round_id)]
        if not options.auth:
            common.append("--no-auth")
        if options.accept_loss:
            common.append("--accept-loss")
        if options.tls_ca is not None:
            common += ["--tls-ca", os.path.abspath(options.tls_ca)]
        return common

    async def _launch_and_watch(
        self, plan: _RoundPlan, children: list[_Child], on_progress: ProgressCallback | None
    ) -> _RoundOutcome:
        """Launch the round's processes (into ``children``) and follow them to the report, as
        ``monitor``, a read-only account."""
        options, prefix, round_id = self.options, self.prefix, plan.round_id
        keys = self._keys
        assert keys is not None
        async with (
            MqttTransport(
                self.broker_url,
                client_id=random_client_id(MONITOR),
                username=MONITOR if options.auth else None,
                password=load_password(keys, MONITOR) if options.auth else None,
                tls_ca=options.tls_ca,
            ) as monitor,
            Inbox(monitor, name="simulate-inbox") as inbox,
        ):
            await monitor.subscribe(progress_topic(prefix, round_id, "+"))
            await monitor.subscribe(status_topic(prefix, round_id, "+"))
            await monitor.subscribe(report_topic(prefix, round_id))
            launched = time.monotonic()
            try:
                for name, args in plan.specs:
                    children.append(await _spawn(name, args, plan.workdir))
                if plan.browser is not None:
                    await self._launch_browser(plan, children)
                fault = plan.faults.fault(plan)
                timeout = options.timeout_for(plan.n)
                report, seen = await _watch(
                    inbox, children, prefix, round_id, timeout, on_progress, fault
                )
            except BaseException:
                # Ctrl-C or a failure: stop the children first, before the monitor's
                # goodbye to a broker that may be slow to answer.
                await _stop_all(children, 0.0)
                raise
            finished = time.monotonic()
            # Nothing to clear: each stage clears its own status when it ends (or its will
            # does), and the report stays, written once (the monitor may write nothing).
        return _RoundOutcome(report, seen, fault, launched, finished)

    async def _launch_browser(self, plan: _RoundPlan, children: list[_Child]) -> None:
        """The WebSocket bridge, then the browser driver with the browser's client process
        (simulations/pipeline/browser.py), both into ``children``."""
        from shuffledp.simulations.pipeline import browser

        assert plan.browser is not None and self._keys is not None
        tools = browser.find_tools()
        bridge_log = plan.workdir / "websockify.log"
        process, ws_url = await browser.start_bridge(tools, self.broker_url, bridge_log)
        children.append(_Child(BRIDGE, process, bridge_log))
        plan.browser.bridge = browser.bridge_label(self.broker_url, ws_url)
        name = f"clients-{plan.browser.process}"
        auth = self.options.auth
        config = browser.write_config(
            plan.workdir / "browser.json",
            tools=tools,
            ws_url=ws_url,
            manifest=plan.manifest,
            trusted_coordinator=load_public_directory(self._keys).verify_key(COORDINATOR),
            round_id=plan.round_id,
            processes=[
                {
                    "name": name,
                    "username": name if auth else None,
                    "password": load_password(self._keys, name) if auth else None,
                    "processKey": load_process_credentials(
                        self._keys, plan.browser.process
                    ).key.hex()
                    if auth
                    else None,
                    "values": [int(v) for v in plan.browser.values],
                }
            ],
            accept_loss=self.options.accept_loss,
            out=plan.workdir / "browser-summary.json",
        )
        children.append(
            await _spawn_command(
                "browser", [tools.node, str(tools.driver), str(config)], plan.workdir
            )
        )

    def _final_report(
        self,
        plan: _RoundPlan,
        outcome: _RoundOutcome,
        published: PublishedReport,
        dataset_label: str,
        started: float,
    ) -> dict[str, Any]:
        """The round log (RoundLog, as JSON): the analyzer's report with what only a simulation
        knows (the true histogram, the utility against the baseline, timings, the run's facts)."""
        final = self._report_with_truth(plan, published)
        return RoundLog(
            report=final,
            stages=published.stages,
            warning=published.warning,
            delivery=published.delivery,
            chaos=plan.faults.summarize(
                published.stages, outcome.seen.states, final.n_received, plan.n, outcome.fault
            ),
            timings=_round_timings(outcome, published, started),
            simulation=self._simulation_info(plan, dataset_label),
        ).to_json()

    def _report_with_truth(self, plan: _RoundPlan, published: PublishedReport) -> Report:
        """The analyzer's counts rebuilt into a report that knows the true histogram (utility,
        the central Gaussian baseline), with the run's randomness named."""
        options, round_id = self.options, plan.round_id
        # k and eps0 as the analyzer published them (the manifest's), never re-read from flags.
        return build_report(
            round_id=round_id,
            k=published.report.k,
            eps0=published.report.eps0,
            colluders=published.report.privacy.colluders,
            histogram=published.report.histogram,
            n_expected=plan.n,
            rejected=published.report.rejected,
            target_delta=options.target_delta,
            eps=options.eps,
            true_histogram=plan.truth,
            # A Generator: the 63-bit child seed is outside diffprivlib's int seed range
            # [0, 2^32), which made every seeded run fail.
            baseline_rng=(
                None
                if options.seed is None
                else np.random.default_rng(_child_seed(options.seed, round_id, 999))
            ),
            randomness_name=(
                "os-csprng"
                if options.seed is None
                else f"seeded-pcg64 from --seed {options.seed} (reproducible simulation; "
                "not a privacy guarantee)"
            ),
        )

    def _simulation_info(self, plan: _RoundPlan, dataset_label: str) -> SimulationInfo:
        """The run's facts: broker, hops, processes, dataset, seed, keys, authentication, and
        what ran in the browser."""
        options = self.options
        browser_info = None
        if plan.browser is not None:
            from shuffledp.simulations.pipeline.browser import read_summary

            browser_info = read_summary(
                plan.workdir / "browser-summary.json",
                clients=int(plan.browser.values.size),
                bridge=plan.browser.bridge,
            )
        return SimulationInfo(
            broker=self._broker_label,
            n_hops=options.hops,
            client_processes=plan.processes,
            dataset=dataset_label,
            seed=options.seed,
            topic_prefix=self.prefix,
            keys="fresh" if options.keys is None else str(self._keys),
            authentication="broker accounts and one report per enrolled client"
            if options.auth
            else "none (--no-auth)",
            deadline_seconds=plan.deadline_seconds,
            min_batch=plan.min_batch,
            browser=browser_info,
        )


def _round_timings(
    outcome: _RoundOutcome, published: PublishedReport, started: float
) -> RoundTimings:
    """Wall-clock times of the round: total, set-up, the round itself, the slowest client
    process's sending, the analyzer's collection."""
    launched, finished = outcome.launched, outcome.finished
    client_seconds = [
        float(state.get("seconds", 0.0))
        for name, state in outcome.seen.states.items()
        if name.startswith("clients-")
    ]
    return RoundTimings(
        total_seconds=round(time.monotonic() - started, 3),
        setup_seconds=round(launched - started, 3),
        round_seconds=round(finished - launched, 3),
        clients_send_seconds=round(max(client_seconds, default=0.0), 3),
        analyzer_collect_seconds=published.timings.analyzer_collect_seconds,
    )


def _check_delivery(published: PublishedReport, n: int, accept_loss: bool) -> None:
    """The launcher's final check: every one of the ``n`` reports sent was counted, or the
    round is refused: RoundLossError naming how many were lost and where (unless
    ``accept_loss`` and the report says it was accepted), RoundRefusedError for another
    refusal."""
    delivery = published.delivery
    if published.error is not None:
        if delivery is not None and delivery.lost and not delivery.loss_accepted:
            raise RoundLossError(f"the round was refused: {delivery.message}")
        raise RoundRefusedError(f"the round was refused: {published.error}")
    counted = published.report.n_received
    if counted < n and not accept_loss:
        where = delivery.message if delivery is not None and delivery.message else None
        raise RoundLossError(
            f"the round was refused: {where or f'lost {n - counted:,} of {n:,} reports'} "
            "(the analyzer published a smaller round without --accept-loss)"
        )


def _round_values(values: npt.ArrayLike, k: int) -> npt.NDArray[Any]:
    """``values`` as an array; InvalidParameterError unless 1-d integers in [0, k), >= 2."""
    true_values = np.asarray(values)
    if true_values.ndim != 1 or not np.issubdtype(true_values.dtype, np.integer):
        raise InvalidParameterError("values must be a 1-d array of integers")
    n = int(true_values.size)
    if n < 2:
        raise InvalidParameterError(f"a round needs at least 2 reports, got {n}")
    if true_values.min() < 0 or true_values.max() >= k:
        raise InvalidParameterError(f"values must lie in [0, k) = [0, {k})")
    return true_values


def _write_value_files(
    true_values: npt.NDArray[Any], processes: int, workdir: Path
) -> list[tuple[Path, int]]:
    """The values split over the client processes (np.array_split), one file each: (path,
    count) per process."""
    value_files = []
    for index, part in enumerate(np.array_split(true_values, processes)):
        path = workdir / f"values-{index}.txt"
        path.write_text("".join(f"{int(v)}\n" for v in part), encoding="utf-8")
        value_files.append((path, int(part.size)))
    return value_files


@dataclass(slots=True, kw_only=True)
class _BrowserPlan:
    """The browser's client process of a round: its index, its clients' true values, and
    (once launched) the bridge's label."""

    process: int
    values: npt.NDArray[Any]
    bridge: str = ""


@dataclass(slots=True, kw_only=True)
class _RoundPlan:
    """One round's launch: its size, the client processes, the true histogram, the hops'
    minimum batch and deadline, the faults to inject, and ``specs`` (stage name, arguments)
    in launch order (the analyzer, the hops, the client processes)."""

    round_id: int
    n: int
    processes: int
    truth: npt.NDArray[Any]
    min_batch: int
    deadline_seconds: float
    workdir: Path
    faults: _RoundFaults
    specs: list[tuple[str, list[str]]] = field(default_factory=list)
    browser: _BrowserPlan | None = None
    manifest: Path = Path()


@dataclass(frozen=True, slots=True)
class _RoundOutcome:
    """What the launcher saw of a round: the analyzer's report, the stages' progress and
    states, the fault injected (if any), and when the processes were launched and the report
    arrived (monotonic)."""

    report: dict[str, Any]
    seen: _Progress
    fault: _HopKill | None
    launched: float
    finished: float


def _analyzer_args(options: SimulationOptions, common: list[str]) -> list[str]:
    """k, eps0, the expected count, the deadline and the delta target are the manifest's."""
    analyzer_args = ["analyzer", *common]
    if options.eps is not None:
        analyzer_args += ["--eps", repr(options.eps)]
    return analyzer_args


def _hop_args(
    options: SimulationOptions, plan: _RoundPlan, common: list[str], index: int
) -> list[str]:
    hop_args = ["hop", *common, "--index", str(index)]
    if options.seed is not None:
        hop_args += ["--seed", str(_child_seed(options.seed, plan.round_id, 1000 + index))]
    return hop_args + plan.faults.hop_args(plan)


def _hop_specs(
    options: SimulationOptions, plan: _RoundPlan, common: list[str], index: int
) -> list[tuple[str, list[str]]]:
    """Hop ``index``'s processes: one, or its mixer (``hop-I``) and W peelers (``hop-I-pP``)."""
    args = _hop_args(options, plan, common, index)
    workers = options.hop_workers
    if workers == 1:
        return [(f"hop-{index}", args)]
    specs = [(f"hop-{index}", [*args, "--role", "mixer"])]
    specs += [
        (f"hop-{index}-p{p}", [*args, "--role", "peeler", "--worker", str(p)])
        for p in range(workers)
    ]
    return specs


def _client_args(
    options: SimulationOptions,
    plan: _RoundPlan,
    common: list[str],
    index: int,
    path: Path,
    count: int,
) -> list[str]:
    client_args = ["clients", *common]
    client_args += plan.faults.client_args(index, count)
    client_args += ["--values", str(path)]
    client_args += ["--name", f"clients-{index}"]
    if options.seed is not None:
        client_args += ["--seed", str(_child_seed(options.seed, plan.round_id, index))]
    return client_args


class _RoundFaults:
    """The faults a round injects: none (a plain round). :class:`_Chaos` overrides each step;
    the launcher chooses once, and calls every step whatever it chose."""

    def hop_args(self, plan: _RoundPlan) -> list[str]:
        """Extra arguments of every hop."""
        return []

    def client_args(self, index: int, count: int) -> list[str]:
        """Extra arguments of client process ``index`` (hosting ``count`` clients)."""
        return []

    def fault(self, plan: _RoundPlan) -> _HopKill | None:
        """The process to kill and restart while the round runs, if any."""
        return None

    def summarize(
        self,
        stages: Mapping[str, Mapping[str, Any]],
        states: dict[str, dict[str, Any]],
        n_received: int,
        n: int,
        fault: Any,
    ) -> ChaosSummary | None:
        """What was injected, and what came of it (the round log's ``chaos``), if anything."""
        return None


class _Chaos(_RoundFaults):
    """`simulate --chaos`: hostile messages from every client process (10 % of n, rounded up,
    split over the processes; simulations/pipeline/chaos.py), sent slowly enough that hop 0 is
    still collecting when the launcher kills it (SIGKILL) and restarts it from its journal:
    hop 0's one process, its mixer, or one of its peelers (``--chaos-kill``)."""

    def __init__(self, n: int, sizes: list[int], *, kill: str = "hop-0", workers: int = 1) -> None:
        processes = len(sizes)
        self.counts = [int(part.size) for part in np.array_split(np.arange(-(-n // 10)), processes)]
        self.n = n
        self.sizes = sizes  # the clients of each client process
        self.kill = kill
        self.workers = workers

    def hop_args(self, plan: _RoundPlan) -> list[str]:
        # journaled, so that it can be killed and restarted
        return ["--state-dir", str(plan.workdir / "state")]

    def client_args(self, index: int, count: int) -> list[str]:
        # Sending takes >= CHAOS_SEND_SECONDS, so that hop 0 is still collecting when the
        # launcher kills it (no slower than needed at large n).
        rate = max(1.0, count / CHAOS_SEND_SECONDS)
        return ["--chaos", str(self.counts[index]), "--rate", repr(rate)]

    def fault(self, plan: _RoundPlan) -> _HopKill:
        stage = self.kill
        # A quarter of what the process takes: hop 0's (or its mixer's) batch, a peeler's share
        # (its client processes' clients: client process j goes to peeler j mod W).
        should = self.n
        if stage != "hop-0":
            worker = int(stage.rpartition("-p")[2])
            should = sum(self.sizes[worker :: self.workers])
        return _HopKill(
            stage=stage,
            threshold=max(1, should // 4),
            args=dict(plan.specs)[stage],
            workdir=plan.workdir,
        )

    def summarize(
        self,
        stages: Mapping[str, Mapping[str, Any]],
        states: dict[str, dict[str, Any]],
        n_received: int,
        n: int,
        fault: Any,
    ) -> ChaosSummary:
        assert isinstance(fault, _HopKill)
        return _chaos_summary(states, stages, n_received, n, fault)


CHAOS_SEND_SECONDS = 2.0
"""With --chaos, client processes pace themselves to send for at least this long."""


def _chaos_summary(
    states: dict[str, dict[str, Any]],
    stages: Mapping[str, Mapping[str, Any]],
    n_received: int,
    n: int,
    fault: _HopKill,
) -> ChaosSummary:
    """What the chaos clients injected (by kind), the rejections that must follow at hop 0 (by
    reason), what hop 0 rejected, and whether every genuine report was counted once
    (``n_received == n``: none lost, none counted twice)."""
    injected: dict[str, int] = {}
    expected: dict[str, int] = {}
    for name, state in states.items():
        if not name.startswith("clients-"):
            continue
        for kind, count in (state.get("injected") or {}).items():
            injected[kind] = injected.get(kind, 0) + int(count)
        for reason, count in (state.get("expected_rejections") or {}).items():
            expected[reason] = expected.get(reason, 0) + int(count)
    hop0 = stages.get("hop-0", {})
    observed = {r: int(c) for r, c in (hop0.get("rejected") or {}).items() if c}
    # A killed hop 0 may see a few of its own inputs again: the broker redelivers what was
    # journaled but not yet acknowledged when it died, and the journal's seen-set counts them
    # `duplicate` (never accepted twice). So duplicates may exceed the injected replays; every
    # other reason must match exactly.
    extra_duplicates = observed.get("duplicate", 0) - expected.get("duplicate", 0)
    others_match = {r: c for r, c in observed.items() if r != "duplicate"} == {
        r: c for r, c in expected.items() if r != "duplicate"
    }
    return ChaosSummary(
        injected=injected,
        injected_total=sum(injected.values()),
        expected_rejections=expected,
        hop0_rejections=observed,
        redelivered_duplicates=extra_duplicates,
        rejections_as_expected=others_match and extra_duplicates >= 0,
        all_reports_counted_once=n_received == n,
        hop_killed=fault.summary(),
    )


def clients_per_process(n: int, client_processes: int) -> int:
    """The clients the busiest client process hosts in a round of n: ceil(n / processes) with
    min(client_processes, n) processes (``run_round`` splits the values with np.array_split),
    which is what a key directory must enrol per process."""
    return -(-n // min(client_processes, n))


async def _spawn(name: str, args: list[str], workdir: Path) -> _Child:
    return await _spawn_command(name, [sys.executable, "-m", "shuffledp", *args], workdir)


async def _spawn_command(name: str, command: list[str], workdir: Path) -> _Child:
    log_path = workdir / f"{name}.log"
    with open(log_path, "wb") as log:
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=log,
            # Its own session: a Ctrl-C in the terminal reaches the launcher only, which then
            # stops every child itself (no child dies half-way through printing a traceback).
            start_new_session=True,
        )
    return _Child(name, process, log_path)


async def _start_embedded_broker(workdir: Path, keys: Path | None) -> tuple[_Child, str]:
    from shuffledp.brokers.ports import free_loopback_port

    last_error = ""
    for _attempt in range(3):  # the free port may be taken between probing and binding
        port = free_loopback_port()
        log_path = workdir / f"broker-{port}.log"
        with open(log_path, "wb") as log:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "shuffledp",
                "broker",
                "--port",
                str(port),
                *([] if keys is None else ["--keys", str(keys)]),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                start_new_session=True,
            )
        child = _Child("broker", process, log_path)
        assert process.stdout is not None
        try:
            async with asyncio.timeout(BROKER_START_TIMEOUT):
                line = await process.stdout.readline()
        except TimeoutError:
            line = b""
        except BaseException:
            # Cancelled (or interrupted) while the broker starts: nobody else holds this child
            # yet, so stop it here or it outlives the simulation.
            await asyncio.shield(_wait_or_kill(child, 0.0))
            raise
        if b"listening on" in line:
            return child, f"mqtt://127.0.0.1:{port}"
        await _wait_or_kill(child, 0.0)
        last_error = child.log_tail()
    raise SimulationError(f"the embedded broker did not start: {last_error or 'no output'}")


async def _watch(
    inbox: Inbox,
    children: list[_Child],
    prefix: str,
    round_id: int,
    timeout: float,
    on_progress: ProgressCallback | None,
    fault: _HopKill | None = None,
) -> tuple[dict[str, Any], _Progress]:
    """Follow progress until the report arrives; SimulationError if a child fails first.
    With ``fault``: kill its stage with SIGKILL once its progress shows ``threshold`` accepted
    messages and start it again with the same arguments (``simulate --chaos``)."""
    seen = _Progress()
    report_at = report_topic(prefix, round_id)
    stop_at = time.monotonic() + timeout
    while True:
        for child in children:
            code = child.process.returncode
            # A stage that refused the round (3) or found reports lost (5) has told its
            # downstream: the analyzer's report says why.
            if code not in (None, 0, EXIT_REFUSED, EXIT_LOST) and child.name != "analyzer":
                raise SimulationError(f"{child.name} exited with code {code}:\n{child.log_tail()}")
        if time.monotonic() > stop_at:
            progress = ", ".join(f"{stage} {count}" for stage, count in seen.counts.items())
            raise SimulationError(
                f"the round did not complete within {timeout:.0f} s (--timeout); last progress: "
                + (progress or "none reported (the processes were still starting)")
            )
        message = await inbox.get(0.25)
        if message is None:
            analyzer = children[0]
            if analyzer.process.returncode not in (None, 0, EXIT_REFUSED, EXIT_LOST):
                raise SimulationError(
                    f"analyzer exited with code {analyzer.process.returncode}:\n"
                    f"{analyzer.log_tail()}"
                )
            continue
        body = decode_json(message.payload)
        if body is None:
            continue
        if message.topic == report_at:
            return body, seen
        stage = str(body.get("stage", "?"))
        if "/progress/" in message.topic:
            seen.counts[stage] = body
            if fault is not None and fault.due(stage, body):
                await fault.kill_and_restart(children, int(body.get("accepted", 0)))
        else:
            seen.states[stage] = body
        if on_progress is not None:
            on_progress(seen.counts, seen.states)


@dataclass(slots=True, kw_only=True)
class _HopKill:
    """The hop `simulate --chaos` kills with SIGKILL once it has accepted ``threshold``
    messages, and restarts at once with the same arguments (it resumes from its journal)."""

    stage: str
    threshold: int
    args: list[str]
    workdir: Path
    killed_at_accepted: int | None = None
    killed_state: str = ""
    restarted: bool = False
    down_seconds: float | None = None

    def due(self, stage: str, progress: dict[str, Any]) -> bool:
        return (
            self.killed_at_accepted is None
            and stage == self.stage
            and int(progress.get("accepted", 0)) >= self.threshold
        )

    async def kill_and_restart(self, children: list[_Child], accepted: int) -> None:
        index = next(i for i, child in enumerate(children) if child.name == self.stage)
        child = children[index]
        killed = time.monotonic()
        self.killed_at_accepted = accepted  # its last progress before the kill
        if child.process.returncode is not None:
            self.killed_state = "already exited"  # nothing to kill, nothing to restart
            return
        self.killed_state = "running"
        with contextlib.suppress(ProcessLookupError):
            child.process.kill()
        await child.process.wait()
        children[index] = await _spawn(f"{self.stage}-restarted", self.args, self.workdir)
        children[index].name = self.stage
        self.restarted = True
        self.down_seconds = round(time.monotonic() - killed, 3)

    def summary(self) -> HopKill:
        return HopKill(
            stage=self.stage,
            signal="SIGKILL",
            when=f"after its progress showed >= {self.threshold} accepted messages",
            last_progress_accepted=self.killed_at_accepted,
            process_was=self.killed_state or "not killed (the round ended first)",
            restarted=self.restarted,
            restart_seconds=self.down_seconds,
        )


async def _stop_all(children: list[_Child], grace: float) -> None:
    """:func:`_wait_or_kill` for every child at once: stopping them one after the other took up
    to 10 s each on a loaded machine (a Ctrl-C then took over a minute)."""
    await asyncio.gather(*(_wait_or_kill(child, grace) for child in children))


async def _wait_or_kill(child: _Child, grace: float) -> None:
    """Wait up to ``grace`` s for the child to exit; then SIGTERM, then SIGKILL."""
    process = child.process
    if process.returncode is not None:
        return
    if grace > 0:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):  # not wait_for: it can drop a cancellation
                await process.wait()
            return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(GRACE_SECONDS):
                await process.wait()
            return
