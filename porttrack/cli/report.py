"""`porttrack report weekly`: render (and with --post, create or update) the weekly status issue.

`porttrack.report` is imported inside the commands, not here: it loads most of porttrack (gates,
evidence, converge, jinja2 on rendering), and every command module is loaded for `porttrack --help`.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace

import click

from porttrack.cli import Context, cli, emit_json, examples, pass_ctx, say
from porttrack.cli.terminal import show
from porttrack.cli.testhooks import checkpoint
from porttrack.common import clock
from porttrack.common.errors import ConfigError, GitHubAuthError
from porttrack.common.secrets import resolve_token


@cli.group(epilog=examples("porttrack report weekly --dry-run"))
def report() -> None:
    """Reports for the team: the weekly status issue."""


@report.command(epilog=examples("porttrack report weekly --dry-run", "porttrack report weekly --post", "porttrack report weekly --offline --json"))
@click.option("--post", is_flag=True, help="Create the week's issue in report.repo, or update it if its body changed.")
@click.option("--dry-run", is_flag=True, help="Write nothing, post nothing; say what would be created or updated.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as data (schema porttrack/weekly/v1).")
@click.option("--since", metavar="DATE", help="Count changes after this date/time instead of since the previous report.")
@click.option("--now", "now_arg", metavar="TIME", help="Report as of this UTC time (ISO 8601): fixes the week and the window.")
@click.option("--offline", is_flag=True, help="Use the recorded upstream state; do not poll GitHub for PRs.")
@click.option("--comment-tracking", is_flag=True, help="With --post: link the week's issue from report.tracking_issue (once a week).")
@pass_ctx
def weekly(ctx: Context, post: bool, dry_run: bool, as_json: bool, since: str | None, now_arg: str | None,
           offline: bool, comment_tracking: bool) -> int:
    """What moved upstream, what is queued, what is proven: the weekly status issue.

    The markdown goes to stdout and to reports/weekly-<week>.md; this run is recorded in
    state/reports.json so the next report counts changes from here.
    """
    from porttrack.report import history as history_mod
    from porttrack.report import post as post_mod
    from porttrack.report import records as records_mod
    from porttrack.report import render as render_mod
    from porttrack.report.gather import gather as gather_report
    from porttrack.report.post import cut_comments, post_cut
    from porttrack.report.post import post as post_report
    from porttrack.report.render import cut_parts, state_branch_link
    from porttrack.report.render import render as render_report
    from porttrack.report.status import rate_words, recorded_ago
    from porttrack.workspace.files import lock

    if comment_tracking and not post:
        raise click.UsageError("--comment-tracking links the issue --post makes; give both")
    ws, config = ctx.workspace, ctx.config
    moment = clock.parse_moment(now_arg, "--now") if now_arg else clock.now()
    week = clock.iso_week(moment)

    # Without a token --post still reads and writes the report (the week's work is not lost), then
    # refuses to post: GitHub answers every tokenless write 401. The exit code is the auth one.
    refused = _post_refused() if post else None
    post = post and refused is None
    client, issues = None, []
    if post:
        client = _issue_client(ctx, config)
        note = post_mod.check_permission(client)
        if note:
            say(f"note: {note}")
        issues = post_mod.labelled_issues(client, config.report.labels)

    previous = history_mod.previous_report(ws, week, moment, since_arg=since, issues=issues)
    fork, fork_problem = ctx.fork_or_problem
    if offline and fork is not None:
        fork.offline = True  # not even git may reach a remote (a partial clone's on-demand fetch)
    upstream = None if offline else ctx.github(config.upstream.repo)
    weekly_report = gather_report(ws, config, now=moment, since=previous, client=upstream, fork=fork, fork_problem=fork_problem,
                               dry_run=dry_run)
    full = render_report(weekly_report, ws)
    body, cut = render_mod.fit_body(full, render_mod.BODY_LIMIT, render_mod.pointer_to_full(weekly_report))
    if cut:
        say(f"the report is longer than GitHub allows in an issue; the issue shows a cut version, the full one is {weekly_report.report_file}")
    if weekly_report.upstream["mode"] == "offline":
        age = recorded_ago(weekly_report.upstream["observed_at"], moment)
        say(f"offline: {weekly_report.upstream['offline_reason']}; the upstream state shown was {age}")
    elif upstream is not None and not upstream.authenticated:
        words = rate_words(upstream.rate_seen, False)
        assert words is not None  # None only when it is not known whether a token was used
        say(words)

    if not dry_run:
        with lock(ws, "report weekly: writing the report"):
            history_mod.write_outputs(ws, weekly_report, full)
        say(f"wrote {weekly_report.report_file}")
        checkpoint("report:written")

    outcome = None
    if post:
        assert client is not None
        # Under the workspace lock: a second `report weekly --post` (a re-run cron job, a person)
        # waits, then finds the issue this one created instead of creating another.
        with contextlib.nullcontext() if dry_run else lock(ws, "report weekly: posting the issue"):
            recorded = history_mod.recorded_issue_number(ws, week, config.report.repo)
            # Cut, outside GitHub Actions: what was cut goes whole into the issue's own comments, the
            # one place its reader can open; the link to them is in the body from the week's second run.
            to_comments = cut and state_branch_link(weekly_report) is None
            kept = cut_comments(client, recorded or getattr(post_mod.find_week_issue(issues, week), "number", None), week) if to_comments else []
            if kept:
                body, _ = render_mod.fit_body(full, render_mod.BODY_LIMIT, render_mod.pointer_to_full(weekly_report, kept[0].html_url))
            outcome = post_report(client, week=week, title=weekly_report.title, body=body, labels=config.report.labels,
                               issues=issues, recorded=recorded, dry_run=dry_run)
            say(("warning: " if outcome.action == "closed-by-person" else "") + outcome.message)
            if to_comments and not dry_run and outcome.number is not None and outcome.action != "closed-by-person":
                parts = cut_parts(full, body)
                posted = post_cut(client, outcome.number, week, parts, kept)
                assert posted, "a cut body leaves out at least one section"
                linked, _ = render_mod.fit_body(full, render_mod.BODY_LIMIT, render_mod.pointer_to_full(weekly_report, posted[0].html_url))
                if linked != body:
                    client.update_issue(outcome.number, body=linked)
                say(f"what was cut is whole in {len(parts)} comment{'s' if len(parts) != 1 else ''} of #{outcome.number}: "
                    f"{posted[0].html_url}")
            checkpoint("report:posted")
            if not dry_run and outcome.number is not None:
                history_mod.record_issue(ws, weekly_report, full, config.report.repo, outcome)
            if comment_tracking:
                outcome = _comment(client, config, week, outcome, dry_run)

    if as_json:
        data = records_mod.report_to_json(weekly_report)
        data["issue_body_truncated"] = cut
        data["post"] = outcome.to_json() if outcome is not None else None
        emit_json(data)
    else:
        show(ctx.terminal, full.rstrip("\n"))  # paged on a terminal when taller than it (issue 32)
    if dry_run:
        say("dry run: nothing was written or posted")
    if refused is not None:
        raise refused
    # like `status`: a poll that failed is the command's failure, though the recorded-state report was made
    return weekly_report.upstream.get("poll_exit_code") or 0


def _post_refused() -> GitHubAuthError | None:
    if resolve_token() is not None:
        return None
    return GitHubAuthError("not posted: --post needs a GitHub token (set GITHUB_TOKEN or GH_TOKEN, or log in with "
                           "`gh auth login`); the report was made, nothing was posted")


def _issue_client(ctx: Context, config):
    # No ETag cache: the issue list must be read fresh, it decides whether to create.
    return ctx.github(config.report.repo, etags=False)


def _comment(client, config, week: str, outcome, dry_run: bool):
    from porttrack.report import post as post_mod

    if config.report.tracking_issue is None:
        raise ConfigError("--comment-tracking: tracks.yaml sets no report.tracking_issue")
    if outcome.action == "closed-by-person":
        return replace(outcome, comment="not linked: the week's issue was closed by a person")
    said = post_mod.comment_tracking(client, config.report.tracking_issue, week, outcome, dry_run=dry_run)
    say(said)
    return replace(outcome, comment=said)
