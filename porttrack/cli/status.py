"""`porttrack status` (`porttrack.status`: observe upstream, record, say what to do next).

`porttrack.status` and `porttrack.knowledge` are imported inside the command, not here: with the
convergence records and `porttrack.hunks` they are ~60 ms, and every command module is loaded for
`porttrack --help`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from porttrack.cli import Context, cli, emit_json, pass_ctx, say
from porttrack.text import for_terminal, short_sha

if TYPE_CHECKING:
    from porttrack.status import StatusReport


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the documented JSON shape (schema porttrack/status/v1).")
@click.option("--offline", is_flag=True, help="Show the recorded state without asking GitHub.")
@click.option("--no-fetch", is_flag=True, help="Do not fetch PR heads into the fork checkout; classify with GitHub's compare.")
@click.option("--dry-run", is_flag=True, help="Poll, but record nothing.")
@pass_ctx
def status(ctx: Context, as_json: bool, offline: bool, no_fetch: bool, dry_run: bool) -> int:
    """Poll every tracked PR, record its state, and show per track what changed and what to do next."""
    from porttrack.knowledge import gather
    from porttrack.status import refresh, report_to_json

    config = ctx.config
    fork, fork_problem = ctx.fork_or_problem  # status works without one: GitHub's compare is used instead
    report, problem = refresh(
        ctx.workspace,
        config,
        client=None if offline else ctx.github(config.upstream.repo),
        repo=None if no_fetch else fork,
        dry_run=dry_run,
        progress=(lambda line: say(f"  fetch: {line}")) if not as_json else None,
        know=gather(ctx.workspace, config, fork, fork_problem),
    )
    when = report.observed_at or "never"
    if problem is not None:
        say(f"porttrack: error: {problem} — showing the state recorded at {when} instead")
    elif report.mode == "offline":
        say(f"offline: {report.offline_reason}; showing the state recorded at {when} (source: {report.source})")
    if as_json:
        emit_json(report_to_json(report))
    else:
        click.echo(render(report))
    if dry_run and report.mode == "live":
        say("dry run: nothing was recorded")
    return int(problem.exit_code) if problem is not None else 0


def render(report: "StatusReport") -> str:
    from porttrack.status import change_words

    lines = []
    when = f"live poll, {report.requests} request{'s' if report.requests != 1 else ''}" if report.mode == "live" else "OFFLINE (recorded state)"
    lines.append(f"upstream state as of {for_terminal(report.observed_at, 40) or 'never'} — {when}")
    for note in report.notes:
        lines.append(f"note: {for_terminal(note, 300)}")
    for track in report.tracks:
        lines.append("")
        lines.append(f"{for_terminal(track.id, 60)}  {for_terminal(track.title, 100)}")
        for pr in track.prs:
            state = pr.state
            if pr.state == "merged":
                state = f"merged {for_terminal(pr.merged_at, 40)[:10]}".strip() + f" as {short_sha(pr.merge_commit_sha)}"
            elif pr.state == "closed":
                state = f"closed without merging {for_terminal(pr.closed_at, 40)[:10]}".strip()
            head = f"head {short_sha(pr.head_sha)}"
            if pr.head_change in ("appended", "force-pushed"):
                count = f" +{pr.head_change_commits}" if pr.head_change_commits else ""
                head += f" ({pr.head_change}{count})"
            elif pr.head_change == "unchanged":
                head += " (unchanged)"
            elif pr.head_change is None and report.mode == "live" and pr.state != "unobserved":
                head += " (first seen)"  # a live poll leaves head_change null only for a PR it saw first
            base = f"base {for_terminal(pr.base_ref, 80)}" if pr.base_ref else ""
            lines.append(f"  #{pr.number:<6} {for_terminal(state, 60):<36} {head:<34} {base}".rstrip())
            if pr.title:
                lines.append(f"           {for_terminal(pr.title, 110)}")
            for link in pr.stacked_on:
                lines.append(f"           stacked on #{link['number']} ({for_terminal(link['state'], 20)}, from {link['via']})")
            for change in pr.changes:
                lines.append(f"           changed: {for_terminal(change_words(change), 110)}")
            for note in pr.notes:
                lines.append(f"           {for_terminal(note.text, 110)}")
            if pr.updated_at:
                lines.append(f"           last updated {for_terminal(pr.updated_at, 40)}")
        action = track.next_action
        lines.append(f"  next: {for_terminal(action.text, 160)}" + (f"  [{for_terminal(action.command, 120)}]" if action.command else ""))
    return "\n".join(lines)
