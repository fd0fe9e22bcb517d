"""`porttrack status` (`porttrack.report.status`: observe upstream, record, say what to do next).

`porttrack.report.status` and `porttrack.report.knowledge` are imported inside the command, not here: with the
convergence records and `porttrack.diff.hunks` they are ~60 ms, and every command module is loaded for
`porttrack --help`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import click

from porttrack.cli import Context, cli, emit_json, examples, pass_ctx, say, terminal
from porttrack.cli.terminal import Progress, Terminal
from porttrack.common import clock
from porttrack.common.text import for_terminal, short_sha

if TYPE_CHECKING:
    from porttrack.git.repo import GitRepo
    from porttrack.report.status import StatusReport


@cli.command(epilog=examples("porttrack status", "porttrack status --offline --json", "porttrack -v status --no-search"))
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
    from porttrack.report.knowledge import (
        gather,
        record_findings,
        recorded_findings,
        search_upstream,
        start_listing,
        with_findings,
    )
    from porttrack.report.status import rate_words, recorded_ago, refresh, report_to_json

    config = ctx.config
    fork, fork_problem = ctx.fork_or_problem  # status works without one: GitHub's compare is used instead
    if offline and fork is not None:
        fork.offline = True  # not even git may reach a remote (a partial clone's on-demand fetch)
    # git's progress: one line redrawn in place on a terminal, each phase's last line otherwise
    progress = None if as_json else Progress("upstream")
    # the open-PR listing goes out with the poll: one round trip fewer (issue 32, item 4)
    prefetch = None if offline or no_search else start_listing(ctx.workspace, config, ctx.github(config.upstream.repo))
    try:
        report, problem = refresh(
            ctx.workspace,
            config,
            client=None if offline else ctx.github(config.upstream.repo),
            repo=None if no_fetch else fork,
            dry_run=dry_run,
            progress=progress,
            # after the poll: the heads it fetched are what coverage reads (issue 32, item 7)
            know=lambda: gather(ctx.workspace, config, fork, fork_problem),
        )
    finally:
        if progress is not None:
            progress.close()
    if report.mode == "live" and not no_search:  # searches cost requests: only with a live poll
        client = ctx.github(config.upstream.repo)
        report = with_findings(report, search_upstream(ctx.workspace, config, client, report, fork, prefetch,
                                                                fetch=not no_fetch))
        # the figures shown are the command's: every request sent, the budget its last answer stated
        report = replace(report, requests=client.requests_sent, rate_limit=client.rate_seen)
        if not dry_run:
            client.save_cache()
            record_findings(ctx.workspace, report.findings, report.observed_at)
    elif report.mode == "offline":  # what the last live run found still stands, said as such
        kept = recorded_findings(ctx.workspace, config, report)
        if kept is not None:
            report = with_findings(report, kept)
    when = report.observed_at or "never"
    age = recorded_ago(report.observed_at, clock.now())
    if problem is not None:
        say(f"porttrack: error: {problem} — showing the state recorded at {when} ({age}) instead")
    elif report.mode == "offline":
        say(f"offline: {report.offline_reason}; showing the state recorded at {when} ({age}; source: {report.source})")
    if fork is not None:
        report = replace(report, fork_branch=_fork_branch(fork, config.fork.branch))
    if report.authenticated is False:  # a token's 5000 an hour is rarely news; the address's 60 is
        from porttrack.github.client import TOKEN_HINT  # loaded already: the client came from there

        say(f"{rate_words(report.rate_limit, False)} (a token raises it to 5000: {TOKEN_HINT})")
    if as_json:
        emit_json(report_to_json(report))
    else:
        ctx.show(parts(report))
    if dry_run and report.mode == "live":
        say("dry run: nothing was recorded")
    if problem is None and report.failed:
        from porttrack.common.errors import ExitCode

        for number, why in sorted(report.failed.items()):
            say(f"porttrack: #{number} not polled ({for_terminal(why, 300)}); shown from the recorded state, the rest live")
        return int(ExitCode.UNREACHABLE)  # GitHub kept failing (for one PR): the published 5
    return int(problem.exit_code) if problem is not None else 0


def _fork_branch(fork: "GitRepo", branch: str) -> dict[str, str | None]:
    """Which ref `fork.branch` was read as, and its commit (for --json); said when that is not the
    local branch: coverage and verdicts are bound to it, and doctor, apply and verify-converged
    read the same one."""
    from porttrack.git.repo import branch_commit, branch_words  # loaded already: the fork came from there

    ref, sha = branch_commit(fork, branch)
    if ref is None:
        say(f"fork.branch {branch!r} is not a branch of {fork.path} (`porttrack doctor` says what to fetch): "
            f"coverage and recorded verdicts cannot be read against it")
    elif ref != f"refs/heads/{branch}":
        say(f"fork.branch {branch} read as {branch_words(ref, branch)}")
    return {"name": branch, "ref": ref, "sha": sha}


def render(report: "StatusReport", term: Terminal) -> str:
    return terminal.render(term, parts(report))


def parts(report: "StatusReport") -> list:
    """What `status` prints, as terminal parts: wrapped prose, one aligned row per PR, titles cut."""
    from porttrack.report.knowledge import findings_lines
    from porttrack.report.status import recorded_ago

    out: list = []
    if report.mode == "live":
        when = f"live poll, {report.requests} request{'s' if report.requests != 1 else ''}" + ("" if report.authenticated else ", unauthenticated")
    else:
        when = f"OFFLINE (recorded state, {recorded_ago(report.observed_at, clock.now())})"
    out.append(terminal.paragraph(f"upstream state as of {for_terminal(report.observed_at, 40) or 'never'} — {when}", hang=2))
    for note in report.notes:
        out.append(terminal.paragraph(f"note: {for_terminal(note, 300)}", hang=6))
    findings = report.findings
    if findings is not None and findings.cost is not None:
        out.append(terminal.paragraph(findings.cost.text, hang=2))
    if len(report.tracks) > SUMMARY_FROM:
        out += [terminal.paragraph(line, hang=2) for line in summary_lines(report)]
    for track in report.tracks:
        out.append("")
        out.append(terminal.cut(terminal.joined(terminal.text(track.id, "bold"), "  ", for_terminal(track.title, 300))))
        rows = [_pr_row(pr, report.mode) for pr in track.prs]
        for pr, row in zip(track.prs, rows):
            out.append(terminal.table(_PR_COLUMNS, [row], indent=2, header=False, measure=rows))
            out += _pr_details(pr)
        action = track.next_action
        words = terminal.joined("next: ", terminal.state(action.kind, for_terminal(action.text, terminal.UNCUT)),
                                f"  [{for_terminal(action.command, 120)}]" if action.command else "")
        out.append(terminal.paragraph(words, indent=2, hang=6))
        out += [_successor_line(f"    {line}") for line in findings_lines(findings, track)]
    if findings is not None and findings.collisions is not None:
        from porttrack.observe.collisions import render_lines as collision_lines  # only a live run searched

        out.append("")
        out += [terminal.indented(line, untrusted=True) for line in collision_lines(findings.collisions)]
    return out


SUMMARY_FROM = 5  # more tracks than this: a one-screen summary before the per-track detail


def summary_lines(report: "StatusReport") -> list[str]:
    """A few lines that fit one screen whatever the number of tracks: how many tracks and PRs,
    what changed in this run, the next actions by kind (the most pressing first), failures."""
    from collections import Counter

    prs = {pr.number: pr for track in report.tracks for pr in track.prs}
    changed = sorted(n for n, pr in prs.items() if pr.changes)
    kinds = Counter(track.next_action.kind for track in report.tracks)
    order = ["orphaned", "convergence-check", "refresh", "wait-for-stack", "port-candidate", "queued", "unknown", "converged"]
    nexts = ", ".join(f"{kinds[k]} {k}" for k in sorted(kinds, key=lambda k: order.index(k) if k in order else len(order)))
    shown = ", ".join(f"#{n}" for n in changed[:8]) + (f" and {len(changed) - 8} more" if len(changed) > 8 else "")
    lines = [f"summary: {len(report.tracks)} tracks, {len(prs)} PRs; "
             + (f"{len(changed)} changed in this run ({shown})" if changed else "none changed in this run"),
             f"  next actions: {nexts}"]
    if report.failed:
        lines.append(f"  not polled: {', '.join(f'#{n}' for n in sorted(report.failed))} (shown as recorded)")
    collisions = report.findings.collisions if report.findings is not None else None
    if collisions is not None:
        lines.append(f"  collisions ahead: {len(collisions.collisions)} ({collisions.scope})")
    return lines


# #N, state, head, base: state and head wrap within their columns when the terminal is narrow
_PR_COLUMNS = (terminal.Column(), terminal.Column(fit="wrap"), terminal.Column(fit="wrap"), terminal.Column())
_DETAIL = 11  # where a PR's title and details start (under its state)


def _pr_row(pr, mode: str) -> list:
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
    elif pr.head_change is None and mode == "live" and pr.state != "unobserved":
        head += " (first seen)"  # a live poll leaves head_change null only for a PR it saw first
    # GitHub's text (dates, branch names) is cleaned like any other: it reaches the terminal
    return [f"#{pr.number}", terminal.state(pr.state, state), head, f"base {for_terminal(pr.base_ref, 80)}" if pr.base_ref else ""]


def _pr_details(pr) -> list:
    from porttrack.report.status import change_words

    out: list = []
    if pr.title:
        out.append(terminal.cut(for_terminal(pr.title, 300), indent=_DETAIL))
    lines = [f"stacked on #{link['number']} ({for_terminal(link['state'], 20)}, from {link['via']})" for link in pr.stacked_on]
    lines += [f"changed: {for_terminal(change_words(change), terminal.UNCUT)}" for change in pr.changes]
    lines += [for_terminal(note.text, terminal.UNCUT) for note in pr.notes]
    lines += [f"last updated {for_terminal(pr.updated_at, 40)}"] if pr.updated_at else []
    return out + [terminal.paragraph(line, indent=_DETAIL, hang=2) for line in lines]


def _successor_line(line: str):
    """A line under a track's next action (successor candidates, `porttrack.observe.successors`):
    prose wraps at word boundaries under its indent. The tracks.yaml lines to adopt (indented
    deeper than any prose line) are never wrapped — a wrapped YAML comment would paste as broken
    YAML — but cut with "…" on a terminal too narrow for them. Piped, every line is whole."""
    body = line.lstrip(" ")
    indent = len(line) - len(body)
    if indent < 8:
        return terminal.indented(line, hang=2, untrusted=True)
    return terminal.cut(for_terminal(body, terminal.UNCUT), indent=indent)
