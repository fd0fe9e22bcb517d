"""Seeded rebase-merge scenarios for the differential test (issue 30, items 3 and 8), in the shape
of `testing.convergence_scenarios.Scenario`, so its oracle (`oracle_states`, `check_scenario`)
judges them unchanged. Nothing here imports porttrack.

`github_rebase_merge` merges a PR as GitHub's "Rebase and merge" does: `git rebase --force-rebase`
of the PR's head onto the base branch's tip -- each PR commit replayed with its author and message
(new SHAs even where a fast-forward would do), the PR's
"Merge branch 'main'" commits left out, a commit whose change upstream already has dropped. The
merge commit is the last copy.

Kinds (one integer seed decides everything):

- ``merges-from-main``: the PR's 2-4 commits, with upstream's main merged into the PR branch
  between them and as its head (the recorded head is such a merge, as #48630's was);
- ``dropped``: one PR commit's change lands on main by itself before the merge (a cherry-pick),
  so the rebase drops that commit -- sometimes the PR's last, sometimes one in the middle;
- ``stacked``: PR #N-1 (1-2 commits) is rebase-merged, then PR #N, branched from #N-1's head,
  is rebase-merged as GitHub leaves it: its recorded head is still the stacked branch (with #N-1's
  original commits below its own) and its recorded base #N-1's head (`Scenario.base`).

Every PR commit edits files of its own (`src/cK_J.py`), so each hunk of the merged change
(`change_base..merge`, the generator knows `change_base`) comes from exactly one copy. The fork is
cut at the commit below the copies (or before the PR, or at upstream's tip) and takes none, some or
all of the copies by `git cherry-pick` (ported "exact" for those hunks, "none" for the others); at
upstream's tip every hunk is "upstream".
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from testing.convergence_scenarios import PR_NUMBER, Scenario, split_diff
from testing.gitfixtures import Upstream, _dated_env, clone_fork, git, git_bytes, reset_clock

KINDS = ("merges-from-main", "dropped", "stacked")


@dataclass(frozen=True)
class RebaseScenario(Scenario):
    base: str = ""  # the PR's recorded base branch tip (a stacked PR's other PR head), "" for main
    kind: str = ""


def github_rebase_merge(up: Upstream, number: int, onto: str = "main") -> str:
    """GitHub's "Rebase and merge" of PR `number` onto `onto` (see the module docstring); returns
    the last copy, GitHub's `merge_commit_sha`."""
    pr = up.pr(number)
    git(up.work, "checkout", "-q", "-B", f"rebase-{number}", pr.head)
    git(up.work, "rebase", "-q", "--force-rebase", up.tip(onto), env=_dated_env())  # GitHub always rewrites
    sha = git(up.work, "rev-parse", "HEAD")
    up._publish(onto, sha)
    pr.state, pr.merge_commit = "merged", sha
    return sha


def merge_main_into(up: Upstream, number: int) -> str:
    """A "Merge branch 'main' into pr/N" commit on the PR branch, as a PR author makes it."""
    pr = up.pr(number)
    up._checkout(pr.branch)
    git(up.work, "merge", "-q", "--no-ff", "--no-edit", "-m", f"Merge branch 'main' into {pr.branch}", up.tip("main"),
        env=_dated_env())
    sha = up._publish(pr.branch, git(up.work, "rev-parse", "HEAD"), pull=number)
    pr.heads.append(sha)
    return sha


def _lines(rng: random.Random, tag: str, n: int) -> list[str]:
    return [f"{tag}_{j} = {rng.randint(0, 99999)}\n" for j in range(n)]


def _edit(rng: random.Random, lines: list[str], tag: str) -> list[str]:
    """1-3 replacements or insertions, far apart (each its own hunk)."""
    out = list(lines)
    spots = sorted(rng.sample(range(2, len(out) - 2, 8), rng.randint(1, 3)), reverse=True)
    for k, s in enumerate(spots):
        new = [f"{tag}_e{k}_{j} = {rng.randint(0, 99999)}\n" for j in range(rng.randint(1, 2))]
        out[s:s + (1 if rng.random() < 0.6 else 0)] = new
    return out


def build_rebase_scenario(seed: int, root: Path) -> RebaseScenario:
    reset_clock()
    rng = random.Random(seed * 104729 + 30)
    kind = KINDS[seed % len(KINDS)]
    root = Path(root)
    story = [f"kind {kind}"]
    n_commits = rng.randint(2, 4)
    files = {f"src/c{k}_{j}.py": _lines(rng, f"c{k}_{j}", 30) for k in range(-2, n_commits) for j in range(rng.randint(1, 2) if k >= 0 else 1)}
    files["src/other.py"] = _lines(rng, "other", 30)
    up = Upstream(root / "up", initial_files={p: "".join(v) for p, v in files.items()})
    model = {p: list(v) for p, v in files.items()}

    def change(k: int, tag: str) -> dict[str, str]:
        out = {}
        for p in sorted(model):
            if p.startswith(f"src/c{k}_"):
                model[p] = _edit(rng, model[p], f"{tag}{k}")
                out[p] = "".join(model[p])
        return out

    def unrelated(i: int) -> None:
        model["src/other.py"] = _edit(rng, model["src/other.py"], f"main{i}")
        up.commit({"src/other.py": "".join(model["src/other.py"])}, f"unrelated main commit {i}")
        story.append(f"unrelated main commit {i}")

    base = ""
    if kind == "stacked":
        below = PR_NUMBER - 1
        up.open_pr(below, change(-2, "base"), "The PR below", message="Base PR commit 1")
        if rng.random() < 0.5:
            up.append(below, change(-1, "base"), "Base PR commit 2")
        base = up.head(below)
        up.open_pr(PR_NUMBER, change(0, "pr"), "Stacked change", message="Stacked commit 0", start=base)
        for k in range(1, n_commits):
            up.append(PR_NUMBER, change(k, "pr"), f"Stacked commit {k}")
        story.append(f"PR #{below} ({len(up.pr(below).heads)} commit(s)), PR #{PR_NUMBER} stacked on it ({n_commits} commits)")
        if rng.random() < 0.5:
            unrelated(0)
        github_rebase_merge(up, below)
        story.append(f"#{below} rebase-merged")
        if rng.random() < 0.5:
            unrelated(1)
    else:
        up.open_pr(PR_NUMBER, change(0, "pr"), "Random change", message="PR commit 0")
        dropped = rng.randrange(1, n_commits) if kind == "dropped" else None
        for k in range(1, n_commits):
            if kind == "merges-from-main" and rng.random() < 0.5:
                unrelated(k)
                merge_main_into(up, PR_NUMBER)
                story.append("main merged into the PR branch")
            patch = change(k, "pr")
            up.append(PR_NUMBER, patch, f"PR commit {k}")
            if k == dropped:
                up.commit(patch, f"Land PR commit {k}'s change on its own")
                story.append(f"PR commit {k} ({'the last' if k == n_commits - 1 else 'in the middle'}) landed on main first: dropped")
        if kind == "merges-from-main":
            unrelated(9)
            merge_main_into(up, PR_NUMBER)
            story.append("the PR head is a merge of main")
        elif rng.random() < 0.5:
            unrelated(9)
    head = up.head(PR_NUMBER)
    start = up.tip("main")
    merge = github_rebase_merge(up, PR_NUMBER)
    copies = git(up.path, "rev-list", "--reverse", f"{start}..{merge}").split()
    story.append(f"#{PR_NUMBER} rebase-merged: {len(copies)} cop(ies)")
    if rng.random() < 0.4:
        unrelated(10)
    hunks = split_diff(git_bytes(up.path, "diff", "--no-ext-diff", "--no-textconv", "-M", start, merge))
    fork = clone_fork(up, root / "fork")
    git(fork, "fetch", "-q", "upstream", f"+refs/pull/{PR_NUMBER}/head:refs/porttrack/pull/{PR_NUMBER}/head",
        *([f"+refs/pull/{PR_NUMBER - 1}/head:refs/porttrack/pull/{PR_NUMBER - 1}/head"] if base else []))
    cut_name = rng.choice(("below-copies", "below-copies", "below-copies", "upstream-tip"))
    cut = start if cut_name == "below-copies" else up.tip("main")
    git(fork, "checkout", "-q", "-b", "fork", cut)
    if cut_name == "upstream-tip":
        ported = ["upstream"] * len(hunks)
    else:
        picked = [c for c in copies if rng.random() < 0.5] if rng.random() < 0.8 else list(copies)
        for c in picked:
            git(fork, "cherry-pick", c, env=_dated_env())
        picked_paths = {p for c in picked for p in git(fork, "diff-tree", "--no-commit-id", "--name-only", "-r", c).split()}
        ported = ["exact" if h.path in picked_paths else "none" for h in hunks]
        story.append(f"fork at the commit below the copies, cherry-picks {len(picked)} of {len(copies)}")
    return RebaseScenario(seed, root, fork, PR_NUMBER, "Rebase-merged change", merge, "rebase", "fork", "upstream/main", cut_name,
                          tuple(hunks), tuple(ported), (), tuple(story), (), change_base=start, head=head, base=base, kind=kind)
