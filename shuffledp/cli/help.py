"""How every subcommand's help looks: defaults shown, descriptions kept as written, and an
"examples:" section of real invocations at the end."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

__all__ = ["HelpFormatter", "add_command"]


class HelpFormatter(argparse.HelpFormatter):
    """Descriptions and epilogs wrapped to the terminal line by line: a line that starts with
    spaces (an example, a list) is kept as written. Each option's default is appended as
    ``(default: VALUE)`` unless its help already says what the default is, or it has none (None,
    False: a flag that is off, an option that is absent)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        lines = []
        for line in text.splitlines():
            if not line.strip() or line.startswith(" "):
                lines.append(indent + line)
            else:
                lines.append(super()._fill_text(line, width, indent))
        return "\n".join(lines)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            "default" in text
            or default is None
            or default is False
            or default is argparse.SUPPRESS
            or not action.option_strings
        ):
            return text
        return text + " (default: %(default)s)"


def add_command(
    subparsers: Any,
    name: str,
    *,
    help: str,
    description: str,
    examples: Sequence[str],
) -> argparse.ArgumentParser:
    """A subcommand parser with :class:`HelpFormatter` and an epilog listing ``examples`` (each a
    command line, or a ``# comment`` line)."""
    if not examples:
        raise ValueError(f"subcommand {name!r} needs at least one example")
    lines = "\n".join(f"  {example}" for example in examples)
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=help,
        description=description,
        epilog=f"examples:\n{lines}",
        formatter_class=HelpFormatter,
    )
    return parser
