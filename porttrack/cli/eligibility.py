"""`porttrack eligibility` (`porttrack.eligibility`: which models each track must be proven on).

`porttrack.eligibility` and `porttrack.gates` are imported inside the command, not here: every
command module is loaded for `porttrack --help`, and they load the typed config, the evidence log
and the gate judge.
"""

from __future__ import annotations

import click

from porttrack.cli import Context, cli, emit_json, pass_ctx


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the documented JSON shape (schema porttrack/eligibility/v1).")
@pass_ctx
def eligibility(ctx: Context, as_json: bool) -> int:
    """Models × tracks: eligible, not (which requirement failed), or conditional (which proof is pending)."""
    from porttrack import eligibility as elig
    from porttrack.gates import proofs_passed

    result = elig.evaluate(ctx.config, proofs_passed(ctx.workspace, ctx.config))
    if as_json:
        emit_json(elig.to_json(result))
        return 0
    click.echo(elig.render_text(result))
    return 0
