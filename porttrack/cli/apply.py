"""`porttrack apply`: build the staging or default branch from the upstream base plus the queue."""

from __future__ import annotations

import click

from porttrack.cli import Context, cli, emit_json, examples, pass_ctx, say, terminal


@cli.command("apply", epilog=examples("porttrack apply --staging --dry-run", "porttrack apply --default"))
@click.option("--staging", "target", flag_value="staging", default=True,
              help="Build the staging branch: every live patch (the default).")
@click.option("--default", "target", flag_value="default",
              help="Build the default branch: promoted (default-enabled) patches only.")
@click.option("--force", is_flag=True, help="Build even if the fork's work tree has local changes.")
@click.option("--dry-run", is_flag=True, help="Build and report, but move no branch and record nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the documented JSON shape (schema porttrack/apply/v1).")
@pass_ctx
def apply_command(ctx: Context, target: str, force: bool, dry_run: bool, as_json: bool) -> int:
    """Build the fork branch from its upstream base plus the patch queue, one commit per patch.

    Each patch is applied plainly, else by 3-way merge; the report says per patch and per hunk:
    clean, offset, fuzz, 3-way or conflict. A conflict moves nothing and exits 4.
    """
    from porttrack.apply import ApplyConflict, apply, run_to_json

    try:
        run = apply(ctx.workspace, ctx.config, ctx.fork, target=target, force=force, dry_run=dry_run,
                    progress=None if as_json else (lambda line: say(f"  {line}")))
    except ApplyConflict as exc:
        _show(ctx, exc.run, as_json, run_to_json)
        raise
    _show(ctx, run, as_json, run_to_json)
    return 0


def _show(ctx: Context, run, as_json: bool, run_to_json) -> None:
    if as_json:
        emit_json(run_to_json(run))
    else:  # each line wrapped under its own indent to the terminal's width; paged when long
        ctx.show([terminal.indented(line, hang=4) for line in render(run).splitlines()])


def render(run) -> str:
    from porttrack.common.text import for_terminal, short_sha

    lines = [f"{run.branch}: {run.base_ref} ({short_sha(run.base_sha)}) + {len(run.patches)} patch"
             f"{'es' if len(run.patches) != 1 else ''} ({run.target} build)"]
    width = max((len(for_terminal(p.name, 60)) for p in run.patches), default=0)
    for p in run.patches:
        counted: dict[str, int] = {}
        for h in p.hunks:
            counted[h.outcome] = counted.get(h.outcome, 0) + 1
        detail = ", ".join(f"{n} {o}" for o, n in counted.items())
        commit = f" -> {short_sha(p.commit)}" if p.commit else ""
        lines.append(f"  {for_terminal(p.name, 60):<{width}}  {p.outcome:<9} {len(p.hunks)} hunk"
                     f"{'s' if len(p.hunks) != 1 else ''}{f' ({detail})' if detail else ''}{commit}"
                     f"{' [empty: already upstream?]' if p.empty else ''}")
        for h in p.hunks:
            if h.outcome in ("clean", "not-tried"):
                continue
            extra = f" by {h.offset:+d}" if h.offset else f" {h.fuzz} line(s) of context ignored" if h.fuzz else ""
            lines.append(f"      {h.id} {for_terminal(h.path, 80)} {h.header}: {h.outcome}{extra}")
        for f in p.conflict_files:
            lines.append(f"      conflict in {for_terminal(f, 100)}")
        for note in p.notes:
            lines.append(f"      note: {for_terminal(note, 120)}")
    verdict = {
        "created": f"created {run.ref} at {short_sha(run.new)}",
        "updated": f"updated {run.ref}: {short_sha(run.old)} -> {short_sha(run.new)}",
        "unchanged": f"{run.ref} is already this build ({short_sha(run.new)}); nothing to do",
        "dry-run": f"dry run: would move {run.ref} from {short_sha(run.old) if run.old else '(none)'} to {short_sha(run.new)}",
        "conflict": f"conflict: {run.ref} left at {short_sha(run.old)}" if run.old else f"conflict: {run.ref} not created",
    }[run.outcome]
    lines.append(verdict)
    return "\n".join(lines)
