"""`porttrack eligibility` (`porttrack.tracks.eligibility`: which models each track must be proven on).

`porttrack.tracks.eligibility` and `porttrack.prove.gates` are imported inside the command, not here: every
command module is loaded for `porttrack --help`, and they load the typed config, the evidence log
and the gate judge.
"""

from __future__ import annotations

import click

from porttrack.cli import Context, cli, emit_json, examples, pass_ctx, terminal
from porttrack.cli.terminal import Terminal


@cli.command(epilog=examples("porttrack eligibility", "porttrack eligibility --json"))
@click.option("--json", "as_json", is_flag=True, help="Print the documented JSON shape (schema porttrack/eligibility/v1).")
@pass_ctx
def eligibility(ctx: Context, as_json: bool) -> int:
    """Deployment targets × tracks (under the vllm-gpu profile, its models): eligible, not (which
    requirement failed), or conditional (which proof is pending). A profile without them has none."""
    from porttrack.prove.gates import proofs_passed
    from porttrack.tracks import eligibility as elig

    result = elig.evaluate(ctx.config, proofs_passed(ctx.workspace, ctx.config))
    if as_json:
        emit_json(elig.to_json(result))
        return 0
    ctx.show(parts(result))
    return 0


def render(result, term: Terminal) -> str:
    return terminal.render(term, parts(result))


def parts(result) -> list:
    """Models × tracks as a table when it fits the terminal, else one block per track; then where
    each track is required, the proofs passed, and why each model is not eligible."""
    from porttrack.tracks.eligibility import NOT_USED

    targets = [f"{entry.track}: required on {', '.join(entry.targets)}" for entry in result.tracks]
    if not result.used:
        return [terminal.paragraph(NOT_USED), "", *map(terminal.indented, targets)]
    tracks = [entry.track for entry in result.tracks]
    models = [cell.model for cell in result.tracks[0].cells] if result.tracks else []
    rows = [[model, *(terminal.state(result.cell(model, track).verdict) for track in tracks)] for model in models]
    columns = [terminal.Column("model", "cut"), *(terminal.Column(track) for track in tracks)]
    out: list = [terminal.table(columns, rows, narrow=_by_track(result)), ""]
    out += map(terminal.indented, targets)
    out.append(terminal.paragraph(f"proofs passed: {', '.join(sorted(result.proofs_passed)) or 'none'}", hang=2))
    why = [(c.model, c.track, c.reasons) for e in result.tracks for c in e.cells if c.reasons]
    if why:
        out += ["", "not eligible (why):"]
        out += [terminal.paragraph(f"{model} / {track}: {'; '.join(reasons)}", indent=2, hang=4) for model, track, reasons in why]
    return out


def _by_track(result) -> list:
    """The narrow form of the table: per track, its models by verdict."""
    out: list = []
    for entry in result.tracks:
        out.append(terminal.text(entry.track, "bold"))
        for verdict in ("eligible", "conditional", "ineligible"):
            models = [c.model for c in entry.cells if c.verdict == verdict]
            if models:
                out.append(terminal.paragraph(terminal.joined(terminal.state(verdict), f": {', '.join(models)}"), indent=2, hang=4))
    return out
