"""The `shuffledp` command: one subcommand per component."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from shuffledp import __version__
from shuffledp.cli import account as account_cli
from shuffledp.cli import audit as audit_cli
from shuffledp.cli import broker as broker_cli
from shuffledp.cli import components as components_cli
from shuffledp.cli import experiment as experiment_cli
from shuffledp.cli import keys as keys_cli
from shuffledp.cli import simulate as simulate_cli
from shuffledp.cli import stream as stream_cli
from shuffledp.errors import InvalidParameterError, OutsideConditionsError


class _OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line on stderr and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog="shuffledp",
        description="The shuffle model of differential privacy with k-randomized response.",
    )
    parser.add_argument("--version", action="version", version=f"shuffledp {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    account_cli.add_parser(sub)
    broker_cli.add_parser(sub)
    keys_cli.add_parser(sub)
    components_cli.add_parsers(sub)
    simulate_cli.add_parser(sub)
    experiment_cli.add_parser(sub)
    stream_cli.add_parser(sub)
    audit_cli.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except (InvalidParameterError, OutsideConditionsError) as exc:
        print(f"shuffledp {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
