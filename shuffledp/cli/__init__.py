"""The `shuffledp` command line: `main.py` dispatches, one module per command.

Only this package parses arguments and prints; everything below it is a library that raises
:class:`shuffledp.errors.ShuffledpError` subclasses, which `main` turns into one line and an exit
status (2 for bad input, 1 for a runtime failure).
"""

from shuffledp.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
