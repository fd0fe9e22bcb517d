"""`porttrack verify-converged` (`porttrack.converge.verify`).

`porttrack.converge.verify` is imported inside the command, not here: with `porttrack.diff.hunks` it is
~50 ms, and every command module is loaded for `porttrack --help`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from porttrack.cli import Context, cli, completes, emit_json, examples, pass_ctx, say
from porttrack.cli.params import PR_NUMBER
from porttrack.cli.terminal import show
from porttrack.common.text import for_terminal, short_sha

if TYPE_CHECKING:
    from porttrack.converge.verify import HunkResult, Verdict


@cli.command("verify-converged", epilog=examples("porttrack verify-converged 1234 --dry-run", "porttrack verify-converged 1234 --apply-drops"))
@click.argument("pr", type=PR_NUMBER, shell_complete=completes("pr"))
@click.option("--fork-ref", metavar="REF", help="The fork commit to check: a branch, remote-tracking branch, tag or commit [default: fork.branch of tracks.yaml].")
@click.option("--run-regression", is_flag=True, help="Run the track's regression command on the fork ref and include its result.")
@click.option("--apply-drops", is_flag=True, help="Retire the queued patches that the verdict shows droppable (evidence kept).")
@click.option("--json", "as_json", is_flag=True, help="Print the documented JSON shape (schema porttrack/convergence/v2).")
@click.option("--dry-run", is_flag=True, help="Decide and show, but record nothing and retire nothing.")
@pass_ctx
def verify_converged(ctx: Context, pr: int, fork_ref: str | None, run_regression: bool, apply_drops: bool, as_json: bool, dry_run: bool) -> int:
    """Prove that a merged upstream PR is present in the fork: ancestry, then patch-id, then per-hunk
    content (with upstream churn). Exit 0 only when converged."""
    from porttrack.converge import verify as converge

    config = ctx.config
    ctx.require_tracked(pr)  # a typo costs no request
    verdict = converge.verify_converged(
        ctx.workspace,
        config,
        pr,
        repo=ctx.fork,
        github=lambda: ctx.github(config.upstream.repo),
        fork_ref=fork_ref,
        run_regression=run_regression,
        apply_drops=apply_drops,
        dry_run=dry_run,
        say=say,
    )
    if as_json:
        emit_json(converge.to_json(verdict))
    else:
        show(ctx.terminal, render(verdict))  # paged on a terminal when taller than it, as report weekly (issue 32, item 12)
    if dry_run:
        retire = [d.ref for d in verdict.drops if d.droppable and d.kind == "queued-patch"] if apply_drops else []
        where = converge.record_path(ctx.workspace, pr).relative_to(ctx.workspace.root)
        if verdict.unchanged_since and not retire:
            say(f"dry run: unchanged since {verdict.unchanged_since}; nothing would be appended to {where}")
        else:
            say(f"dry run: would append this verdict to {where}" + (f" and retire {', '.join(retire)}" if retire else ""))
    problem = converge.outcome(verdict)
    if problem is not None:
        raise problem
    return 0


def render(v: "Verdict") -> str:
    from porttrack.converge.verify import counts_words, summary

    c = v.commits
    lines = [
        f"#{v.pr} {for_terminal(v.title, 90)}",
        f"verdict: {v.verdict} (decided by {v.method})",
        f"  merge commit {short_sha(c.merge_commit)} ({c.merge_kind}, from {'GitHub' if v.source == 'github' else 'the recorded state'})",
        f"  fork ref {c.fork_ref} = {short_sha(c.fork_sha)}; upstream base {c.upstream_base} = {short_sha(c.upstream_base_sha)}",
    ]
    lines += [f"  - {for_terminal(r, 200)}" for r in v.reasons]
    if v.hunks:
        lines.append(f"  hunks: {counts_words(summary(v.hunks))}")
    if v.hunks:
        lines.append("")
        paths = [for_terminal(h.path, 60) for h in v.hunks]
        headers = [for_terminal(h.header, 40) for h in v.hunks]
        pw, hw = max(map(len, paths)), max(map(len, headers))
        for h, path, header in zip(v.hunks, paths, headers):
            lines.append(f"  {h.id}  {path:<{pw}}  {header:<{hw}}  {_hunk_words(h)}")
    if v.drops:
        lines.append("")
        lines.append("drops:")
        for d in v.drops:
            mark = "retired" if d.retired else ("droppable" if d.droppable else "keep")
            lines.append(f"  {d.kind} {for_terminal(d.ref, 60)}: {mark} — {for_terminal(d.reason, 160)}")
    if v.regression is not None:
        r = v.regression
        lines.append("")
        lines.append(f"regression: {'pass' if r.passed else 'FAIL'} (exit {r.exit_code}, {r.duration_s:.1f}s, {r.workdir}): {for_terminal(r.command, 120)}")
        if not r.passed and r.output_tail:
            lines += [f"  | {for_terminal(line, 160)}" for line in r.output_tail.splitlines()[-10:]]
    if v.recorded:
        lines.append("")
        lines.append(f"recorded in {v.recorded}" if v.unchanged_since is None else
                     f"unchanged since {v.unchanged_since}, as recorded in {v.recorded} (not appended again)")
    return "\n".join(lines)


def _hunk_words(h: "HunkResult") -> str:
    if h.state == "present":
        return f"present ({h.method})"
    if h.state == "present-after-churn" and h.changed_by is not None:
        where = "upstream" if h.changed_by.upstream else "in the fork"
        return (f"present after churn: changed {where} by {h.changed_by.commit[:12]} "
                f"({for_terminal(h.changed_by.subject, 50)}), which the fork has ({h.method})")
    if h.state == "undone-upstream" and h.changed_by is not None:
        return (f"UNDONE UPSTREAM by {h.changed_by.commit[:12]} ({for_terminal(h.changed_by.subject, 50)}): "
                f"keep carrying it or drop it ({h.method})")
    if h.state == "missing":
        return f"MISSING ({h.method}): {for_terminal(h.detail, 100)}"
    return f"UNKNOWN ({h.method}): {for_terminal(h.detail, 140)}"
