"""`shuffledp simulate`: the command line of :mod:`shuffledp.simulations.pipeline.simulate`."""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shuffledp.accountant.mechanism import N_MAX
from shuffledp.cli.argtypes import integer, non_negative, positive, probability
from shuffledp.cli.help import add_command
from shuffledp.cli.paths import check_input_file
from shuffledp.cli.report_text import format_number
from shuffledp.protocol.record import MAX_K, MAX_ROUND_ID
from shuffledp.security.keys import MAX_HOPS

if TYPE_CHECKING:
    from shuffledp.analyzer.records import Report
    from shuffledp.simulations.pipeline.records import ChaosSummary, RoundLog
    from shuffledp.simulations.pipeline.simulate import SimulationOptions

__all__ = ["add_parser", "format_report"]

_RULE_HELP = (
    "With gowalla, each user reports once: the cell of their most recent check-in inside the "
    "region (in a lat,lon file, without users, each row is one user)."
)


def add_parser(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "simulate",
        help="run one full round: clients, hops, analyzer as separate processes over MQTT",
        description="Start a broker (--broker auto: Mosquitto if installed, else the embedded "
        "one; or use --broker), make keys, launch the "
        "analyzer, H hops and client processes hosting N simulated clients, run one round and "
        "print the report: true vs estimated histogram, TV distance per estimator and for the "
        "central Gaussian baseline, the guarantee and timings.",
        examples=[
            "shuffledp simulate --n 2000 --k 10 --eps0 2",
            "shuffledp simulate --dataset zipf:1.3 --n 5000 --hops 2 --seed 7 --json",
            "shuffledp simulate --chaos --n 1000   # needs Mosquitto (auto picks it if installed)",
            "shuffledp simulate --broker embedded --n 1000",
        ],
    )
    _add_round_arguments(p.add_argument_group("the round"))
    _add_data_arguments(p.add_argument_group("the data"))
    _add_broker_arguments(p.add_argument_group("broker and keys"))
    output = p.add_argument_group("output")
    output.add_argument("--json", action="store_true", help="print the report as one JSON object")
    output.add_argument("--quiet", action="store_true", help="no progress display on stderr")
    p.set_defaults(func=run)


def _add_round_arguments(p: argparse._ArgumentGroup) -> None:
    """n, k, eps0, hops, the target, the round id, seeds, sizes and times."""
    _add_size_arguments(p)
    _add_identity_arguments(p)
    _add_target_arguments(p)
    _add_timing_arguments(p)


def _add_size_arguments(p: argparse._ArgumentGroup) -> None:
    """--n, --k, --eps0, --hops."""
    p.add_argument(
        "--n",
        type=integer(2, N_MAX),
        metavar="N",
        help="simulated clients (default: 10000 for the generators, every user of a gowalla "
        "file, the sum of a histogram; a smaller n with gowalla: a uniformly random subset of "
        "the users)",
    )
    p.add_argument(
        "--k",
        type=integer(2, MAX_K),
        metavar="K",
        help="number of values (default: 15 for the generators, the region's cells for "
        "gowalla, the number of entries of histogram/probabilities; a different --k is an error)",
    )
    p.add_argument("--eps0", type=positive, default=4.0, metavar="EPS0", help="local k-RR epsilon")
    p.add_argument(
        "--hops",
        type=integer(1, MAX_HOPS),
        metavar="H",
        help="shuffler hops (default: 3, or the hops of --keys DIR)",
    )
    p.add_argument(
        "--hop-workers",
        type=integer(1, 256),
        default=1,
        metavar="W",
        help="every hop as W peeling processes and one mixer (docs/hop-workers.md); 1: one "
        "process per hop (default). Needs --client-processes >= W",
    )


def _add_identity_arguments(p: argparse._ArgumentGroup) -> None:
    """--round, --seed, --client-processes."""
    p.add_argument(
        "--round",
        type=integer(0, MAX_ROUND_ID),
        metavar="ID",
        help="round id (default: 1 with fresh keys; with --keys a fresh random one, since "
        "reports and tags are bound to the round and a round id must not repeat under one "
        "key directory)",
    )
    p.add_argument(
        "--seed",
        type=integer(0),
        metavar="SEED",
        help="seed every generator (reproducible; default: OS CSPRNG)",
    )
    p.add_argument(
        "--client-processes",
        type=integer(1, 64),
        default=2,
        metavar="COUNT",
        help="client processes (at most --n)",
    )
    p.add_argument(
        "--browser-clients",
        type=integer(0),
        default=0,
        metavar="N",
        help="run N of the round's clients in headless Chromium, the JavaScript client as one "
        "more client process (0..--n; needs node, chromium, websockify and `npm ci` in "
        "clients/js: docs/browser-client.md)",
    )


def _add_target_arguments(p: argparse._ArgumentGroup) -> None:
    """--delta or --eps: what the report's guarantee is computed at."""
    target = p.add_mutually_exclusive_group()
    target.add_argument(
        "--delta", type=probability, default=1e-6, metavar="DELTA", help="target delta"
    )
    target.add_argument(
        "--eps", type=non_negative, metavar="EPS", help="report the delta bracket at this eps"
    )
    p.add_argument(
        "--colluders",
        type=integer(0),
        default=0,
        metavar="C",
        help="clients whose reports the adversary is assumed to know (written into the round "
        "manifest): the guarantee is computed for the reports counted minus C",
    )


def _add_timing_arguments(p: argparse._ArgumentGroup) -> None:
    """--min-batch, --deadline, --timeout, --accept-loss: when the round settles, and how."""
    p.add_argument(
        "--min-batch", type=integer(1), metavar="COUNT", help="hops' minimum batch (default: n/2)"
    )
    p.add_argument(
        "--deadline",
        type=positive,
        metavar="SECONDS",
        help="hops' deadline (default: 60 + 2 ms * n)",
    )
    p.add_argument(
        "--timeout",
        type=positive,
        metavar="SECONDS",
        help="stop the whole run after this many seconds (default: from --deadline and --hops)",
    )
    p.add_argument(
        "--accept-loss",
        action="store_true",
        help="publish the round even if some reports were lost on the way (the report says how "
        "many and where); default: refuse it, exit status 5 and one line saying how many "
        "reports were lost and where",
    )


def _add_data_arguments(p: argparse._ArgumentGroup) -> None:
    """What the clients hold: a generator, a histogram, or check-ins in a region."""
    p.add_argument(
        "--dataset",
        default="synthetic",
        metavar="SPEC",
        help="synthetic or normal (default: N(0, 2), variance 2, in k bins over +-3 sd), "
        "uniform, zipf or zipf:S (P(j) proportional to 1/(j+1)^S, default S 1.1), "
        "histogram:C0,C1,... (exactly these counts, randomly ordered), probabilities:P0,P1,... "
        "(n draws), gowalla:PATH (check-ins: SNAP user<TAB>time<TAB>lat<TAB>lon<TAB>location "
        "or lat,lon CSV, plain or .gz, - for stdin; needs --region or --box/--grid), gowalla "
        "(the file of shuffledp data fetch gowalla, checked against its recorded SHA-256). "
        f"{_RULE_HELP}",
    )
    p.add_argument(
        "--region",
        metavar="NAME",
        help="gowalla region: sf (24 x 17 cells) or paris (16 x 12), or the name of a --box",
    )
    p.add_argument(
        "--box",
        metavar="LAT_MIN,LAT_MAX,LON_MIN,LON_MAX",
        help="a custom region (bounds inclusive; needs --grid)",
    )
    p.add_argument(
        "--grid",
        metavar="COLUMNSxROWS",
        help="cells of the region: longitude steps x latitude steps, e.g. 24x17 (cell = row * "
        "columns + column, row 0 in the south, column 0 in the west)",
    )


def _add_broker_arguments(p: argparse._ArgumentGroup) -> None:
    """Where the components meet and how they log in."""
    p.add_argument(
        "--broker",
        metavar="URL",
        default="auto",
        help="auto (the default): start Mosquitto on a free loopback port if the mosquitto "
        "binary is installed (faster, keeps sessions), else the embedded amqtt broker; "
        "'mosquitto' or 'embedded' to choose; or an external broker URL, e.g. "
        "mqtt://127.0.0.1:1883. Either started broker enforces this run's accounts and ACLs; "
        "the report says which was used",
    )
    p.add_argument(
        "--no-auth",
        action="store_true",
        help="connect anonymously (an open broker); by default every component logs in with "
        "its own fresh account and the embedded broker enforces accounts and topic ACLs",
    )
    p.add_argument(
        "--tls-ca",
        type=Path,
        metavar="FILE",
        help="with --broker mqtts://HOST[:PORT]: every component verifies the broker against "
        "the CA certificates (PEM) in FILE, e.g. DIR/tls/ca.pem of `shuffledp keys init --tls` "
        "(default: the system's trust store)",
    )
    p.add_argument(
        "--chaos",
        action="store_true",
        help="fault injection: the client processes also send 10%% of n hostile messages "
        "(truncated, replayed, corrupted, second reports, another round's reports), and hop 0 "
        "is killed with SIGKILL mid-round and restarted (it resumes from its journal); the "
        "report's 'chaos' section compares hop 0's rejections with what was injected. Needs a "
        "broker that keeps sessions: Mosquitto (--broker auto picks it when installed)",
    )
    p.add_argument(
        "--chaos-kill",
        default="hop-0",
        metavar="STAGE",
        help="with --chaos: the process killed with SIGKILL at a quarter of what it takes and "
        "restarted: hop-0 (default: the one-process hop 0, or its mixer with --hop-workers > 1) "
        "or a peeler hop-0-pP (docs/faults.md)",
    )
    p.add_argument(
        "--keys",
        type=Path,
        metavar="DIR",
        help="use this key directory (`shuffledp keys init`: its hops, broker accounts, topic "
        "prefix and client enrolment; e.g. for a Mosquitto started with DIR/access/"
        "mosquitto.conf) instead of fresh keys in a temporary folder",
    )


#: Below this many reports a round's estimate is mostly noise: with k-RR at the usual eps0 its
#: TV distance to the truth is near 1 for a few users (2 users: TV 1.0), and shuffling gives
#: almost no amplification (eps stays near eps0). The round is still valid; the commands warn.
MIN_USEFUL_ROUND = 100


def warn_small_round(command: str, n: int, k: int, hint: str = "") -> bool:
    """One warning line on stderr if a round of ``n`` reports is below MIN_USEFUL_ROUND;
    whether it was."""
    if n >= MIN_USEFUL_ROUND:
        return False
    print(
        f"shuffledp {command}: warning: a round of {n} reports (below {MIN_USEFUL_ROUND}, "
        f"k = {k}): its estimate is mostly noise and shuffling barely amplifies its privacy"
        f"{hint}",
        file=sys.stderr,
    )
    return True


def run(args: argparse.Namespace) -> int:
    options = _simulation_options(args)
    report = _run_simulation(options, quiet=args.quiet)
    if report is None:
        print(
            "shuffledp simulate: interrupted; every process it started was stopped", file=sys.stderr
        )
        return 130
    # SimulationError, an unreachable broker (BrokerError) and OSError reach main(): one line,
    # exit status 1.
    from shuffledp.simulations.pipeline.records import RoundLog

    log = RoundLog.from_json(report)  # the round log's schema (docs/report-schema.md)
    warn_small_round("simulate", log.report.n_received, log.report.k)
    if args.json:
        print(json.dumps(log.to_json(), allow_nan=False))
    else:
        print(format_report(log))
    return 0


def _simulation_options(args: argparse.Namespace) -> SimulationOptions:
    """The flags as SimulationOptions, with the defaults that depend on other flags filled in
    (k from the dataset, hops and the round id from --keys); input files checked."""
    from shuffledp.security.keys import load_public_directory
    from shuffledp.simulations.data.datasets import DEFAULT_K, parse_dataset_spec
    from shuffledp.simulations.data.regions import region_from_options
    from shuffledp.simulations.pipeline.simulate import SimulationOptions

    region = None
    if args.region is not None or args.box is not None or args.grid is not None:
        region = region_from_options(args.region, args.box, args.grid)
    spec = parse_dataset_spec(args.dataset)
    if spec.path is not None and spec.path != "-":
        if spec.kind == "gowalla" and not Path(spec.path).exists():
            from shuffledp.simulations.data.fetch import DataMissingError, fetch_command

            raise DataMissingError(
                f"--dataset {spec.path}: no such file (the Gowalla check-ins: run "
                f"`{fetch_command()}`, then --dataset gowalla)"
            )
        check_input_file("--dataset", Path(spec.path))
    k = args.k
    if k is None:
        k = spec.fixed_k(region) or DEFAULT_K
    hops = args.hops
    if hops is None:
        hops = 3 if args.keys is None else load_public_directory(args.keys).n_hops
    round_id = args.round
    if round_id is None:
        round_id = 1 if args.keys is None else 1 + secrets.randbelow(2**48)
    return SimulationOptions(
        n=args.n,
        k=k,
        eps0=args.eps0,
        hops=hops,
        hop_workers=args.hop_workers,
        keys=args.keys,
        chaos=args.chaos,
        chaos_kill=args.chaos_kill,
        round_id=round_id,
        dataset=args.dataset,
        region=region,
        broker=args.broker,
        seed=args.seed,
        client_processes=args.client_processes,
        target_delta=args.delta,
        eps=args.eps,
        min_batch=args.min_batch,
        deadline=args.deadline,
        timeout=args.timeout,
        auth=not args.no_auth,
        tls_ca=args.tls_ca,
        accept_loss=args.accept_loss,
        colluders=args.colluders,
        browser_clients=args.browser_clients,
    )


def _run_simulation(options: SimulationOptions, *, quiet: bool) -> dict[str, Any] | None:
    """The round log as JSON, with a progress display unless ``quiet``; None on Ctrl-C."""
    from shuffledp.simulations.pipeline.simulate import run_simulation

    display = None if quiet else _ProgressDisplay(options)
    try:
        if display is not None:
            with display:
                return asyncio.run(run_simulation(options, on_progress=display.update))
        return asyncio.run(run_simulation(options))
    except KeyboardInterrupt:
        return None


class _ProgressDisplay:
    """One progress bar per stage on stderr (rich; plain lines when stderr is not a terminal)."""

    def __init__(self, options: SimulationOptions) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self._progress = Progress(
            TextColumn("{task.description:<10}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[state]}"),
            console=Console(stderr=True),
            transient=False,
        )
        self._tasks: dict[str, Any] = {}
        self._options = options
        stages = [f"clients-{i}" for i in range(options.total_client_processes)]
        stages += [f"hop-{i}" for i in range(options.hops)] + ["analyzer"]
        for stage in stages:  # fixed order: the data flows down the list
            self._tasks[stage] = self._progress.add_task(stage, total=None, state="starting")

    def __enter__(self) -> _ProgressDisplay:
        self._progress.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        if exc_type is not None and issubclass(exc_type, Exception):
            # An error (not Ctrl-C, which keeps them): erase the bars (Progress.stop would add a blank line on a non-terminal): the
            # error's one line is all that is left on the screen.
            self._progress.live.transient = True
            self._progress.live.stop()
            return
        self._progress.__exit__(None, None, None)

    def update(self, counts: dict[str, dict[str, Any]], states: dict[str, dict[str, Any]]) -> None:
        for stage in sorted(set(counts) | set(states), key=_stage_order):
            count = counts.get(stage, {})
            state = str(states.get(stage, {}).get("state", ""))
            total = count.get("total", count.get("expected", None))
            done = count.get("sent", count.get("accepted", 0))
            if stage not in self._tasks:
                self._tasks[stage] = self._progress.add_task(stage, total=total, state=state)
            self._progress.update(self._tasks[stage], completed=done, total=total, state=state)


def _stage_order(stage: str) -> tuple[int, str]:
    if stage.startswith("clients"):
        return (0, stage)
    if stage.startswith("hop-"):
        return (1, stage.rjust(8))
    return (2, stage)


def format_report(log: RoundLog) -> str:
    """The round log as a compact text table (what `shuffledp simulate` prints without --json)."""
    report, sim = log.report, log.simulation
    lines = [
        f"round {report.round}: {report.n_received} of {report.n_expected} reports "
        f"received; k = {report.k}, eps0 = {report.eps0:g}, {sim.n_hops} hops, "
        f"broker: {sim.broker}"
    ]
    lines.extend(_dataset_lines(sim.dataset, sim.dataset_details or {}))
    lines.extend(_histogram_lines(report))
    lines.append("")
    privacy = report.privacy
    if privacy.error is not None:
        lines.append(f"guarantee: none ({privacy.error})")
    else:
        lines.append(
            f"guarantee: eps = {_num(privacy.eps)}, delta <= {_num(privacy.delta)} "
            f"(valid upper bound from {privacy.bound}; delta_lower = "
            f"{_num(privacy.delta_lower)}; computed for n = {privacy.n} received"
            + (
                f": {privacy.n_counted} counted minus {privacy.colluders} colluders)"
                if privacy.colluders
                else ")"
            )
        )
    rejected = {k: v for k, v in report.rejected.items() if v}
    lines.append(
        "rejected: " + (", ".join(f"{k} {v}" for k, v in rejected.items()) if rejected else "none")
    )
    if log.chaos is not None:
        lines.append(_chaos_line(log.chaos))
    timings = log.timings.to_json()
    lines.append(
        "timings (s): " + ", ".join(f"{k.removesuffix('_seconds')} {v}" for k, v in timings.items())
    )
    lines.append(f"randomness: {report.randomness}")
    if sim.browser is not None:
        lines.append(_browser_line(sim.browser, report.n_expected))
    if log.warning:
        lines.append(f"warning: {log.warning}")
    return "\n".join(lines)


def _browser_line(browser: Mapping[str, Any], n: int) -> str:
    """How many clients ran in the browser, which browser, what hop 0 confirmed of them."""
    peak = int(browser.get("peak_memory_bytes", 0)) / 2**20
    confirmed = browser.get("confirmed_by_hop_0")
    receipts = (
        "no receipts without client authentication"
        if confirmed is None
        else f"hop 0 confirmed {confirmed:,}"
    )
    return (
        f"browser: {browser.get('clients', 0):,} of the {n:,} clients ran in headless "
        f"{browser.get('browser', '?')} and sent {browser.get('sent', 0):,} reports ({receipts}; "
        f"peak memory {peak:.0f} MiB): {browser.get('runtime', '')}"
    )


def _histogram_lines(report: Report) -> list[str]:
    """The bins: truth, noisy counts, the two estimates, a bar of truth and shuffle+INV; then
    the TV distances."""
    utility = report.utility
    truth = list(utility.true_histogram) if utility is not None else []
    noisy = report.histogram
    inv = report.estimate.counts or [0.0] * len(noisy)
    n = max(report.n_received, 1)
    ibu_distribution = utility.ibu_distribution if utility is not None else None
    ibu = [p * n for p in ibu_distribution or []] or [0.0] * len(noisy)
    scale = max([*truth, *noisy, 1])
    lines = [
        "",
        f"{'bin':>4} {'true':>7} {'noisy':>7} {'shuffle+INV':>12} {'IBU':>9}  "
        "true (#) and shuffle+INV (|)",
    ]
    width = 30
    for j, count in enumerate(noisy):
        t = truth[j] if truth else 0
        bar = list("#" * round(width * t / scale) + " " * (width + 1))
        bar[min(round(width * inv[j] / scale), width)] = "|"
        lines.append(
            f"{j:>4} {t:>7} {count:>7} {inv[j]:>12.1f} {ibu[j]:>9.1f}  {''.join(bar).rstrip()}"
        )
    if utility is not None:
        tv = utility.tv_distance.to_json()
        lines.append("")
        lines.append(
            "TV distance to the truth: "
            + ", ".join(f"{name} {_num(value)}" for name, value in tv.items())
        )
        if ibu_distribution is not None and report.estimate.distribution is not None:
            pairs = zip(ibu_distribution, report.estimate.distribution, strict=True)
            if max(abs(a - b) for a, b in pairs) < 1e-9:
                lines.append(_SAME_ESTIMATES)
    return lines


_SAME_ESTIMATES = (
    "IBU = shuffle+INV here: the inversion has no negative bin, so it already is the "
    "maximum-likelihood estimate IBU converges to (they differ when a bin goes negative: few "
    "users, small eps0 or large k; docs/estimators.md)"
)


def _chaos_line(chaos: ChaosSummary) -> str:
    injected = ", ".join(f"{k} {v}" for k, v in chaos.injected.items())
    verdict = "as expected" if chaos.rejections_as_expected else "NOT as expected"
    killed = chaos.hop_killed
    restart = (
        f"; {killed.stage} killed (SIGKILL) at {killed.last_progress_accepted} "
        f"accepted and restarted: {killed.restarted}"
        if killed.last_progress_accepted is not None
        else ""
    )
    return (
        f"chaos: injected {chaos.injected_total} ({injected}); hop 0 rejections {verdict} "
        f"({chaos.redelivered_duplicates} redelivered after the restart){restart}; "
        f"n_received == n: {chaos.all_reports_counted_once}"
    )


def _dataset_lines(label: str, details: Mapping[str, Any]) -> list[str]:
    """What the report says about the data: its label, and for check-ins the region, the rows
    read, rejections, rows outside the region, users and the one-report-per-user rule."""
    lines = [f"dataset: {label}"] if label else []
    if details.get("kind") == "gowalla":
        lines.append(f"  region: {details['region']}")
        lines.append(
            f"  file ({details['format']}): {details['load_summary']}; "
            f"{details['inside_region']:,} inside the region, {details['outside_region']:,} "
            "outside"
        )
        if "first_time" in details:
            lines.append(
                f"  check-ins inside from {details['first_time']} to {details['last_time']}"
            )
        lines.append(
            f"  {details['users']:,} {details['users_are']}; reporting: {details['selection']}"
        )
        lines.append(f"  rule: {details['rule']}")
    return lines


_num = format_number
