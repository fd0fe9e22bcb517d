"""Seeded random convergence scenarios in real git repositories, and an oracle independent of
`porttrack.converge.verify` (issue 11's differential test).

Nothing here imports porttrack: the oracle is `git apply --check` in a scratch index plus what the
generator itself knows about how the fork was built. `tests/properties/test_converge_differential.py` (a
fast subset) and `proofs/converge_differential.py` (the full run) compare it with
`porttrack.converge.decide`.

Scenario (one integer seed decides everything; `reset_clock()` first, so SHAs repeat too)
---------------------------------------------------------------------------------------
upstream  2-4 files of 20-60 unique lines; 0-2 commits on main; PR #N branched from main with
          1-3 random edits (replace / insert / delete, sometimes the file's first or last line)
          in 1-3 files, sometimes a new file or a deleted file; merged by squash or by a true
          merge (sometimes with a second PR commit, sometimes after an unrelated main commit);
          then 0-4 churn commits: rewrite or delete a line the PR added, insert next to one,
          edit elsewhere, delete a PR file, rename a PR file (sometimes with an edit).
fork      a clone cut at a random first-parent commit of main: before the PR, the merge's first
          parent, the merge, or after some churn. A fork that lacks the merge takes no port, the
          whole change (`git cherry-pick`), or a random subset of the PR's hunks (each applied
          alone with `git apply`), some with an edit of one added line ("edited") and sometimes
          an unrelated edit in the same file at least 4 lines from any hunk line. A fork that has
          the merge sometimes reverts one hunk. Sometimes it cherry-picks a later churn commit
          too, and commits something of its own. The upstream base is `upstream/main` (upstream's
          tip) or, sometimes, a ref at the cut point.

Issue 21's kinds (`_Extras`, drawn from a second generator seeded from the same integer, so the
draws above are unchanged): files that repeat lines like `}` and `# ---`; the same 9-line block
twice in a file, which the PR edits in both copies (two hunks of identical bytes); lines with
trailing spaces or CRLF that the PR only strips / turns into LF; after the fork took the change
(ancestry, cherry-pick or hand port) a fork commit that undoes one hunk (the second twin or a
whitespace hunk first) or edits one of its added lines; the fork renaming a PR file
(`fork_moves`); an unrelated upstream commit in a PR file and its revert before the churn; an
upstream commit after the churn that restores one hunk's original text.

A PR of two commits that a true merge would have merged is, half the time (a third generator),
merged by rebase instead: both commits replayed onto main, the merge commit the last copy, the
change `merge~2..merge` (`change_base`), the PR head fetched into the fork as `status` does.

Issue 30's kinds are a family of their own, `build_kind_scenario` (renames against copies,
symlinks, empty files, added files moved upstream, submodule bumps, end-of-file newlines,
byte-identical files), with their own oracle (tree entries, then `git apply`): see the section
comment above it. `split_diff` lists a meta pseudo-hunk (position 0) where git's header itself is
the change (a rename or copy, a mode change, an empty file), as porttrack lists one.

Oracle, per hunk h of `git diff -M <merge>^1 <merge>` (for a rebase merge: `<change_base>
<merge>`; own parser: a hunk is one `@@` block
with its file's header, so a single-hunk patch `git apply` takes; ordered by path, then position)
--------------------------------------------------------------------------------------------
In a scratch index (`GIT_INDEX_FILE=<tmp> git read-tree <fork ref>`), `git apply --cached --check`
of h's single-hunk patch, forward and with `-R`: full context (no `-C`, no `--unidiff-zero`, so
hunks at the first or last line are anchored there, as git anchors them), byte for byte, and at
h's own location: the header's start line is moved to where `git diff -U0` of h's file (merge^1
for the forward check, merge for the reverse one, against the judged commit) maps it, and a match
git finds more than `SLACK` lines away (`-v` reports the offset) does not count -- the same text
elsewhere in the file is not h. With that and the
generator's record of h ("upstream": the fork has the merge and did not revert h; "exact": hand
ported or cherry-picked as is; "edited": hand ported with one added line changed; "reverted";
"none": never ported) and K = the churn commits C the fork contains (ancestors of the fork ref,
or cherry-picked onto it) that changed h upstream: C changed h's file (followed through renames)
and h reverse-applies at C^ but not at C, or already did not at C^ (`churned_by`). Where K has a
rename of h's file, h is judged at the new path first (`PatchHunk.at`): applied there is churned.

    reverse applies, forward does not          -> applied       (expect present)
    forward applies, reverse does not          -> not-applied   (expect missing), except for a
        hunk creating a file when K != {} (upstream deleted or renamed the file and the fork
        took that): churned if ported (upstream/exact), else ambiguous
    neither; ported (upstream/exact); K != {}  -> churned       (expect present-after-churn)
    neither; edited; K == {}                   -> edited        (expect unknown; missing allowed)
    neither; none/reverted; K == {}            -> not-ported    (expect missing or unknown)
    neither; none/reverted; K != {}, but every line h removes is still in the fork's file and no
        line it adds is (generated lines are unique -- a hunk with a line the generator repeats,
        `COMMON` or the twin block, is left out -- and only a restore commit, which the fork's
        pre-image would already show, brings one back)  -> not-ported
    anything else                              -> ambiguous     (no expectation)

Strict checks (a violation fails the run): (1) porttrack says `converged` only if every hunk is
applied or churned by the oracle (a hunk that is not-applied, not-ported or edited makes it a
violation; an ambiguous hunk is counted apart as "unverifiable"); (2) no hunk the oracle calls
not-applied, not-ported or edited is reported present or present-after-churn; (3) porttrack's
per-hunk list maps onto the oracle's (same paths, same count per path), its summary counts its
own hunk states and adds up, and its verdict follows from those states as CONTRACT-11 defines it
(converged iff all present / present-after-churn, partially iff some). Conservative answers (porttrack missing/unknown where the oracle says applied or churned) are
allowed and counted apart.

A porttrack state "changed-since" (the pre-issue-11 name) is read as "present-after-churn".
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import re
import subprocess
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from testing.gitfixtures import (
    Executable,
    Gitlink,
    Symlink,
    Upstream,
    clone_fork,
    fork_commit,
    git,
    git_bytes,
    is_ancestor,
    reset_clock,
)

__all__ = [
    "ORACLE_STATES",
    "PORTTRACK_STATES",
    "Check",
    "PatchHunk",
    "Scenario",
    "apply_state",
    "build_kind_scenario",
    "build_scenario",
    "check_scenario",
    "oracle_states",
    "oracle_verdict",
    "split_diff",
]

PR_NUMBER = 4242
ORACLE_STATES = ("applied", "churned", "not-applied", "not-ported", "edited", "ambiguous")
PORTTRACK_STATES = ("present", "present-after-churn", "missing", "unknown", "undone-upstream")
FOUND = ("present", "present-after-churn")
NOT_THERE = ("not-applied", "not-ported", "edited")  # the post-image is provably not at the fork ref
OLD_STATE_NAMES = {"changed-since": "present-after-churn"}


# ---------------------------------------------------------------------------- diff splitting


@dataclass(frozen=True)
class PatchHunk:
    """One `@@` block of the merged change, with its file's header: a patch `git apply` takes."""
    path: str  # the new path, or the old one for a deleted file
    position: int  # 1, 2, ... within its file
    header: bytes
    body: bytes

    @property
    def patch(self) -> bytes:
        return self.header + self.body

    @property
    def creates_file(self) -> bool:
        return b"\nnew file mode " in self.header

    def at(self, path: str) -> "PatchHunk":
        """The same hunk for a file that now lives at `path` (headers rewritten)."""
        header = self.header.replace(f"a/{self.path}".encode(), f"a/{path}".encode())
        header = header.replace(f"b/{self.path}".encode(), f"b/{path}".encode())
        return PatchHunk(path, self.position, header, self.body)

    def lines(self, marker: str) -> list[str]:
        """The hunk's lines starting with `marker` ("+", "-" or " "), without the marker."""
        out = []
        for raw in self.body.decode().splitlines(keepends=True)[1:]:
            if raw.startswith(marker):
                out.append(raw[1:])
        return out


def split_diff(diff: bytes) -> list[PatchHunk]:
    """`git diff` output -> one PatchHunk per `@@` block, in diff order."""
    hunks: list[PatchHunk] = []
    for entry in _file_entries(diff):
        lines = entry.splitlines(keepends=True)
        first = next((i for i, line in enumerate(lines) if line.startswith(b"@@")), None)
        header = b"".join(lines[:first] if first is not None else lines)
        path = _entry_path(lines[:first] if first is not None else lines)
        if _is_meta(header, first is not None):
            # what the header itself changes (a rename or copy, a mode change, an empty file
            # added or deleted): one pseudo-hunk, before the text hunks, as git shows it first
            hunks.append(PatchHunk(path, 0, header, b""))
        if first is None:
            continue
        starts = [i for i in range(first, len(lines)) if lines[i].startswith(b"@@")] + [len(lines)]
        for n, (s, e) in enumerate(zip(starts, starts[1:]), start=1):
            hunks.append(PatchHunk(path, n, header, b"".join(lines[s:e])))
    return hunks


def _is_meta(header: bytes, has_text: bool) -> bool:
    marks = (b"\nrename from ", b"\ncopy from ", b"\nold mode ")
    if any(m in header for m in marks):
        return True
    return not has_text and (b"\nnew file mode " in header or b"\ndeleted file mode " in header)


def _file_entries(diff: bytes) -> list[bytes]:
    lines = diff.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith(b"diff --git ")] + [len(lines)]
    return [b"".join(lines[s:e]) for s, e in zip(starts, starts[1:])]


def _entry_path(header: Sequence[bytes]) -> str:
    old = new = None
    for line in header:
        if line.startswith(b"--- "):
            old = line[4:].rstrip(b"\n").decode()
        elif line.startswith(b"+++ "):
            new = line[4:].rstrip(b"\n").decode()
        elif line.startswith((b"rename to ", b"copy to ")):
            new = "b/" + line.split(b" ", 2)[2].rstrip(b"\n").decode()
    if new and new != "/dev/null":
        return new[2:]
    if old and old != "/dev/null":
        return old[2:]
    git_line = header[0].rstrip(b"\n").decode() if header else ""
    if git_line.startswith("diff --git a/") and " b/" in git_line:  # no ---/+++ lines (an empty file, a pure rename)
        return git_line.rsplit(" b/", 1)[1]
    raise ValueError(f"no path in diff header: {b''.join(header)!r}")


# ------------------------------------------------------------------------------ the oracle


class ScratchIndex:
    """An index file of our own in `repo`, so `git apply --cached --check` tests a commit's tree
    without touching the work tree or the real index."""

    def __init__(self, repo: Path) -> None:
        self.repo = Path(repo)
        fd, name = tempfile.mkstemp(prefix="oracle-index-")
        os.close(fd)
        os.unlink(name)  # git wants to create it; a zero-byte file is not an index
        self.env = {"GIT_INDEX_FILE": name}
        self.loaded: str | None = None

    def load(self, rev: str) -> None:
        if rev != self.loaded:
            git(self.repo, "read-tree", rev, env=self.env)
            self.loaded = rev

    def applies(self, patch: bytes, *, reverse: bool, slack: int | None = None) -> bool:
        """`git apply --cached --check` (with `-R`: reversed); with `slack`, only where the hunk
        header says, give or take `slack` lines (git searches the whole file otherwise, and
        reports how far it went with `-v`)."""
        args = ["apply", "--cached", "--check", "-v", *(["-R"] if reverse else []), "-"]
        p = subprocess.run(["git", "-C", str(self.repo), *args], input=patch, capture_output=True,
                           env={**os.environ, "LC_ALL": "C", **self.env})
        if p.returncode != 0:
            return False
        offsets = [abs(int(m)) for m in re.findall(rb"\(offset (-?\d+) lines?\)", p.stderr)]
        return slack is None or all(o <= slack for o in offsets)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.env["GIT_INDEX_FILE"])


SLACK = 3  # lines a pinned hunk may sit away from where the history maps it (twins are 21 apart)


def apply_state(index: ScratchIndex, rev: str, hunk: PatchHunk, *, merge: str | None = None,
                origin: str | None = None, parent: str | None = None) -> str:
    """"applied", "not-applied", "both" or "neither" for `hunk` at `rev` (see the docstring).

    With `merge` (the merged change is `merge^1..merge`; `origin` is the hunk's path there when
    `hunk` was moved to another path), the hunk is tried at its own location only: its pre-image
    where `git diff -U0 merge^1:<origin> <rev>:<path>` maps the hunk's old start line, its
    post-image where `git diff -U0 merge:<origin> <rev>:<path>` maps its new start, within
    `SLACK` lines. The same text elsewhere in the file (a second copy of a block, a `}`) is not
    the hunk. `parent`: where the merged change starts when that is not `merge^1` (a rebase merge:
    below the PR's replayed commits)."""
    index.load(rev)
    if merge is None:
        forward = index.applies(hunk.patch, reverse=False)
        reverse = index.applies(hunk.patch, reverse=True)
    else:
        src = origin or hunk.path
        fwd = _pinned(hunk, index.repo, parent or f"{merge}^1", src, rev, old=True)
        back = _pinned(hunk, index.repo, merge, src, rev, old=False)
        forward = index.applies(fwd.patch, reverse=False, slack=SLACK)
        reverse = index.applies(back.patch, reverse=True, slack=SLACK)
    if reverse and not forward:
        return "applied"
    if forward and not reverse:
        return "not-applied"
    return "both" if forward else "neither"


_HEADER = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _pinned(hunk: PatchHunk, repo: Path, src_rev: str, src_path: str, rev: str, *, old: bool) -> PatchHunk:
    """`hunk` with its start lines moved to where the history maps its old (or new) start at `rev`. A
    start of 1 stays (git anchors such a hunk at the top of the file); so does a hunk whose file
    is missing on either side."""
    m = _HEADER.match(hunk.body)
    assert m is not None, hunk.body[:80]
    start = int(m.group(1) if old else m.group(3))
    if start <= 1:
        return hunk
    diff = subprocess.run(["git", "-C", str(repo), "diff", "-U0", "--no-ext-diff", "--no-textconv",
                           f"{src_rev}:{src_path}", f"{rev}:{hunk.path}"], capture_output=True)
    if diff.returncode != 0:  # a path missing on one side
        return hunk
    mapped = max(2, _map_line(_regions(diff.stdout), start))
    # Both sides' starts: `git apply` looks for a hunk where its *new* start says (earlier hunks of
    # a file shift it), so a single hunk pinned on one side only was looked for as many lines away
    # as the hunks before it in its file added or removed -- more than SLACK made a present hunk
    # "neither" (found with the rebase-merge scenarios: two 2-line deletions above a hunk).
    body = (hunk.body[:m.start(1)] + str(mapped).encode() + hunk.body[m.end(1):m.start(3)] + str(mapped).encode()
            + hunk.body[m.end(3):])
    return PatchHunk(hunk.path, hunk.position, hunk.header, body)


def _regions(diff: bytes) -> list[tuple[int, int, int, int]]:
    out = []
    for line in diff.splitlines():
        m = _HEADER.match(line)
        if m:
            a, b, c, d = (int(g) if g is not None else 1 for g in m.groups())
            out.append((a, b, c, d))
    return out


def _map_line(regions: Sequence[tuple[int, int, int, int]], x: int) -> int:
    """Line `x` of the old file in the new one (a line inside a changed region: where it starts)."""
    shift = 0
    for a, b, c, d in regions:
        if b == 0:  # an insertion after old line a
            if x > a:
                shift += d
                continue
            break
        if x < a:
            break
        if x < a + b:
            return c if d else c + 1
        shift += d - b
    return x + shift


# ------------------------------------------------------------------------------- scenarios


@dataclass(frozen=True)
class Scenario:
    seed: int
    root: Path
    fork: Path
    pr: int
    title: str
    merge: str
    merge_kind: str  # squash | merge | rebase
    fork_ref: str
    upstream_base: str
    cut: str  # where the fork was cut: before-pr | pr-parent | merge | after-churn-K
    hunks: tuple[PatchHunk, ...]
    ported: tuple[str, ...]  # per hunk: upstream | exact | edited | reverted | none
    # the churn commits the fork contains, oldest first, each with the PR paths (as merged) whose
    # file it changed, deleted or renamed, and where a rename moved it
    churn_in_fork: tuple[tuple[str, frozenset[str], str | None], ...]
    story: tuple[str, ...]  # what the generator did, for a reader of a failure
    fork_moves: tuple[tuple[str, str], ...] = ()  # PR paths the fork itself renamed, and where to
    change_base: str = ""  # a rebase merge's: below the PR's replayed commits ("": merge^1)
    head: str = ""  # the PR's head (in the fork checkout, as `status` fetches it)
    kind: str = ""  # issue 30's family (`build_kind_scenario`): which kind of change; "": the random family


class _Model:
    """Upstream's current files as lists of lines, plus where each PR file went (renames)."""

    def __init__(self, files: Mapping[str, list[str]]) -> None:
        self.files = {k: list(v) for k, v in files.items()}
        self.counter = 0
        self.extras: _Extras | None = None

    def fresh(self, tag: str, rng: random.Random) -> str:
        self.counter += 1
        return f"{tag}_{self.counter} = {rng.randint(0, 99999)}  # {rng.choice(WORDS)}\n"


WORDS = ("alpha", "beta", "gamma", "delta", "kappa", "sigma", "omega", "theta", "lambda", "rho")


def _initial_file(rng: random.Random, k: int) -> list[str]:
    return [f"v{k}_{j} = {rng.randint(0, 999)}  # {rng.choice(WORDS)}\n" for j in range(rng.randint(20, 60))]


def _mutate(rng: random.Random, model: _Model, lines: list[str], tag: str, edits: int) -> list[str]:
    """`edits` random edits, far enough apart to stay distinct; sometimes the first/last line."""
    out = list(lines)
    n = len(out)
    spots: set[int] = set()
    if rng.random() < 0.2 and n > 4:
        spots.add(0)
    if rng.random() < 0.2 and n > 4:
        spots.add(n - 1)
    tries = 0
    while len(spots) < edits and tries < 50:
        tries += 1
        s = rng.randrange(n)
        if all(abs(s - t) > 2 for t in spots):
            spots.add(s)
    for s in sorted(spots, reverse=True):
        op = rng.choice(("replace", "replace", "insert", "delete")) if s not in (0, n - 1) else \
            rng.choice(("delete", "delete", "replace"))
        if op == "replace":
            out[s:s + rng.randint(1, 2)] = [model.fresh(tag, rng) for _ in range(rng.randint(1, 2))]
        elif op == "insert":
            out[s:s] = [model.fresh(tag, rng) for _ in range(rng.randint(1, 3))]
        elif len(out) > 3:
            del out[s:s + rng.randint(1, 2)]
    return out


def _text(lines: Sequence[str]) -> str:
    return "".join(lines)


def _read_tree(repo: Path, rev: str) -> dict[str, list[str]]:
    names = git(repo, "ls-tree", "-r", "--name-only", rev).splitlines()
    return {n: git_bytes(repo, "cat-file", "blob", f"{rev}:{n}").decode().splitlines(keepends=True) for n in names}


def build_scenario(seed: int, root: Path) -> Scenario:
    """Build the upstream, the merged PR, the churn and the fork for `seed` under `root`."""
    reset_clock()
    rng = random.Random(seed)
    # issue 21's kinds draw from a second generator, so the draws above stay as they were; the
    # rebase merges (of the two-commit PRs a true merge would have merged) from a third
    xr = random.Random(seed * 7919 + 21)
    rr = random.Random(seed * 7919 + 25)
    story: list[str] = []
    root = Path(root)
    files = {f"src/mod_{k}.py": _initial_file(rng, k) for k in range(rng.randint(2, 4))}
    extras = _Extras(xr)
    extras.shape_files(files, story)
    up = Upstream(root / "up", initial_files={k: _text(v) for k, v in files.items()})
    model = _Model(files)
    model.extras = extras
    for i in range(rng.randint(0, 2)):
        path = rng.choice(sorted(model.files))
        model.files[path] = _mutate(rng, model, model.files[path], f"pre{i}", 1)
        up.commit({path: _text(model.files[path])}, f"upstream change {i} before the PR")
        story.append(f"pre-PR upstream commit edits {path}")
    merge, merge_kind, pr_paths = _merge_pr(rng, up, model, story, rr)
    change_base = git(up.path, "rev-parse", f"{merge}~2") if merge_kind == "rebase" else ""
    diff = git_bytes(up.path, "diff", "--no-ext-diff", "--no-textconv", "-M", change_base or f"{merge}^1", merge)
    hunks = split_diff(diff)
    churn = _churn(rng, up, model, hunks, pr_paths, story)
    s = _fork(rng, seed, root, up, merge, merge_kind, hunks, churn, story, extras, change_base)
    git(s.fork, "fetch", "-q", "upstream", f"+refs/pull/{PR_NUMBER}/head:refs/porttrack/pull/{PR_NUMBER}/head")
    return replace(s, change_base=change_base, head=up.head(PR_NUMBER))


def _merge_pr(rng: random.Random, up: Upstream, model: _Model, story: list[str],
              rr: random.Random | None = None) -> tuple[str, str, set[str]]:
    paths = sorted(model.files)
    touched = rng.sample(paths, rng.randint(1, min(3, len(paths))))
    change: dict[str, str | None] = {}
    for p in touched:
        model.files[p] = _mutate(rng, model, model.files[p], "pr", rng.randint(1, 3))
        change[p] = _text(model.files[p])
    if model.extras is not None:
        for p, text in model.extras.pr_edits(model.files, story).items():
            change[p] = text
    if rng.random() < 0.3:
        model.files["src/new_feature.py"] = [model.fresh("new", rng) for _ in range(rng.randint(8, 20))]
        change["src/new_feature.py"] = _text(model.files["src/new_feature.py"])
    spare = [p for p in paths if p not in touched]
    if spare and rng.random() < 0.15 and len(spare) > 1:
        gone = rng.choice(spare)
        del model.files[gone]
        change[gone] = None
        spare.remove(gone)
    up.open_pr(PR_NUMBER, change, title="Random change")
    kind = rng.choice(("squash", "merge"))
    story.append(f"PR #{PR_NUMBER} changes {sorted(change)}; merged by {kind}")
    if kind == "merge" and rng.random() < 0.5:
        p = rng.choice(touched)
        model.files[p] = _mutate(rng, model, model.files[p], "pr2", 1)
        up.append(PR_NUMBER, {p: _text(model.files[p])})
        story.append(f"second PR commit edits {p}")
        if rr is not None and rr.random() < 0.5:
            kind = "rebase"
            story.append("... merged by rebase instead: both PR commits replayed onto main")
    if spare and rng.random() < 0.4:
        p = rng.choice(spare)
        # main moves on an unrelated file while the PR is open: the merge's first parent is not
        # the PR's base
        main_files = _read_tree(up.path, up.tip())
        new = _mutate(rng, model, main_files[p], "side", 1)
        model.files[p] = new
        up.commit({p: _text(new)}, "unrelated main commit while the PR is open")
        story.append(f"unrelated main commit edits {p} before the merge")
    merge = {"squash": up.squash_merge, "merge": up.merge, "rebase": up.rebase_merge}[kind](PR_NUMBER)
    model.files = _read_tree(up.path, merge)
    return merge, kind, set(change)


@dataclass
class _Churn:
    sha: str
    origins: frozenset[str]  # PR file paths (as merged) whose file this commit touched
    renamed_to: str | None = None  # where a rename moved that file


def _churn(rng: random.Random, up: Upstream, model: _Model, hunks: Sequence[PatchHunk],
           pr_paths: set[str], story: list[str]) -> list[_Churn]:
    # where each PR file lives now (renames move it), keyed by its path in the merged change
    where = {p: p for p in sorted(pr_paths) if p in model.files}
    added = [line for h in hunks for line in h.lines("+")]
    out: list[_Churn] = []
    if model.extras is not None:
        out += model.extras.churn_before(up, model, hunks, where, story)
    for i in range(rng.choice((0, 1, 1, 2, 3, 4))):
        kind = rng.choice(("rewrite", "rewrite", "rewrite", "edit", "edit", "delete", "rename", "near"))
        live = {o: p for o, p in where.items() if p in model.files}
        change, origins, what = _churn_change(rng, model, kind, live, added, i)
        sha = up.commit(change, f"churn {i}: {what}")
        renamed_to = None
        if what.startswith("rename"):
            (origin,) = origins
            where[origin] = renamed_to = next(q for q, v in change.items() if v is not None)
        for path, value in change.items():
            if value is None:
                model.files.pop(path, None)
            else:
                model.files[path] = value.splitlines(keepends=True)
        out.append(_Churn(sha, frozenset(origins), renamed_to))
        story.append(f"churn {i} ({sha[:10]}): {what}")
    if model.extras is not None:
        out += model.extras.churn_after(up, model, hunks, where, story)
    return out


def _churn_change(rng: random.Random, model: _Model, kind: str, live: Mapping[str, str],
                  added: Sequence[str], i: int) -> tuple[dict[str, str | None], set[str], str]:
    by_path = {p: o for o, p in live.items()}
    if kind in ("rewrite", "near"):
        spots = [(p, n) for p in by_path for n, line in enumerate(model.files[p]) if line in added]
        if spots:
            p, n = rng.choice(spots)
            lines = list(model.files[p])
            if kind == "near":
                lines.insert(n + 1, model.fresh(f"near{i}", rng))
            elif rng.random() < 0.3 and len(lines) > 3:
                del lines[n]
            else:
                lines[n] = model.fresh(f"churn{i}", rng)
            return {p: _text(lines)}, {by_path[p]}, f"{kind} a PR line in {p}"
        kind = "edit"
    if kind == "delete" and by_path and len(model.files) > 1:
        p = rng.choice(sorted(by_path))
        return {p: None}, {by_path[p]}, f"delete {p}"
    if kind == "rename" and by_path:
        p = rng.choice(sorted(by_path))
        lines = list(model.files[p])
        if rng.random() < 0.5:
            lines = _mutate(rng, model, lines, f"ren{i}", 1)
        new = f"src/renamed_{i}.py"
        return {p: None, new: _text(lines)}, {by_path[p]}, f"rename {p} -> {new}"
    p = rng.choice(sorted(model.files))
    lines = _mutate(rng, model, model.files[p], f"edit{i}", 1)
    return {p: _text(lines)}, ({by_path[p]} if p in by_path else set()), f"edit {p}"


# ------------------------------------------------------------------- issue 21's kinds

# Lines a real file repeats: presence and revert checks must look at the hunk's own location,
# not for such a line anywhere in the file.
COMMON = ("}\n", "# ---\n", "    pass\n")
# a block longer than a hunk with its context: the PR's hunks in the two copies are the same bytes
TWIN = ("def helper():\n", "    a = 0\n", "    b = 1\n", "    c = 2\n", "    value = 1\n", "    d = 3\n",
        "    e = 4\n", "    f = 5\n", "    return value\n")
TWIN_OLD, TWIN_NEW = "    value = 1\n", "    value = 2\n"


class _Extras:
    """Issue 21's kinds, drawn from their own generator so that the older draws stay as they
    were: lines like `}` repeated; the same block twice in one file, which the PR edits in both
    places; whitespace-only hunks (trailing spaces stripped, CRLF turned into LF); a fork that
    undoes or edits lines it took by ancestry or a cherry-pick; a fork that renames a PR file;
    an upstream commit that restores a hunk's original text; an unrelated upstream commit and its
    revert between the merge and the later churn."""

    def __init__(self, xr: random.Random) -> None:
        self.xr = xr
        self.twin_path: str | None = None
        self.ws: tuple[str, str] | None = None  # (path, "trailing" | "crlf")
        self.undo = xr.random() < 0.4
        self.rename = xr.random() < 0.08
        self.restore = xr.random() < 0.12
        self.unrelated_revert = xr.random() < 0.2

    def shape_files(self, files: dict[str, list[str]], story: list[str]) -> None:
        paths = sorted(files)
        if self.xr.random() < 0.3:
            for p in paths:
                for _ in range(self.xr.randint(1, 3)):
                    files[p].insert(self.xr.randrange(1, len(files[p])), self.xr.choice(COMMON))
            story.append("files repeat lines like `}` and `# ---`")
        if self.xr.random() < 0.25:
            p = self.twin_path = self.xr.choice(paths)
            lines = files[p]
            a = self.xr.randrange(2, max(3, len(lines) // 3))
            if len(lines) - a < 12:
                a = 2
            q = self.xr.randrange(a + 12, len(lines) + 1)  # at least 21 lines apart
            lines[q:q] = list(TWIN)  # the second copy first, so `a` still means the same
            lines[a:a] = list(TWIN)
            story.append(f"{p} has the same block twice")
        if self.xr.random() < 0.25:
            p = self.xr.choice(paths)
            kind = self.xr.choice(("trailing", "crlf"))
            lines = files[p]
            start = self.xr.randrange(1, len(lines) - 3)
            for n in range(start, start + self.xr.randint(1, 3)):
                lines[n] = lines[n][:-1] + ("   \n" if kind == "trailing" else "\r\n")
            self.ws = (p, kind)
            story.append(f"{p} has lines with {'trailing spaces' if kind == 'trailing' else 'CRLF'}")

    def pr_edits(self, files: dict[str, list[str]], story: list[str]) -> dict[str, str]:
        """The PR also edits both twin blocks the same way, and/or only the whitespace."""
        change: dict[str, str] = {}
        p = self.twin_path
        if p in files and sum(line == TWIN_OLD for line in files[p]) == 2:
            files[p] = [TWIN_NEW if line == TWIN_OLD else line for line in files[p]]
            change[p] = _text(files[p])
            story.append(f"the PR edits both copies of the block in {p}")
        if self.ws and self.ws[0] in files:
            path, kind = self.ws
            marked = [n for n, line in enumerate(files[path]) if line.endswith(("   \n", "\r\n"))]
            if marked:
                for n in marked[:self.xr.randint(1, len(marked))]:
                    files[path][n] = files[path][n].rstrip(" \r\n") + "\n"
                change[path] = _text(files[path])
                story.append(f"the PR only {'strips trailing spaces' if kind == 'trailing' else 'turns CRLF into LF'} in {path}")
        return change

    def churn_before(self, up: Upstream, model: _Model, hunks: Sequence[PatchHunk], where: Mapping[str, str],
                     story: list[str]) -> list["_Churn"]:
        """An unrelated upstream commit in a PR file, then its revert (issue 21's class 9)."""
        live = sorted(o for o, p in where.items() if p in model.files)
        if not self.unrelated_revert or not live:
            return []
        origin = self.xr.choice(live)
        path = where[origin]
        lines = list(model.files[path])
        mentioned = {line for h in hunks for m in "+- " for line in h.lines(m)}
        marks = [n for n, line in enumerate(lines) if line in mentioned]
        spots = [n for n in range(len(lines)) if all(abs(n - q) > 4 for q in marks)]
        if not spots:
            return []
        n = self.xr.choice(spots)
        before = _text(lines)
        lines[n] = model.fresh("unrelated", self.xr)
        one = up.commit({path: _text(lines)}, "unrelated upstream change")
        two = up.commit({path: before}, 'Revert "unrelated upstream change"')
        story.append(f"upstream edits {path}:{n + 1} ({one[:10]}) and reverts it ({two[:10]})")
        return [_Churn(one, frozenset({origin})), _Churn(two, frozenset({origin}))]

    def churn_after(self, up: Upstream, model: _Model, hunks: Sequence[PatchHunk], where: Mapping[str, str],
                    story: list[str]) -> list["_Churn"]:
        """A later upstream commit that restores one hunk's original text."""
        if not self.restore:
            return []
        for h in self.xr.sample(list(hunks), len(hunks)):
            path = where.get(h.path)
            if path is None or path not in model.files or h.creates_file:
                continue
            lines = model.files[path]
            post, pre = _image(h, "+"), _image(h, "-")
            at = [n for n in range(len(lines) - len(post) + 1) if lines[n:n + len(post)] == post]
            if len(at) != 1 or not post:
                continue
            new = lines[:at[0]] + pre + lines[at[0] + len(post):]
            sha = up.commit({path: _text(new)}, f"restore {path} as before part of the PR")
            model.files[path] = new
            story.append(f"upstream restores {h.path}#{h.position}'s original text ({sha[:10]})")
            return [_Churn(sha, frozenset({h.path}))]
        return []

    def undo_after_port(self, fork: Path, hunks: Sequence[PatchHunk], ported: list[str], story: list[str]) -> None:
        """The fork undoes (or edits) a hunk it took, by ancestry, cherry-pick or hand port: the
        second twin first, then a whitespace hunk, else any."""
        taken = [n for n, p in enumerate(ported) if p in ("upstream", "exact")]
        if not self.undo or not taken:
            return
        twins = [n for n in taken if TWIN_NEW in hunks[n].lines("+")]
        spaces = [n for n in taken if any(line.endswith(("   \n", "\r\n")) for line in hunks[n].lines("-"))]
        n = twins[-1] if len(twins) > 1 else self.xr.choice(spaces) if spaces else self.xr.choice(taken)
        h = hunks[n]
        if n not in twins and n not in spaces and h.lines("+") and self.xr.random() < 0.5:
            target = fork / h.path
            if not target.exists():
                return
            lines = target.read_bytes().decode().splitlines(keepends=True)
            unique = [k for k, line in enumerate(lines) if line in h.lines("+") and lines.count(line) == 1]
            if not unique:
                return
            k = self.xr.choice(unique)
            lines[k] = lines[k].rstrip("\n") + "  # fork edit after taking it\n"
            target.write_bytes(_text(lines).encode())
            git(fork, "add", "-A")
            fork_commit(fork, {}, "fork: edit a line it took")
            ported[n] = "edited"
            story.append(f"fork edits an added line of {h.path}#{h.position} after taking it")
            return
        if _apply_in_fork(fork, h.patch, reverse=True):
            fork_commit(fork, {}, "fork: undo part of the PR")
            ported[n] = "reverted"
            story.append(f"fork undoes {h.path}#{h.position} after taking it")

    def fork_rename(self, fork: Path, hunks: Sequence[PatchHunk], story: list[str]) -> dict[str, str]:
        paths = sorted({h.path for h in hunks if (fork / h.path).is_file()})
        if not self.rename or not paths:
            return {}
        p = self.xr.choice(paths)
        git(fork, "mv", p, "src/fork_moved.py")
        fork_commit(fork, {}, f"fork: move {p}")
        story.append(f"fork renames {p} -> src/fork_moved.py")
        return {p: "src/fork_moved.py"}


def _image(h: PatchHunk, marker: str) -> list[str]:
    """h's post-image (`marker` "+") or pre-image ("-"): context and `marker` lines, in order."""
    return [raw[1:] for raw in h.body.decode().splitlines(keepends=True)[1:] if raw[:1] in (" ", marker)]


# ------------------------------------------------------------------------------------ fork


def _fork(rng: random.Random, seed: int, root: Path, up: Upstream, merge: str, merge_kind: str,
          hunks: Sequence[PatchHunk], churn: Sequence[_Churn], story: list[str], extras: "_Extras",
          change_base: str = "") -> Scenario:
    fork = clone_fork(up, root / "fork")
    line = git(up.path, "rev-list", "--first-parent", "--reverse", "main").splitlines()
    at_merge = line.index(merge)
    choices = [("before-pr", c) for c in line[:at_merge - 1]] + [("pr-parent", line[at_merge - 1]),
                                                                ("merge", merge)]
    choices += [(f"after-churn-{k + 1}", c.sha) for k, c in enumerate(churn)]
    # the interesting cuts lack the merge: weigh them up
    weights = [3 if not name.startswith("after") and name != "merge" else 2 for name, _ in choices]
    cut_name, cut = rng.choices(choices, weights)[0]
    git(fork, "checkout", "-q", "-b", "fork", cut)
    story.append(f"fork cut at {cut_name} ({cut[:10]})")
    has_merge = is_ancestor(fork, merge, cut)
    ported = ["upstream" if has_merge else "none"] * len(hunks)
    if has_merge:
        _maybe_revert(rng, fork, hunks, ported, story)
    else:
        _hand_port(rng, fork, merge, merge_kind, hunks, ported, story, change_base)
    extras.undo_after_port(fork, hunks, ported, story)
    picked = _maybe_pick_churn(rng, fork, churn, cut, story)
    moves = extras.fork_rename(fork, hunks, story)
    if rng.random() < 0.3:
        fork_commit(fork, {f"fork/local_{seed}.txt": "fork-only\n"}, "fork: own change")
        story.append("fork commits a file of its own")
    base = "upstream/main"
    if rng.random() < 0.3:
        git(fork, "update-ref", "refs/remotes/upstream/base", cut)
        base = "upstream/base"
    in_fork = tuple((c.sha, c.origins, c.renamed_to) for c in churn if c.sha in picked or is_ancestor(fork, c.sha, "fork"))
    return Scenario(seed, root, fork, PR_NUMBER, "Random change", merge, merge_kind, "fork", base, cut_name,
                    tuple(hunks), tuple(ported), in_fork, tuple(story), tuple(sorted(moves.items())))


def _apply_in_fork(fork: Path, patch: bytes, reverse: bool = False) -> bool:
    p = subprocess.run(["git", "-C", str(fork), "apply", "--index", *(["-R"] if reverse else []), "-"],
                       input=patch, capture_output=True, env={**os.environ, "LC_ALL": "C"})
    return p.returncode == 0


def _maybe_revert(rng: random.Random, fork: Path, hunks: Sequence[PatchHunk], ported: list[str],
                  story: list[str]) -> None:
    if not hunks or rng.random() >= 0.2:
        return
    n = rng.randrange(len(hunks))
    if _apply_in_fork(fork, hunks[n].patch, reverse=True):
        ported[n] = "reverted"
        fork_commit(fork, {}, "fork: revert part of the PR")
        story.append(f"fork reverts hunk {hunks[n].path}#{hunks[n].position}")


def _hand_port(rng: random.Random, fork: Path, merge: str, merge_kind: str, hunks: Sequence[PatchHunk],
               ported: list[str], story: list[str], change_base: str = "") -> None:
    mode = rng.choices(("none", "cherry-pick", "subset"), (0.15, 0.15, 0.7))[0]
    if mode == "none":
        story.append("fork ports nothing")
        return
    if mode == "cherry-pick":
        args = ["cherry-pick", *(["-m", "1"] if merge_kind == "merge" else []),
                f"{change_base}..{merge}" if merge_kind == "rebase" else merge]
        git(fork, *args, check=False)
        if _clean_pick(fork):
            ported[:] = ["exact"] * len(hunks)
            story.append("fork cherry-picks the whole merged change")
            return
        story.append("cherry-pick of the merge conflicted; porting hunk by hunk instead")
    for n, h in enumerate(hunks):
        if rng.random() < 0.6 and _apply_in_fork(fork, h.patch):
            ported[n] = "exact"
            if h.lines("+") and rng.random() < 0.2 and _edit_added_line(rng, fork, h):
                ported[n] = "edited"
    if rng.random() < 0.3:
        _edit_far_away(rng, fork, hunks, story)
    if any(p != "none" for p in ported) or rng.random() < 0.5:
        fork_commit(fork, {}, "fork: hand port of the PR")
    story.append("fork hand-ports " + ", ".join(f"{h.path}#{h.position}={p}" for h, p in zip(hunks, ported)))


def _clean_pick(fork: Path) -> bool:
    """True when the cherry-pick just run left a clean commit; otherwise abort it."""
    state = git(fork, "status", "--porcelain")
    if state or git(fork, "rev-parse", "-q", "--verify", "CHERRY_PICK_HEAD", check=False):
        git(fork, "cherry-pick", "--abort", check=False)
        git(fork, "reset", "-q", "--hard", check=False)
        return False
    return True


def _edit_added_line(rng: random.Random, fork: Path, h: PatchHunk) -> bool:
    target = fork / h.path
    if not target.exists():
        return False
    lines = target.read_text().splitlines(keepends=True)
    candidates = [n for n, line in enumerate(lines) if line in h.lines("+")]
    if not candidates:
        return False
    n = rng.choice(candidates)
    lines[n] = lines[n].rstrip("\n") + "  # fork tweak\n"
    target.write_text("".join(lines))
    git(fork, "add", "-A")
    return True


def _edit_far_away(rng: random.Random, fork: Path, hunks: Sequence[PatchHunk], story: list[str]) -> None:
    """Insert a fork line at least 4 lines away from any line that any hunk mentions, so it
    disturbs no hunk's context (git's default is 3 lines) nor a first/last-line anchor."""
    mentioned = {line for h in hunks for m in "+- " for line in h.lines(m)}
    paths = sorted({h.path for h in hunks if (fork / h.path).exists()})
    if not paths:
        return
    path = rng.choice(paths)
    lines = (fork / path).read_text().splitlines(keepends=True)
    marks = [n for n, line in enumerate(lines) if line in mentioned]
    spots = [p for p in range(1, len(lines)) if all(q < p - 4 or q >= p + 4 for q in marks)]
    if not spots:
        return
    p = rng.choice(spots)
    lines.insert(p, f"fork_local_line = {p}\n")
    (fork / path).write_text("".join(lines))
    git(fork, "add", "-A")
    story.append(f"fork inserts an unrelated line at {path}:{p + 1}")


def _maybe_pick_churn(rng: random.Random, fork: Path, churn: Sequence[_Churn], cut: str,
                      story: list[str]) -> set[str]:
    later = [c for c in churn if not is_ancestor(fork, c.sha, cut)]
    if not later or rng.random() >= 0.3:
        return set()
    c = rng.choice(later)
    git(fork, "cherry-pick", c.sha, check=False)
    if _clean_pick(fork):
        story.append(f"fork cherry-picks churn {c.sha[:10]}")
        return {c.sha}
    story.append(f"cherry-pick of churn {c.sha[:10]} conflicted; skipped")
    return set()


# ------------------------------------------------------------------------------ judgement


def oracle_states(s: Scenario) -> list[str]:
    """The oracle's state for each hunk of `s` (see the module docstring; issue 30's kinds: the
    section comment above `build_kind_scenario`)."""
    if s.kind:
        return _kind_oracle(s)
    index = ScratchIndex(s.fork)
    try:
        return [_oracle_one(index, s, h, p) for h, p in zip(s.hunks, s.ported)]
    finally:
        index.close()


def _oracle_one(index: ScratchIndex, s: Scenario, h: PatchHunk, ported: str) -> str:
    applies = apply_state(index, s.fork_ref, h, merge=s.merge, parent=s.change_base or None)
    moved = moved_to(s, h)
    if applies != "applied" and moved:
        # the fork took upstream's rename, or made its own: judge the hunk where the file is now,
        # so a pre-image the rename carried along is still not-applied, and an intact post-image
        # is churned (present at the new path: present or present-after-churn are both right)
        applies = apply_state(index, s.fork_ref, h.at(moved), merge=s.merge, origin=h.path, parent=s.change_base or None)
        if applies == "applied":
            return "churned"
    if applies == "not-applied" and h.creates_file and churned_by(index, s, h):
        # an added file that is absent looks like the pre-image, but here the fork contains the
        # upstream commit that deleted (or renamed) it
        return "churned" if ported in ("upstream", "exact") else "ambiguous"
    if applies in ("applied", "not-applied"):
        return applies
    if applies == "neither":
        touching = churned_by(index, s, h)
        if ported in ("upstream", "exact") and touching:
            return "churned"
        if ported == "edited" and not touching:
            return "edited"
        if ported in ("none", "reverted") and (not touching or _removed_lines_kept(s, h, moved)):
            return "not-ported"
    return "ambiguous"


def _removed_lines_kept(s: Scenario, h: PatchHunk, moved: str | None) -> bool:
    """Every line h removes is still in the fork's file and no line it adds is. Generated lines
    are unique and churn never brings a removed line back, so upstream's later state lacks them
    all: whatever later commit the fork took, it does not match upstream there."""
    removed, added = h.lines("-"), h.lines("+")
    if not removed or any(line in COMMON or line in TWIN or line in (TWIN_NEW,) for line in removed + added):
        return False  # a line the generator repeats proves nothing by being somewhere in the file
    text = git_bytes(s.fork, "cat-file", "-p", f"{s.fork_ref}:{moved or h.path}", check=False).decode()
    lines = set(text.splitlines(keepends=True))
    return all(line in lines for line in removed) and not any(line in lines for line in added)


def moved_to(s: Scenario, h: PatchHunk) -> str | None:
    """Where the churn renames the fork contains moved `h`'s file, if any did."""
    moved = h.path
    for _, origins, renamed_to in s.churn_in_fork:
        if renamed_to and h.path in origins:
            moved = renamed_to
    moved = dict(s.fork_moves).get(moved, moved)
    return None if moved == h.path else moved


def churned_by(index: ScratchIndex, s: Scenario, h: PatchHunk) -> list[str]:
    """The churn commits in the fork that changed `h`'s post-image upstream: h reverse-applies
    at C^ but not at C (a rename or deletion of its file counts). Where h was already gone at C^
    (an earlier churn), C counts too: that only widens "ambiguous", never a strict state."""
    out = []
    for sha, origins, _ in s.churn_in_fork:
        if h.path in origins and (apply_state(index, f"{sha}^", h, merge=s.merge, parent=s.change_base or None) != "applied"
                                  or apply_state(index, sha, h, merge=s.merge, parent=s.change_base or None) != "applied"):
            out.append(sha)
    return out


def oracle_verdict(states: Sequence[str]) -> str:
    ok = sum(s in ("applied", "churned") for s in states)
    if ok == len(states):
        return "converged"
    return "partially-converged" if ok else "not-converged"


@dataclass
class Check:
    """One scenario judged: the two tables' entries, violations and the visible soft cases."""
    seed: int
    cells: list[tuple[str, str]] = field(default_factory=list)  # (oracle state, porttrack state) per hunk
    verdicts: tuple[str, str] = ("", "")  # (oracle, porttrack)
    violations: list[str] = field(default_factory=list)
    conservative: int = 0
    unverifiable: int = 0


def check_scenario(s: Scenario, states: Sequence[str], verdict: str,
                   reported: Sequence[tuple[str, str]], summary: Mapping[str, int]) -> Check:
    """Judge porttrack's answer (`verdict`, `reported` = [(path, state)] in its order, `summary`)
    against the oracle `states` for scenario `s`."""
    c = Check(s.seed)
    mapped = _map_hunks(s.hunks, reported)
    if mapped is None:
        c.violations.append(f"hunk lists differ: oracle {[(h.path, h.position) for h in s.hunks]} vs porttrack "
                            f"{[p for p, _ in reported]}")
        return c
    c.violations += _own_consistency(verdict, [p for _, p in reported], summary)
    for h, o, p in zip(s.hunks, states, mapped):
        c.cells.append((o, p))
        where = f"{h.path}#{h.position}"
        if o in NOT_THERE and p in FOUND:
            c.violations.append(f"{where}: oracle {o}, porttrack {p}")
        if o in ("applied", "churned") and p not in FOUND:
            c.conservative += 1
    c.verdicts = (oracle_verdict(states), verdict)
    if verdict == "converged":
        bad = [f"{h.path}#{h.position}={o}" for h, o in zip(s.hunks, states) if o in NOT_THERE]
        if bad:
            c.violations.append(f"converged, but the oracle finds {', '.join(bad)}")
        c.unverifiable = sum(o == "ambiguous" for o in states)
    return c


def _own_consistency(verdict: str, reported: Sequence[str], summary: Mapping[str, int]) -> list[str]:
    """Check (3): the summary counts porttrack's own hunk states and adds up, and the verdict
    follows from those states as the contract defines it."""
    out = []
    parts = {k: v for k, v in summary.items() if k != "hunks"}
    by_state = Counter(reported)
    if summary.get("hunks") != len(reported) or sum(parts.values()) != len(reported) or \
            any(v != by_state[k.replace("_", "-")] for k, v in parts.items()):
        out.append(f"summary {dict(summary)} does not count the hunk states {dict(by_state)}")
    found = sum(OLD_STATE_NAMES.get(p, p) in FOUND for p in reported)
    expected = "converged" if found == len(reported) else "partially-converged" if found else "not-converged"
    undone = sum(p == "undone-upstream" for p in reported)  # issue 30: a verdict of its own when the rest counts
    if undone and found + undone == len(reported):
        expected = "undone-upstream"
    if verdict != expected:
        out.append(f"verdict {verdict} does not follow from porttrack's own hunk states {dict(by_state)}")
    return out


def _map_hunks(hunks: Sequence[PatchHunk], reported: Sequence[tuple[str, str]]) -> list[str] | None:
    """porttrack's states in the oracle's hunk order, matched by path and order within the path."""
    if Counter(h.path for h in hunks) != Counter(p for p, _ in reported):
        return None
    queues: dict[str, list[str]] = {}
    for path, state in reported:
        queues.setdefault(path, []).append(OLD_STATE_NAMES.get(state, state))
    return [queues[h.path].pop(0) for h in hunks]


# ---------------------------------------------------------------------------------- tables


def confusion_tables(checks: Sequence[Check]) -> str:
    """The hunk table (oracle state x porttrack state) and the verdict table, as text."""
    cells = Counter(cell for c in checks for cell in c.cells)
    verdicts = Counter(c.verdicts for c in checks if c.verdicts != ("", ""))
    seen = {p for _, p in cells}
    cols = [*PORTTRACK_STATES, *sorted(seen - set(PORTTRACK_STATES))]
    out = [_table("hunks: oracle \\ porttrack", ORACLE_STATES, cols, cells)]
    names = ("converged", "partially-converged", "not-converged")
    out.append(_table("verdicts: oracle \\ porttrack", names, (*names, "undone-upstream"), verdicts))
    out.append(f"violations: {sum(len(c.violations) for c in checks)} in "
               f"{sum(bool(c.violations) for c in checks)} of {len(checks)} scenarios; "
               f"conservative hunks (oracle applied/churned, porttrack missing/unknown): "
               f"{sum(c.conservative for c in checks)}; ambiguous hunks under a converged verdict "
               f"(unverifiable): {sum(c.unverifiable for c in checks)}")
    return "\n".join(out)


def _table(title: str, rows: Sequence[str], cols: Sequence[str], counts: Counter) -> str:
    width = max(len(r) for r in rows) + 2
    head = title.ljust(width) + "".join(c.rjust(max(len(c), 5) + 2) for c in cols) + "    total"
    lines = [head]
    for r in rows:
        vals = [counts.get((r, c), 0) for c in cols]
        lines.append(r.ljust(width) + "".join(str(v).rjust(max(len(c), 5) + 2) for v, c in zip(vals, cols))
                     + str(sum(vals)).rjust(9))
    return "\n".join(lines)


# ------------------------------------------------------------- issue 30: every kind of change
#
# A family of its own (`build_kind_scenario`), so the random scenarios above keep their seeds.
# Kind k = KIND_NAMES[seed % 7], each with its own variants drawn from random.Random(seed):
#
#   rename          the PR moves src/body.py to src/sub/body.py (half the time with an edit); the
#                   fork renames it the same way, or copies it and keeps the old file, or nothing
#   symlink         the PR adds a symlink src/link.py -> t.py, or turns a regular file holding
#                   "t.py" into that symlink, or a symlink into such a file; the fork takes the
#                   entry, or has a regular file with the target's name, or nothing
#   empty-file      the PR adds an empty src/pkg/__init__.py; the fork adds it empty, or with a
#                   line, or empty but executable, or nothing
#   added-then-moved  the PR adds src/new.py and upstream later moves it to src/moved/new.py
#                   (sometimes with an edit); the fork cherry-picks the merge and the move, or
#                   only the merge, or nothing (or is cut after the move)
#   submodule       the PR bumps the gitlink vendor/lib (sometimes upstream bumps it again
#                   later); the fork has the PR's commit, a third one, or the old one
#   final-newline   the PR adds (or removes) the newline at the end of src/e.py, sometimes with an
#                   edit at its top; the fork takes it or not, sometimes with its own first line
#   identical-file  the PR edits 2-3 of 15 identical blocks of src/r.py (both images occur near
#                   each hunk); the fork takes the whole file, one hunk, or nothing
#
# Cuts: the merge's first parent (then the fork acts as above), the merge, or upstream's tip.
#
# Oracle, per hunk (its own reading of `git ls-tree` and `git apply`, plus the generator's
# record): the fork's entry (mode, object id) where the hunk's file is (followed through the
# upstream move the fork contains) against the merge's and the entry before the change:
#   the merge's entry (a rename's meta hunk: and the old path gone)     -> applied (churned where moved)
#   the entry before the change, nothing at the new path, or a rename's
#     meta hunk with the old path still there                           -> not-applied
#   an entry an upstream commit the fork contains made after the merge  -> churned
#   a regular text file on both sides                                   -> `apply_state` (git apply)
#   else: the record says never ported (or ported wrong)                -> not-ported; else ambiguous

KIND_NAMES = ("rename", "symlink", "empty-file", "added-then-moved", "submodule", "final-newline", "identical-file")


def _numbered(tag: str, n: int, rng: random.Random) -> str:
    return "".join(f"{tag}_{i} = {rng.randint(0, 999)}  # {rng.choice(WORDS)}\n" for i in range(n))


def _blocks(n: int, changed: Mapping[int, str]) -> str:
    return "".join(f"def f():\n    {changed.get(i, 'pass')}\n\n" for i in range(n))


def _fake_sha(word: str) -> str:
    """A commit id for a gitlink: a submodule's commit need not exist in the superproject."""
    return hashlib.sha1(word.encode()).hexdigest()


def build_kind_scenario(seed: int, root: Path) -> Scenario:
    """Build issue 30's scenario for `seed` (see the section comment above)."""
    reset_clock()
    rng = random.Random(seed * 7919 + 30)
    kind = KIND_NAMES[seed % len(KIND_NAMES)]
    root = Path(root)
    story: list[str] = [f"kind {kind}"]
    base: dict = {"src/t.py": _numbered("t", 12, rng), "src/other.py": _numbered("o", 25, rng)}
    pr: dict = {}
    later: list[tuple[dict, str, str | None, frozenset[str]]] = []  # (files, message, renamed_to, origins)
    wrong: dict = {}  # what a fork that takes the change wrongly writes
    if kind == "rename":
        body = _numbered("b", 30, rng)
        base["src/body.py"] = body
        new = body.replace("b_7 = ", "b_7 = 1") if rng.random() < 0.5 else body
        pr = {"src/body.py": None, "src/sub/body.py": new}
        wrong = {"src/sub/body.py": new}  # a copy: the old file stays
        story.append("the PR renames src/body.py to src/sub/body.py" + (" with an edit" if new != body else ""))
    elif kind == "symlink":
        variant = rng.choice(("add", "to-link", "to-file"))
        if variant == "add":
            pr, wrong = {"src/link.py": Symlink("t.py")}, {"src/link.py": "t.py"}
        elif variant == "to-link":
            base["src/link.py"] = "t.py"
            pr, wrong = {"src/link.py": Symlink("t.py")}, {"src/link.py": "t.py\n"}
        else:
            base["src/link.py"] = Symlink("t.py")
            pr, wrong = {"src/link.py": "t.py"}, {"src/link.py": Symlink("other.py")}
        story.append(f"the PR's symlink change: {variant}")
    elif kind == "empty-file":
        pr = {"src/pkg/__init__.py": ""}
        wrong = rng.choice(({"src/pkg/__init__.py": "x = 1\n"}, {"src/pkg/__init__.py": Executable("")}))
        story.append("the PR adds an empty src/pkg/__init__.py")
    elif kind == "added-then-moved":
        new = _numbered("n", 20, rng)
        pr = {"src/new.py": new}
        moved = new.replace("n_3 = ", "n_3 = 3") if rng.random() < 0.5 else new
        later.append(({"src/new.py": None, "src/moved/new.py": moved}, "move new.py", "src/moved/new.py", frozenset({"src/new.py"})))
        wrong = {"src/new.py": new.replace("n_5 = ", "n_5 = 5")}
        story.append("the PR adds src/new.py; upstream then moves it" + (" with an edit" if moved != new else ""))
    elif kind == "submodule":
        base["vendor/lib"] = Gitlink(_fake_sha(f"old {seed}"))
        pr = {"vendor/lib": Gitlink(_fake_sha(f"new {seed}"))}
        wrong = {"vendor/lib": Gitlink(_fake_sha(f"third {seed}"))}
        if rng.random() < 0.4:
            later.append(({"vendor/lib": Gitlink(_fake_sha(f"later {seed}"))}, "bump lib again", None, frozenset({"vendor/lib"})))
        story.append("the PR bumps the submodule vendor/lib" + (" and upstream bumps it again later" if later else ""))
    elif kind == "final-newline":
        text = _numbered("e", 25, rng)
        adds = rng.random() < 0.6
        before, after = (text[:-1], text) if adds else (text, text[:-1])
        if rng.random() < 0.4:
            after = "e_top = 1\n" + after
        base["src/e.py"], pr = before, {"src/e.py": after}
        wrong = {"src/e.py": "fork_top = 1\n" + before}
        story.append(f"the PR {'adds' if adds else 'removes'} the final newline of src/e.py" + (" and edits its top" if after.startswith("e_top") else ""))
    else:  # identical-file
        picked_blocks = rng.sample(range(1, 14), rng.randint(2, 3))
        base["src/r.py"] = _blocks(15, {})
        pr = {"src/r.py": _blocks(15, {i: f"return {i}" for i in picked_blocks})}
        wrong = {"src/r.py": _blocks(15, {picked_blocks[0]: f"return {picked_blocks[0]}"})}  # one hunk of them
        story.append(f"the PR edits blocks {sorted(picked_blocks)} of 15 identical ones in src/r.py")
    up = Upstream(root / "up", initial_files=base)
    up.open_pr(PR_NUMBER, pr, title="Kind change")
    merge_kind = rng.choice(("squash", "merge"))
    merge = up.squash_merge(PR_NUMBER) if merge_kind == "squash" else up.merge(PR_NUMBER)
    story.append(f"merged by {merge_kind}")
    churn: list[_Churn] = []
    for files, message, renamed, origins in later:
        churn.append(_Churn(up.commit(files, message), origins, renamed))
    diff = git_bytes(up.path, "diff", "--no-ext-diff", "--no-textconv", "-M", f"{merge}^1", merge)
    hunks = split_diff(diff)
    fork = clone_fork(up, root / "fork")
    cut_name = rng.choices(("pr-parent", "merge", "after-churn"), (0.7, 0.15, 0.15))[0]
    cut = {"pr-parent": f"{merge}^1", "merge": merge, "after-churn": up.tip()}[cut_name]
    git(fork, "checkout", "-q", "-b", "fork", cut)
    story.append(f"fork cut at {cut_name}")
    picked: set[str] = set()
    action = "upstream"
    if cut_name == "pr-parent":
        action = rng.choice(("exact", "exact", "wrong", "none"))
        if action == "exact":
            git(fork, "cherry-pick", *(["-m", "1"] if merge_kind == "merge" else []), merge)
            if kind == "added-then-moved" and churn and rng.random() < 0.6:
                git(fork, "cherry-pick", churn[0].sha)
                picked.add(churn[0].sha)
                story.append("fork cherry-picks the merge and upstream's move")
            else:
                story.append("fork cherry-picks the merge")
        elif action == "wrong":
            fork_commit(fork, wrong, "fork: its own take of the change")
            story.append(f"fork takes it its own way: {sorted(wrong)}")
        else:
            story.append("fork takes nothing")
        ported = {"exact": "exact", "wrong": "none", "none": "none"}[action]
    else:
        ported = "upstream"
    if rng.random() < 0.3:
        fork_commit(fork, {f"fork/local_{seed}.txt": "fork-only\n"}, "fork: own change")
        story.append("fork commits a file of its own")
    per_hunk = [ported] * len(hunks)
    if kind == "identical-file" and cut_name == "pr-parent" and action == "wrong":  # it took one of the hunks
        taken = f"return {picked_blocks[0]}"
        per_hunk = ["exact" if [x.strip() for x in h.lines("+")] == [taken] else "none" for h in hunks]
    base_ref = "upstream/main"
    if rng.random() < 0.3:
        git(fork, "update-ref", "refs/remotes/upstream/base", cut)
        base_ref = "upstream/base"
    in_fork = tuple((c.sha, c.origins, c.renamed_to) for c in churn if c.sha in picked or is_ancestor(fork, c.sha, "fork"))
    git(fork, "fetch", "-q", "upstream", f"+refs/pull/{PR_NUMBER}/head:refs/porttrack/pull/{PR_NUMBER}/head")
    return Scenario(seed, root, fork, PR_NUMBER, "Kind change", merge, merge_kind, "fork", base_ref, cut_name,
                    tuple(hunks), tuple(per_hunk), in_fork, tuple(story), head=up.head(PR_NUMBER), kind=kind)


def _entries(repo: Path, rev: str, paths: Sequence[str]) -> dict[str, tuple[str, str]]:
    """path -> (mode, object id) at `rev`, as `git ls-tree` lists them."""
    out = {}
    for line in git_bytes(repo, "ls-tree", "-z", "--full-tree", rev, "--", *paths).split(b"\0"):
        if line:
            meta, _, name = line.partition(b"\t")
            mode, _, oid = meta.decode().split(" ")
            out[name.decode()] = (mode, oid)
    return out


def _old_path(h: PatchHunk) -> str:
    m = re.search(rb"\n(?:rename|copy) from ([^\n]+)", h.header)
    return m.group(1).decode() if m else h.path


def _kind_oracle(s: Scenario) -> list[str]:
    index = ScratchIndex(s.fork)
    try:
        return [_kind_oracle_one(index, s, h, p) for h, p in zip(s.hunks, s.ported)]
    finally:
        index.close()


def _kind_oracle_one(index: ScratchIndex, s: Scenario, h: PatchHunk, ported: str) -> str:
    old = _old_path(h)
    moved = moved_to(s, h)
    path = moved or h.path
    renamed = b"\nrename from " in h.header
    deleted = b"\ndeleted file mode " in h.header
    fork = _entries(s.fork, s.fork_ref, sorted({h.path, old, path}))
    after = _entries(s.fork, s.merge, [h.path]).get(h.path)
    before = _entries(s.fork, f"{s.merge}^1", [old]).get(old)
    at = fork.get(path)
    if deleted:
        if h.path not in fork:
            return "applied"
        if fork.get(h.path) == before:
            return "not-applied"
        if after is not None and fork.get(h.path) == after:  # a type change: the new entry is there
            return "applied"
        return "not-ported" if ported in ("none", "reverted") else "ambiguous"
    left = renamed and old in fork and (h.position == 0)
    if at is not None and at == after and not left:
        return "churned" if moved else "applied"
    if left or (at is None and before is not None and fork.get(old) == before and old != h.path):
        return "not-applied"
    if at is not None and before is not None and old == h.path and at == before:
        return "not-applied"
    for sha, origins, _ in s.churn_in_fork:  # an entry upstream made after the merge, which the fork has
        if h.path in origins and at is not None and _entries(s.fork, sha, [path]).get(path) == at:
            return "churned"
    if at is None and before is None and ported in ("none",):
        return "not-applied"  # an added file never taken
    regular = at is not None and after is not None and at[0].startswith("100") and after[0].startswith("100") \
        and (before is None or before[0].startswith("100")) and h.position > 0
    if regular and not moved:
        state = apply_state(index, s.fork_ref, h, merge=s.merge)
        if state in ("applied", "not-applied"):
            return state
    return "not-ported" if ported == "none" else "ambiguous"
