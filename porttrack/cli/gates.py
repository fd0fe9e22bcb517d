"""`porttrack gate run|ingest|check`, `promote`, `demote`, `evidence supersede|list`."""

from __future__ import annotations

from pathlib import Path

import click

from porttrack.cli import Context, cli, completes, emit_json, examples, pass_ctx, say, terminal
from porttrack.common.errors import NotFound

# The core modules are imported inside each command, not here: every command module is loaded for
# `porttrack --help`, and these (with apply, hunks, the evidence log) would add ~0.1 s to it.


def _subject(ctx: Context, patch: str | None, proof: str | None):
    """The patch (by name, prefix or PR number) or the proof (--proof ID) a gate command is about."""
    from porttrack.prove import gates
    from porttrack.queue import manifest as queue_mod

    if (patch is None) == (proof is None):
        raise click.UsageError("name a patch, or a proof with --proof ID (not both)")
    queue = queue_mod.load(ctx.workspace)
    if proof is not None:
        return queue, gates.proof_subject(ctx.config, proof)
    assert patch is not None  # one of the two, checked above
    return queue, gates.patch_subject(ctx.config, queue, queue.get(patch))


@cli.group(epilog=examples("porttrack gate run 1234", "porttrack gate check 1234"))
def gate() -> None:
    """Run a patch's gate job and judge its evidence."""


@gate.command("run", epilog=examples("porttrack gate run 1234 --baseline", "porttrack gate run 1234 --target cpu", "porttrack gate run --proof PROOF-ID"))
@click.argument("patch", required=False, shell_complete=completes("patch"))
@click.option("--proof", metavar="ID", shell_complete=completes("proof"), help="Run a proof's gate (an id under proofs: in tracks.yaml) instead of a patch's.")
@click.option("--target", "targets", multiple=True, metavar="T", shell_complete=completes("target"), help="Only this target (repeatable) [default: every target the gate requires].")
@click.option("--baseline", is_flag=True, help="Measure the baseline: the same job on the fork without the patch.")
@click.option("--interleaved", type=click.IntRange(2, 1000), default=None, metavar="N",
              help="Measure baseline and candidate in turns (C B B C ...), N rounds each, and record the medians with their spread (local command jobs).")
@click.option("--run-id", "run_ids", multiple=True, metavar="[TARGET=]ID", help="Collect an existing workflow run instead of dispatching one.")
@click.option("--poll-interval", type=float, default=15.0, show_default=True, metavar="S", help="Seconds between polls of a workflow run.")
@click.option("--wait", "wait_s", type=float, default=None, metavar="S", help="Give up polling after S seconds [default: the gate's timeout_s].")
@click.option("--force", is_flag=True, help="Build the staging branch even if the fork's work tree has local changes (as `apply --force`).")
@click.option("--json", "as_json", is_flag=True, help="Print what was recorded and the verdict (schema porttrack/gate-run/v1).")
@click.option("--dry-run", is_flag=True, help="Build the ref and show what would run; run and record nothing.")
@pass_ctx
def gate_run(ctx: Context, patch, proof, targets, baseline, interleaved, run_ids, poll_interval, wait_s, force, as_json, dry_run) -> int:
    """Build the staging ref, run the gate job (local command or GitHub Actions workflow) per
    target, and record its results as evidence. Exit code: the verdict's, as `gate check`."""
    from porttrack.prove import gaterun
    from porttrack.prove import promote as promote_mod

    queue, subject = _subject(ctx, patch, proof)
    if interleaved is not None:
        from porttrack.common.errors import InputError
        from porttrack.prove import interleave

        if baseline or run_ids or dry_run:
            raise InputError("--interleaved measures both roles itself: give it without --baseline, --run-id or --dry-run")
        done = interleave.run(ctx.workspace, ctx.config, queue, subject, repo=ctx.fork, rounds=interleaved,
                              targets=list(targets) or None, say=None if as_json else say, force=force)
        candidate = next(o for o in done if o.role == "candidate")
        change, result = promote_mod.settle(ctx.workspace, ctx.config, subject, warn=say)
        return _judged(ctx, change, result, as_json, candidate.ref.sha, list(candidate.plan), [r.id for o in done for r in o.records])
    ids = _run_ids(run_ids, targets)
    outcome = gaterun.run(
        ctx.workspace, ctx.config, queue, subject, repo=ctx.fork, client=_gate_client(ctx, subject, dry_run),
        role="baseline" if baseline else "candidate", targets=list(targets) or (list(ids) if ids else None),
        dry_run=dry_run, poll_interval_s=poll_interval, wait_s=wait_s, run_ids=ids,
        progress=None if as_json else say, force=force,
    )
    if dry_run:
        for line in outcome.plan:
            say(f"would run: {line}")
        say("dry run: nothing was run or recorded")
        if as_json:
            # what each target's job would be told: a maintainer measuring by hand sets these, then `gate ingest`
            told = {line.split(":", 1)[0]: gaterun.job_environment(subject, outcome.role, line.split(":", 1)[0], outcome.ref, gaterun.RESULTS_NAME)
                    for line in outcome.plan}
            emit_json({"schema": "porttrack/gate-run/v1", "dry_run": True, "ref": outcome.ref.sha, "plan": list(outcome.plan),
                       "job_environment": told, "records": [], "check": None})
        return 0
    change, result = promote_mod.settle(ctx.workspace, ctx.config, subject, warn=say)
    return _judged(ctx, change, result, as_json, outcome.ref.sha, list(outcome.plan), [r.id for r in outcome.records])


@gate.command("ingest", epilog=examples("porttrack gate ingest 1234 --target cpu --results results.json --dry-run"))
@click.argument("patch", required=False, shell_complete=completes("patch"))
@click.option("--proof", metavar="ID", shell_complete=completes("proof"), help="Results for a proof's gate instead of a patch's.")
@click.option("--target", required=True, metavar="T", shell_complete=completes("target"), help="The target the results were measured on.")
@click.option("--results", "results_file", required=True, type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="A porttrack/results/v1 file (written by the gate's job, run on your own machine).")
@click.option("--baseline", is_flag=True, help="The results are of the baseline build (the fork without the patch).")
@click.option("--json", "as_json", is_flag=True, help="Print what was recorded and the verdict (schema porttrack/gate-run/v1).")
@click.option("--dry-run", is_flag=True, help="Check the file against the build; record nothing.")
@pass_ctx
def gate_ingest(ctx: Context, patch, proof, target, results_file, baseline, as_json, dry_run) -> int:
    """Record results measured by hand as evidence — only when they are for the build `gate run`
    would measure (its ref, patch set, target, track and subject); otherwise refused with the
    reason (exit 2) and nothing recorded. Exit code: the verdict's, as `gate check`."""
    from porttrack.prove import gaterun

    queue, subject = _subject(ctx, patch, proof)
    warnings: list[str] = []  # said after the line on what was recorded
    done = gaterun.record_and_judge(ctx.workspace, ctx.config, queue, subject, repo=ctx.fork,
                                    role="baseline" if baseline else "candidate", target=target, path=results_file,
                                    dry_run=dry_run, say=None if as_json else say, warn=warnings.append)
    built, record = done.built, done.record
    if done.result is None:  # a dry run
        say(f"dry run: {results_file} matches the {'baseline' if baseline else 'candidate'} build {built.sha[:12]} on {target}; nothing recorded")
        if as_json:
            emit_json({"schema": "porttrack/gate-run/v1", "dry_run": True, "ref": built.sha, "plan": [], "records": [], "check": None})
        return 0
    say(f"{target}: recorded {record.id} ({len(record.cells)} cells) from {results_file}")
    for line in warnings:
        say(line)
    return _judged(ctx, done.change, done.result, as_json, built.sha, [], [record.id])


def _judged(ctx: Context, change, result, as_json: bool, ref: str, plan: list[str], records: list[str]) -> int:
    """After evidence was recorded and judged (`gate run`, `gate ingest`): the patch's state change
    and the verdict, printed; its exit code is the command's."""
    from porttrack.prove import gate_output

    if change is not None:
        say(change.message)
    if as_json:
        emit_json({"schema": "porttrack/gate-run/v1", "dry_run": False, "ref": ref, "plan": plan,
                   "records": records, "check": gate_output.to_json(result)})
    else:
        ctx.show([terminal.indented(line, hang=4) for line in gate_output.render(result).splitlines()])
    return result.exit_code


def _gate_client(ctx: Context, subject, dry_run: bool):
    """The fork's GitHub client when the gate dispatches a workflow and a token exists; else None
    (a workflow job then says it needs a token; a command job needs no client)."""
    from porttrack.github.client import has_token

    gate = subject.gate
    if dry_run or gate is None or gate.job.workflow is None or not has_token():
        return None
    return ctx.github(ctx.config.fork.repo)


def _run_ids(values, targets) -> dict[str, int]:
    ids: dict[str, int] = {}
    for value in values:
        target, _, run_id = value.rpartition("=")
        if not target:
            if len(targets) != 1:
                raise click.UsageError("--run-id ID needs exactly one --target (or write --run-id TARGET=ID)")
            target = targets[0]
        if not run_id.isdigit():
            raise click.UsageError(f"--run-id {value!r}: expected a run id (digits)")
        ids[target] = int(run_id)
    return ids


@gate.command("check", epilog=examples("porttrack gate check 1234", "porttrack gate check 1234 --json"))
@click.argument("patch", required=False, shell_complete=completes("patch"))
@click.option("--proof", metavar="ID", shell_complete=completes("proof"), help="Check a proof's gate instead of a patch's.")
@click.option("--json", "as_json", is_flag=True, help="Print the documented JSON shape (schema porttrack/gate-check/v1).")
@pass_ctx
def gate_check(ctx: Context, patch, proof, as_json) -> int:
    """The verdict cell by cell (each combination of the gate's axes, per target and phase; axes are
    what tracks.yaml names: a dataset size, a Python version, or under vllm-gpu model × context ×
    batch). Exit 0: every cell
    passes; 1: the gate failed; 7: it could not be evaluated (missing evidence or baseline)."""
    from porttrack.prove import gate_output, gates

    _queue, subject = _subject(ctx, patch, proof)
    result = gates.judge(ctx.workspace, ctx.config, subject)
    if as_json:
        emit_json(gate_output.to_json(result))
    else:
        ctx.show([terminal.indented(line, hang=4) for line in gate_output.render(result).splitlines()])
    if result.verdict == gates.CANNOT_EVALUATE and not as_json:
        say(f"porttrack: could not evaluate: {result.reason}")
    return result.exit_code


@cli.command(epilog=examples("porttrack promote 1234 --dry-run", "porttrack promote 1234"))
@click.argument("patch", shell_complete=completes("patch"))
@click.option("--json", "as_json", is_flag=True, help="Print the decision and the verdict it rests on.")
@click.option("--dry-run", is_flag=True, help="Judge the evidence; record nothing.")
@pass_ctx
def promote(ctx: Context, patch, as_json, dry_run) -> int:
    """Make a patch default-enabled — refused unless the latest non-superseded evidence satisfies
    its gate for every required cell on every required target."""
    from porttrack.prove import promote as promote_mod

    try:
        decision = promote_mod.promote(ctx.workspace, ctx.config, patch, dry_run=dry_run)
    except promote_mod.PromotionRefused as exc:
        if as_json:
            emit_json(_decision_json(None, exc.result))
        raise
    if as_json:
        emit_json(_decision_json(decision, decision.result))
    say(decision.message)
    return 0


@cli.command(epilog=examples("porttrack demote 1234 --reason 'slower on cpu'"))
@click.argument("patch", shell_complete=completes("patch"))
@click.option("--reason", required=True, help="Why it is no longer default-enabled (recorded).")
@click.option("--dry-run", is_flag=True, help="Show the change; record nothing.")
@pass_ctx
def demote(ctx: Context, patch, reason, dry_run) -> int:
    """Take a patch out of the default build (it stays in staging); its state follows the evidence."""
    from porttrack.prove import promote as promote_mod

    decision = promote_mod.demote(ctx.workspace, ctx.config, patch, reason, dry_run=dry_run)
    say(decision.message)
    return 0


def _decision_json(decision, result) -> dict:
    from porttrack.prove import gate_output

    return {
        "schema": "porttrack/promote/v1",
        "patch": decision.patch if decision else result.subject.name,
        "promoted": bool(decision and decision.changed),
        "before": decision.before if decision else result.subject.state,
        "after": decision.after if decision else result.subject.state,
        "evidence": list(decision.evidence) if decision else [],
        "dry_run": bool(decision and decision.dry_run),
        "check": gate_output.to_json(result) if result is not None else None,
    }


@cli.group("evidence", epilog=examples("porttrack evidence list 1234 --current"))
def evidence_group() -> None:
    """Evidence records: append-only results of gate jobs, and their corrections."""


@evidence_group.command("list", epilog=examples("porttrack evidence list", "porttrack evidence list 1234 --current --json"))
@click.argument("subject", required=False, shell_complete=completes("subject"))
@click.option("--json", "as_json", is_flag=True, help="Print the documented JSON shape (schema porttrack/evidence-list/v1).")
@click.option("--current", is_flag=True, help="Only records that still count (not superseded).")
@pass_ctx
def evidence_list(ctx: Context, subject, as_json, current) -> int:
    """Every record (or those of SUBJECT: a patch name or proof id), oldest first."""
    from porttrack.common.text import for_terminal
    from porttrack.prove import evidence

    log = evidence.load(ctx.workspace)
    records = log.current() if current else log.records
    if subject:
        name = _subject_name(ctx, subject)
        records = tuple(r for r in records if r.subject.name == name)
    if as_json:
        emit_json(evidence.list_to_json(log, records))
        return 0
    for record in records:
        sup = log.superseded_by(record.id)
        status = f"SUPERSEDED by {sup.id}: {for_terminal(sup.reason, 120)}" if sup else "current"
        click.echo(f"{record.id}  {record.subject.kind} {record.subject.name}  {record.role:<9} {record.target:<8} "
                   f"ref {record.commits.get('ref_under_test', '')[:12]}  {len(record.cells)} cells  {status}")
    for bad in log.invalid:
        click.echo(f"INVALID {bad.path}: {for_terminal(bad.why, 160)}")
    if not records:
        say("no evidence recorded" + (f" for {subject}" if subject else ""))
    return 0


def _subject_name(ctx: Context, subject: str) -> str:
    from porttrack.queue import manifest as queue_mod

    if subject in ctx.config.proofs:
        return subject
    try:
        return queue_mod.load(ctx.workspace).get(subject).name
    except NotFound:
        return subject


@evidence_group.command("supersede", epilog=examples("porttrack evidence supersede RECORD-ID --reason 'measured on the wrong build'"))
@click.argument("record_id", metavar="ID")
@click.option("--reason", required=True, help="Why the record no longer counts (recorded).")
@click.option("--replaced-by", metavar="ID", help="The record that corrects it, if any.")
@click.option("--dry-run", is_flag=True, help="Show the correction; record nothing.")
@pass_ctx
def evidence_supersede(ctx: Context, record_id, reason, replaced_by, dry_run) -> int:
    """Record a correction: the record stops counting but stays in history."""
    from porttrack.prove import evidence
    from porttrack.queue import manifest as queue_mod

    entry = evidence.supersede(ctx.workspace, record_id, reason, replaced_by=replaced_by, dry_run=dry_run)
    say(f"{entry.supersedes} superseded by {entry.id}: {entry.reason}" + (" (dry run: nothing recorded)" if dry_run else ""))
    for patch in queue_mod.load(ctx.workspace).patches:
        promoted = next((t for t in reversed(patch.history) if t.to == "default-enabled"), None)
        if patch.state == "default-enabled" and promoted is not None and entry.supersedes in promoted.evidence:
            say(f"warning: {patch.name} was promoted on this evidence; check it (`porttrack gate check {patch.name}`) "
                f"and demote it if it no longer holds (`porttrack demote {patch.name} --reason ...`)")
    return 0
