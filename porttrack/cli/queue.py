"""`porttrack queue` and `drop`: list the patch queue and retire a patch from it (`porttrack.queue`).
Patches enter the queue with `porttrack import` (`porttrack.cli.take`)."""

from __future__ import annotations

import click

from porttrack.cli import Context, cli, completes, emit_json, pass_ctx, say


@cli.command("queue")
@click.option("--all", "include_retired", is_flag=True, help="Also list dropped and converged patches.")
@click.option("--json", "as_json", is_flag=True, help="Print the documented JSON shape (schema porttrack/queue-list/v1).")
@click.option("--collisions", is_flag=True, help="Also ask GitHub which open upstream PRs change what the queued patches change.")
@pass_ctx
def queue_(ctx: Context, include_retired: bool, as_json: bool, collisions: bool) -> int:
    """List the queued patches: state, PR, track, hunks taken and left out, and hand-port coverage."""
    from porttrack.coverage import track_coverage
    from porttrack.queue import QUEUE_SCHEMA, queue_entries

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
    click.echo(render_queue(entries, coverage))
    if found:
        from porttrack.collisions import render_lines

        click.echo("\n".join(["", *render_lines(found[0]), found[1].text]))
    return 0


def _collisions(ctx: Context):
    """(CollisionSearch, Cost) for the live queue against open upstream PRs."""
    from porttrack.budget import Budget
    from porttrack.collisions import find_collisions
    from porttrack.knowledge import queued_hunks, search_limit
    from porttrack.status import tracked_numbers

    client = ctx.github(ctx.config.upstream.repo)
    budget = Budget(client, search_limit())
    search = find_collisions(client, budget, queued_hunks(ctx.workspace), frozenset(tracked_numbers(ctx.config)))
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


def render_queue(entries, coverage) -> str:
    from porttrack.text import for_terminal

    lines = []
    if not entries:
        lines.append("the queue is empty (take a PR with `porttrack import N`)")
    else:
        rows = [("PATCH", "STATE", "PR", "TRACK", "TAKEN", "LEFT OUT")]
        for e in entries:
            p = e.patch
            reasons = ", ".join(f"{k} {v}" for k, v in e.left_out_by_reason.items())
            rows.append((p.name, p.state, f"#{p.pr}", p.track, str(len(p.hunks_taken)),
                         f"{len(p.hunks_left_out)}" + (f" ({reasons})" if reasons else "")))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        for r in rows:
            lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[5])
        for e in entries:
            if e.patch.depends_on:
                lines.append(f"{e.patch.name} depends on {', '.join(e.patch.depends_on)}")
    if coverage:
        lines.append("")
        lines.append("hand-ported (found in the fork's history, or listed as fork_commits):")
        for c in coverage:
            lines.append(f"  #{c.pr} ({c.track}): {for_terminal(c.text, 160)}")
            if c.fork_commits_missing:
                lines.append(f"    not in {c.branch}: {', '.join(c.fork_commits_missing)}")
            missing = [h for h in c.hunks if h.state != "applied"]
            for h in missing:
                lines.append(f"    {h.state:<12} {h.id}  {for_terminal(h.path, 80)}" + (" (after the port's last commit)" if h.after_through else ""))
    return "\n".join(lines)


@cli.command("drop")
@click.argument("patch", shell_complete=completes("patch"))
@click.option("--reason", required=True, metavar="TEXT", help="Why the patch leaves the queue (recorded).")
@click.option("--force", is_flag=True, help="Drop it even though other queued patches depend on it.")
@click.option("--dry-run", is_flag=True, help="Show what would change; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the documented JSON shape (schema porttrack/drop/v1).")
@pass_ctx
def drop(ctx: Context, patch: str, reason: str, force: bool, dry_run: bool, as_json: bool) -> int:
    """Retire a queued patch (by name, unique prefix, or PR number), recording why."""
    from porttrack.queue import DROP_SCHEMA, drop_patch

    result = drop_patch(ctx.workspace, patch, reason, dry_run=dry_run, force=force)
    if as_json:
        emit_json({"schema": DROP_SCHEMA, "name": result.after.name, "pr": result.after.pr, "from": result.before.state,
                   "to": result.after.state, "reason": result.after.history[-1].why, "dry_run": dry_run,
                   "written": result.written})
    else:
        verb = "dropped" if result.written else "would drop"
        click.echo(f"{verb} {result.after.name} (#{result.after.pr}, was {result.before.state}): {result.after.history[-1].why}")
    return 0
