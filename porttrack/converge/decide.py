"""The verdict of `porttrack verify-converged`: what a merged upstream PR looks like at a fork ref.

A PR is decided in three steps, cheapest first, and each hunk records the step that decided it.
Every hunk ends in one of four states, and only the first two count toward converged:

- **present** -- the hunk's post-image is at the fork ref (directly, by patch-id, or by ancestry
  of the merge commit with the post-image still there);
- **present-after-churn** -- the post-image is gone from the fork ref, but the fork ref contains
  the later upstream change C that rewrote or deleted those lines (C is an ancestor of the fork
  ref, or C's own change on that file is present at the fork ref), so the fork matches upstream's
  later state; `changed_by` names C;
- **missing** -- the hunk's pre-image is still at the fork ref, whatever upstream did later (for a
  deleted file: the file is still there; for an added file: it is absent and upstream never
  deleted it);
- **unknown** -- none of those could be shown; `detail` says why.

The merged change is the merge commit against its first parent -- except after GitHub's "Rebase
and merge", whose `merge_commit_sha` is only the last of the PR's replayed commits: then (told by
the PR head's author and message, `history.rebase_merged`) it starts below the replayed commits.

1. **ancestry** -- the merge commit (GitHub's `merge_commit_sha`: a true merge, the squash
   commit or the last replayed commit) is an ancestor of the fork ref: one `git merge-base <merge> <fork>`, which also gives
   the merge base the later steps start from. Ancestry says the change arrived, not that it is
   still there (the fork may have reverted or edited lines since): every hunk is then decided as
   in step 3, at the fork tip, and keeps this step as its method. Only commits on upstream's
   branch (the ancestry path from the merge to the upstream base) can make a hunk
   present-after-churn; a fork commit that undoes or edits the PR never does. A missing hunk
   names the newest commit since the merge that touched its path (`changed_by`: what undid it).
2. **patch-id** -- `git patch-id --stable` of the merged change (merge commit vs its first parent),
   and of each PR commit for a true merge, against the fork commits since the merge base that touch
   the PR's paths (`git log <merge-base>..<fork> -- <paths>`), so the cost follows the fork's own
   commits on those files, not the length of history. A cherry-pick (new SHA, same change) is found
   here; as after ancestry, every hunk is then re-checked at the fork tip.
3. **content** -- each hunk is looked for at the fork ref, byte for byte, at its own location
   (`porttrack.diff.presence.hunk_state` with `near`: the hunk's lines in the merge commit's file
   mapped through `git diff -U0 <merge> <fork>`; it anchors a hunk at the start or end of the file
   as `git apply` does): post-image found there and not the pre-image -> present; pre-image found
   there and not the post-image -> missing. The same text elsewhere in the file (a second copy of
   a block, a `}`) is not the hunk. A hunk with
   neither is looked up in upstream's later history, only when the fork's upstream base contains
   the merge: C is the first commit on the ancestry path from the merge to the base
   (`git log --ancestry-path <merge>..<base> -- <path>`) whose content of the path lacks the
   post-image. It is present-after-churn when C is an ancestor of the fork ref, or every hunk of
   C's change to the path (against its first parent) is applied at the fork ref; a deletion by C
   counts only by ancestry (absence alone does not show the fork ever had the PR's version).
   Anything else is unknown, with the reason.

Verdict: `converged` when every hunk is present or present-after-churn (an empty change is
converged), `partially-converged` when some are and some are not, `not-converged` when none is.
Counts (`summary`) say present / present-after-churn / missing / unknown separately and add up to
`hunks`. The command exits 0 only for `converged` (and, with `--run-regression`, a passing
regression); otherwise `CheckFailed` (exit 1), after recording.

Applying the diff in reverse at the tip is deliberately not a method: once upstream has moved on
(#48407's `vllm/models/deepseek_v32/nvidia/attention.py` was deleted two days after it merged),
it fails on upstream's own main.

JSON shape (`--json`, schema `porttrack/convergence/v2`; additive changes only). v2 replaced v1's
hunk state `changed-since` (which counted a hunk as present on the strength of upstream churn alone)
by `present-after-churn` (proven) and added `unknown`; `summary` went from
`{hunks, present, changed_since, missing}` to `{hunks, present, present_after_churn, missing,
unknown}`. A state whose meaning changed is not an additive change, hence the new name::

    {
      "schema": "porttrack/convergence/v2",
      "pr": 48407, "title": "...", "track": "sparse-indexer-skip" | null,
      "verdict": "converged" | "partially-converged" | "not-converged",
      "method": "ancestry" | "patch-id" | "content",   # the step that settled the verdict
      "reasons": ["...", ...],                          # human sentences, in order
      "computed_at": "2026-08-25T10:00:00Z",
      "source": {"pr_state": "github" | "recorded", "note": str | null},
      "commits": {"merge_commit": sha, "merge_parent": sha | null,       # what the change is taken against
                  "merge_kind": "squash" | "merge" | "rebase",            # "rebase": additive, this round
                  "fork_ref": "main", "fork_sha": sha,
                  "upstream_base": "upstream/main", "upstream_base_sha": sha | null,
                  "merge_base": sha | null},
      "ancestry": {"fork_ref": bool, "upstream_base": bool | null},   # null: not checked (the
                                                                      # fork ref has the merge)
      "patch_id": null | {"change": hex, "candidates": int,
                          "matched": [{"commit": sha, "subject": str, "matches": "change" | pr-commit sha}]},
      "hunks": [{"id": "1a2b3c4d5e6f", "path": "...", "kind": "text" | "binary" | "meta",
                 "header": "@@ -10,7 +10,9 @@ def f",
                 "state": "present" | "present-after-churn" | "missing" | "unknown",
                 "method": "ancestry" | "patch-id" | "content" | "churn",
                 "changed_by": null | {"commit": sha, "subject": str, "upstream": bool},
                 "detail": str}],
      "summary": {"hunks": int, "present": int, "present_after_churn": int, "missing": int,
                  "unknown": int},                      # the four add up to hunks
      "drops": [{"kind": "queued-patch" | "fork-commit", "ref": name-or-sha, "commit": sha | null,
                 "duplicate": bool, "droppable": bool, "retired": bool, "reason": str}],
      "regression": null | {"command": str, "workdir": "checkout" | "temporary worktree",
                            "passed": bool, "exit_code": int, "duration_s": float,
                            "output_tail": str},
      "recorded": "state/convergence/48407.json" | null,     # null: --dry-run
      "unchanged_since": null | "2026-08-24T10:00:00Z"       # the last entry found the same; not appended
    }
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from porttrack.diff import hunks as hunks_mod
from porttrack.diff import presence
from porttrack.common.clock import utcnow
from porttrack.converge.history import LITERAL as _LITERAL
from porttrack.converge.history import Later as _Later
from porttrack.converge.history import later_upstream as _later_upstream
from porttrack.converge.history import locations as _locations
from porttrack.converge.history import patch_id_of_change, patch_ids
from porttrack.converge.history import rebase_merged as _rebase_merged
from porttrack.converge.history import read_files as _read_files
from porttrack.converge.history import STEP_WITH_RENAMES as _STEP
from porttrack.converge.history import rename_in as _rename_in
from porttrack.converge.history import renamed_to as _renamed_to
from porttrack.common.errors import CannotEvaluate, NotFound
from porttrack.gitrepo import GitRepo

if TYPE_CHECKING:
    from porttrack.diff.hunks import FileDiff, Hunk

SCHEMA = "porttrack/convergence/v2"
VERDICTS = ("converged", "partially-converged", "not-converged")
STATES = ("present", "present-after-churn", "missing", "unknown")
COUNTED = frozenset({"present", "present-after-churn"})  # the states that count toward converged


# --------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True)
class MergedPR:
    number: int
    title: str
    merge_commit: str
    merged_at: str | None
    source: str  # "github" | "recorded"
    note: str | None = None
    head_sha: str | None = None  # the PR's head: tells a rebase merge from a squash (history.rebase_merged)


@dataclass(frozen=True)
class Commits:
    merge_commit: str
    merge_parent: str | None  # what the change is taken against: the first parent; for a rebase merge, the
    # parent of the first replayed commit
    merge_kind: str  # "squash" (one parent) | "merge" | "rebase" (the last of the PR's replayed commits)
    fork_ref: str
    fork_sha: str
    upstream_base: str
    upstream_base_sha: str | None
    merge_base: str | None


@dataclass(frozen=True)
class ChangedBy:
    commit: str
    subject: str
    upstream: bool  # the commit is in the fork's upstream base (else the fork made it)


@dataclass(frozen=True)
class HunkResult:
    id: str
    path: str
    kind: str
    header: str
    state: str  # present | present-after-churn | missing | unknown (see the module docstring)
    method: str  # ancestry | patch-id | content | churn
    changed_by: ChangedBy | None = None
    detail: str = ""

    @property
    def counts(self) -> bool:
        """Counts toward converged: present, or present after (proven) upstream churn."""
        return self.state in COUNTED


@dataclass(frozen=True)
class PatchIdMatch:
    commit: str
    subject: str
    matches: str  # "change", or the PR commit whose patch-id it has


@dataclass(frozen=True)
class PatchIdResult:
    change: str | None  # patch-id of the whole merged change (None: an empty diff)
    candidates: int
    matched: tuple[PatchIdMatch, ...]


@dataclass(frozen=True)
class Drop:
    kind: str  # queued-patch | fork-commit
    ref: str  # patch name, or the SHA as tracks.yaml writes it
    commit: str | None
    duplicate: bool
    droppable: bool
    reason: str
    retired: bool = False


@dataclass(frozen=True)
class Regression:
    command: str
    workdir: str  # "checkout" | "temporary worktree"
    passed: bool
    exit_code: int
    duration_s: float
    output_tail: str


@dataclass(frozen=True)
class Verdict:
    pr: int
    title: str
    track: str | None
    verdict: str
    method: str
    reasons: tuple[str, ...]
    computed_at: str
    source: str
    source_note: str | None
    commits: Commits
    ancestry_fork: bool
    ancestry_base: bool | None
    patch_id: PatchIdResult | None
    hunks: tuple[HunkResult, ...]
    drops: tuple[Drop, ...] = ()
    regression: Regression | None = None
    recorded: str | None = None
    unchanged_since: str | None = None  # the record's last entry found the same: not appended again

    @property
    def converged(self) -> bool:
        return self.verdict == "converged"

    @property
    def upstream_has_it(self) -> bool:
        """The change reaches the fork from upstream (not only from a copy the fork carries)."""
        return self.ancestry_fork or bool(self.ancestry_base)


def to_json(v: Verdict) -> dict[str, Any]:
    """The documented `porttrack/convergence/v2` shape (see the module docstring)."""
    return {
        "schema": SCHEMA,
        "pr": v.pr,
        "title": v.title,
        "track": v.track,
        "verdict": v.verdict,
        "method": v.method,
        "reasons": list(v.reasons),
        "computed_at": v.computed_at,
        "source": {"pr_state": v.source, "note": v.source_note},
        "commits": asdict(v.commits),
        "ancestry": {"fork_ref": v.ancestry_fork, "upstream_base": v.ancestry_base},
        "patch_id": None if v.patch_id is None else {
            "change": v.patch_id.change,
            "candidates": v.patch_id.candidates,
            "matched": [asdict(m) for m in v.patch_id.matched],
        },
        "hunks": [asdict(h) for h in v.hunks],  # in diff order
        "summary": summary(v.hunks),
        "drops": [asdict(d) for d in v.drops],
        "regression": None if v.regression is None else asdict(v.regression),
        "recorded": v.recorded,
        "unchanged_since": v.unchanged_since,
    }


def summary(hunks: Sequence[HunkResult]) -> dict[str, int]:
    """Per state, and in all: every hunk is in exactly one state, so the four add up."""
    return {
        "hunks": len(hunks),
        "present": sum(h.state == "present" for h in hunks),
        "present_after_churn": sum(h.state == "present-after-churn" for h in hunks),
        "missing": sum(h.state == "missing" for h in hunks),
        "unknown": sum(h.state == "unknown" for h in hunks),
    }


def counts_words(s: Mapping[str, int]) -> str:
    """'11 present, 2 present after churn, 3 missing, 1 unknown of 17 hunks': exact, adds up."""
    return (f"{s['present']} present, {s['present_after_churn']} present after churn, "
            f"{s['missing']} missing, {s['unknown']} unknown of {s['hunks']} hunk(s)")


# --------------------------------------------------------------------------------------------
# 2-4. Deciding


def decide(repo: GitRepo, pr: MergedPR, *, fork_ref: str, upstream_base: str, track: str | None = None, now: str | None = None) -> Verdict:
    """Ancestry, then patch-id, then per-hunk content with churn: see the module docstring.

    History walks are what cost on a big repository (without a commit-graph each one reads every
    commit back to the merge), so there are as few as the answer needs: one merge-base answers
    both "ancestor?" and "since where?", and the path-limited logs run only for paths whose
    content is absent.
    """
    merge = pr.merge_commit
    # the merge (with its parents), the fork ref and the upstream base in one batch
    known = repo.commits([merge, upstream_base, *(() if fork_ref.startswith("-") else (fork_ref,))])
    fork_sha = None if fork_ref.startswith("-") or known[fork_ref] is None else known[fork_ref].sha
    if fork_sha is None:
        raise NotFound(f"fork ref {fork_ref!r} does not exist in the fork checkout {repo.path}")
    merge_info = known[merge]
    parents = list(merge_info.parents) if merge_info else repo.text("rev-list", "--parents", "-n", "1", merge).split()[1:]
    kind = "merge" if len(parents) > 1 else "squash"
    if repo.shallow and parents and repo.commits([parents[0]])[parents[0]] is None:
        raise _shallow(repo, merge, fork_ref)  # the cut is right below the merge
    rebased = _rebase_merged(repo, merge, pr.head_sha) if len(parents) == 1 else None
    if rebased is not None:  # the change starts below the PR's replayed commits, not at the merge's parent
        kind, parents = "rebase", [rebased[0]]
    base_sha = known[upstream_base].sha if known[upstream_base] else None
    if parents:
        files = hunks_mod.parse_diff(repo.diff(parents[0], merge))
    else:  # a root commit: everything it has is its change
        files = hunks_mod.parse_diff(repo.run("diff-tree", "-p", "--root", "--binary", "--full-index", "-M", merge).stdout)
    merge_base = repo.merge_base(merge, fork_sha)
    in_fork = merge_base == merge
    if not in_fork and repo.shallow:  # a "yes" found in the history there is true; a "no" may be the cut
        raise _shallow(repo, merge, fork_ref)
    # Only needed when the fork ref lacks the merge (null in the JSON: not checked).
    in_base = None if in_fork else (repo.is_ancestor(merge, base_sha) if base_sha else False)
    reasons: list[str] = []
    where = f"{fork_ref} ({fork_sha[:12]})"
    base_where = f"{upstream_base} ({base_sha[:12]})" if base_sha else repr(upstream_base)

    def finish(method: str, results: list[HunkResult], patch_id: PatchIdResult | None = None) -> Verdict:
        if not results:
            reasons.append("the merged change is empty: nothing to carry")
        commits = Commits(merge, parents[0] if parents else None, kind,
                          fork_ref, fork_sha, upstream_base, base_sha, merge_base)
        return Verdict(
            pr=pr.number, title=pr.title, track=track, verdict=_verdict_of(results), method=method,
            reasons=tuple(reasons), computed_at=now or utcnow(), source=pr.source, source_note=pr.note,
            commits=commits, ancestry_fork=in_fork, ancestry_base=in_base, patch_id=patch_id, hunks=tuple(results),
        )

    if in_fork:
        reasons.append(f"merge commit {merge[:12]} is an ancestor of {where}")
        results = _rechecked(repo, files, pr.number, merge, fork_sha, base_sha, "ancestry",
                             f"merge commit {merge[:12]} is an ancestor", merge)
        churned = sorted({h.path for h in results if h.state == "present-after-churn"})
        if churned:
            reasons.append(f"changed since the merge, so no longer at the fork ref as merged: {', '.join(churned)}")
        return finish("ancestry", results)

    reasons.append(f"merge commit {merge[:12]} is not an ancestor of {where}")
    if in_base:
        reasons.append(f"{base_where} contains it: the fork has not been rebased onto its upstream base since")
    elif base_sha:
        reasons.append(f"{base_where} does not contain it either: the fork's upstream base predates the merge")
    else:
        reasons.append(f"upstream base {base_where} does not exist in the fork checkout")

    paths = sorted({p for fd in files for p in (fd.old_path, fd.new_path) if p is not None})
    pr_commits = list(rebased[1]) if rebased else None
    patch_id, decided = _patch_id_step(repo, merge, parents, merge_base, fork_sha, paths, pr_commits)
    if patch_id is not None and decided:
        m = patch_id.matched[0]
        if m.matches == "change":
            reasons.append(f"fork commit {m.commit[:12]} ({m.subject[:60]}) has the merged change's patch-id")
        else:
            reasons.append(f"every commit of the PR has a fork commit with its patch-id: {', '.join(x.commit[:12] for x in patch_id.matched)}")
        return finish("patch-id", _rechecked(repo, files, pr.number, merge, fork_sha, base_sha if in_base else None,
                                             "patch-id", f"same patch-id as {m.commit[:12]}", m.commit), patch_id)
    if patch_id is not None:
        since = f"since {merge_base[:12]}" if merge_base else ""
        reasons.append(f"none of the {patch_id.candidates} fork commit(s) {since} touching the PR's files has its patch-id")

    results = _by_content(repo, files, pr.number, merge, fork_sha, base_sha if in_base else None)
    reasons.append(f"by content at {fork_ref}: {counts_words(summary(results))}")
    return finish("content", results, patch_id)


def _shallow(repo: GitRepo, merge: str, fork_ref: str) -> CannotEvaluate:
    return CannotEvaluate(
        f"the fork checkout {repo.path} is a shallow clone: merge commit {merge[:12]} or its history was not found from "
        f"{fork_ref}, which may only mean that history is cut off, so neither ancestry nor patch-id can be decided; "
        f"deepen it first: git -C {repo.path} fetch --unshallow REMOTE, for the upstream remote and the fork's own")


def _verdict_of(results: Sequence[HunkResult]) -> str:
    """Converged only when every hunk counts (present, or present after proven churn): a missing
    or unknown hunk fails closed. Churn alone proves nothing -- it is counted only with proof that
    the fork has the later change."""
    found = sum(h.counts for h in results)
    if found == len(results):
        return "converged"
    return "partially-converged" if found else "not-converged"


def _result(h: "Hunk", state: str, method: str, changed_by: ChangedBy | None = None, detail: str = "") -> HunkResult:
    return HunkResult(h.id, h.path, h.kind, _header(h), state, method, changed_by, detail)


def _header(h: "Hunk") -> str:
    if h.kind == "text":
        return h.body.split(b"\n", 1)[0].decode("utf-8", "replace")
    if h.kind == "binary":
        return "binary"
    # meta: a rename or copy, an empty file added or deleted, or (status "modified") a mode change
    return "mode change" if h.file_status == "modified" else h.file_status


# -- ancestry and patch-id: the change arrived; is it still there?

def _rechecked(repo: GitRepo, files: Sequence["FileDiff"], number: int, merge: str, fork_sha: str,
               base_sha: str | None, method: str, why: str, since: str) -> list[HunkResult]:
    """Ancestry or a patch-id match says the change arrived in the fork, not that it is still
    there: the fork may have reverted or edited lines since. So every hunk is looked for at the
    fork tip at its own location, as the content step does: present where its post-image is
    there (`method` says how it arrived); otherwise missing, present after churn or unknown by
    the content step's rules, where only commits on upstream's branch (the ancestry path from
    the merge to the upstream base) count as churn -- a fork commit that undoes or edits the PR
    never does. `base_sha`: the upstream base; its history counts only when it contains the
    merge (asked only when a hunk needs it). `since`: the commit the change arrived with (the
    merge, or the fork commit with its patch-id), to name what undid a missing hunk."""
    results = _by_content(repo, files, number, merge, fork_sha, base_sha, base_checked=False, merge_in_fork=since == merge)
    undone = _undone_by(repo, since, fork_sha, base_sha, sorted({r.path for r in results if r.state == "missing"}))
    out = []
    for r in results:
        by = undone.get(r.path) if r.state == "missing" else None
        if by is not None:
            where = "upstream" if by.upstream else "in the fork"
            r = replace(r, changed_by=by, detail=f"the pre-image is back at the fork ref: undone {where} by {by.commit[:12]} ({by.subject[:60]})")
        out.append(replace(r, method=method, detail=f"{why}; {r.detail}"))
    return out


def _undone_by(repo: GitRepo, since: str, fork_sha: str, base_sha: str | None, paths: Sequence[str]) -> dict[str, ChangedBy]:
    """path -> the newest commit in since..fork that touched it (one `log -1` per path of a
    missing hunk, usually none), and whether upstream's base has it."""
    out = {}
    for path in paths:
        line = repo.text("log", "-1", "--no-renames", "--format=%H %s", f"{since}..{fork_sha}", "--", path, env=_LITERAL)
        if line:
            sha, _, subject = line.partition(" ")
            out[path] = ChangedBy(sha, subject, bool(base_sha) and repo.is_ancestor(sha, base_sha))
    return out


# -- patch-id

def _patch_id_step(repo: GitRepo, merge: str, parents: list[str], merge_base: str | None,
                   fork_sha: str, paths: list[str], pr_commits: list[str] | None = None) -> tuple[PatchIdResult | None, bool]:
    """Patch-ids of fork commits since the merge base that touch the PR's paths, against the
    merged change (and, for a true merge or a rebase merge, each PR commit). Decides when the
    whole change matched or every PR commit did."""
    if merge_base is None or not parents or not paths:
        return None, False
    log = repo.text("log", "--no-merges", "--format=%H %s", f"{merge_base}..{fork_sha}", "--", *paths, env=_LITERAL)
    subjects = dict(line.partition(" ")[::2] for line in log.split("\n") if line)  # not splitlines: a subject may hold U+2028
    if pr_commits is None:  # a rebase merge's are its upstream copies, given
        pr_commits = repo.text("rev-list", "--no-merges", f"{parents[0]}..{parents[1]}").split() if len(parents) > 1 else []
    # every patch-id in one diff-tree and one patch-id: the merged change (the merge against its
    # first parent, as `patch_id_of_change` has it), the PR's commits and the fork's candidates;
    # patch-id names each by its commit, so a rebase merge's change (merge against the start of the
    # replayed commits, while the merge is also its own last commit) is asked on its own
    together = merge not in pr_commits
    ids = patch_ids(repo, [*([f"{merge} {parents[0]}"] if together else []), *pr_commits, *subjects])
    change = ids.get(merge) if together else patch_id_of_change(repo, parents[0], merge)
    wanted = {change: "change"} if change else {}
    for sha in pr_commits:
        if sha in ids:
            wanted.setdefault(ids[sha], sha)
    found = {sha: ids[sha] for sha in subjects if sha in ids}
    matched = sorted(
        (PatchIdMatch(sha, subject, wanted[found[sha]]) for sha, subject in subjects.items() if found.get(sha) in wanted),
        key=lambda m: m.matches != "change",
    )
    matches = {m.matches for m in matched}
    decided = "change" in matches or (bool(pr_commits) and set(pr_commits) <= matches)
    return PatchIdResult(change, len(subjects), tuple(matched)), decided


# -- content and churn

@dataclass(frozen=True)
class _Look:
    """What the fork ref's content alone says of one hunk: a state, or None (neither image there:
    upstream's later history decides), and the words for it."""

    state: str | None
    detail: str
    absent_added: bool = False  # an added file that is absent: missing unless upstream deleted it


def _by_content(repo: GitRepo, files: Sequence["FileDiff"], number: int, merge: str, fork_sha: str,
                base_sha: str | None, base_checked: bool = True, merge_in_fork: bool = False) -> list[HunkResult]:
    """Each hunk by the fork ref's content at its own location (`_locations`), then, for a hunk
    with neither image there, by the later upstream change that rewrote it (`base_sha` counts
    only when the upstream base contains the merge: given so, or, with `base_checked` false,
    asked here when a hunk needs it). Upstream's history is read only for those hunks' paths."""
    paths = sorted({p for fd in files for p in (fd.path, fd.old_path) if p is not None})
    at_fork = _read_files(repo, fork_sha, paths)
    near = _locations(repo, merge, fork_sha, files, at_fork)
    looks = [(fd, h, _look(h, fd, at_fork, near.get(id(h)))) for fd in files for h in fd.hunks]
    open_paths = sorted({fd.path for fd, _, look in looks if look.state is None})
    missing_paths = sorted({fd.path for fd, _, look in looks if look.state == "missing" and fd.status != "deleted"})
    later: dict[str, Sequence[_Later] | None] = {}
    known: set[str] = set()  # commits stepped back through from the fork ref: in it by construction
    moves: dict[tuple[str, str], str | None] = {}  # (commit, path) -> where that commit renamed it
    rest = open_paths
    if base_sha and merge_in_fork and open_paths:
        open_hunks: dict[str, list[tuple["Hunk", "FileDiff"]]] = {}
        for fd, h, look in looks:
            if look.state is None:
                open_hunks.setdefault(fd.path, []).append((h, fd))
        later, rest, moves = _newest_upstream(repo, merge, fork_sha, base_sha, open_paths, open_hunks)
        known = {c[0] for commits in later.values() if commits for c in commits}
    base_has_merge = bool(base_sha) and (base_checked or not (rest or missing_paths) or repo.is_ancestor(merge, base_sha))
    if rest and base_sha:
        later.update(_later_upstream(repo, merge, base_sha, rest) if base_has_merge else dict.fromkeys(rest))
    at_base = _read_files(repo, base_sha, missing_paths) if base_has_merge and base_sha and missing_paths else {}
    # the commits stepped back through from the fork ref are in it by construction, and their
    # steps said where they moved the path
    memo: dict = {**dict.fromkeys(known, True), **moves}
    results = []
    for fd, h, look in looks:
        if look.state == "present":
            results.append(_result(h, "present", "content", detail=look.detail))
        elif look.state is not None:
            words = _upstream_words(h, fd, base_sha if base_has_merge else None, at_base) if look.state == "missing" else ""
            results.append(_result(h, look.state, "content", detail=look.detail + words))
        else:
            results.append(_after_churn(repo, h, fd, look, number, fork_sha, base_sha, later.get(fd.path),
                                        at_fork.get(fd.path), near.get(id(h)), memo))
    return results


_MAX_STEPS = 20  # newest-first steps back through a path's history before the full walk


def _newest_upstream(repo: GitRepo, merge: str, fork_sha: str, base_sha: str, paths: Sequence[str],
                     open_hunks: Mapping[str, Sequence[tuple["Hunk", "FileDiff"]]],
                     ) -> tuple[dict[str, Sequence[_Later] | None], list[str], dict[tuple[str, str], str | None]]:
    """For a fork ref that contains the merge, and a path no fork-only commit (`<base>..<fork>`)
    touched: the commits since the merge that touched it are upstream's, so step back from the
    newest (`log -1` each) until the parent has every open hunk's post-image -- usually one step,
    as cheap as before issue 21. Oldest first, as `_later_upstream` gives them; the paths the
    fork itself touched, or that need more steps, are left to that full walk (the second list).
    Each step also lists the commit's whole change with rename detection (`_STEP`): the third
    result, (commit, path) -> where it moved the path, is what `_renamed_to` would ask again."""
    out: dict[str, Sequence[_Later] | None] = {}
    rest = []
    moves: dict[tuple[str, str], str | None] = {}
    for path in paths:
        if repo.text("log", "-1", "--no-renames", "--format=%H", f"{base_sha}..{fork_sha}", "--", path, env=_LITERAL):
            rest.append(path)
            continue
        commits: list[_Later] = []
        tip = fork_sha
        for _ in range(_MAX_STEPS):
            step = repo.run("log", "-1", "--format=%H %s", *_STEP, f"{merge}..{tip}", "--", path, env=_LITERAL).stdout
            if not step.strip():
                break
            head, _, changes = step.partition(b"\0")  # "<sha> <subject>\0" then "\n" and the -z name-status
            sha, _, subject = head.decode("utf-8", "surrogateescape").partition(" ")
            moves[(sha, path)] = _rename_in(changes.removeprefix(b"\n"), path)
            commits.append((sha, subject, _read_files(repo, sha, [path]).get(path)))
            before = _read_files(repo, f"{sha}^", [path]).get(path)
            if all(_present(h, fd, before) for h, fd in open_hunks[path]):
                break
            tip = f"{sha}^"
        else:
            rest.append(path)
            continue
        out[path] = commits[::-1]
    return out, rest, moves


def _look(h: "Hunk", fd: "FileDiff", at_fork: Mapping[str, tuple[str, bytes]], near: tuple[int, int] | None = None) -> _Look:
    """The hunk by the fork ref's content alone (`at_fork`: path -> (mode, bytes)), at its
    location `near` (`_locations`)."""
    entry = at_fork.get(fd.path)
    if fd.status == "deleted":
        return _Look("present", f"{fd.path} is gone at the fork ref") if entry is None else _Look("missing", f"{fd.path} still exists at the fork ref")
    if entry is None:
        old = at_fork.get(fd.old_path) if fd.old_path not in (None, fd.path) else None
        if old is not None and (h.kind != "text" or presence.pre_image_present(h, old[1])):
            return _Look("missing", f"not renamed at the fork ref: {fd.old_path} is still there" + (" with the pre-image" if h.kind == "text" else ""))
        if fd.status == "added":
            return _Look(None, f"{fd.path} does not exist at the fork ref", absent_added=True)
        return _Look(None, f"{fd.path} does not exist at the fork ref")
    if h.kind == "meta":
        if fd.new_mode is None or entry[0] == fd.new_mode:
            return _Look("present", "found at the fork ref")
        if entry[0] == fd.old_mode:
            return _Look("missing", f"mode still {fd.old_mode} at the fork ref")
        return _Look(None, f"mode {entry[0]} at the fork ref: neither {fd.old_mode} nor {fd.new_mode}")
    state = presence.hunk_state(h, entry[1], near)
    if state == "applied":
        return _Look("present", "post-image found at the fork ref")
    if state == "not-applied":
        return _Look("missing", "pre-image still at the fork ref")
    if h.kind == "text" and presence.post_image_present(h, entry[1], near) and presence.pre_image_present(h, entry[1], near):
        return _Look("unknown", "both the pre-image and the post-image occur at the fork ref")
    return _Look(None, "neither the pre-image nor the post-image is at the fork ref")


def _upstream_words(h: "Hunk", fd: "FileDiff", base_sha: str | None, at_base: Mapping[str, tuple[str, bytes]]) -> str:
    """For a missing hunk: whether upstream still has it (a hint for the reader, not a proof)."""
    if base_sha is None or fd.status == "deleted":
        return ""
    return "; upstream still has it" if _present(h, fd, at_base.get(fd.path)) else "; upstream has since changed it, and the fork never took this change"


def _after_churn(repo: GitRepo, h: "Hunk", fd: "FileDiff", look: _Look, number: int, fork_sha: str,
                 base_sha: str | None, later: Sequence[_Later] | None, entry: tuple[str, bytes] | None,
                 near: tuple[int, int] | None = None, memo: dict | None = None) -> HunkResult:
    """A hunk with neither image at the fork ref: present after churn when the fork ref contains
    the upstream change C that took the post-image away (see the module docstring), else unknown
    -- or, for an added file that is absent and that upstream never deleted, missing."""
    if base_sha is None or later is None:
        if look.absent_added:
            return _result(h, "missing", "content", detail=look.detail)
        return _result(h, "unknown", "content", detail=f"{look.detail}; the upstream base does not contain the merge, so there is no later upstream state to compare")
    c = next((c for c in later if not _present(h, fd, c[2])), None)
    if c is None:
        if look.absent_added:
            return _result(h, "missing", "content", detail=f"{look.detail}; upstream still has it")
        return _result(h, "unknown", "content", detail=f"{look.detail}; upstream still has the post-image, so this is the fork's own version")
    changed = ChangedBy(c[0], c[1], True)
    what = "deleted" if c[2] is None else "rewrote"
    if entry is not None and h.kind == "text" and presence.change_undone(h, entry[1], near):
        return _result(h, "missing", "content", changed,
                       f"{look.detail}; the lines #{number} removes are at the fork ref and the lines it adds are not: "
                       f"undone there, whatever {c[0][:12]} ({c[1][:60]}) changed around them")
    if c[2] is not None and h.kind == "text" and presence.hunk_state(h, c[2][1]) == "not-applied":
        # upstream put the original text back: that undoes #N, it does not carry it further
        return _result(h, "missing", "content", changed,
                       f"{look.detail}; upstream {c[0][:12]} ({c[1][:60]}) restored the text #{number} replaced, so no later "
                       f"upstream state carries this change")
    if entry is None and c[2] is not None and not look.absent_added and not any(
            later_c[2] is None and repo.is_ancestor(later_c[0], fork_sha) for later_c in later):
        # the file is gone from the fork ref, and no upstream deletion the fork has explains it:
        # the fork removed or moved it itself, which is never upstream churn
        return _result(h, "unknown", "churn", changed,
                       f"{look.detail}; upstream {c[0][:12]} ({c[1][:60]}) rewrote it, but upstream never deleted "
                       f"{fd.path} in a commit the fork ref has: the fork removed or moved it itself")
    memo = {} if memo is None else memo  # (commit, path) -> renamed to; commit -> in the fork ref
    if c[2] is None and h.kind == "text" and (c[0], fd.path) not in memo:
        memo[(c[0], fd.path)] = _renamed_to(repo, c[0], fd.path)
    moved = memo.get((c[0], fd.path)) if c[2] is None and h.kind == "text" else None
    if moved is not None:
        there = _read_files(repo, fork_sha, [moved]).get(moved)
        if there is not None and presence.hunk_state(h, there[1]) == "not-applied":
            return _result(h, "missing", "content", changed,
                           f"{look.detail}; upstream {c[0][:12]} ({c[1][:60]}) renamed it to {moved}, where the fork ref has the pre-image")
    if c[0] not in memo:
        memo[c[0]] = repo.is_ancestor(c[0], fork_sha)
    if memo[c[0]]:
        return _result(h, "present-after-churn", "churn", changed,
                       f"{look.detail}; upstream {c[0][:12]} ({c[1][:60]}) {what} it, and the fork ref contains that commit")
    if look.absent_added:  # the pre-image of an added file is its absence, and it is absent
        return _result(h, "missing", "content", changed,
                       f"{look.detail}; upstream {c[0][:12]} ({c[1][:60]}) {what} it later, but the fork ref does not contain that "
                       f"commit: the fork never took #{number}'s file")
    if c[2] is None:
        return _result(h, "unknown", "churn", changed,
                       f"{look.detail}; upstream {c[0][:12]} ({c[1][:60]}) deleted the file, which the fork ref does not contain: "
                       f"absence alone does not show the fork ever had #{number}'s version")
    if entry is not None and _change_present(repo, c[0], fd.path, entry):
        return _result(h, "present-after-churn", "churn", changed,
                       f"{look.detail}; upstream {c[0][:12]} ({c[1][:60]}) rewrote it, and its change to {fd.path} is at the fork ref")
    return _result(h, "unknown", "churn", changed,
                   f"{look.detail}; upstream {c[0][:12]} ({c[1][:60]}) rewrote it, but the fork ref has neither that commit nor its change to {fd.path}")


def _change_present(repo: GitRepo, sha: str, path: str, entry: tuple[str, bytes]) -> bool:
    """Every hunk of commit `sha`'s change to `path` (against its first parent) is applied in the
    fork's `entry`: the fork has upstream's later state of that file, not just its absence."""
    changes = [fd for fd in hunks_mod.parse_diff(repo.run("diff", "--no-ext-diff", "--no-textconv", "--no-renames", "--binary", "--full-index",
                                                          f"{sha}^", sha, "--", path, env=_LITERAL).stdout) if fd.path == path]
    checks = [(fd, h) for fd in changes for h in fd.hunks]
    return bool(checks) and all(_applied(h, fd, entry) for fd, h in checks)


def _applied(h: "Hunk", fd: "FileDiff", entry: tuple[str, bytes] | None) -> bool:
    """Stricter than `_present`: the post-image is there and the pre-image is not."""
    if fd.status == "deleted" or entry is None or h.kind == "meta":
        return _present(h, fd, entry)
    return presence.hunk_state(h, entry[1]) == "applied"


def _present(h: "Hunk", fd: "FileDiff", entry: tuple[str, bytes] | None) -> bool:
    """Is hunk `h` of entry `fd` applied in a tree whose `fd.path` is `entry` ((mode, bytes) or None)?"""
    if fd.status == "deleted" or entry is None:
        return presence.hunk_state(h, entry[1] if entry else None) == "applied"
    if h.kind == "meta":
        return fd.new_mode is None or entry[0] == fd.new_mode
    return presence.post_image_present(h, entry[1])
