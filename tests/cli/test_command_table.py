"""The table of subcommands in ``cli/main.py`` stays in step with the commands it loads:
every module exists and defines its command, and the short help ``looprun --help``
shows from the table is the command's own, so listing them needs to import none."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from looprun.cli.main import COMMANDS, main

COMMANDS_DIR = Path(__file__).resolve().parents[2] / "engine" / "looprun" / "cli" / "commands"


def _loaded(name: str) -> click.Command:
    return importlib.import_module(COMMANDS[name].module).command


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_entry_names_a_module_that_defines_its_command(name: str) -> None:
    command = _loaded(name)
    assert isinstance(command, click.Command)
    assert command.name == name
    assert main.get_command(click.Context(main), name) is command


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_entry_short_help_is_the_commands_own(name: str) -> None:
    assert COMMANDS[name].short_help == _loaded(name).get_short_help_str(limit=10**6)


def test_every_command_module_is_in_the_table() -> None:
    modules = {p.stem for p in COMMANDS_DIR.glob("*.py") if p.stem != "__init__"}
    assert {entry.module.rpartition(".")[2] for entry in COMMANDS.values()} == modules


@pytest.mark.parametrize("width", [40, 50, 80, 120, 200])
def test_the_listing_from_the_table_is_clicks_own_from_the_commands(width: int) -> None:
    ctx = click.Context(main)
    ours, clicks = click.HelpFormatter(width=width), click.HelpFormatter(width=width)
    main.format_commands(ctx, ours)
    click.Group.format_commands(main, ctx, clicks)  # loads every command
    assert ours.getvalue() == clicks.getvalue()


def test_help_imports_no_command_module(tmp_path: Path) -> None:
    code = (
        "import json, runpy, sys\n"
        "sys.argv = ['looprun', '--help']\n"
        "try:\n"
        "    runpy.run_module('looprun', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print()\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('looprun.cli.'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    loaded = json.loads(out.stdout.splitlines()[-1])
    assert "Commands:" in out.stdout
    assert not [m for m in loaded if m.startswith("looprun.cli.commands.")], loaded
