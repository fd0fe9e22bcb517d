"""Running a gate job: build the ref under test, run the job per target, ingest its results.

`gate run` builds the ref under test, runs the gate's job once per target — a local command
(through the one job runner, `porttrack.runner.local`), or a GitHub Actions workflow on the fork's
self-hosted runners — and ingests each target's results as one evidence record. Per target all or
nothing: a results file that is malformed, or that describes another run than the one asked for,
records nothing for that target. Judging the evidence is `porttrack.prove.gates`' business.

The doors come in opened: `repo` is the fork checkout, `client` the fork's GitHub client (None
when no workflow job needs one; a workflow job then raises the clear auth error).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import os
import secrets as pysecrets
import shlex
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from porttrack import apply as apply_mod
from porttrack.common.errors import CannotEvaluate, ConfigError, ConflictError, GitHubAuthError, InputError, PreconditionError
from porttrack.common.text import for_terminal
from porttrack.git.repo import GitRepo, network_timeout
from porttrack.prove import evidence, promote
from porttrack.prove.evidence import Expected, Record, Subject
from porttrack.prove.gates import GateCheck, GateSubject
from porttrack.prove.promote import Decision
from porttrack.queue import manifest as queue_mod
from porttrack.queue import series as series_mod
from porttrack.runner import results
from porttrack.runner.local import command_argv, run_job
from porttrack.workspace.files import Workspace, checkpoint, sweep_dead_scratch

if TYPE_CHECKING:
    from porttrack.github.client import GitHubClient
    from porttrack.queue.manifest import Queue
    from porttrack.tracks.config import Config

RESULTS_NAME = "results.json"  # the file a workflow's results artifact must hold
LOG_TAIL = 12  # lines of a failed job's output quoted in the error
NEEDS_TOKEN = "dispatching a gate workflow needs a GitHub token (GITHUB_TOKEN, GH_TOKEN or `gh auth login`)"

Say = Callable[[str], None]


@dataclass(frozen=True)
class BuiltRef:
    sha: str  # the commit under test
    upstream_base: str
    fork_commit: str  # the commit the patch set was applied on
    patch_set: tuple[tuple[str, str], ...]  # (name, sha256) in series order
    how: str  # for messages: "staging build porttrack/staging" / "baseline build (without …)"


@dataclass(frozen=True)
class TargetOutcome:
    target: str
    record: Record | None
    problem: str | None = None
    exit_code: int | None = None  # the job's (command) exit status
    run_url: str | None = None  # the workflow run (workflow jobs)


@dataclass(frozen=True)
class RunOutcome:
    subject: GateSubject
    role: str
    ref: BuiltRef
    targets: tuple[TargetOutcome, ...]
    plan: tuple[str, ...]  # what was (or, with --dry-run, would be) run
    dry_run: bool

    @property
    def records(self) -> tuple[Record, ...]:
        return tuple(t.record for t in self.targets if t.record is not None)


@dataclass(frozen=True)
class _Run:
    """What one `run` call shares with the per-target steps."""

    ws: Workspace
    config: "Config"
    repo: GitRepo
    subject: GateSubject
    role: str
    built: BuiltRef
    dry_run: bool
    say: Say
    now: str | None


def run(
    ws: Workspace,
    config: "Config",
    queue: "Queue",
    subject: GateSubject,
    *,
    repo: GitRepo,
    client: "GitHubClient | None" = None,
    role: str = "candidate",
    targets: Sequence[str] | None = None,
    dry_run: bool = False,
    poll_interval_s: float = 15.0,
    wait_s: float | None = None,
    run_ids: Mapping[str, int] | None = None,
    progress: Say | None = None,
    now: str | None = None,
    force: bool = False,
) -> RunOutcome:
    """Run `subject`'s gate job in `role` on `targets` (default: every target the gate requires).

    Raises InputError when a results file is refused (after recording the other targets) and
    CannotEvaluate when a job produced no results; otherwise returns what was recorded.
    """
    say = progress or (lambda _line: None)
    if subject.gate is None:
        raise PreconditionError(subject.why_ungated or f"{subject.name} has no gate")
    if role not in ("candidate", "baseline"):
        raise ValueError(role)
    gate = subject.gate
    chosen = _targets(config, subject, targets)
    built = build_ref(ws, config, queue, subject, role, repo=repo, dry_run=dry_run, say=say, force=force)
    say(f"{role} ref {built.sha[:12]}: {built.how}")
    ctx = _Run(ws, config, repo, subject, role, built, dry_run, say, now)
    if gate.job.command is not None:
        plan, outcomes = _run_commands(ctx, chosen)
    else:
        plan, outcomes = _run_workflow(ctx, chosen, client, poll_interval_s=poll_interval_s,
                                       wait_s=wait_s if wait_s is not None else float(gate.job.timeout_s),
                                       run_ids=run_ids or {})
    result = RunOutcome(subject, role, built, tuple(outcomes), tuple(plan), dry_run)
    checkpoint("gate:recorded")
    refused = [t for t in outcomes if t.problem and t.problem.startswith("results refused")]
    failed = [t for t in outcomes if t.problem and t not in refused]
    if refused:
        raise InputError("; ".join(f"{t.target}: {t.problem}" for t in refused + failed))
    if failed:
        raise CannotEvaluate("; ".join(f"{t.target}: {t.problem}" for t in failed)
                             + (f" (recorded: {', '.join(r.id for r in result.records)})" if result.records else ""))
    return result


def _targets(config: "Config", subject: GateSubject, targets: Sequence[str] | None) -> tuple[str, ...]:
    gate = subject.gate
    assert gate is not None
    allowed = list(gate.matrix.targets or config.targets) if subject.kind == "proof" else config.gate_targets(subject.track)
    if not targets:
        return tuple(allowed)
    for target in targets:
        if target not in allowed:
            raise ConfigError(f"target {target} is not one of the gate's targets ({', '.join(allowed)})")
    return tuple(dict.fromkeys(targets))


# -- the ref under test ------------------------------------------------------------------------

def build_ref(ws: Workspace, config: "Config", queue: "Queue", subject: GateSubject, role: str, *,
              repo: GitRepo, dry_run: bool = False, say: Say | None = None, force: bool = False) -> BuiltRef:
    """The commit to measure. Candidate: the staging build (every live patch; `porttrack apply`).
    Baseline: the same build without the subject and the patches that depend on it (a proof's
    baseline: the fork with no queued patch). Builds are reproducible, so the same queue on the
    same base gives the same commit."""
    series = list(queue.series(queue_mod.STAGING_STATES))
    if subject.kind == "patch" and subject.name not in {p.name for p in series}:
        raise PreconditionError(f"patch {subject.name} is {subject.state}, not in the staging build; only a live patch can be gated")
    if role == "candidate":
        staged = apply_mod.apply(ws, config, repo, target="staging", force=force, dry_run=dry_run, progress=say,
                                 queue=queue if dry_run else None)
        assert staged.new is not None
        patch_set = tuple((p.name, p.sha256) for p in series)
        return BuiltRef(staged.new, _upstream_base_sha(config, repo), staged.base_sha, patch_set,
                        f"staging build {staged.branch} ({len(series)} patches)")
    leave_out = {subject.name} | set(subject.dependents) if subject.kind == "patch" else {p.name for p in series}
    kept = [p for p in series if p.name not in leave_out]
    base_ref = series_mod.build_base(repo, config)
    base = repo.rev_parse(base_ref)
    if base is None:
        raise PreconditionError(f"build base {base_ref!r} is not in {repo.path}; fetch or create it first")
    contents = {p.name: queue_mod.read_patch(ws, p) for p in kept}
    # apply's builder works in a scratch index: no branch moves, the work tree is not touched.
    built, sha = series_mod.build_series(repo, base, kept, contents, say)
    if sha is None:
        bad = next((r.name for r in built if r.outcome == "conflict"), "?")
        raise ConflictError(f"the baseline build (the queue without {subject.name}) conflicts at {bad}; a baseline cannot be built")
    left = sorted(leave_out & {p.name for p in series})
    return BuiltRef(sha, _upstream_base_sha(config, repo), base, tuple((p.name, p.sha256) for p in kept),
                    f"baseline build without {', '.join(left) or 'nothing'} ({len(kept)} patches)")


def _upstream_base_sha(config: "Config", repo: GitRepo) -> str:
    """The upstream commit the fork is based on (a fingerprint field: baselines must match it)."""
    sha = repo.rev_parse(config.fork.upstream_base)
    if sha is None:
        raise PreconditionError(f"upstream base {config.fork.upstream_base!r} is not in {repo.path}; fetch it first")
    return sha


# -- what a job is told, and what it hands back -----------------------------------------------

def job_environment(subject: GateSubject, role: str, target: str, built: BuiltRef, results_path: str) -> dict[str, str]:
    """What porttrack tells a job (porttrack.runner.results reads it)."""
    return {
        "PORTTRACK_TRACK": subject.track,
        "PORTTRACK_SUBJECT": subject.name,
        "PORTTRACK_ROLE": role,
        "PORTTRACK_TARGET": target,
        "PORTTRACK_REF": built.sha,
        "PORTTRACK_UPSTREAM_BASE": built.upstream_base,
        "PORTTRACK_FORK_COMMIT": built.fork_commit,
        "PORTTRACK_PATCH_SET": json.dumps([{"name": n, "sha256": s} for n, s in built.patch_set]),
        "PORTTRACK_RESULTS": results_path,
    }


def ingest(ws: Workspace, config: "Config", subject: GateSubject, role: str, target: str, built: BuiltRef,
           data: bytes, where: str, job: Mapping[str, Any], *, now: str | None = None, dry_run: bool = False) -> Record:
    """Validate a results file and record it as evidence. InputError, and nothing recorded, when
    it is malformed or describes another run (other ref, patch set, track, target...)."""
    document = results.parse(data, where)
    expected_arch = config.targets[target].arch if target in config.targets else None
    arch = document["environment"]["arch"]
    if expected_arch is not None and document["target"] == target and arch != expected_arch:
        raise InputError(f"{where}: results for target {target} were measured on arch {arch}, not {expected_arch}; nothing was recorded")
    return evidence.record_results(ws, document, _expected(subject, role, target, built), job=job,
                                   results_sha256=evidence.results_digest(data), now=now, dry_run=dry_run)


def ingest_file(ws: Workspace, config: "Config", queue: "Queue", subject: GateSubject, *, repo: GitRepo, role: str,
                target: str, path: Path, now: str | None = None, dry_run: bool = False,
                say: Say | None = None) -> tuple[BuiltRef, Record]:
    """Results measured by hand (on the maintainer's own GB10 or Strix Halo box), recorded as
    evidence only when they describe the build `gate run` would measure: the ref it would build
    for `role` (nothing is moved: the build is a dry run), its patch set, upstream base and fork
    commit, the target, the track and the subject. Anything else is an InputError naming what
    differs, and nothing is recorded."""
    if subject.gate is None:
        raise PreconditionError(subject.why_ungated or f"{subject.name} has no gate")
    if role not in ("candidate", "baseline"):
        raise ValueError(role)
    _targets(config, subject, [target])
    try:
        with open(path, "rb") as handle:
            data = handle.read(results.MAX_BYTES + 1)
    except OSError as exc:
        raise InputError(f"cannot read the results file {path}: {exc.strerror or exc}") from None
    # force: the dry-run build reads the queue and the base and touches no work tree or branch
    built = build_ref(ws, config, queue, subject, role, repo=repo, dry_run=True, say=say, force=True)
    job = {"kind": "manual", "file": path.name}
    return built, ingest(ws, config, subject, role, target, built, data, str(path), job, now=now, dry_run=dry_run)


@dataclass(frozen=True)
class Ingested:
    """`gate ingest`'s outcome: the build the results matched, the record, and (unless a dry run)
    the patch's state change and the verdict, judged once."""

    built: BuiltRef
    record: Record
    change: Decision | None = None
    result: GateCheck | None = None


def record_and_judge(ws: Workspace, config: "Config", queue: "Queue", subject: GateSubject, *, repo: GitRepo, role: str,
                     target: str, path: Path, now: str | None = None, dry_run: bool = False, say: Say | None = None,
                     warn: Say | None = None) -> Ingested:
    """Results measured by hand recorded as evidence (`ingest_file`, which says what it refuses),
    then, unless `dry_run`, the subject judged once on the evidence now held and a patch's state
    moved to what the verdict says (`promote.settle`; `warn` is told of a default-enabled patch
    whose gate no longer passes)."""
    built, record = ingest_file(ws, config, queue, subject, repo=repo, role=role, target=target, path=path,
                                now=now, dry_run=dry_run, say=say)
    if dry_run:
        return Ingested(built, record)
    change, result = promote.settle(ws, config, subject, warn=warn)
    return Ingested(built, record, change, result)


def _expected(subject: GateSubject, role: str, target: str, built: BuiltRef) -> Expected:
    return Expected(subject.track, Subject(subject.kind, subject.name, subject.sha256), role, target,
                    built.sha, built.upstream_base, built.fork_commit, built.patch_set)


# -- a local command ---------------------------------------------------------------------------

def _run_commands(run_: _Run, targets: Sequence[str]) -> tuple[list[str], list[TargetOutcome]]:
    plan: list[str] = []
    outcomes: list[TargetOutcome] = []
    for target in targets:
        with _job_folder(run_.ws) as tmp:
            outcome = _run_command(run_, target, Path(tmp), plan)
        if outcome is not None:
            outcomes.append(outcome)
    return plan, outcomes


def _run_command(run_: _Run, target: str, tmp: Path, plan: list[str]) -> TargetOutcome | None:
    """One target: run the job (in a worktree of the ref when it asks for {workdir}), ingest."""
    gate, subject, built = run_.subject.gate, run_.subject, run_.built
    assert gate is not None and gate.job.command is not None
    command = gate.job.command
    results_path, workdir = tmp / RESULTS_NAME, tmp / "work"
    values = {"ref": built.sha, "results": str(results_path), "workdir": str(workdir), "target": target}
    what = f"gate job command of {subject.track}"
    plan.append(f"{target}: {shlex.join(command_argv(command, values, what))}")
    if run_.dry_run:
        return None
    log = Path(run_.ws.cache_dir) / "logs" / f"gate-{subject.name}-{run_.role}-{target}.log"
    run_.say(f"{target}: running the job (timeout {gate.job.timeout_s}s, log {log})")
    with _workdir(run_.repo, built.sha, workdir, needed="{workdir}" in command):
        # the job needs no GitHub token (the runner removes it), and its log is kept redacted
        job_run = run_job(command, values, cwd=Path(run_.ws.root), timeout_s=gate.job.timeout_s, log=log,
                          env=job_environment(subject, run_.role, target, built, str(results_path)),
                          tail_lines=LOG_TAIL, what=what)
    code = job_run.exit_code
    job = {"kind": "command", "command": command, "exit_code": code, "duration_s": job_run.duration_s}
    checkpoint("gate:job-done")
    if not results_path.is_file():
        why = "timed out" if job_run.timed_out else f"exited {code}"
        return TargetOutcome(target, None, f"the job {why} and wrote no results; {_tail(job_run.output_tail, log)}", code)
    try:
        record = ingest(run_.ws, run_.config, subject, run_.role, target, built, results_path.read_bytes(),
                        f"{target} results", job, now=run_.now)
    except InputError as exc:
        return TargetOutcome(target, None, f"results refused, nothing recorded: {exc}", code)
    run_.say(f"{target}: recorded {record.id} ({len(record.cells)} cells; job exited {code})")
    return TargetOutcome(target, record, None, code)


def _job_folder(ws: Workspace) -> tempfile.TemporaryDirectory:
    """The job's scratch folder (its results file, its work tree): `.porttrack/gate/<pid>-*` in the
    workspace, not the system's temp folder, so a gate run killed with SIGKILL leaves nothing
    outside the workspace; the next run sweeps folders whose process is gone."""
    parent = Path(ws.cache_dir) / "gate"
    parent.mkdir(parents=True, exist_ok=True)
    sweep_dead_scratch(parent)
    return tempfile.TemporaryDirectory(prefix=f"{os.getpid()}-", dir=parent)


@contextlib.contextmanager
def _workdir(repo: GitRepo, sha: str, path: Path, needed: bool) -> Iterator[None]:
    """{workdir}: a detached work tree of the ref under test, made only when the command asks for
    it (else an empty folder)."""
    if not needed:
        path.mkdir(parents=True, exist_ok=True)
        yield
        return
    with repo.temporary_worktree(sha, path):
        yield


def _tail(lines: Sequence[str], log: Path) -> str:
    shown = " | ".join(for_terminal(line, 200) for line in lines if line.strip())
    return f"last output: {shown}" if shown else f"no output (log {log})"


# -- a GitHub Actions workflow -----------------------------------------------------------------

def _run_workflow(run_: _Run, targets: Sequence[str], client: "GitHubClient | None", *,
                  poll_interval_s: float, wait_s: float, run_ids: Mapping[str, int]) -> tuple[list[str], list[TargetOutcome]]:
    gate, config, subject, built, say = run_.subject.gate, run_.config, run_.subject, run_.built, run_.say
    assert gate is not None and gate.job.workflow is not None
    wf = gate.job.workflow
    plan, pending, outcomes = [], {}, {}
    if not run_.dry_run and client is None:
        raise GitHubAuthError(NEEDS_TOKEN)
    pushed = None if run_.dry_run else _push(run_.repo, config.fork.repo, built.sha, say)
    for target in targets:
        request_id = pysecrets.token_hex(8)
        inputs = {key: value.format(ref=built.sha, results=RESULTS_NAME, workdir=".", target=target) for key, value in wf.inputs.items()}
        context = {**{k.removeprefix("PORTTRACK_").lower(): v for k, v in job_environment(subject, run_.role, target, built, RESULTS_NAME).items()},
                   "request_id": request_id}
        context["patch_set"] = json.loads(context["patch_set"])
        labels = list(config.targets[target].runner_labels) if target in config.targets else []
        inputs.update({"ref": built.sha, "patch": subject.name, "target": target, "role": run_.role,
                       "runner": json.dumps(labels or ["self-hosted", target]),
                       "request_id": request_id, "context": json.dumps(context, sort_keys=True, separators=(",", ":"))})
        inputs["ref_name"] = pushed or ""
        plan.append(f"{target}: dispatch {wf.file}@{wf.ref} on {config.fork.repo} with ref={built.sha[:12]} role={run_.role}")
        if run_.dry_run:
            continue
        assert client is not None
        if target in run_ids:
            pending[target] = (int(run_ids[target]), request_id)
            say(f"{target}: collecting workflow run {run_ids[target]}")
            continue
        since = _iso_now(-120)
        run_id = client.dispatch_workflow(wf.file, wf.ref, inputs)
        if run_id is None:
            run_id = _find_run(client, wf.file, request_id, since, poll_interval_s, wait_s)
        if run_id is None:
            outcomes[target] = TargetOutcome(target, None, f"dispatched {wf.file}, but no run carrying request id {request_id} appeared "
                                                           f"within {wait_s:.0f}s (does the workflow's run-name include inputs.request_id?)")
            continue
        say(f"{target}: dispatched {wf.file}, run {run_id}")
        pending[target] = (run_id, request_id)
    if run_.dry_run:
        return plan, []
    assert client is not None
    finished = _wait_for_runs(run_, client, pending, outcomes, poll_interval_s, wait_s)
    for target, state in finished.items():
        outcomes[target] = _collect(run_, client, target, state)
    return plan, [outcomes[t] for t in targets if t in outcomes]


def _wait_for_runs(run_: _Run, client: "GitHubClient", pending: dict[str, tuple[int, str]],
                   outcomes: dict[str, TargetOutcome], poll_interval_s: float, wait_s: float) -> dict[str, Any]:
    """Poll until every pending run completed; those still running at the deadline get an outcome
    saying how to collect them later."""
    deadline = time.monotonic() + wait_s
    finished = {}
    while pending:
        for target, (run_id, _req) in list(pending.items()):
            state = client.get_workflow_run(run_id)
            if state.status == "completed":
                finished[target] = state
                del pending[target]
                run_.say(f"{target}: run {run_id} {state.conclusion} ({state.html_url})")
        if not pending:
            break
        if time.monotonic() + poll_interval_s > deadline:
            for target, (run_id, _req) in pending.items():
                outcomes[target] = TargetOutcome(target, None, f"workflow run {run_id} did not finish within {wait_s:.0f}s; nothing recorded "
                                                               f"(collect it later: porttrack gate run {run_.subject.name} --target {target} --run-id {run_id}"
                                                               f"{' --baseline' if run_.role == 'baseline' else ''})")
            break
        time.sleep(poll_interval_s)
    return finished


def _collect(run_: _Run, client: "GitHubClient", target: str, state: Any) -> TargetOutcome:
    """A finished run's results artifact, ingested."""
    gate = run_.subject.gate
    assert gate is not None and gate.job.workflow is not None  # a workflow gate's run
    wf = gate.job.workflow
    job = {"kind": "workflow", "workflow": wf.file, "run_id": state.id, "run_url": state.html_url, "conclusion": state.conclusion}
    artifact = next((a for a in client.list_run_artifacts(state.id) if a.name == wf.artifact and not a.expired), None)
    if artifact is None:
        return TargetOutcome(target, None, f"run {state.html_url} concluded {state.conclusion} without a {wf.artifact!r} artifact", run_url=state.html_url)
    where = f"{target} artifact {wf.artifact}"
    try:
        data = _results_from_zip(client.download_artifact(artifact.id), where)
        record = ingest(run_.ws, run_.config, run_.subject, run_.role, target, run_.built, data, where, job, now=run_.now)
    except InputError as exc:
        return TargetOutcome(target, None, f"results refused, nothing recorded: {exc}", run_url=state.html_url)
    run_.say(f"{target}: recorded {record.id} ({len(record.cells)} cells)")
    return TargetOutcome(target, record, None, run_url=state.html_url)


def _find_run(client: "GitHubClient", workflow_file: str, request_id: str, since: str, poll_interval_s: float, wait_s: float) -> int | None:
    deadline = time.monotonic() + min(wait_s, 300.0)
    while True:
        found = client.find_dispatched_run(workflow_file, request_id, since)
        if found is not None:
            return found.id
        if time.monotonic() + poll_interval_s > deadline:
            return None
        time.sleep(poll_interval_s)


def _results_from_zip(blob: bytes, where: str) -> bytes:
    """The results file inside an artifact zip: `results.json`, or its only JSON file."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(blob))
    except zipfile.BadZipFile:
        raise InputError(f"{where}: not a zip archive") from None
    entries = [i for i in archive.infolist() if not i.is_dir()]
    chosen = [i for i in entries if i.filename.rsplit("/", 1)[-1] == RESULTS_NAME] or [i for i in entries if i.filename.endswith(".json")]
    if len(chosen) != 1:
        raise InputError(f"{where}: expected one {RESULTS_NAME} in the artifact, found {len(chosen)} JSON files")
    if chosen[0].file_size > results.MAX_BYTES:
        raise InputError(f"{where}: {chosen[0].filename} is larger than {results.MAX_BYTES >> 20} MiB; refused")
    with archive.open(chosen[0]) as handle:
        return handle.read(results.MAX_BYTES + 1)


def _push(repo: GitRepo, fork_repo: str, sha: str, say: Say) -> str | None:
    """Make the ref under test fetchable by the runner: push it to the fork's remote as
    `porttrack/gate/<sha12>`. Skipped (with a note) when no remote of the checkout is the fork."""
    wanted = fork_repo.lower()
    remotes = repo.text("remote").split()
    remote = next((r for r in remotes if (repo.remote_url(r) or "").lower().rstrip("/").removesuffix(".git").endswith(wanted)), None)
    if remote is None:
        say(f"note: no remote of {repo.path} points at {fork_repo}; not pushing {sha[:12]} (the runner must be able to fetch it)")
        return None
    branch = f"porttrack/gate/{sha[:12]}"
    repo.run("push", "--quiet", "--force", remote, f"{sha}:refs/heads/{branch}", timeout=network_timeout())
    say(f"pushed {sha[:12]} to {remote} as {branch}")
    return branch


def _iso_now(offset_s: float = 0.0) -> str:
    when = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=offset_s)
    return when.replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
