"""The command layer: parse options, call the core with plain arguments, print, return an exit code.

Only this package imports click. Heavy modules (PyGithub, jinja2, pydantic, jsonschema) are imported
inside the commands, and so are the few core modules that are slow to load themselves
(`porttrack.github.client`, `porttrack.report`), each marked where it is imported. The command
modules themselves are imported lazily (`COMMANDS`, `LazyGroup`, as pip's `commands/__init__.py`):
a command's module only when that command runs or shows its own help; `porttrack --help` lists the
commands from the table and imports none of them. The table names each command's module and its
click command there (each module also registers its commands on `cli` when imported); `main()`
is the one error boundary that turns `PorttrackError`s into a one-line message and the exit code
from the published table (`porttrack.common.errors.ExitCode`).
"""

from __future__ import annotations

import importlib
import io
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import click
from click.shell_completion import CompletionItem

from porttrack import __version__
from porttrack.cli import testhooks
from porttrack.cli.terminal import COLOR_CHOICES, Terminal, fit_stderr, render, show
from porttrack.common.errors import EXIT_CODE_MEANINGS, ExitCode, PorttrackError
from porttrack.common.secrets import redact, register_configured
from porttrack.common.text import for_terminal_lines

if TYPE_CHECKING:  # the doors are opened inside the properties: `--help` loads none of them
    from porttrack.git.repo import GitRepo
    from porttrack.github.client import GitHubClient
    from porttrack.tracks.config import Config
    from porttrack.workspace.files import Workspace


@dataclass
class Context:
    """What every command may need, resolved lazily so a bad tracks.yaml only matters when read.

    The doors (STYLE.md 12) are opened here, once per command, and handed to the core: the fork
    checkout (`fork`, `fork_or_none`, `fork_or_problem`) and a GitHub client per repository
    (`github`). --fork (or PORTTRACK_FORK) reaches the config as its fork.checkout
    (`tracks_file.load_config`), so every reader of the config sees the same checkout."""

    workspace_arg: str | None = None
    fork_arg: str | None = None
    api_url_arg: str | None = None
    color_arg: str = "auto"
    no_pager: bool = False
    _cache: dict[str, Any] = field(default_factory=dict)

    @property
    def workspace(self) -> Workspace:
        if "ws" not in self._cache:
            from porttrack.workspace.files import Workspace

            self._cache["ws"] = Workspace.locate(self.workspace_arg)
        return self._cache["ws"]

    @property
    def config(self) -> "Config":
        if "config" not in self._cache:
            from porttrack.tracks.file import load_config  # here, not at the top: ~20 ms of `--help`

            ws = self.workspace
            self._cache["config"] = load_config(ws.tracks_file, fork_override=self.fork_arg, cache_dir=ws.cache_dir)
        return self._cache["config"]

    @property
    def terminal(self) -> Terminal:
        """How stdout is shown: width, colour, pager (`porttrack.cli.terminal`)."""
        if "terminal" not in self._cache:
            self._cache["terminal"] = Terminal.resolve(self.color_arg, self.no_pager)
        return self._cache["terminal"]

    def show(self, parts: Any) -> None:
        """Human output: the parts laid out for the terminal, paged when long."""
        term = self.terminal
        show(term, render(term, parts))

    @property
    def fork(self) -> GitRepo:
        """The fork checkout as a `GitRepo`; `git.repo.NO_FORK_CHECKOUT` when there is none."""
        if "fork" not in self._cache:
            from porttrack.git.repo import open_fork

            self._cache["fork"] = open_fork(self.config.fork_checkout())
        return self._cache["fork"]

    @property
    def fork_or_none(self) -> GitRepo | None:
        """The fork checkout when one is configured and present, else None (for read commands that
        can say "unknown" without it). A checkout that is configured but broken still raises."""
        if self.config.fork_checkout() is None:
            return None
        return self.fork

    @property
    def fork_or_problem(self) -> tuple[GitRepo | None, str | None]:
        """(the fork checkout, None), or (None, why there is none; None: none is configured or its
        folder is gone): for what says "unknown" rather than fail without one (hand-port coverage),
        even where a configured checkout is broken."""
        path = self.config.fork_checkout()
        if path is None or not path.exists():
            return None, None
        try:
            return self.fork, None
        except PorttrackError as exc:
            return None, str(exc)

    def require_tracked(self, number: int) -> None:
        """Refuse a PR number no track names (nor stacked under one), before anything is asked
        of GitHub or git: "#4880 is not tracked; tracked: …; did you mean #48804?" (usage)."""
        from porttrack.take.source import check_tracked
        from porttrack.workspace import state as state_mod  # here: `--help` loads no recorded state code

        check_tracked(self.config, state_mod.load(self.workspace.upstream_state_file, self.config.upstream.repo), number)

    def github(self, repo: str, *, etags: bool = True) -> "GitHubClient":
        """The GitHub client for `repo` ("owner/name"): token and API base from the environment,
        ETags cached in the workspace (`etags=False`: every read fresh, for what decides on a write).
        Without a token it is unauthenticated (`GitHubClient.authenticated`): reads of a public
        repository work, writes are refused; a command that writes checks for a token first.
        Building it sends nothing (PyGithub loads on first request)."""
        key = f"github:{repo}:{etags}"
        if key not in self._cache:
            from porttrack.github.client import client_for  # here, not at the top: 20-50 ms of `--help`

            self._cache[key] = client_for(repo, self.api_url_arg, self.workspace.cache_dir if etags else None)
        return self._cache[key]


pass_ctx = click.make_pass_decorator(Context)


def completes(kind: str):
    """A click `shell_complete=` callback: `kind` values from the workspace (porttrack.cli.completion),
    found through --workspace when it was typed before the word being completed."""

    def complete(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
        # here, not at the top: completion reads tracks.yaml and the queue (~25 ms of imports
        # that `--help` and every other command need not pay)
        from porttrack.cli import completion

        workspace = ctx.find_root().params.get("workspace")
        return [CompletionItem(value, help=words) for value, words in completion.candidates(kind, incomplete, workspace)]

    return complete


def examples(*lines: str) -> str:
    """A command's `--help` epilog: command lines a user can copy, shown as written (click's \\b keeps
    the lines). They name no vLLM model or backend: `--help` cannot know the workspace's profile."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


def _exit_code_epilog() -> str:
    rows = "\n".join(f"  {int(code):>3}  {meaning}" for code, meaning in EXIT_CODE_MEANINGS.items())
    return f"\b\nExit codes:\n{rows}"


class CommandInfo(NamedTuple):
    """Where a command lives: the module that defines it, the click command's name there, and its
    short help as `porttrack --help` shows it (pip's `commands.CommandInfo`)."""

    module_path: str
    attribute: str
    summary: str


# Every command, in the README's order: the module defining it (a full module path, so a move of
# modules rewrites this one table), its click command there, and its short help (the first sentence
# of its docstring; tests/cli/test_startup.py checks each against the command's own). A command's module
# is imported only when that command is resolved (run, completed, or asked for its own --help).
COMMANDS: dict[str, CommandInfo] = {
    "status": CommandInfo("porttrack.cli.status", "status", "Poll every tracked PR, record its state, and show per track what changed and what to do next."),
    "eligibility": CommandInfo("porttrack.cli.eligibility", "eligibility", "Deployment targets × tracks (under the vllm-gpu profile, its models): eligible, not "
                                                                          "(which requirement failed), or conditional (which proof is pending)."),
    "import": CommandInfo("porttrack.cli.take", "import_", "Take the stable, separable hunks of upstream PR into the patch queue."),
    "refresh": CommandInfo("porttrack.cli.take", "refresh", "Per hunk, what changed upstream since the PR was imported (new / removed / changed / "
                                                            "unchanged); the queue changes only with --update."),
    "queue": CommandInfo("porttrack.cli.queue", "queue_", "List the queued patches: state, PR, track, hunks taken and left out, and hand-port coverage."),
    "drop": CommandInfo("porttrack.cli.queue", "drop", "Retire a queued patch (by name, unique prefix, or PR number), recording why."),
    "gate": CommandInfo("porttrack.cli.gates", "gate", "Run a patch's gate job and judge its evidence."),
    "promote": CommandInfo("porttrack.cli.gates", "promote", "Make a patch default-enabled — refused unless the latest non-superseded evidence "
                                                             "satisfies its gate for every required cell on every required target."),
    "demote": CommandInfo("porttrack.cli.gates", "demote", "Take a patch out of the default build (it stays in staging); its state follows the evidence."),
    "evidence": CommandInfo("porttrack.cli.gates", "evidence_group", "Evidence records: append-only results of gate jobs, and their corrections."),
    "report": CommandInfo("porttrack.cli.report", "report", "Reports for the team: the weekly status issue."),
    "apply": CommandInfo("porttrack.cli.apply", "apply_command", "Build the fork branch from its upstream base plus the patch queue, one commit per patch."),
    "verify-converged": CommandInfo("porttrack.cli.converge", "verify_converged", "Prove that a merged upstream PR is present in the fork: ancestry, "
                                                                                  "then patch-id, then per-hunk content (with upstream churn)."),
    "init": CommandInfo("porttrack.cli.init", "init_command", "Create a workspace in FOLDER: a commented tracks.yaml (for --profile), an empty patch "
                                                              "queue, templates/, .gitignore, and the fork checkout (a blobless clone with an `upstream` "
                                                              "remote, or --fork-checkout)."),
    "doctor": CommandInfo("porttrack.cli.doctor", "doctor_command", "Check the workspace, the fork checkout and its upstream remote, the token and "
                                                                    "GitHub, quilt and runner labels: one line each, and the command that fixes what is broken."),
}


def load_command(name: str) -> click.Command:
    """The click command `name`, its module imported now (a name not in `COMMANDS`: KeyError).
    Importing it also registers its commands on `cli` (`@cli.command`); the table does not rely on
    that, so a module may drop the registration (`@click.command`) without a change here."""
    info = COMMANDS[name]
    return getattr(importlib.import_module(info.module_path), info.attribute)


class LazyGroup(click.Group):
    """`cli`: its commands come from `COMMANDS`, each module imported when its command is first
    resolved. Listing them (`--help`, completion of the command word) imports nothing."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.add_command(load_command(cmd_name), cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's own layout, with the short help of a command not yet imported from the table."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            command = self.commands.get(name)
            if command is None:
                rows.append((name, click.Command(name, help=COMMANDS[name].summary).get_short_help_str(limit)))  # click's cut
            elif not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, epilog=examples("porttrack init work --upstream OWNER/NAME --fork YOU/NAME --profile neutral",
                             "porttrack status", "porttrack -v status --json") + "\n\n" + _exit_code_epilog(), context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="porttrack")
@click.option("--workspace", "-C", metavar="DIR", help="Workspace holding tracks.yaml [env PORTTRACK_WORKSPACE; default: nearest folder up].")
@click.option("--fork", "fork", metavar="DIR", help="The fork's local checkout [env PORTTRACK_FORK; default: fork.checkout in tracks.yaml].")
@click.option("--api-url", metavar="URL", help="GitHub REST API base [env GITHUB_API_URL; default https://api.github.com].")
@click.option("--color", type=click.Choice(COLOR_CHOICES), default="auto", show_default=True,
              help="Colour states: auto is on a terminal unless NO_COLOR is set.")
@click.option("--no-pager", is_flag=True, help="Never page long output (it is paged only on a terminal).")
@click.option("--verbose", "-v", is_flag=True, help="Log each git command and GitHub request, with its time, to stderr (never a token).")
@click.pass_context
def cli(ctx: click.Context, workspace: str | None, fork: str | None, api_url: str | None, color: str, no_pager: bool,
        verbose: bool) -> None:
    """Follow upstream pull requests into a downstream fork: observe, take stable hunks, apply,
    prove, converge, report."""
    ctx.obj = Context(workspace_arg=workspace, fork_arg=fork or os.environ.get("PORTTRACK_FORK"), api_url_arg=api_url,
                      color_arg=color, no_pager=no_pager)
    if verbose:
        from porttrack.common import trace  # here, not at the top: `--help` imports nothing for it

        trace.enable(_to_stderr)
        ctx.call_on_close(lambda: trace.enable(None))  # in-process callers (tests) run many commands
    if os.environ.get(testhooks.PAUSE_ENV) or os.environ.get(testhooks.TRACE_ENV):  # a crash test's pause points
        from porttrack.workspace import files

        files.install_pause(testhooks.checkpoint)


def _to_stderr(line: str) -> None:
    click.echo(line, err=True)


def emit_json(data: Any) -> None:
    """Data goes to stdout; talk goes to stderr (`say`). Strings keep every character, but those a
    terminal would act on or hide (C1 controls, bidi and invisible format characters, lone
    surrogates) are written as \\u escapes: the same JSON to a parser, inert on a terminal."""
    from porttrack.workspace.files import dump_json

    click.echo(_INERT_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", dump_json(data)), nl=False)


# Outside strings JSON is ASCII, so these only ever occur inside a string, where the escape is exact.
_INERT_IN_JSON = re.compile("[\x7f-\x9f\u061c\u180e\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb\ud800-\udfff]")


def say(message: str) -> None:
    """Talk to stderr. It often quotes what GitHub or a stranger wrote (an error `message`, a
    branch name): the terminal cleaner keeps escape sequences and controls out of it."""
    click.echo(fit_stderr(for_terminal_lines(message)), err=True)  # wrapped at words on a terminal


def main(argv: list[str] | None = None) -> int:
    """Entry point: the single boundary where errors become messages and exit codes."""
    try:
        result = cli.main(args=argv, prog_name="porttrack", standalone_mode=False)
    except PorttrackError as exc:
        register_configured()  # a message may quote an argument: a token pasted as one is masked
        click.echo(for_terminal_lines(f"porttrack: error: {redact(str(exc))}"), err=True)
        return int(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("porttrack: interrupted; nothing was changed", err=True)
        return int(ExitCode.INTERRUPTED)
    except KeyboardInterrupt:
        click.echo("porttrack: interrupted; nothing was changed", err=True)
        return int(ExitCode.INTERRUPTED)
    except click.exceptions.ClickException as exc:
        shown = io.StringIO()
        exc.show(file=shown)  # usage errors quote what was typed, which may be a pasted token
        register_configured()  # so a configured token is masked whatever its shape
        click.echo(for_terminal_lines(redact(shown.getvalue())), err=True, nl=False)
        return int(ExitCode.USAGE)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except Exception as exc:  # a bug: one line here, the whole story in a log file
        return _report_internal_error(exc)
    return int(result or 0)


def crash_log_dir() -> Path:
    """PORTTRACK_LOG_DIR, else the platform's cache folder (~/.cache/porttrack on Linux,
    ~/Library/Caches/porttrack on macOS, %LOCALAPPDATA%\\porttrack\\Cache on Windows)."""
    import platformdirs  # only for a crash, like traceback below

    return Path(os.environ.get("PORTTRACK_LOG_DIR") or platformdirs.user_cache_dir("porttrack", appauthor=False))


def _report_internal_error(exc: BaseException) -> int:
    import traceback  # only for a crash: ~10 ms that `--help` need not pay

    log_dir = crash_log_dir()
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        log = log_dir / "crash.log"
        log.write_text(redact("".join(traceback.format_exception(exc))), encoding="utf-8")
        where = str(log)
    except OSError:
        where = "(could not write a log)"
    click.echo(f"porttrack: internal error: {redact(type(exc).__name__ + ': ' + str(exc))[:300]}; full log: {where}", err=True)
    return int(ExitCode.INTERNAL)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
