"""`porttrack status` (`porttrack.status`: observe upstream, record, say what to do next).

`porttrack.status` and `porttrack.knowledge` are imported inside the command, not here: with the
convergence records and `porttrack.hunks` they are ~60 ms, and every command module is loaded for
`porttrack --help`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from porttrack import clock
from porttrack.cli import Context, cli, emit_json, pass_ctx, say
from porttrack.text import for_terminal, short_sha

if TYPE_CHECKING:
    from porttrack.status import StatusReport


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the documented JSON shape (schema porttrack/status/v1).")
@click.option("--offline", is_flag=True, help="Show the recorded state without asking GitHub.")
@click.option("--no-fetch", is_flag=True, help="Do not fetch PR heads into the fork checkout; classify with GitHub's compare.")
@click.option("--dry-run", is_flag=True, help="Poll, but record nothing.")
@click.option("--no-search", is_flag=True, help="Skip the searches (successors of closed PRs, collisions with the queue).")
@pass_ctx
def status(ctx: Context, as_json: bool, offline: bool, no_fetch: bool, dry_run: bool, no_search: bool) -> int:
    """Poll every tracked PR, record its state, and show per track what changed and what to do next.

    Without a token a public upstream is polled unauthenticated (60 requests an hour; an unchanged
    PR, answered 304, costs none)."""
    from dataclasses import replace

    from porttrack.knowledge import gather, search_upstream
    from porttrack.status import rate_words, recorded_ago, refresh, report_to_json

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
    if report.mode == "live" and not no_search:  # searches cost requests: only with a live poll
        client = ctx.github(config.upstream.repo)
        report = replace(report, findings=search_upstream(ctx.workspace, config, client, report))
        if not dry_run:
            client.save_cache()
    when = report.observed_at or "never"
    age = recorded_ago(report.observed_at, clock.now())
    if problem is not None:
        say(f"porttrack: error: {problem} — showing the state recorded at {when} ({age}) instead")
    elif report.mode == "offline":
        say(f"offline: {report.offline_reason}; showing the state recorded at {when} ({age}; source: {report.source})")
    if report.authenticated is False:  # a token's 5000 an hour is rarely news; the address's 60 is
        from porttrack.github import TOKEN_HINT  # loaded already: the client came from there

        say(f"{rate_words(report.rate_limit, False)} (a token raises it to 5000: {TOKEN_HINT})")
    if as_json:
        emit_json(report_to_json(report))
    else:
        click.echo(render(report))
    if dry_run and report.mode == "live":
        say("dry run: nothing was recorded")
    return int(problem.exit_code) if problem is not None else 0


def render(report: "StatusReport") -> str:
    from porttrack.collisions import render_lines as collision_lines
    from porttrack.knowledge import findings_lines
    from porttrack.status import change_words, recorded_ago

    lines = []
    if report.mode == "live":
        when = f"live poll, {report.requests} request{'s' if report.requests != 1 else ''}" + ("" if report.authenticated else ", unauthenticated")
    else:
        when = f"OFFLINE (recorded state, {recorded_ago(report.observed_at, clock.now())})"
    lines.append(f"upstream state as of {for_terminal(report.observed_at, 40) or 'never'} — {when}")
    for note in report.notes:
        lines.append(f"note: {for_terminal(note, 300)}")
    findings = report.findings
    if findings is not None and findings.cost is not None:
        lines.append(findings.cost.text)
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
        lines += [_kept_indent(f"    {line}") for line in findings_lines(findings, track)]
    if findings is not None and findings.collisions is not None:
        lines.append("")
        lines += [_kept_indent(line) for line in collision_lines(findings.collisions)]
    return "\n".join(lines)


def _kept_indent(line: str) -> str:
    """`for_terminal` of a line whose leading spaces matter (the tracks.yaml lines to adopt)."""
    body = line.lstrip(" ")
    return " " * (len(line) - len(body)) + for_terminal(body, 200)
