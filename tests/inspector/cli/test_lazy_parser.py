"""`mosqdb CMD` builds only CMD's module's parser: the names each command module declares (read as text
by the CLI, not imported) must be what its register() adds, and the one-command parser must equal the full one."""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil

import pytest

import inspector.commands
from inspector.cli import COMMANDS_DIR, Parser, build_parser, command_table, declared


def registered(module: str) -> tuple[str, ...]:
    parser = Parser(prog="mosqdb")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    importlib.import_module(module).register(sub)
    return tuple(sub.choices)


def command_modules() -> list[str]:
    return [m.name for m in pkgutil.iter_modules(inspector.commands.__path__, "inspector.commands.")
            if not m.ispkg and not m.name.rsplit(".", 1)[-1].startswith("_")]


def choices(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]


@pytest.mark.parametrize("module", command_modules())
def test_every_module_declares_what_it_registers(module: str) -> None:
    """Every module directly in inspector/commands/ is a command module (helpers live in the sub-package),
    and its COMMANDS line, as the CLI reads it and as Python does, names what register() adds."""
    mod = importlib.import_module(module)
    with open(os.path.join(COMMANDS_DIR, module.rsplit(".", 1)[-1] + ".py"), "rb") as fh:
        got = declared(fh.read())
    assert got is not None, f"{module}: no COMMANDS = (...) line"
    assert got[0] == mod.COMMANDS == registered(module)
    assert got[1] == getattr(mod, "HELP_ORDER", got[1])


def test_table_lists_every_module() -> None:
    table = command_table()
    assert set(table.values()) == set(command_modules())
    assert len(table) == sum(len(registered(m)) for m in command_modules())  # no name declared twice


def test_one_command_parser_equals_full_one() -> None:
    full = choices(build_parser())
    assert list(full) == list(command_table())  # the help lists them in the declared order
    for command in command_table():
        one = choices(build_parser(command))
        assert command in one
        assert one[command].format_help() == full[command].format_help()
        assert one[command].prog == full[command].prog


def test_unknown_first_word_builds_everything() -> None:
    assert set(choices(build_parser("no-such"))) == set(choices(build_parser()))


def test_a_new_module_is_found_by_its_declaration(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A module is a command by its COMMANDS line alone; one without a HELP_ORDER comes last; helpers
    (no COMMANDS line), private modules and sub-packages are not commands."""
    (tmp_path / "zeta.py").write_text('COMMANDS = ("zeta", "zed")\n')
    (tmp_path / "alpha.py").write_text("COMMANDS = ('alpha',)\nHELP_ORDER = 5\n")
    (tmp_path / "helper.py").write_text("NAMES = ('x',)\n")
    (tmp_path / "_private.py").write_text("COMMANDS = ('private',)\n")
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "opts.py").write_text("COMMANDS = ('opts',)\n")
    assert command_table(str(tmp_path)) == {"alpha": "inspector.commands.alpha", "zeta": "inspector.commands.zeta",
                                            "zed": "inspector.commands.zeta"}
