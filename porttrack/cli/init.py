"""`porttrack init`: make a workspace and the fork checkout (see `porttrack.bootstrap.init`)."""

from __future__ import annotations

from pathlib import Path

import click

from porttrack.cli import Context, cli, emit_json, examples, pass_ctx, say
from porttrack.common.errors import ExitCode, PorttrackError

# porttrack.tracks.config's profile names, the default first; written here because importing the records
# module costs `--help` ~25 ms (tests/tracks/test_config.py checks the two agree)
PROFILE_NAMES = ["vllm-gpu", "neutral"]


@cli.command("init", epilog=examples("porttrack init work --upstream OWNER/NAME --fork YOU/NAME --profile neutral",
                                           "porttrack init work --upstream vllm-project/vllm --fork YOU/vllm --profile vllm-gpu --dry-run"))
@click.argument("folder", required=False, default=".", type=click.Path(file_okay=False, path_type=Path))
@click.option("--upstream", required=True, metavar="OWNER/NAME", help="The upstream repository (e.g. python/cpython, pallets/click, vllm-project/vllm).")
@click.option("--fork", "fork_repo", required=True, metavar="OWNER/NAME", help="Your fork (e.g. YOU/cpython).")
@click.option("--branch", metavar="NAME", help="The fork's branch [default: main, or what FOLDER's tracks.yaml says].")
@click.option("--upstream-branch", metavar="NAME", help="Upstream's default branch, the fork's base [default: main, or what tracks.yaml says].")
@click.option("--fork-checkout", metavar="DIR", help="Use this existing clone of the fork (relative to FOLDER) instead of cloning one.")
@click.option("--checkout", metavar="DIR", help="Where to clone the fork, relative to FOLDER [default: ../<fork name>].")
@click.option("--upstream-url", metavar="URL", help="Clone URL of upstream [default: https://github.com/OWNER/NAME.git].")
@click.option("--fork-url", metavar="URL", help="Clone URL of the fork [default: https://github.com/OWNER/NAME.git].")
@click.option("--profile", type=click.Choice(PROFILE_NAMES), default=PROFILE_NAMES[0], show_default=True,
              help="Which tracks.yaml skeleton: vllm-gpu (GPU targets, models) or neutral (any fork: named targets and axes).")
@click.option("--dry-run", is_flag=True, help="Say what would be written and cloned; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan (schema porttrack/init/v1).")
@pass_ctx
def init_command(ctx: Context, folder: Path, upstream: str, fork_repo: str, branch: str | None, upstream_branch: str | None,
                 fork_checkout: str | None,
                 checkout: str | None, upstream_url: str | None, fork_url: str | None, profile: str, dry_run: bool,
                 as_json: bool) -> int:
    """Create a workspace in FOLDER: a commented tracks.yaml (for --profile), an empty patch queue, templates/,
    .gitignore, and the fork checkout (a blobless clone with an `upstream` remote, or --fork-checkout).

    Never overwrites: over another workspace it refuses and lists what exists. Run again over its
    own (after a fix to tracks.yaml, a failed clone, or to switch to --fork-checkout), it keeps
    every file, reads what tracks.yaml says, and makes only what is missing; with everything in
    place it changes nothing."""
    from porttrack.bootstrap import init as init_mod

    if fork_checkout and checkout:
        raise click.UsageError("--fork-checkout names an existing clone and --checkout where to clone one: give one")
    options = init_mod.Options(
        upstream=upstream, fork=fork_repo, branch=branch or "", upstream_branch=upstream_branch or "",
        checkout=fork_checkout or checkout or "",
        existing_checkout=bool(fork_checkout), upstream_url=upstream_url or "", fork_url=fork_url or "",
        profile=profile,
    )
    init_mod.checked(options)  # a malformed name is a usage error before anything is looked at
    if not dry_run:
        folder.mkdir(parents=True, exist_ok=True)
    plan = init_mod.plan(folder, options)
    if as_json:
        emit_json({"schema": "porttrack/init/v1", "dry_run": dry_run, "workspace": str(folder.resolve()),
                   "steps": [{"what": s.what, "target": s.target, "detail": s.detail} for s in plan.steps]})
    if plan.nothing_to_do:
        say(f"{folder}: already a workspace as init makes it; nothing to do")
        return 0
    if dry_run:
        for step in plan.steps:
            say(f"would {step.what}: {step.target}{' (' + step.detail + ')' if step.detail else ''}")
        say("dry run: nothing was written")
        return 0
    try:
        init_mod.run(plan, say=None if as_json else say)
    except KeyboardInterrupt:  # not "nothing was changed": the files may be written, the clone was not
        stopped = PorttrackError("interrupted; what init wrote so far is kept and a half-made clone was removed: "
                                 "run the same `porttrack init` again to finish")
        stopped.exit_code = ExitCode.INTERRUPTED
        raise stopped from None
    except PorttrackError as exc:  # a clone that failed (no network, a wrong URL): the files stay
        resumable = PorttrackError(f"{exc}; the workspace files are written: fix that, then run the same "
                                   "`porttrack init` again to resume (it keeps them and makes only what is missing)")
        resumable.exit_code = exc.exit_code
        raise resumable from None
    if not as_json:
        say(f"next: edit {folder / 'tracks.yaml'} (your tracks), then `porttrack doctor` and `porttrack status`")
    return 0
