"""`porttrack queue` and `drop`: list the patch queue and retire a patch from it (`porttrack.queue.manifest`).
Patches enter the queue with `porttrack import` (`porttrack.cli.take`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from porttrack.cli import Context, cli, completes, emit_json, examples, pass_ctx, say, terminal
from porttrack.common.text import for_terminal

if TYPE_CHECKING:  # rich is imported where output is laid out
    from rich.text import Text


@cli.command("queue", epilog=examples("porttrack queue", "porttrack queue --all --json", "porttrack queue --collisions"))
@click.option("--all", "include_retired", is_flag=True, help="Also list dropped and converged patches.")
@click.option("--json", "as_json", is_flag=True, help="Print the documented JSON shape (schema porttrack/queue-list/v1).")
@click.option("--collisions", is_flag=True, help="Also ask GitHub which open upstream PRs change what the queued patches change.")
@pass_ctx
def queue_(ctx: Context, include_retired: bool, as_json: bool, collisions: bool) -> int:
    """List the queued patches: state, PR, track, hunks taken and left out, and hand-port coverage."""
    from porttrack.converge.coverage import track_coverage
    from porttrack.queue.manifest import QUEUE_SCHEMA, queue_entries

    entries, stale = queue_entries(ctx.workspace, include_retired)
    coverage = track_coverage(ctx.workspace, ctx.config, *ctx.fork_or_problem)
    found = _collisions(ctx) if collisions else None
    if stale:
        say("note: patches/series does not match the manifest; the next write repairs it")
    if as_json:
        emit_json({
            "schema": QUEUE_SCHEMA,
            "series_stale": stale,
            "patches": [_entry_json(e) for e in entries],
            "coverage": [c.to_json() for c in coverage],
            **({"collisions": found[0].to_json(), "search_cost": found[1].to_json()} if found else {}),
        })
        return 0
    parts = render_queue(entries, coverage)
    if found:
        from porttrack.observe.collisions import render_lines

        parts += ["", *(terminal.indented(line, untrusted=True) for line in [*render_lines(found[0]), found[1].text])]
    ctx.show(parts)
    return 0


def _collisions(ctx: Context):
    """(CollisionSearch, Cost) for the live queue against open upstream PRs."""
    from porttrack.github.budget import Budget
    from porttrack.observe.collisions import find_collisions
    from porttrack.report.knowledge import queued_hunks, search_limit
    from porttrack.report.status import tracked_numbers

    client = ctx.github(ctx.config.upstream.repo)
    budget = Budget(client, search_limit())
    fork, _problem = ctx.fork_or_problem  # where the bases are mapped; without it, compared unmapped
    upstream = ctx.config.upstream  # the same git path, cache and remote as `status` (issue 32)
    search = find_collisions(client, budget, queued_hunks(ctx.workspace), frozenset(tracked_numbers(ctx.config)), fork,
                             remote=upstream.remote, cache=ctx.workspace.cache_dir / "collisions.json",
                             default_branch=upstream.default_branch)
    client.save_cache()
    return search, budget.cost()


def _entry_json(entry) -> dict:
    p = entry.patch
    return {
        "name": p.name,
        "file": p.file,
        "state": p.state,
        "pr": p.pr,
        "track": p.track,
        "upstream": p.upstream,
        "title": p.title,
        "revision": {"head": p.revision.head, "base": p.revision.base, "through": p.revision.through,
                     "merged": p.revision.merged, "merge_commit": p.revision.merge_commit},
        "gate": p.gate,
        "depends_on": list(p.depends_on),
        "hunks_taken": len(p.hunks_taken),
        "hunks_left_out": len(p.hunks_left_out),
        "left_out_by_reason": dict(entry.left_out_by_reason),
        "updated_at": p.history[-1].at if p.history else None,
    }


def render_queue(entries, coverage) -> list:
    """The queue as terminal parts: one row per patch (names and tracks cut to fit, reasons wrapped),
    then hand-port coverage."""
    out: list = []
    if not entries:
        out.append("the queue is empty (take a PR with `porttrack import N`)")
    else:
        rows: list[list[str | Text]] = []
        for e in entries:
            p = e.patch
            reasons = ", ".join(f"{k} {v}" for k, v in e.left_out_by_reason.items())
            rows.append([for_terminal(p.name, 120), terminal.state(p.state), f"#{p.pr}", for_terminal(p.track, 80),
                         str(len(p.hunks_taken)), f"{len(p.hunks_left_out)}" + (f" ({for_terminal(reasons, 200)})" if reasons else "")])
        out.append(terminal.table(_QUEUE_COLUMNS, rows))
        for e in entries:
            if e.patch.depends_on:
                out.append(terminal.paragraph(f"{e.patch.name} depends on {', '.join(e.patch.depends_on)}", hang=2))
    if coverage:
        out.append("")
        out.append(terminal.paragraph("hand-ported (found in the fork's history, or listed as fork_commits):"))
        for c in coverage:
            out.append(terminal.paragraph(f"#{c.pr} ({c.track}): {for_terminal(c.text, 160)}", indent=2, hang=2))
            if c.fork_commits_missing:
                out.append(terminal.paragraph(f"not in {c.branch}: {', '.join(c.fork_commits_missing)}", indent=4, hang=2))
            missing = [[terminal.state(h.state), h.id, for_terminal(h.path, 80) + (" (after the port's last commit)" if h.after_through else "")]
                       for h in c.hunks if h.state != "applied"]
            if missing:
                out.append(terminal.table(_HUNK_COLUMNS, missing, indent=4, header=False))
    return out


_QUEUE_COLUMNS = (
    terminal.Column("PATCH", "cut"), terminal.Column("STATE"), terminal.Column("PR"), terminal.Column("TRACK", "cut"),
    terminal.Column("TAKEN"), terminal.Column("LEFT OUT", "wrap"),
)
_HUNK_COLUMNS = (terminal.Column(), terminal.Column(), terminal.Column(fit="wrap"))


@cli.command("drop", epilog=examples("porttrack drop 1234 --reason 'merged upstream' --dry-run"))
@click.argument("patch", shell_complete=completes("patch"))
@click.option("--reason", required=True, metavar="TEXT", help="Why the patch leaves the queue (recorded).")
@click.option("--force", is_flag=True, help="Drop it even though other queued patches depend on it.")
@click.option("--dry-run", is_flag=True, help="Show what would change; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the documented JSON shape (schema porttrack/drop/v1).")
@pass_ctx
def drop(ctx: Context, patch: str, reason: str, force: bool, dry_run: bool, as_json: bool) -> int:
    """Retire a queued patch (by name, unique prefix, or PR number), recording why."""
    from porttrack.queue.manifest import DROP_SCHEMA, drop_patch

    result = drop_patch(ctx.workspace, patch, reason, dry_run=dry_run, force=force)
    if as_json:
        emit_json({"schema": DROP_SCHEMA, "name": result.after.name, "pr": result.after.pr, "from": result.before.state,
                   "to": result.after.state, "reason": result.after.history[-1].why, "dry_run": dry_run,
                   "written": result.written})
    else:
        verb = "dropped" if result.written else "would drop"
        click.echo(f"{verb} {result.after.name} (#{result.after.pr}, was {result.before.state}): {result.after.history[-1].why}")
    return 0
