"""The `shuffledp` command: one subcommand per component.

Errors leave every subcommand the same way: one line ``shuffledp COMMAND: error: MESSAGE`` on
stderr, the message naming the flag, and the exit status

- 2 for bad input: a flag, a parameter, an input file, an output path that cannot be written
  (:class:`~shuffledp.errors.InvalidParameterError`, argparse's usage errors) or a bound asked
  outside its conditions (:class:`~shuffledp.errors.OutsideConditionsError`);
- 1 for a run that failed: an unreachable broker, a failed round, a file system error
  (:class:`~shuffledp.errors.OperationalError`, :class:`OSError`).

Anything else is a bug and keeps its traceback. Subcommands have further statuses of their own
(3 and 4 in :mod:`shuffledp.cli.components`, 130 on Ctrl-C, 143 on SIGTERM, 129 on SIGHUP).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import threading
from collections.abc import Sequence
from typing import Any

from shuffledp import __version__
from shuffledp.cli import account as account_cli
from shuffledp.cli import audit as audit_cli
from shuffledp.cli import broker as broker_cli
from shuffledp.cli import components as components_cli
from shuffledp.cli import data as data_cli
from shuffledp.cli import experiment as experiment_cli
from shuffledp.cli import keys as keys_cli
from shuffledp.cli import round as round_cli
from shuffledp.cli import signals
from shuffledp.cli import simulate as simulate_cli
from shuffledp.cli import stream as stream_cli
from shuffledp.errors import (
    InvalidParameterError,
    OperationalError,
    OutsideConditionsError,
    ShuffledpError,
)
from shuffledp.protocol.delivery import (
    EXIT_LOST,
    EXIT_PUBLISHED,
    ReportExistsError,
    ReportsLostError,
)

__all__ = ["EXIT_BROKEN_PIPE", "EXIT_FAILURE", "EXIT_USAGE", "build_parser", "exit_status", "main"]

EXIT_USAGE = 2
EXIT_FAILURE = 1
#: The reader of standard output went away (``shuffledp experiment ... | head``): no message,
#: the status a shell gives a process killed by SIGPIPE (128 + 13).
EXIT_BROKEN_PIPE = 141

# argparse says "argument --eps0: must be > 0, got -1"; the converters of shuffledp.cli.argtypes
# write their rule to follow the flag directly: "--eps0 must be > 0, got -1".
_ARGUMENT_RULE = re.compile(r"^argument (-[-\w]+(?:/-[-\w]+)*): (must )")


# argparse takes "-1e-6" for an option (its negative-number pattern has no exponent) and says
# "--delta: expected one argument"; this one also reads exponents, so the value reaches the
# flag's converter, which names the rule: "--delta must be in (0, 1), got -1e-06".
_NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


class _OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line on stderr and exit code 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _NEGATIVE_NUMBER  # see _NEGATIVE_NUMBER

    def error(self, message: str) -> None:  # type: ignore[override]
        message = _ARGUMENT_RULE.sub(r"\1 \2", " ".join(message.split()))
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog="shuffledp",
        description="The shuffle model of differential privacy with k-randomized response.",
        epilog="Run `shuffledp COMMAND --help` for a command's options and examples. Errors are "
        "one line on stderr; exit status 2 for bad input, 1 for a run that failed.",
    )
    parser.add_argument("--version", action="version", version=f"shuffledp {__version__}")
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=_OneLineParser
    )
    account_cli.add_parser(sub)
    broker_cli.add_parser(sub)
    keys_cli.add_parser(sub)
    round_cli.add_parser(sub)
    components_cli.add_parsers(sub)
    simulate_cli.add_parser(sub)
    experiment_cli.add_parser(sub)
    data_cli.add_parser(sub)
    stream_cli.add_parser(sub)
    audit_cli.add_parser(sub)
    return parser


def exit_status(error: BaseException) -> int | None:
    """The exit status for ``error``, or None for an error that is a bug (shown in full)."""
    if isinstance(error, InvalidParameterError | OutsideConditionsError):
        return EXIT_USAGE
    if isinstance(error, ReportsLostError):
        return EXIT_LOST
    if isinstance(error, ReportExistsError):
        return EXIT_PUBLISHED
    if isinstance(error, OperationalError | ShuffledpError | OSError):
        return EXIT_FAILURE
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` (default: the process's command line) and return its exit
    status. Run as the process's command (``argv`` None, main thread), SIGTERM and SIGHUP stop
    it as a Ctrl-C does (:mod:`shuffledp.cli.signals`), with status 143 / 129."""
    if argv is None and threading.current_thread() is threading.main_thread():
        signals.install()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        # A command with nothing of its own to stop (account, audit, keys ...): one line.
        print(f"shuffledp {_command(args)}: interrupted", file=sys.stderr)
        return signals.interrupted_status()
    except BrokenPipeError:
        _discard_stdout()
        return EXIT_BROKEN_PIPE
    except (ShuffledpError, OSError) as exc:
        status = exit_status(exc)
        assert status is not None
        print(f"shuffledp {_command(args)}: error: {_one_line(exc)}", file=sys.stderr)
        return status
    except ExceptionGroup as group:
        # Concurrent publishes (publish_all's TaskGroup) that failed for one reason, e.g. the
        # connection lost for good or taken over: the first error's one line, not a traceback.
        first = _first_leaf(group)
        status = exit_status(first)
        if status is None:
            raise
        print(f"shuffledp {_command(args)}: error: {_one_line(first)}", file=sys.stderr)
        return status
    # Commands that stop their children on a Ctrl-C return 130; SIGTERM / SIGHUP take that path.
    return signals.interrupted_status() if code == signals.EXIT_INTERRUPTED else code


def _first_leaf(group: BaseExceptionGroup[Any]) -> BaseException:
    """The first error of ``group`` that is not itself a group."""
    first: BaseException = group
    while isinstance(first, BaseExceptionGroup) and first.exceptions:
        first = first.exceptions[0]
    return first


def _discard_stdout() -> None:
    """Point standard output at /dev/null, so that the interpreter's final flush of what is
    still buffered does not fail on the closed pipe again (Python's documented recipe for
    SIGPIPE: Python ignores the signal and raises BrokenPipeError instead)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def forget_caught_interrupt() -> None:
    """Keep the exit status of a run whose Ctrl-C was caught and handled (status 130).

    CPython (3.11, 3.12) records "KeyboardInterrupt was unhandled" whenever code run from a
    *string* by exec/eval ends in KeyboardInterrupt, even when a caller catches it later, and
    under ``python -m`` the interpreter then kills itself with SIGINT at exit, replacing the
    status we return. dataclasses and namedtuple build their methods with string exec, so a
    Ctrl-C landing while one is created (a lazy import) trips it. Every string eval clears the
    record first, so an empty one before exiting restores our status; it is harmless where
    the interpreter behaves otherwise.
    """
    exec("")  # a constant empty string: the call exists only for its side effect


def _command(args: argparse.Namespace) -> str:
    """The command as typed: `keys init`, `data fetch`, not just `keys`."""
    nested = (
        getattr(args, "keys_command", None)
        or getattr(args, "data_command", None)
        or getattr(args, "round_command", None)
    )
    return f"{args.command} {nested}" if nested else str(args.command)


def _one_line(error: BaseException) -> str:
    if isinstance(error, OSError) and not isinstance(error, ShuffledpError) and error.strerror:
        where = f"{error.filename}: " if error.filename is not None else ""
        return f"{where}{error.strerror}"
    return " ".join(str(error).split())


if __name__ == "__main__":
    status = main()
    forget_caught_interrupt()
    sys.exit(status)
