"""The verdict of `porttrack verify-converged`: what a merged upstream PR looks like at a fork ref.

A PR is decided in three steps, cheapest first, and each hunk records the step that decided it.
Every hunk ends in one of five states, and only the first two count toward converged:

- **present** -- the hunk is at the fork ref: its post-image at its location (directly, by
  patch-id, or by ancestry), or the lines it put there are where upstream still has them (no
  later upstream commit touched them; their context may have changed: context is not evidence);
- **present-after-churn** -- a later upstream commit C rewrote those lines, and the fork ref holds
  upstream's newest form of them (`changed_by` names C, the last commit that touched the lines);
- **undone-upstream** -- upstream's newest form of those lines is the hunk's pre-image: a revert
  (also one resolved by hand), or a later change that removed the lines; `changed_by` names the
  commit that last touched them. Whatever the fork has, this never counts toward converged, and it
  is never "missing": the next action is the maintainer's (keep carrying it, or drop it);
- **missing** -- the hunk's pre-image is at the fork ref and upstream's newest form is not (for a
  deleted file: the file is still there; for an added file: it is absent and upstream kept it);
  at a fork ref whose file is upstream's own, never;
- **unknown** -- none of those could be shown; `detail` says why.

**Upstream's newest form decides** (DESIGN.md, "What a verdict may claim";
`porttrack.converge.trail`): each hunk's lines -- the lines it added, and a gap where it only
removed lines -- are followed through upstream's first-parent history after the merge, one
`git log --first-parent -p -U0 <start>..<base> -- <the PR's paths>` for all of them (a PR path a
later commit renamed is followed into its new file). A commit whose change overlaps those lines
touched them; its lines become the newest form. A merge on upstream's first-parent line is named
after the commit it brought (`git log -L` over what it merged), not the merge.
The merged change is the merge commit against its first parent -- except after GitHub's "Rebase
and merge", whose `merge_commit_sha` is only the last of the PR's replayed commits: then (told by
the PR head's author and message, `history.rebase_merged`) it starts below the replayed commits.

1. **ancestry** -- the merge commit (GitHub's `merge_commit_sha`: a true merge, the squash
   commit or the last replayed commit) is an ancestor of the fork ref: one `git merge-base <merge> <fork>`
   (none when the fork ref is its upstream base: the churn walk shows the merge there), which also
   gives the merge base the later steps start from. Ancestry says the change arrived, not that it
   is still there (the fork or upstream may have reverted or edited lines since): every hunk is
   then decided as in step 3 and keeps this step as its method. A missing hunk at a fork ref that
   contains the upstream base names the fork commit that undid it (the hunk's lines followed on
   through the fork's own first-parent commits).
2. **patch-id** -- `git patch-id --stable` of the merged change (merge commit vs its first parent),
   and of each PR commit for a true merge, against the fork commits since the merge base that touch
   the PR's paths (`git log <merge-base>..<fork> -- <paths>`), so the cost follows the fork's own
   commits on those files, not the length of history. A cherry-pick (new SHA, same change) is found
   here; as after ancestry, every hunk is then decided as in step 3. For a squash merge whose fork
   ref is a few commits from it, the merge base and those commits are read from the objects
   (`history.fork_since`), and the patch-ids are computed in process (`history.patch_ids_of`).
3. **content** -- upstream's newest form first (only when the upstream base has the merge on its
   first-parent line), then the fork ref's content: a fork file that is the upstream base's
   (same blob and mode) holds upstream's newest form of every hunk in it; otherwise the file's
   tree entries speak first (`porttrack.converge.kinds`: the fork's entry -- mode and blob id, or a
   submodule's commit -- against the merge's and the one before the change: a byte-identical file,
   a symlink or submodule where the change has another kind of entry, an empty added file, a copy
   taken for a rename, whose old path must be gone too); then the hunk is
   looked for at the fork ref, byte for byte (the end-of-file newline too), at its own location (`porttrack.diff.presence.hunk_state`
   with `near`: the hunk's lines in the merge commit's file mapped through `git diff -U0 <merge>
   <fork>`; it anchors a hunk at the start or end of the file as `git apply` does), and upstream's
   newest form at the location the base's lines map to in the fork (`git diff -U0 <base> <fork>`).
   The same text elsewhere in the file (a second copy of a block, a `}`) is not the hunk. A file
   upstream deleted after the merge counts as churn only by ancestry of that commit (absence alone
   does not show the fork ever had the PR's version); one the PR added and upstream deleted is
   undone upstream. A file the PR added that is absent at the fork ref is looked for where git's
   rename detection between the merge and the fork ref finds it (the fork took a move).
   Anything else is unknown, with the reason.

Verdict: `converged` when every hunk is present or present-after-churn (an empty change is
converged), `undone-upstream` when every other hunk is undone upstream, `partially-converged` when
some count and some are missing or unknown, `not-converged` when none counts.
Counts (`summary`) say present / present-after-churn / missing / unknown / undone-upstream
separately and add up to `hunks`. The command exits 0 only for `converged` (and, with `--run-regression`, a passing
regression); otherwise `CheckFailed` (exit 1), after recording.

Applying the diff in reverse at the tip is deliberately not a method: once upstream has moved on
(#48407's `vllm/models/deepseek_v32/nvidia/attention.py` was moved two days after it merged),
it fails on upstream's own main.

JSON shape (`--json`, schema `porttrack/convergence/v2`; additive changes only). v2 replaced v1's
hunk state `changed-since` (which counted a hunk as present on the strength of upstream churn alone)
by `present-after-churn` (proven) and added `unknown`; `summary` went from
`{hunks, present, changed_since, missing}` to `{hunks, present, present_after_churn, missing,
unknown}`. A state whose meaning changed is not an additive change, hence the new name::

    {
      "schema": "porttrack/convergence/v2",
      "pr": 48407, "title": "...", "track": "sparse-indexer-skip" | null,
      "verdict": "converged" | "partially-converged" | "not-converged" | "undone-upstream",  # the last: additive
      "method": "ancestry" | "patch-id" | "content",   # the step that settled the verdict
      "reasons": ["...", ...],                          # human sentences, in order
      "computed_at": "2026-08-25T10:00:00Z",
      "source": {"pr_state": "github" | "recorded", "note": str | null},
      "commits": {"merge_commit": sha, "merge_parent": sha | null,       # what the change is taken against
                  "merge_kind": "squash" | "merge" | "rebase",            # "rebase": additive, this round
                  "fork_ref": "refs/heads/main", "fork_sha": sha,         # fully qualified, as resolved
                  "upstream_base": "refs/remotes/upstream/main", "upstream_base_sha": sha | null,
                  "merge_base": sha | null},
      "ancestry": {"fork_ref": bool, "upstream_base": bool | null},   # null: not checked (the
                                                                      # fork ref has the merge)
      "patch_id": null | {"change": hex, "candidates": int,
                          "matched": [{"commit": sha, "subject": str, "matches": "change" | pr-commit sha}]},
      "hunks": [{"id": "1a2b3c4d5e6f", "path": "...", "kind": "text" | "binary" | "meta",
                 "header": "@@ -10,7 +10,9 @@ def f",
                 "state": "present" | "present-after-churn" | "undone-upstream" | "missing" | "unknown",
                 "method": "ancestry" | "patch-id" | "content" | "churn",
                 "changed_by": null | {"commit": sha, "subject": str, "upstream": bool},
                 "detail": str}],
      "summary": {"hunks": int, "present": int, "present_after_churn": int, "missing": int,
                  "unknown": int, "undone_upstream": int},   # they add up to hunks ("undone_upstream": additive)
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

from porttrack.common.clock import utcnow
from porttrack.common.errors import CannotEvaluate, NotFound
from porttrack.common.text import for_terminal  # a subject cut with a mark: a bare cut of "(#46076)" read as PR #460
from porttrack.converge import kinds as _kinds
from porttrack.converge import trail as _trail
from porttrack.converge.history import LITERAL as _LITERAL
from porttrack.converge.history import fork_since as _fork_since
from porttrack.converge.history import locations as _locations
from porttrack.converge.history import patch_id_of_change, patch_ids
from porttrack.converge.history import read_files as _read_files
from porttrack.converge.history import rebase_merged as _rebase_merged
from porttrack.converge.history import renamed_to as _renamed_to
from porttrack.diff import hunks as hunks_mod
from porttrack.diff import presence
from porttrack.git.repo import GitRepo

if TYPE_CHECKING:
    from porttrack.diff.hunks import FileDiff, Hunk

SCHEMA = "porttrack/convergence/v2"
VERDICTS = ("converged", "partially-converged", "not-converged", "undone-upstream")
STATES = ("present", "present-after-churn", "undone-upstream", "missing", "unknown")
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
    base_sha: str | None = None  # the PR's recorded base branch tip: a stacked PR's other PR (history.rebase_merged)


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
        "undone_upstream": sum(h.state == "undone-upstream" for h in hunks),
    }


def counts_words(s: Mapping[str, int]) -> str:
    """'11 present, 2 present after churn, 3 missing, 1 unknown of 17 hunks': exact, adds up (hunks
    undone upstream are named when there are any: '..., 2 undone upstream, 3 missing, ...')."""
    undone = f"{s['undone_upstream']} undone upstream, " if s.get("undone_upstream") else ""
    return (f"{s['present']} present, {s['present_after_churn']} present after churn, {undone}"
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
    fork_commit = None if fork_ref.startswith("-") else known[fork_ref]
    fork_sha = fork_commit.sha if fork_commit is not None else None
    if fork_sha is None:
        raise NotFound(f"fork ref {fork_ref!r} does not exist in the fork checkout {repo.path}")
    merge_info = known[merge]
    parents = list(merge_info.parents) if merge_info else repo.text("rev-list", "--parents", "-n", "1", merge).split()[1:]
    kind = "merge" if len(parents) > 1 else "squash"
    if repo.shallow and parents and repo.commits([parents[0]])[parents[0]] is None:
        raise _shallow(repo, merge, fork_ref)  # the cut is right below the merge
    rebased = _rebase_merged(repo, merge, pr.head_sha, pr.base_sha) if len(parents) == 1 else None
    if rebased is not None:  # the change starts below the PR's replayed commits, not at the merge's parent
        kind, parents = "rebase", [rebased[0]]
    base_info = known[upstream_base]
    base_sha = base_info.sha if base_info else None
    if parents:
        files = hunks_mod.parse_diff(repo.diff(parents[0], merge))
    else:  # a root commit: everything it has is its change
        files = hunks_mod.parse_diff(repo.run("diff-tree", "-p", "--root", "--binary", "--full-index", "-M", merge).stdout)
    start = parents[0] if parents else None  # the walk of upstream's later history starts here (trail.walk)
    paths = sorted({p for fd in files for p in (fd.old_path, fd.new_path) if p is not None})
    # The churn walk of the upstream base, needed whenever the base has the merge, comes first: when
    # it shows the merge (on the base's first-parent line) no `merge-base --is-ancestor` is asked, and
    # a fork ref at its upstream base (just rebased, or upstream main itself) has the merge too.
    early = _trail.follow_upstream(repo, files, start, merge, str(base_sha)) if base_sha and start is not None else _NOT_YET
    on_line = early is not _NOT_YET and early is not None
    walked = on_line and fork_sha == base_sha
    # A squash merge's fork close to it: merge base and the fork's commits read from the objects
    # (`history.fork_since`), no `merge-base` nor `log` process.
    since = None if walked or kind != "squash" or len(parents) != 1 or repo.shallow else \
        _fork_since(repo, merge, parents[0], fork_sha, paths)
    merge_base = merge if walked else since[0] if since else repo.merge_base(merge, fork_sha)
    in_fork = merge_base == merge
    if not in_fork and repo.shallow:  # a "yes" found in the history there is true; a "no" may be the cut
        raise _shallow(repo, merge, fork_ref)
    # Only needed when the fork ref lacks the merge (null in the JSON: not checked).
    in_base = None if in_fork else (on_line or (repo.is_ancestor(merge, base_sha) if base_sha else False))
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
        results = _rechecked(repo, files, pr.number, merge, start, fork_sha, base_sha, "ancestry",
                             f"merge commit {merge[:12]} is an ancestor", early)
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

    pr_commits = list(rebased[1]) if rebased else None
    patch_id, decided = _patch_id_step(repo, merge, parents, merge_base, fork_sha, paths, pr_commits, since[1] if since else None)
    if patch_id is not None and decided:
        m = patch_id.matched[0]
        if m.matches == "change":
            reasons.append(f"fork commit {m.commit[:12]} ({for_terminal(m.subject, 60)}) has the merged change's patch-id")
        else:
            reasons.append(f"every commit of the PR has a fork commit with its patch-id: {', '.join(x.commit[:12] for x in patch_id.matched)}")
        return finish("patch-id", _rechecked(repo, files, pr.number, merge, start, fork_sha, base_sha if in_base else None,
                                             "patch-id", f"same patch-id as {m.commit[:12]}", early if in_base else None), patch_id)
    if patch_id is not None:
        looked = f"since {merge_base[:12]}" if merge_base else ""
        if patch_id.candidates:
            reasons.append(f"none of the {patch_id.candidates} fork commit(s) {looked} touching the PR's files has its patch-id")
        else:
            reasons.append(f"no fork commit {looked} touches the PR's files, so none can carry its patch-id")

    results = _by_content(repo, files, pr.number, merge, start, fork_sha, base_sha if in_base else None, early if in_base else None)
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
    undone = sum(h.state == "undone-upstream" for h in results)
    if undone and found + undone == len(results):
        return "undone-upstream"
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

_NOT_YET: Any = object()  # trails not walked yet (`_by_content` walks)


def _rechecked(repo: GitRepo, files: Sequence["FileDiff"], number: int, merge: str, start: str | None, fork_sha: str,
               base_sha: str | None, method: str, why: str, trails: Any = _NOT_YET) -> list[HunkResult]:
    """Ancestry or a patch-id match says the change arrived in the fork, not that it is still
    there: the fork may have reverted or edited lines since, and upstream may have. So every hunk
    is decided as the content step decides it (`_by_content`: upstream's newest form, then the
    fork tip's content), keeping `method` (how the change arrived) and saying `why`."""
    results = _by_content(repo, files, number, merge, start, fork_sha, base_sha, trails, arrived=True)
    return [replace(r, method=method, detail=f"{why}; " + ("the pre-image is back at the fork ref: " if r.state == "missing" else "") + r.detail)
            for r in results]



# -- patch-id

def _patch_id_step(repo: GitRepo, merge: str, parents: list[str], merge_base: str | None,
                   fork_sha: str, paths: list[str], pr_commits: list[str] | None = None,
                   candidates: Sequence[tuple[str, str]] | None = None) -> tuple[PatchIdResult | None, bool]:
    """Patch-ids of fork commits since the merge base that touch the PR's paths, against the
    merged change (and, for a true merge or a rebase merge, each PR commit). Decides when the
    whole change matched or every PR commit did. `candidates`: those fork commits, newest first,
    with their subjects, when already known (`history.fork_since`)."""
    if merge_base is None or not parents or not paths:
        return None, False
    if candidates is not None:
        subjects = dict(candidates)
    else:
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


def _by_content(repo: GitRepo, files: Sequence["FileDiff"], number: int, merge: str, start: str | None,
                fork_sha: str, base_sha: str | None, walked: Any = _NOT_YET, arrived: bool = False) -> list[HunkResult]:
    """Each hunk by upstream's newest form of its lines, then by the fork ref's content.

    `base_sha`: the upstream base, given only when it may contain the merge; its first-parent
    history after the merge is walked once for all the PR's paths (`trail.walk`, from `start`, the
    commit the change is taken against, so the merge itself must show up: that proves the base
    has it on its first-parent line). Per hunk (`porttrack.converge.trail`):

    - upstream's newest form is the pre-image: **undone-upstream**, naming the commit that last
      touched those lines, whatever the fork has (a revert upstream is never converged);
    - the fork's file is the upstream base's (same blob and mode): present when no later upstream
      commit touched the hunk's lines, else present-after-churn -- never missing;
    - otherwise the fork's content: the post-image at the hunk's location -> present; upstream's
      newest form there (the base's lines where the base has them, no fork change over them)
      -> present (untouched) or present-after-churn; the pre-image -> missing; else unknown.

    Without a walk (the base lacks the merge) only the fork's content decides: there is no later
    upstream state to compare."""
    trails = walked if walked is not _NOT_YET else _trail.follow_upstream(repo, files, start, merge, base_sha) if base_sha else None
    where = {id(h): trails[id(h)].path if trails is not None else fd.path for fd in files for h in fd.hunks}  # a later rename moves it
    paths = sorted({p for fd in files for p in (fd.path, fd.old_path) if p is not None} | set(where.values()))
    fork_entries = repo.tree_entries(fork_sha, paths)
    base_entries = repo.tree_entries(base_sha, paths) if trails is not None and base_sha else {}
    same = {p for p in set(where.values()) if trails is not None and fork_entries.get(p) == base_entries.get(p)}
    others = [fd for fd in files if any(where[id(h)] not in same for h in fd.hunks)]
    # the fork's files are read only where upstream's newest form alone cannot decide (at the
    # upstream base itself: none)
    at_fork = _read_files(repo, fork_sha, sorted({p for fd in others for p in (fd.path, fd.old_path) if p is not None} |
                                                 {where[id(h)] for fd in others for h in fd.hunks}))
    near = _locations(repo, merge, fork_sha, others, at_fork) if others else {}
    # what the tree entries say (mode and blob id: symlinks, gitlinks, empty files, copies taken
    # for renames, byte-identical files), before any line is looked for (`porttrack.converge.kinds`)
    # (read once, only when a file is not the upstream base's: at upstream main, never)
    entry_sides: dict[int, _kinds.Sides] = {}
    known_base = base_entries if trails is not None and base_sha else None

    def whole(h: "Hunk", fd: "FileDiff", tpath: str) -> tuple[str, str] | None:
        if not entry_sides:
            entry_sides.update(_kinds.sides(repo, start, merge, files))
        return _kinds.judge(h, fd, entry_sides[id(fd)], tpath, fork_entries, number, known_base)

    cache: dict[Any, Any] = {}

    def ancestor(sha: str) -> bool:
        """`sha` (a commit of upstream's walk, or the base) is in the fork ref; every commit of the
        walk is in the base, so a fork ref at the base (or containing it) has them all."""
        if sha == fork_sha or fork_sha == base_sha or cache.get(("anc", base_sha)):
            return True
        if ("anc", sha) not in cache:
            cache[("anc", sha)] = repo.is_ancestor(sha, fork_sha)
        return cache[("anc", sha)]

    def upstream_regions(path: str) -> list[tuple[int, int, int, int]]:
        """The `-U0` hunks of the base's file against the fork's (one diff for every such path)."""
        if "regions" not in cache:
            wanted = sorted({p for p in where.values() if p not in same and p in fork_entries and p in base_entries})
            diff = repo.run("diff", "-U0", "--no-renames", "--no-ext-diff", "--no-textconv", str(base_sha), fork_sha, "--",
                            *wanted, env=_LITERAL).stdout if wanted else b""
            cache["regions"] = {fd.path: [(x.old_start, x.old_len, x.new_start, x.new_len) for x in fd.hunks if x.kind == "text"]
                                for fd in hunks_mod.parse_diff(diff)}
        return cache["regions"].get(path, [])

    def by(t: "_trail.Trail", path: str, k: int = -1) -> ChangedBy:
        """The commit that touched the lines (the last, or touch `k`)."""
        last = t.touched[k]
        if len(last.parents) > 1:  # a merge on the first-parent line: name the commit it brought
            key = ("real", last.sha, path, t.spans[k])  # per span: two hunks one merge brought are two questions
            if key not in cache:
                cache[key] = _trail.real_commit(repo, last, path, t.spans[k])
            sha, subject = cache[key]
            return ChangedBy(sha, subject, True)
        return ChangedBy(last.sha, last.subject, True)

    def moved_to(sha: str, path: str) -> str | None:
        if ("moved", sha, path) not in cache:
            cache[("moved", sha, path)] = _renamed_to(repo, sha, path)
        return cache[("moved", sha, path)]

    def moved_out(sha: str, lost: Sequence[bytes]) -> bool:
        """Commit `sha` added most of the `lost` lines elsewhere (another file): moved, not removed."""
        if ("diff", sha) not in cache:
            cache[("diff", sha)] = repo.run("diff-tree", "-p", "-U0", "--no-renames", "--no-ext-diff", "--no-textconv",
                                            f"{sha}^", sha).stdout
        if "restored" not in cache:
            cache["restored"] = {fd.path: _trail.pre_image_lines(fd) for fd in files}
        return _trail.moved_out(cache[("diff", sha)], lost, cache["restored"])

    results: list[HunkResult] = []
    fork_trails: dict[int, "_trail.Trail"] = {}  # index in results -> trail of a missing hunk
    absent: dict[int, tuple["Hunk", "FileDiff"]] = {}  # index in results -> a hunk of an added file absent at the fork ref
    for fd in files:
        for h in fd.hunks:
            t = trails.get(id(h)) if trails is not None else None
            tpath = where[id(h)]
            look = _look(h, fd, at_fork, near.get(id(h)), whole(h, fd, tpath)) if tpath not in same else None
            if t is None:
                if look is not None and look.absent_added:
                    absent[len(results)] = (h, fd)
                results.append(_without_upstream(h, look, base_sha is not None and trails is None))
                continue
            if t.touched and t.absent and fd.status != "deleted":
                if look is None and fd.path in fork_entries:  # the fork has the file upstream later moved and deleted
                    at_fork.update(_read_files(repo, fork_sha, [p for p in (fd.path, fd.old_path) if p is not None]))
                    near.update(_locations(repo, merge, fork_sha, [fd], at_fork))
                    look = _look(h, fd, at_fork, near.get(id(h)), whole(h, fd, tpath))
                results.append(_gone_upstream(h, fd, t, look, number, by(t, tpath), lambda: moved_to(t.touched[-1].sha, t.path or fd.path),
                                              fork_entries, base_entries, ancestor,
                                              lambda: bool(t.lost) and moved_out(t.touched[-1].sha, t.lost)))
                continue
            if t.touched and t.lost and _trail.undone(h, t) and moved_out(t.touched[-1].sha, t.lost):
                c = by(t, tpath)
                what = f"upstream {c.commit[:12]} ({for_terminal(c.subject, 60)}) moved these lines out of {fd.path}"
                if tpath in same or ancestor(t.touched[-1].sha):
                    results.append(_result(h, "present-after-churn", "churn", c, f"{what}, and the fork ref has that change"))
                elif look is not None and look.state == "present":
                    results.append(_result(h, "present", "content", detail=look.detail))
                else:
                    results.append(_result(h, "unknown", "churn", c, f"{what}, which the fork ref does not contain"))
                continue
            if t.touched and _undone(h, fd, t, at_base_entry=lambda p: _read_files(repo, str(base_sha), [p]).get(p)):
                c = by(t, tpath, _trail.undone_index(h, t) if not (t.whole or t.opaque) else -1)
                still = look is not None and look.state == "present"
                results.append(_result(h, "undone-upstream", "churn", c,
                                       f"upstream's newest form of these lines is the pre-image: undone upstream by {c.commit[:12]} "
                                       f"({for_terminal(c.subject, 60)}); " + ("the fork ref still has #%d's lines: keep carrying them or drop them" % number
                                                                  if still else "the fork ref has upstream's form: drop any carried copy or keep carrying it")))
                continue
            copy = _kinds.left_behind(h, fd, fork_entries, base_entries) if tpath in same else None
            if copy is not None:
                results.append(_result(h, "missing", "content", detail=f"{tpath} is the upstream base's, but {copy}"))
                continue
            if tpath in same:
                if not t.touched:
                    results.append(_result(h, "present", "content", detail="the fork ref's file is the upstream base's, and no later upstream "
                                                                           "commit touched these lines"))
                else:
                    c = by(t, tpath)
                    results.append(_result(h, "present-after-churn", "churn", c,
                                           f"upstream {c.commit[:12]} ({for_terminal(c.subject, 60)}) changed these lines later, and the fork ref's "
                                           f"file is the upstream base's"))
                continue
            assert look is not None
            if look.state == "present":
                results.append(_result(h, "present", "content", detail=look.detail))
                continue
            entry = at_fork.get(tpath)
            if entry is not None and not t.whole and t.items and tpath in base_entries and \
                    _trail.holds(t, _trail.file_lines(entry[1]), upstream_regions(tpath)):
                if not t.touched:
                    results.append(_result(h, "present", "content", detail=f"{look.detail}; the lines #{number} put there are at the "
                                                                           f"fork ref where upstream has them (their context changed)"))
                else:
                    c = by(t, tpath)
                    results.append(_result(h, "present-after-churn", "churn", c,
                                           f"{look.detail}; the fork ref has upstream's newest form of these lines, from {c.commit[:12]} "
                                           f"({for_terminal(c.subject, 60)})"))
                continue
            words = ""
            if t.touched:
                c = by(t, tpath)
                words = f"; upstream {c.commit[:12]} ({for_terminal(c.subject, 60)}) changed these lines since, and the fork ref has neither that form nor #{number}'s"
            if look.state == "missing" or look.absent_added:
                fork_trails[len(results)] = t
                if look.absent_added:
                    absent[len(results)] = (h, fd)
                results.append(_result(h, "missing", "content", detail=look.detail + (words or "; upstream still has it")))
            else:
                results.append(_result(h, "unknown", "churn" if t.touched else "content",
                                       detail=look.detail + (words or _neither(number, arrived))))
    if fork_trails and base_sha and ancestor(base_sha):
        results = _undone_in_fork(repo, results, fork_trails, files, base_sha, fork_sha)
    if absent:
        if not entry_sides:
            entry_sides.update(_kinds.sides(repo, start, merge, files))
        results = _moved_in_fork(repo, results, absent, merge, fork_sha, entry_sides)
    return results


def _neither(number: int, arrived: bool) -> str:
    """Why neither image is at the fork ref while upstream still has #number's lines: what is known,
    no more. Arrived (by ancestry or patch-id): the fork changed these lines since. Not arrived: the
    PR is not in the fork, and the fork's file differs from the PR's base there -- an older fork
    lacking what the PR builds on looks exactly like this, as does a fork's own edit."""
    if arrived:
        return f"; upstream still has the post-image, and the fork changed these lines since #{number} arrived: the fork's own version"
    return (f"; upstream still has the post-image; #{number} is not in the fork (no ancestry, no patch-id), and the fork's file differs from #{number}'s base there "
            f"(its pre-image is not there either): the fork lacks what #{number} changes these lines from -- a change it builds on, "
            f"or the fork's own edit")


def _moved_in_fork(repo: GitRepo, results: list[HunkResult], absent: Mapping[int, tuple["Hunk", "FileDiff"]], merge: str,
                   fork_sha: str, entry_sides: Mapping[int, "_kinds.Sides"]) -> list[HunkResult]:
    """Hunks of a file the PR added that is absent at the fork ref: the fork may have moved it
    (taking upstream's rename without its upstream base showing it, or its own). Git's rename
    detection between the merge and the fork ref (one `diff -M`, only in this case) says where;
    there the file's entry, then its lines, decide (`porttrack.converge.kinds.moved`)."""
    moves = _kinds.renamed_in(repo, merge, fork_sha, sorted({fd.path for _, fd in absent.values()}))
    if not moves:
        return results
    targets = sorted(set(moves.values()))
    entries, files = repo.tree_entries(fork_sha, targets), _read_files(repo, fork_sha, targets)
    out = list(results)
    for i, (h, fd) in absent.items():
        if fd.path in moves and results[i].state in ("missing", "unknown"):
            state, detail = _kinds.moved(h, fd, entry_sides[id(fd)], moves[fd.path], entries, files)
            out[i] = replace(out[i], state=state, detail=f"{out[i].detail}; {detail}")
    return out


def _undone_in_fork(repo: GitRepo, results: list[HunkResult], missing: Mapping[int, "_trail.Trail"], files: Sequence["FileDiff"],
                    base_sha: str, fork_sha: str) -> list[HunkResult]:
    """Missing hunks at a fork ref that contains the upstream base: upstream's newest form was not
    the pre-image, so the fork's own commits since the base undid them. Their trails, followed on
    through the fork's first-parent history (one more walk), name the fork commit that did."""
    paths = sorted({results[i].path for i in missing})
    steps = _trail.walk(repo, base_sha, fork_sha, paths)
    copies = {i: _trail.Trail(list(t.items), restored=t.restored) for i, t in missing.items()}
    _trail.follow([(results[i].path, copies[i]) for i in copies], steps)
    out = list(results)
    for i, t in copies.items():
        if t.touched:
            c = t.touched[-1]
            out[i] = replace(out[i], changed_by=ChangedBy(c.sha, c.subject, False),
                             detail=f"{out[i].detail}; undone in the fork by {c.sha[:12]} ({for_terminal(c.subject, 60)})")
    return out


def _undone(h: "Hunk", fd: "FileDiff", t: "_trail.Trail", at_base_entry) -> bool:
    """Upstream's newest form of `h` is its pre-image (see `porttrack.converge.trail.undone`);
    a whole-file hunk by the base's file: the old blob, the old mode, a deleted file back as it was."""
    if not t.whole and not t.opaque:
        return _trail.undone(h, t, lambda: (at_base_entry(t.path or fd.path) or ("", None))[1])
    entry = at_base_entry(t.path or fd.path)
    if entry is None:
        return False
    if fd.status == "deleted":
        return h.kind == "meta" or presence.pre_image_present(h, entry[1])
    if h.kind == "binary":
        return presence.pre_image_present(h, entry[1]) and not presence.post_image_present(h, entry[1])
    if h.kind == "meta" and fd.old_mode and fd.new_mode and fd.old_mode != fd.new_mode:
        return entry[0] == fd.old_mode
    return False


def _without_upstream(h: "Hunk", look: _Look | None, not_on_line: bool) -> HunkResult:
    """No later upstream state to compare: the fork's content alone decides."""
    assert look is not None
    if look.state in ("present", "missing", "unknown"):
        return _result(h, look.state, "content", detail=look.detail)
    if look.absent_added:
        return _result(h, "missing", "content", detail=look.detail)
    why = ("the merge is not on the upstream base's first-parent history, so its later upstream state cannot be followed"
           if not_on_line else "the upstream base does not contain the merge, so there is no later upstream state to compare")
    return _result(h, "unknown", "content", detail=f"{look.detail}; {why}")


def _gone_upstream(h: "Hunk", fd: "FileDiff", t: "_trail.Trail", look: _Look | None, number: int, c: ChangedBy,
                   moved_to, fork_entries: Mapping[str, tuple[str, str]], base_entries: Mapping[str, tuple[str, str]],
                   ancestor, carried_elsewhere) -> HunkResult:
    """Upstream deleted (or moved: `moved_to()`, asked only when it matters) the hunk's file after
    the merge (`c` last touched it). A file the PR added is undone upstream when the commit that
    deleted it neither renamed it nor added most of its lines elsewhere (`carried_elsewhere()`:
    code moved into another file is upstream rewriting, not undoing)."""
    gone = f"upstream {c.commit[:12]} ({for_terminal(c.subject, 60)}) "
    if fd.status == "added":
        moved = moved_to()
        if moved is None and not carried_elsewhere():
            still = fd.path in fork_entries
            return _result(h, "undone-upstream", "churn", c,
                           f"{gone}deleted {fd.path}, which #{number} added: undone upstream; " +
                           ("the fork ref still has it: keep carrying it or drop it" if still else "the fork ref has no such file either"))
    if fd.path not in fork_entries:
        if ancestor(t.touched[-1].sha):
            return _result(h, "present-after-churn", "churn", c, f"{gone}deleted or moved {fd.path}, and the fork ref contains that commit")
        moved = moved_to()
        if moved is not None and moved in base_entries and fork_entries.get(moved) == base_entries.get(moved):
            return _result(h, "present-after-churn", "churn", c, f"{gone}moved {fd.path} to {moved}, and the fork ref has {moved} as upstream has it")
        return _result(h, "unknown", "churn", c, f"{fd.path} does not exist at the fork ref; {gone}deleted it, which the fork ref does not "
                                                 f"contain: absence alone does not show the fork ever had #{number}'s version")
    assert look is not None
    if look.state == "present":
        return _result(h, "present", "content", detail=look.detail)
    if look.state == "missing":
        return _result(h, "missing", "content", detail=f"{look.detail}; {gone}deleted or moved {fd.path} since")
    return _result(h, "unknown", "churn", c, f"{look.detail}; {gone}deleted or moved {fd.path} since, and the fork ref still has the file")


def _look(h: "Hunk", fd: "FileDiff", at_fork: Mapping[str, tuple[str, bytes]], near: tuple[int, int] | None = None,
          whole: tuple[str, str] | None = None) -> _Look:
    """The hunk by the fork ref's content alone (`at_fork`: path -> (mode, bytes)), at its
    location `near` (`_locations`); `whole`: what its tree entries already decided
    (`porttrack.converge.kinds.judge`), which the lines are not asked to overrule."""
    if whole is not None:
        return _Look(*whole)
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


def _present(h: "Hunk", fd: "FileDiff", entry: tuple[str, bytes] | None) -> bool:
    """Is hunk `h` of entry `fd` applied in a tree whose `fd.path` is `entry` ((mode, bytes) or None)?"""
    if fd.status == "deleted" or entry is None:
        return presence.hunk_state(h, entry[1] if entry else None) == "applied"
    if h.kind == "meta":
        return fd.new_mode is None or entry[0] == fd.new_mode
    return presence.post_image_present(h, entry[1])
