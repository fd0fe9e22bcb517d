"""Start-up (issue 34): `porttrack --help` lists the commands from `porttrack.cli.COMMANDS` without
importing a command module, `porttrack <command> --help` imports that command's module alone, and
neither loads a heavy library. These check what is imported, never how long it takes
(benchmarks/startup.py times it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from porttrack import cli as cli_mod

ROOT = Path(__file__).resolve().parents[2]

# what `porttrack --help` may load of porttrack: the command layer's own plumbing
HELP_MODULES = {"porttrack", "porttrack.cli", "porttrack.cli.terminal", "porttrack.cli.testhooks", "porttrack.common",
                "porttrack.common.errors", "porttrack.common.secrets", "porttrack.common.text"}
# libraries no `--help` needs (each 5-60 ms to import)
HEAVY = {"rich", "pydantic", "jinja2", "requests", "urllib3", "github", "yaml", "jsonschema", "unidiff", "pyflakes",
         "platformdirs", "pygments", "markdown_it", "cmarkgfm"}
COMMAND_MODULES = {info.module_path for info in cli_mod.COMMANDS.values()}

# runs porttrack's entry point in a fresh interpreter and prints what it left in sys.modules
_PROBE = """
import contextlib, io, sys
from porttrack.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    code = main(sys.argv[1:])
loaded = sorted(sys.modules)
import json
print(json.dumps({"code": code, "modules": loaded, "out": out.getvalue()}))
"""


def _run(*argv: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(COLUMNS="80", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", _PROBE, *argv], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["code"] == 0, result
    return result


def _ours(modules: list[str]) -> set[str]:
    return {m for m in modules if m == "porttrack" or m.startswith("porttrack.")}


def _heavy(modules: list[str]) -> set[str]:
    return {m.split(".")[0] for m in modules} & HEAVY


def test_top_level_help_imports_no_command_module_and_no_heavy_library():
    result = _run("--help")
    assert _ours(result["modules"]) <= HELP_MODULES, sorted(_ours(result["modules"]) - HELP_MODULES)
    assert not _heavy(result["modules"])
    listed = [line.split()[0] for line in result["out"].split("Commands:\n", 1)[1].split("\n\n")[0].splitlines()]
    assert listed == sorted(cli_mod.COMMANDS), "every command in the table is listed, and nothing else"


@pytest.mark.parametrize("name", sorted(cli_mod.COMMANDS))
def test_a_commands_help_imports_its_own_module_alone(name):
    result = _run(name, "--help")
    own = cli_mod.COMMANDS[name].module_path
    assert own in result["modules"]
    assert _ours(result["modules"]) & COMMAND_MODULES == {own}
    assert not _heavy(result["modules"]), f"porttrack {name} --help loads {sorted(_heavy(result['modules']))}"
    assert result["out"].startswith(f"Usage: porttrack {name} ")


def test_the_table_names_every_command_with_its_own_short_help():
    """The table's short help is the first sentence of the command's docstring, so the listing
    reads as click would print it with every module loaded; each entry names a click command of
    that name defined in its module; resolving every name gives `cli` exactly the table's commands."""
    for name, info in cli_mod.COMMANDS.items():
        command = cli_mod.load_command(name)
        assert isinstance(command, click.Command) and command.name == name, name
        assert command.callback.__module__ == info.module_path, name
        assert info.summary == command.get_short_help_str(limit=10**6), name
    for name in cli_mod.COMMANDS:
        assert cli_mod.cli.get_command(click.Context(cli_mod.cli), name) is cli_mod.load_command(name)
    assert set(cli_mod.cli.commands) == set(cli_mod.COMMANDS)


def test_the_lazy_listing_is_clicks_own():
    lazy = _run("--help")["out"]
    for name in cli_mod.COMMANDS:
        cli_mod.cli.get_command(click.Context(cli_mod.cli), name)
    # COLUMNS=80 in _run: click lays help out 2 columns narrower
    loaded = cli_mod.cli.get_help(click.Context(cli_mod.cli, info_name="porttrack", terminal_width=78,
                                                **cli_mod.cli.context_settings))
    assert lazy.rstrip("\n") == loaded.rstrip("\n")
    formatter = click.HelpFormatter(width=78)
    click.Group.format_commands(cli_mod.cli, click.Context(cli_mod.cli), formatter)  # click's, all loaded
    assert formatter.getvalue() in lazy


# what `status --offline` has no use for: the GitHub door, the live searches and their threads, and
# the diff parser when no diff is parsed (issue 34: the offline path imports what it reads)
OFFLINE_UNUSED = {"porttrack.github.client", "porttrack.github.graphql", "porttrack.github.policy",
                  "porttrack.observe.collisions", "concurrent.futures", "unidiff"}


def test_status_offline_imports_no_github_door_no_search_and_no_diff_parser():
    """The checkout's own workspace (tracks.yaml and state/upstream.json, no fork checkout)."""
    result = _run("status", "--offline")
    assert "upstream state as of" in result["out"]
    assert not set(result["modules"]) & OFFLINE_UNUSED, sorted(set(result["modules"]) & OFFLINE_UNUSED)
