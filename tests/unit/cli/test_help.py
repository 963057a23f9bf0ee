"""Every subcommand's --help: an "examples:" section of real invocations, defaults shown, and one
metavar per flag across the commands.

The examples are parsed with the real parser, so an example that names a removed flag or breaks a
rule checked at parse time fails here.
"""

from __future__ import annotations

import argparse
import shlex

import pytest

from shuffledp.cli import build_parser


def _subcommands(
    parser: argparse.ArgumentParser, path: str = ""
) -> dict[str, argparse.ArgumentParser]:
    """Every (nested) subcommand's parser by its command path, e.g. 'keys init'."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                full = f"{path} {name}".strip()
                found[full] = sub
                found.update(_subcommands(sub, full))
    return found


PARSER = build_parser()
COMMANDS = _subcommands(PARSER)


def _examples(parser: argparse.ArgumentParser) -> list[str]:
    """The command lines of the parser's "examples:" epilog (comments and pipes removed)."""
    epilog = parser.epilog or ""
    assert epilog.startswith("examples:\n"), epilog
    lines = []
    for line in epilog.splitlines()[1:]:
        command = line.split("#", 1)[0].strip()
        command = command.rsplit("| ", 1)[-1]  # `zcat FILE | shuffledp stream --dataset -`
        lines.append(command)
    return lines


def test_every_command_is_covered() -> None:
    expected = {"account", "broker", "keys", "keys init", "hop", "analyzer", "clients"}
    expected |= {"simulate", "experiment", "stream", "audit", "data", "data fetch"}
    expected |= {"round", "round init", "round show"}
    assert set(COMMANDS) == expected


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_ends_with_examples_that_parse(command: str) -> None:
    """At least two examples of the command itself (a component's may also show the `keys init`
    it needs first); every example is accepted by the real parser."""
    parser = COMMANDS[command]
    assert "\nexamples:\n  shuffledp " in parser.format_help()
    own = 0
    for example in _examples(parser):
        argv = shlex.split(example)
        assert argv[0] == "shuffledp", example
        args = build_parser().parse_args(argv[1:])  # SystemExit(2) on a bad example
        nested = (
            getattr(args, "keys_command", None)
            or getattr(args, "data_command", None)
            or getattr(args, "round_command", None)
        )
        typed = f"{args.command} {nested or ''}".strip()
        # a group's examples are those of its one nested command (keys init, data fetch)
        own += typed == command or typed in {f"{command} init", f"{command} fetch"}
    assert own >= 2


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_defaults_are_shown(command: str) -> None:
    """Each option with a default (not None, not an off flag) says it in its help line."""
    parser = COMMANDS[command]
    formatter = parser._get_formatter()
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        if action.default in (None, False, argparse.SUPPRESS):
            continue
        shown = formatter._expand_help(action)
        assert "default" in shown, (command, action.option_strings, shown)
        if "(default: %(default)s)" in (formatter._get_help_string(action) or ""):
            assert f"(default: {action.default})" in shown


def _metavars() -> dict[str, set[str]]:
    """Each flag that takes a value: the metavars it is shown with across the commands."""
    seen: dict[str, set[str]] = {}
    for command, parser in COMMANDS.items():
        for action in parser._actions:
            if not action.option_strings or action.nargs == 0 or action.choices is not None:
                continue
            if isinstance(action, argparse._SubParsersAction):
                continue
            assert action.metavar is not None, (command, action.option_strings)
            for flag in action.option_strings:
                seen.setdefault(flag, set()).add(str(action.metavar))
    return seen


def test_value_flags_have_upper_case_metavars() -> None:
    for flag, metavars in _metavars().items():
        for metavar in metavars:
            words = metavar.replace("x", "").replace("|synthetic", "").replace("|-", "")
            assert words == words.upper(), (flag, metavar)


def test_one_metavar_per_flag_across_commands() -> None:
    """--keys is DIR, --broker URL, --seed SEED... wherever they appear. Exempt: --dataset (a
    spec, a check-in file or stream) and --out (the analyzer's report FILE, the experiments' DIR),
    whose values differ in kind between commands."""
    exempt = {"--dataset", "--out"}
    mixed = {flag: m for flag, m in _metavars().items() if len(m) > 1 and flag not in exempt}
    assert mixed == {}
