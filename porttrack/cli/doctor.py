"""`porttrack doctor`: check every precondition, with the command that fixes each (see `porttrack.bootstrap.doctor`)."""

from __future__ import annotations

import click

from porttrack.cli import Context, cli, emit_json, examples, pass_ctx
from porttrack.common.errors import CheckFailed
from porttrack.common.text import for_terminal


@cli.command("doctor", epilog=examples("porttrack doctor", "porttrack -C work doctor --json"))
@click.option("--json", "as_json", is_flag=True, help="Print the findings (schema porttrack/doctor/v1).")
@pass_ctx
def doctor_command(ctx: Context, as_json: bool) -> int:
    """Check the workspace, the fork checkout and its upstream remote, the token and GitHub, quilt
    and runner labels: one line each, and the command that fixes what is broken. Exit 0 only when
    every check passes (warnings pass)."""
    from porttrack.bootstrap import doctor as doctor_mod

    findings = doctor_mod.diagnose(lambda: ctx.workspace, lambda: ctx.config, ctx.github)
    if as_json:
        emit_json(doctor_mod.to_json(findings))
    else:
        width = max(len(f.check) for f in findings)
        for f in findings:
            click.echo(f"{f.status:<7} {f.check:<{width}}  {for_terminal(f.detail, 200)}")
            if f.fix and f.status != "ok":
                click.echo(f"{'':<7} {'':<{width}}  fix: {for_terminal(f.fix, 200)}")
    failed = [f.check for f in findings if not f.passed]
    if failed:
        raise CheckFailed(f"doctor: {len(failed)} check(s) did not pass: {', '.join(failed)}")
    return 0
