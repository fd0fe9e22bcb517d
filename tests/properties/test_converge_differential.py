"""Issue 11's differential test, fast subset: `porttrack.converge.decide` against an independent
oracle on 24 seeded random scenarios and the pinned ones below (issue 21 added kinds: the same
block twice, whitespace-only hunks, a fork undoing or editing what it took, repeated `}` lines,
renames by the fork, upstream restoring original text, an unrelated revert before churn). Real
repositories; `testing/convergence_scenarios.py` defines the scenarios, the oracle and the checks. The full run, 200+ scenarios with the
confusion tables, is `proofs/converge_differential.py`.

Written to fail until converge.py proves presence (issue 11): on main before that work it finds
false "converged" verdicts, unported hunks called churn, and first/last-line deletions reported
present. Do not weaken it to pass; a failing seed reproduces with
`python proofs/converge_differential.py --seed S --scenarios 1 --verbose --keep /tmp/s`.
"""

from __future__ import annotations

from collections import Counter

from porttrack.converge.verify import MergedPR, decide, summary
from porttrack.git.repo import GitRepo
from testing.convergence_scenarios import (
    PatchHunk,
    Scenario,
    ScratchIndex,
    apply_state,
    build_scenario,
    check_scenario,
    confusion_tables,
    oracle_states,
    split_diff,
)
from testing.gitfixtures import Upstream, git_bytes

# 30 random seeds, plus seeds that once found a defect (they name a scenario only as long as the
# generator in testing/convergence_scenarios.py draws the same way: re-check them if it changes)
REGRESSION_SEEDS = (
    1461,  # fork reverts a hunk, then cherry-picks later churn of its context only: not converged
    # issue 21 (found on main at 9ae2063 by the extended generator):
    8,  # the same block twice, the fork undoes the second copy after taking it: was "present"
    17,  # the same, with a CRLF -> LF hunk, cut after churn: was "converged"
    26,  # the fork edits a line it took by hand port (patch-id): was "present", "converged"
    67,  # a trailing-spaces-only hunk taken then undone: was "present", "converged"
    69,  # the fork edits a line it took by ancestry, upstream churned the file: was "present-after-churn"
    # found while fixing issue 21:
    180,  # upstream renames the file, then restores a hunk's original text there: not churn
    297,  # upstream restores a hunk's original text, the fork then moves the file: not churn
)
FAST_SEEDS = (*range(1000, 1024), *REGRESSION_SEEDS)
# issue 21's kinds, as the generator's story names them: the subset must meet each
KINDS = {
    "twin": "has the same block twice",
    "whitespace": "the PR only",
    "fork undo or edit after taking": "after taking it",
    "common lines": "repeat lines like",
    "upstream restores": "original text",
    "unrelated revert": "and reverts it",
}


def ask_porttrack(s: Scenario) -> tuple[str, list[tuple[str, str]], dict[str, int]]:
    v = decide(GitRepo.open(s.fork), MergedPR(s.pr, s.title, s.merge, None, "recorded", head_sha=s.head or None),
               fork_ref=s.fork_ref, upstream_base=s.upstream_base)
    return v.verdict, [(h.path, h.state) for h in v.hunks], summary(v.hunks)


# ------------------------------------------------------------------- the oracle on its own


def _lines(n: int, tag: str = "l") -> str:
    return "".join(f"{tag}{i} = {i}\n" for i in range(n))


def test_split_diff_gives_one_applicable_patch_per_hunk(tmp_path):
    up = Upstream(tmp_path / "up", initial_files={"a.py": _lines(30), "b.py": _lines(10, "b"), "gone.py": "x\n"})
    a = _lines(30).replace("l2 = 2\n", "l2 = 20\n").replace("l25 = 25\n", "")
    after = up.commit({"a.py": a, "new.py": "n = 1\n", "gone.py": None}, "change")
    hunks = split_diff(git_bytes(up.path, "diff", "-M", f"{after}^", after))
    assert [(h.path, h.position) for h in hunks] == [("a.py", 1), ("a.py", 2), ("gone.py", 1), ("new.py", 1)]
    assert hunks[0].lines("-") == ["l2 = 2\n"] and hunks[0].lines("+") == ["l2 = 20\n"]
    assert hunks[1].lines("-") == ["l25 = 25\n"] and hunks[1].lines("+") == []
    assert [h.creates_file for h in hunks] == [False, False, False, True]
    index = ScratchIndex(up.path)
    try:
        assert [apply_state(index, after, h) for h in hunks] == ["applied"] * 4
        assert [apply_state(index, f"{after}^", h) for h in hunks] == ["not-applied"] * 4
    finally:
        index.close()


def test_oracle_anchors_a_first_line_deletion_at_the_start_of_the_file(tmp_path):
    """The defect issue 11 names: a PR deleting a file's first line is not present in a fork that
    still has that line, even though the hunk's context lines are all there."""
    up = Upstream(tmp_path / "up", initial_files={"a.py": _lines(20)})
    pr = up.commit({"a.py": _lines(20).replace("l0 = 0\n", "")}, "delete the first line")
    (hunk,) = split_diff(git_bytes(up.path, "diff", f"{pr}^", pr))
    other = up.commit({"a.py": "header = 1\n" + _lines(20).replace("l0 = 0\n", "")}, "a new first line")
    index = ScratchIndex(up.path)
    try:
        assert apply_state(index, pr, hunk) == "applied"
        assert apply_state(index, f"{pr}^", hunk) == "not-applied"
        # its context (l1..l3) is there, but not at the start of the file
        assert apply_state(index, other, hunk) == "neither"
        moved = hunk.at("b.py")
        assert isinstance(moved, PatchHunk) and b"a/b.py" in moved.header and b"a/a.py" not in moved.header
    finally:
        index.close()


def test_oracle_judges_a_hunk_at_its_own_location_not_at_a_copy_elsewhere(tmp_path):
    """Issue 21: a PR edits two identical blocks; a later commit undoes the second. `git apply`
    alone would find the second hunk's post-image at the first block (it searches the whole
    file); pinned to where the history maps it, the second hunk is not applied there."""
    block = "def helper():\n    a = 0\n    b = 1\n    c = 2\n    value = {}\n    d = 3\n    e = 4\n    f = 5\n"
    def twin(first: str, second: str) -> str:
        return _lines(6, "x") + block.format(first) + _lines(20, "y") + block.format(second) + _lines(6, "z")
    up = Upstream(tmp_path / "up", initial_files={"t.py": twin("1", "1")})
    merge = up.commit({"t.py": twin("2", "2")}, "the PR")
    undone = up.commit({"t.py": twin("2", "1")}, "undo the second copy")
    hunks = split_diff(git_bytes(up.path, "diff", f"{merge}^", merge))
    assert len(hunks) == 2 and hunks[0].body.splitlines()[1:] == hunks[1].body.splitlines()[1:]
    index = ScratchIndex(up.path)
    try:
        assert [apply_state(index, undone, h) for h in hunks] == ["both", "both"]  # unpinned: fooled
        assert [apply_state(index, undone, h, merge=merge) for h in hunks] == ["applied", "not-applied"]
    finally:
        index.close()


def test_a_seed_builds_the_same_scenario_twice(tmp_path):
    one, two = build_scenario(1234, tmp_path / "one"), build_scenario(1234, tmp_path / "two")
    assert (one.merge, one.story, one.ported, [h.patch for h in one.hunks]) == \
        (two.merge, two.story, two.ported, [h.patch for h in two.hunks])
    assert oracle_states(one) == oracle_states(two)


# -------------------------------------------------------------------- porttrack vs oracle


def test_differential_fast_subset(tmp_path):
    checks, cuts, kinds, met = [], Counter(), Counter(), Counter()
    for seed in FAST_SEEDS:
        s = build_scenario(seed, tmp_path / f"s{seed}")
        cuts[s.cut.split("-")[0]] += 1
        kinds[s.merge_kind] += 1
        met.update(k for k, words in KINDS.items() if any(words in line for line in s.story))
        checks.append(check_scenario(s, oracle_states(s), *ask_porttrack(s)))
    table = confusion_tables(checks)
    oracle = Counter(o for c in checks for o, _ in c.cells)
    # the subset must exercise what the test is for, or passing would prove nothing
    assert all(oracle[k] for k in ("applied", "not-applied", "churned")), table
    assert all(cuts[k] for k in ("before", "pr", "merge", "after")), cuts
    assert kinds["squash"] and kinds["merge"], kinds
    assert set(met) == set(KINDS), met
    failures = [f"seed {c.seed}: {v}" for c in checks for v in c.violations]
    assert not failures, "\n".join([*failures, "", table])


# ------------------------------------------------ issue 30's kinds: the family and its oracle

# seeds of `build_kind_scenario` whose verdict main (c8c0733) got wrong (KIND_NAMES[seed % 7]):
# rename copies and symlinks replaced by regular files called converged or present, submodule
# bumps, end-of-file newlines, byte-identical files and added files the fork moved not decided
KIND_REGRESSION_SEEDS = (1001, 1008, 1014, 1015, 1016, 1023, 1029, 1037, 1041, 1046, 1051, 1065, 1068, 1075, 1104, 1129)
KIND_FAST_SEEDS = (*range(0, 21), 24, 53, *KIND_REGRESSION_SEEDS)  # 24, 53: cut after upstream churn


def test_split_diff_lists_a_meta_hunk_where_porttrack_does(tmp_path):
    """A rename, an empty added file, a mode change: the oracle's hunk list must be porttrack's
    (same paths, same count), meta pseudo-hunk first."""
    from testing.gitfixtures import Executable
    body = _lines(20)
    up = Upstream(tmp_path / "up", initial_files={"a.py": body, "x.sh": "echo\n"})
    after = up.commit({"a.py": None, "sub/a.py": body.replace("l3 = 3\n", "l3 = 30\n"), "empty.py": "",
                       "x.sh": Executable("echo\n")}, "kinds")
    hunks = split_diff(git_bytes(up.path, "diff", "-M", f"{after}^", after))
    assert [(h.path, h.position) for h in hunks] == [("empty.py", 0), ("sub/a.py", 0), ("sub/a.py", 1), ("x.sh", 0)]


def test_differential_kinds_subset(tmp_path):
    from testing.convergence_scenarios import KIND_NAMES, build_kind_scenario
    checks, kinds, cuts = [], Counter(), Counter()
    regressed = []
    for seed in KIND_FAST_SEEDS:
        s = build_kind_scenario(seed, tmp_path / f"k{seed}")
        kinds[s.kind] += 1
        cuts[s.cut] += 1
        c = check_scenario(s, oracle_states(s), *ask_porttrack(s))
        checks.append(c)
        if seed in KIND_REGRESSION_SEEDS and c.verdicts[0] != c.verdicts[1]:
            regressed.append(f"kinds seed {seed} ({s.kind}): oracle {c.verdicts[0]}, porttrack {c.verdicts[1]}")
    table = confusion_tables(checks)
    oracle = Counter(o for c in checks for o, _ in c.cells)
    assert set(kinds) == set(KIND_NAMES), kinds
    assert all(oracle[k] for k in ("applied", "not-applied", "churned", "not-ported")), table
    assert all(cuts[k] for k in ("pr-parent", "merge", "after-churn")), cuts
    failures = [f"kinds seed {c.seed}: {v}" for c in checks for v in c.violations]
    assert not failures, "\n".join([*failures, "", table])
    assert not regressed, "\n".join([*regressed, "", table])
