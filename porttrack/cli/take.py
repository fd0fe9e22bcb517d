"""`porttrack import` and `refresh`: take an upstream PR's stable, separable hunks into the patch
queue, and follow it upstream (`porttrack.take.importer`, `porttrack.take.refresh`)."""

from __future__ import annotations

import click

from porttrack.cli import Context, cli, completes, emit_json, examples, pass_ctx, say
from porttrack.cli.params import PR_NUMBER


def _client(ctx: Context, offline: bool):
    """The upstream's GitHub client; None with --offline (the recorded state is used)."""
    return None if offline else ctx.github(ctx.config.upstream.repo)


@cli.command("import", epilog=examples("porttrack import 1234 --dry-run", "porttrack import 1234 --paths 'src/*' --exclude 'tests/*'"))
@click.argument("pr", type=PR_NUMBER, shell_complete=completes("pr"))
@click.option("--through", metavar="SHA", help="Take the PR only up to this commit of it.")
@click.option("--paths", "paths", multiple=True, metavar="GLOB", help="Only files matching a glob (repeatable).")
@click.option("--exclude", "exclude", multiple=True, metavar="GLOB", help="Never files matching a glob (repeatable).")
@click.option("--hunk", "hunks", multiple=True, metavar="ID", help="Only these hunks (ids from --dry-run; repeatable).")
@click.option("--force-unstable", is_flag=True, help="Also take hunks that changed in the PR's recent revisions.")
@click.option("--offline", is_flag=True, help="Use the recorded upstream state; do not poll GitHub (git is still fetched).")
@click.option("--dry-run", is_flag=True, help="Show what would be taken and written; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the documented JSON shape (schema porttrack/import/v1).")
@pass_ctx
def import_(ctx: Context, pr: int, through: str | None, paths: tuple[str, ...], exclude: tuple[str, ...],
            hunks: tuple[str, ...], force_unstable: bool, offline: bool, dry_run: bool, as_json: bool) -> int:
    """Take the stable, separable hunks of upstream PR into the patch queue.

    Every hunk left out is recorded with its reason: not selected, excluded by path rule,
    unstable, depends on a left-out hunk, not separable, or already in the fork.
    """
    from porttrack.queue.manifest import PRESENT, Selection
    from porttrack.take.importer import import_pr, plan_to_json

    number = pr
    ctx.require_tracked(number)  # a typo costs no request
    selection = Selection(paths=tuple(paths), exclude=tuple(exclude), hunks=tuple(hunks), force_unstable=force_unstable)
    outcome = import_pr(ctx.workspace, ctx.config, number, repo=ctx.fork, client=_client(ctx, offline), through=through,
                        selection=selection, dry_run=dry_run, say=say, in_fork=_already_in_fork)
    if as_json:
        emit_json(plan_to_json(outcome, dry_run))
    else:
        click.echo(render_import(outcome))
    plan = outcome.plan
    if not plan.taken:
        if plan.hunks and all(h.why is not None and h.why.kind == PRESENT for h in plan.hunks):
            say(f"porttrack: #{number} is already in the fork: every hunk is there (as `porttrack verify-converged {number}` "
                f"finds it); nothing to take, nothing was written")
        else:
            say(f"porttrack: nothing of #{number} can be taken (every hunk was left out); nothing was written")
        return 1
    if plan.source_check is not None and not plan.source_check.ok:  # the importer never queues one; say so if it did
        say(f"porttrack: #{number}'s patch fails its source check: {plan.source_check.text}")
        return 1
    if dry_run:
        patch = outcome.patch
        assert patch is not None  # something was taken: returned above otherwise
        say(f"dry run: would write patches/{patch.file} and add {patch.name} to the manifest")
    return 0


def _already_in_fork(*args):
    """converge.verify.already_in_fork, imported only when a merged PR asks for it."""
    from porttrack.converge.verify import already_in_fork

    return already_in_fork(*args)


def render_import(outcome) -> str:
    from porttrack.common.text import for_terminal, short_sha
    from porttrack.prove.gates import ungated_fix

    plan = outcome.plan
    rev = plan.revision
    lines = [f"#{plan.pr} {for_terminal(plan.title, 100)}  (track {plan.track}, {plan.pr_state})"]
    what = f"merge commit {short_sha(rev.merge_commit)}" if rev.merged else f"head {short_sha(rev.head)}"
    if rev.through:
        what += f" through {short_sha(rev.through)}"
    lines.append(f"revision: {what}, diff from {short_sha(rev.base)}; fork {plan.fork_branch} at {short_sha(plan.fork_tip)}")
    if len(plan.revisions_compared) > 1:
        lines.append("stability compared across: " + " -> ".join(short_sha(s) for s in plan.revisions_compared))
    for note in plan.notes:
        lines.append(f"note: {for_terminal(note, 200)}")
    for h in plan.hunks:
        mark = "take" if h.taken else "out "
        how = f" [{h.applies}]" if h.taken and h.applies not in ("clean", "unchecked") else ""
        why = f"  {for_terminal(h.reason, 160)}" if h.reason else ""
        lines.append(f"  {mark} {h.id}  {for_terminal(h.path, 70)} {h.where}{how}{why}")
    if plan.source_check is not None:  # the patched files against the fork tip: new undefined names, compile
        lines.append(for_terminal(plan.source_check.text, 600))
    summary = f"{len(plan.taken)} of {len(plan.hunks)} hunks taken, {len(plan.left_out)} left out"
    if outcome.patch is not None:
        verb = "wrote" if outcome.written else "would write"
        if outcome.patch.gate:
            summary += f"; {verb} patches/{outcome.patch.file} as {outcome.patch.name} ({outcome.patch.state}; gate: track {outcome.patch.gate})"
        else:  # the state says it already: say what it means and how to get out of it
            summary += (f"; {verb} patches/{outcome.patch.file} as {outcome.patch.name}, ungated: track {plan.track} has no gate,"
                        f" so this patch cannot be promoted; {ungated_fix(outcome.patch)}")
    lines.append(summary)
    return "\n".join(lines)


@cli.command("refresh", epilog=examples("porttrack refresh 1234", "porttrack refresh 1234 --update --dry-run"))
@click.argument("pr", type=PR_NUMBER, shell_complete=completes("pr"))
@click.option("--update", is_flag=True, help="Replace the queued patch by an import of the PR as it is now.")
@click.option("--offline", is_flag=True, help="Use the recorded upstream state; do not poll GitHub.")
@click.option("--dry-run", is_flag=True, help="With --update: show the new patch; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the documented JSON shape (schema porttrack/refresh/v1).")
@pass_ctx
def refresh(ctx: Context, pr: int, update: bool, offline: bool, dry_run: bool, as_json: bool) -> int:
    """Per hunk, what changed upstream since the PR was imported (new / removed / changed /
    unchanged); the queue changes only with --update."""
    from porttrack.take.refresh import refresh_pr, refresh_to_json

    number = pr
    result = refresh_pr(ctx.workspace, ctx.config, number, repo=ctx.fork, client=_client(ctx, offline), update=update,
                        dry_run=dry_run, say=say)
    if as_json:
        emit_json(refresh_to_json(result, dry_run))
    else:
        click.echo(render_refresh(result))
    if update and not result.written and result.patch_after is not None:
        say("dry run: nothing was written")
    return 0


def render_refresh(result) -> str:
    from porttrack.common.text import for_terminal, short_sha

    old, new = result.old, result.new
    lines = [f"#{result.pr} ({result.patch}): imported at {short_sha(old.through or old.head)}, upstream now "
             f"{short_sha(new.through or new.head)}" + ("" if result.moved else " (unchanged)")]
    for note in result.notes:
        lines.append(f"note: {for_terminal(note, 200)}")
    for h in result.hunks:
        ids = h.old_id if h.change in ("unchanged", "removed") else (h.new_id if h.change == "new" else f"{h.old_id} -> {h.new_id}")
        before = "" if h.was_taken is None else ("taken" if h.was_taken else "left out")
        after = "" if h.now_taken is None else ("would be taken" if h.now_taken else f"would be left out: {h.reason}")
        detail = "; ".join(x for x in (before, after) if x)
        lines.append(f"  {h.change:<9} {ids}  {for_terminal(h.path, 70)}  {for_terminal(detail, 160)}")
    counts = result.counts()
    lines.append(", ".join(f"{v} {k}" for k, v in counts.items()))
    if result.written and result.patch_after is not None:
        lines.append(f"updated {result.patch_after.name}: patches/{result.patch_after.file} ({result.patch_after.state})")
    elif result.patch_after is not None:
        lines.append(f"would update {result.patch_after.name}: patches/{result.patch_after.file} ({result.patch_after.state})")
    elif not result.update and result.moved:
        lines.append(f"run `porttrack refresh {result.pr} --update` to replace the queued patch")
    return "\n".join(lines)
