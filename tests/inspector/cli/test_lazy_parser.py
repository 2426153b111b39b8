"""`mosqdb CMD` builds only CMD's module's parser: the table saying which module has which command
must match what the modules register, and the one-command parser must equal the full one for it."""

from __future__ import annotations

import argparse
import importlib

from inspector.cli import COMMAND_MODULES, COMMANDS, Parser, build_parser


def registered() -> dict[str, str]:
    out = {}
    for name in COMMAND_MODULES:
        parser = Parser(prog="mosqdb")
        sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
        importlib.import_module(name).register(sub)
        out.update(dict.fromkeys(sub.choices, name))
    return out


def choices(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]


def test_table_matches_registration() -> None:
    assert registered() == COMMANDS


def test_one_command_parser_equals_full_one() -> None:
    full = choices(build_parser())
    for command in COMMANDS:
        one = choices(build_parser(command))
        assert command in one
        assert one[command].format_help() == full[command].format_help()
        assert one[command].prog == full[command].prog


def test_unknown_first_word_builds_everything() -> None:
    assert set(choices(build_parser("no-such"))) == set(choices(build_parser()))
