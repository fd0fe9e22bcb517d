"""Build a fork branch from its upstream base plus the patch queue (`porttrack apply`).

The staging branch carries every live patch; the default build only the promoted ones
(`queue.STAGING_STATES` / `queue.DEFAULT_STATES`). The branch is always rebuilt from the upstream
base, one commit per patch, so its history reads as the queue.

Where the build happens: in a temporary index (`GIT_INDEX_FILE`) of the fork's repository, i.e. a
worktree without files. `git apply --cached` works on blobs exactly as `git am` would, `write-tree`
and `commit-tree` make the commits, and nothing is registered with `git worktree` or checked out.
So the fork's work tree, index, HEAD and branches cannot be touched by the build, a 5,000-file
checkout costs nothing, and even SIGKILL leaves only unreferenced objects (for `git gc`) and a
scratch folder under `.git/porttrack/apply/` that the next run sweeps.

Per patch (library notes §2.4):
  1. plain `git apply --cached -v`: exact context, hunks may move (reported as *offset*);
  2. `--3way`: merge against the pre-image blobs named by the patch's `index` lines (*3-way*).
     Its exit status is trusted only together with the unmerged entries it leaves in the scratch
     index (`apply --check --3way` exits 0 on conflicts, so no `--check` is used);
  3. only when the repository lacks those blobs: `--3way -C1`, i.e. context reduced by up to two
     lines, like patch(1)'s fuzz 2 (*fuzz*);
  otherwise the patch *conflicts*: the build stops, nothing is moved, `ApplyConflict` (exit 4).
Per hunk: from `-v` for files that applied plainly; hunks of files that did not are probed one
by one (single-hunk patch, tiny index holding just that file) so the report names exactly which
hunks needed a merge, fuzz, or a human.

Commits: message and author from the patch file (`git mailinfo`, as `git am` reads it), so the
provenance trailers land in the branch history; committer `porttrack`, committer date the later of
the author date and the parent's committer date. Builds are therefore reproducible: the same
queue on the same base gives the same SHAs, and an unchanged queue leaves the branch as it is.

The commit point is one `git update-ref <ref> <new> <old>` (compare-and-swap; a branch that moved
meanwhile is left alone), or `git reset --keep` inside the worktree that has the branch checked
out. Ctrl-C and SIGTERM before it: the scratch folder is removed, refs are untouched. A signal
during it waits until the ref and the run record are written.

Each run is recorded in `state/apply/<branch>.json` (the last `KEEP_RUNS`), `--dry-run` excepted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from porttrack.common.clock import utcnow
from porttrack.common.errors import ConfigError, ConflictError, PreconditionError
from porttrack.git.repo import GitRepo
from porttrack.queue import manifest as queue_mod
from porttrack.queue.manifest import Patch
from porttrack.queue.series import NOT_TRIED, OUTCOMES, HunkResult, PatchResult, _build, build_base
from porttrack.tracks.config import Config
from porttrack.workspace.files import Workspace, append_run, checkpoint, commit_point, lock, sigterm_as_interrupt
from porttrack.workspace.files import load_runs as _load_runs

SCHEMA = "porttrack/apply/v1"
RECORD_SCHEMA = "porttrack/apply-runs/v1"
KEEP_RUNS = 20
TARGETS = ("staging", "default")


# -- records -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ApplyRun:
    target: str  # staging | default
    branch: str
    ref: str
    fork: str
    base_ref: str
    base_sha: str
    old: str | None  # the branch before the run (None: it did not exist)
    new: str | None  # the built tip (None: the build conflicted)
    outcome: str  # created | updated | unchanged | dry-run | conflict
    dry_run: bool
    forced: bool
    started_at: str
    finished_at: str
    duration_ms: int
    patches: tuple[PatchResult, ...]
    inputs: str | None = None  # digest of what the build is a function of (`_inputs`): an unchanged next run reuses it

    @property
    def moved(self) -> bool:
        return self.outcome in ("created", "updated")

    @property
    def conflict(self) -> PatchResult | None:
        return next((p for p in self.patches if p.outcome == "conflict"), None)


class ApplyConflict(ConflictError):
    """A patch conflicts with the fork. `run` holds the full report; nothing was moved."""

    def __init__(self, run: ApplyRun):
        self.run = run
        bad = run.conflict
        assert bad is not None
        hunks = [h.id for h in bad.hunks if h.outcome == "conflict"]
        files = ", ".join(bad.conflict_files) or "(see the report)"
        what = f"; hunk{'s' if len(hunks) != 1 else ''} {', '.join(hunks[:8])}{' …' if len(hunks) > 8 else ''}" if hunks else ""
        super().__init__(
            f"patch {bad.name} (PR #{bad.pr}) conflicts with {run.base_ref} in {files}{what}; "
            f"{run.ref} and the fork's work tree were left as they were "
            f"(refresh or drop the patch: `porttrack refresh {bad.pr}`)"
        )


# -- the command ---------------------------------------------------------------------------------


def apply(
    ws: Workspace,
    config: Config,
    repo: GitRepo,
    *,
    target: str = "staging",
    force: bool = False,
    dry_run: bool = False,
    progress: Callable[[str], None] | None = None,
    queue: queue_mod.Queue | None = None,
) -> ApplyRun:
    """Build `target`'s branch from the upstream base plus the queue; move it if all applied.
    `queue`: the queue as the caller read it, for a dry run (which writes nothing, so needs no
    read of its own under the lock); a real build reads it under the lock.

    Raises `ApplyConflict` (exit 4, carrying the report) when a patch conflicts,
    `PreconditionError` on a dirty fork or a branch that moved during the build.
    """
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}")
    say = progress or (lambda _line: None)
    started, t0 = utcnow(), time.monotonic()
    fork = config.fork
    branch = fork.staging_branch if target == "staging" else fork.default_build_branch
    ref = f"refs/heads/{branch}"
    with sigterm_as_interrupt(), lock(ws, f"apply --{target}"):
        base_ref = build_base(repo, config)
        found = repo.commits([base_ref, ref])  # one process for both, with the base's tree and date
        base, built = found[base_ref], found[ref]
        old = built.sha if built is not None else None
        if base is None:
            raise PreconditionError(
                f"build base {base_ref!r} is not in {repo.path}; fetch or create it first "
                f"(fork.build_base in tracks.yaml, default: fork.branch)"
            )
        base_sha = base.sha
        holders = _checked_out_in(repo, ref)
        if not force:
            _refuse_dirty(repo, holders)
        if queue is None or not dry_run:
            queue = queue_mod.load(ws, repair=not dry_run)
        patches = queue.series(queue_mod.STAGING_STATES if target == "staging" else queue_mod.DEFAULT_STATES)
        contents = {p.name: queue_mod.read_patch(ws, p) for p in patches}  # fail on a bad file before building
        inputs = _inputs(target, base_sha, patches)
        same = _same_as_last(ws, branch, inputs, old)
        if same is not None:  # nothing changed since the last build: its answer, without re-applying
            say(f"{branch} is the build of {base_ref} ({base_sha[:12]}) + the same {len(patches)} patches: nothing to do")
            results, new = list(same), old
        else:
            say(f"building {branch} from {base_ref} ({base_sha[:12]}) + {len(patches)} patch{'es' if len(patches) != 1 else ''}")
            with repo.scratch_index("apply") as scratch:
                results, new = _build(scratch, base, patches, contents, say)

        def run(outcome: str) -> ApplyRun:
            return ApplyRun(target, branch, ref, str(repo.path), base_ref, base_sha, old,
                            new, outcome, dry_run, force, started, utcnow(),
                            int((time.monotonic() - t0) * 1000), tuple(results), inputs)

        if new is None:
            result = run("conflict")
            if not dry_run:
                _record(ws, result)
            raise ApplyConflict(result)
        if new == old:
            result = run("unchanged")
        elif dry_run:
            result = run("dry-run")
        else:
            result = run("created" if old is None else "updated")
        if dry_run:
            return result
        checkpoint("apply:built")
        with commit_point("the branch was being updated"):
            if result.moved:
                _move(repo, ref, new, old, holders)
                checkpoint("apply:moved")
            _record(ws, result)
        return result


def _inputs(target: str, base_sha: str, patches: Sequence[Patch]) -> str:
    """What a build is a function of: the target, the base commit, each patch (name, file, bytes'
    sha256, state) in series order."""
    import hashlib
    import json

    data = [target, base_sha, [(p.name, p.file, p.sha256, p.state) for p in patches]]
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()


def _same_as_last(ws: Workspace, branch: str, inputs: str, tip: str | None) -> tuple[PatchResult, ...] | None:
    """The last recorded build's patch results, when it was of the same inputs and the branch is
    still at what it built (nobody moved it since); None: build again."""
    runs = load_runs(ws, branch)
    last = runs[-1] if runs else None
    if not isinstance(last, dict) or tip is None or last.get("inputs") != inputs or last.get("new") != tip \
            or last.get("outcome") not in ("created", "updated", "unchanged") or last.get("dry_run"):
        return None
    try:
        return tuple(PatchResult(p["name"], p["file"], int(p["pr"]), p["track"], p["state"], p["outcome"], p.get("commit"),
                                 bool(p.get("empty")), tuple(HunkResult(h["id"], h["path"], h["kind"], int(h["index"]), h["header"],
                                                                        h["outcome"], h.get("offset"), h.get("fuzz"))
                                                             for h in p.get("hunks", ())),
                                 tuple(p.get("conflict_files", ())), tuple(p.get("errors", ())), tuple(p.get("notes", ())))
                     for p in last.get("patches", ()))
    except (KeyError, TypeError, ValueError):
        return None


def _refuse_dirty(repo: GitRepo, holders: list[Path]) -> None:
    if not repo.is_clean():
        raise PreconditionError(
            f"the fork's work tree {repo.path} has local changes (or untracked files); commit or "
            f"stash them, or pass --force (the build never touches the work tree)"
        )
    for where in holders:
        if where != repo.path.resolve() and not GitRepo(where).is_clean():
            raise PreconditionError(f"the target branch is checked out in {where} with local changes; "
                                    f"commit or stash them, or pass --force")


def _checked_out_in(repo: GitRepo, ref: str) -> list[Path]:
    """Work trees that have `ref` checked out (moving it must move their files too)."""
    out = repo.text("worktree", "list", "--porcelain")
    holders, current = [], None
    for line in out.splitlines():
        if line.startswith("worktree "):
            current = Path(line[len("worktree "):])
        elif line == f"branch {ref}" and current is not None:
            holders.append(current)
    return [p.resolve() for p in holders]


def _move(repo: GitRepo, ref: str, new: str, old: str | None, holders: list[Path]) -> None:
    """The commit point: compare-and-swap the ref; a checked-out branch moves with its files."""
    reason = "porttrack apply: rebuilt from the upstream base and the queue"
    if holders:
        where = GitRepo(holders[0])
        if where.rev_parse("HEAD") != old:
            raise PreconditionError(f"{ref} moved during the build; nothing was changed, run apply again")
        proc = where.run("reset", "--keep", new, check=False, env={"GIT_REFLOG_ACTION": reason})
        if proc.returncode != 0:
            said = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            raise PreconditionError(
                f"{ref} is checked out in {where.path} and its local changes conflict with the new build; "
                f"nothing was changed ({said[-1] if said else f'git reset --keep exited {proc.returncode}'})"
            )
        return
    expected = old if old is not None else "0" * len(new)
    proc = repo.run("update-ref", "-m", reason, ref, new, expected, check=False)
    if proc.returncode < 0:  # Ctrl-C in a terminal reaches git too: did it move the ref or not?
        if repo.rev_parse(ref) == new:
            return
        raise KeyboardInterrupt
    if proc.returncode != 0:
        raise PreconditionError(
            f"{ref} moved during the build (expected {expected[:12]}); nothing was changed, run apply again"
        )


# -- the run record ------------------------------------------------------------------------------


def record_path(ws: Workspace, branch: str) -> Path:
    """`state/apply/<branch>.json`; a branch `porttrack/staging` lives in `state/apply/porttrack/`."""
    parts = branch.split("/")
    if any(p in ("", ".", "..") or p.startswith(".") for p in parts):
        raise ConfigError(f"branch name {branch!r} cannot name a record file")
    return ws.state_dir.joinpath("apply", *parts[:-1], parts[-1] + ".json")


def load_runs(ws: Workspace, branch: str) -> list[dict[str, Any]]:
    return _load_runs(record_path(ws, branch), RECORD_SCHEMA)


def _record(ws: Workspace, run: ApplyRun) -> None:
    append_run(record_path(ws, run.branch), RECORD_SCHEMA, run_to_json(run), KEEP_RUNS, branch=run.branch)


def run_to_json(run: ApplyRun) -> dict[str, Any]:
    """The documented `--json` shape (schema porttrack/apply/v1); also one entry of the record."""
    counts = {k: 0 for k in (*OUTCOMES, NOT_TRIED)}
    for p in run.patches:
        counts[p.outcome] += 1
    return {
        "schema": SCHEMA,
        "target": run.target,
        "branch": run.branch,
        "ref": run.ref,
        "fork": run.fork,
        "base": {"ref": run.base_ref, "sha": run.base_sha},
        "old": run.old,
        "new": run.new,
        "outcome": run.outcome,
        "moved": run.moved,
        "dry_run": run.dry_run,
        "forced": run.forced,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "duration_ms": run.duration_ms,
        "summary": counts,
        "inputs": run.inputs,
        "patches": [
            {
                "name": p.name,
                "file": p.file,
                "pr": p.pr,
                "track": p.track,
                "state": p.state,
                "outcome": p.outcome,
                "commit": p.commit,
                "empty": p.empty,
                "conflict_files": list(p.conflict_files),
                "errors": list(p.errors),
                "notes": list(p.notes),
                "hunks": [
                    {"id": h.id, "path": h.path, "kind": h.kind, "index": h.index, "header": h.header,
                     "outcome": h.outcome, "offset": h.offset, "fuzz": h.fuzz}
                    for h in p.hunks
                ],
            }
            for p in run.patches
        ],
    }
