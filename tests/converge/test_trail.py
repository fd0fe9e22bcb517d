"""Following a hunk's lines through upstream's later history (porttrack.converge.trail), against
content worked out by hand and against real git: seeded random histories where the trail's newest
form must be exactly the lines git's own files hold there."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

from porttrack.converge import trail
from porttrack.diff import hunks as hunks_mod
from porttrack.git.repo import GitRepo


def _git(repo: Path, *args: str, input: bytes | None = None) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], input=input, capture_output=True, check=True).stdout.decode()


def _commit(repo: Path, text: str, message: str) -> str:
    (repo / "f.py").write_text(text)
    _git(repo, "add", "f.py")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD").strip()


def _history(tmp_path: Path, versions: list[str]) -> tuple[GitRepo, list[str]]:
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    shas = [_commit(repo, text, f"v{i}") for i, text in enumerate(versions)]
    return GitRepo.open(repo), shas


def _undone(repo: GitRepo, h, t, tip: str) -> bool:
    return trail.undone(h, t, lambda: repo.read_objects([f"{tip}:f.py"])[f"{tip}:f.py"][1])


def _trails(repo: GitRepo, shas: list[str]) -> tuple[list, dict]:
    """The trails of the change v0 -> v1, followed to the tip."""
    files = hunks_mod.parse_diff(repo.diff(shas[0], shas[1]))
    pairs = [(fd.path, trail.start(fd, h)) for fd in files for h in fd.hunks]
    trail.follow(pairs, trail.walk(repo, shas[1], shas[-1], ["f.py"]))
    return [h for fd in files for h in fd.hunks], {id(h): t for h, (_, t) in zip([h for fd in files for h in fd.hunks], pairs)}


def lines(n: int, **changed: str) -> str:
    out = [f"line_{i} = {i}" for i in range(n)]
    for k, v in changed.items():
        out[int(k[1:])] = v
    return "\n".join(out) + "\n"


def test_a_later_revert_is_undone_and_a_later_rewrite_is_not(tmp_path):
    base = lines(30)
    pr = lines(30, l10="line_10 = 'pr'")
    repo, shas = _history(tmp_path, [base, pr, lines(30, l10="line_10 = 'pr'", l2="line_2 = 'neighbour, far'"), base])
    [h], t = _trails(repo, shas)
    assert trail.undone(h, t[id(h)]) and t[id(h)].touched[-1].sha == shas[3]  # the revert, not the neighbour's edit

    repo2, shas2 = _history(tmp_path / "b", [base, pr, lines(30, l10="line_10 = 'rewritten'")])
    [h2], t2 = _trails(repo2, shas2)
    assert not trail.undone(h2, t2[id(h2)]) and t2[id(h2)].form == [b"line_10 = 'rewritten'"]


def test_context_that_comes_back_is_not_evidence(tmp_path):
    """An addition whose neighbours change: its own lines are untouched, so it is not undone."""
    base = lines(20)
    pr = base.replace("line_9 = 9\n", "line_9 = 9\nadded = 'pr'\n")
    later = pr.replace("line_8 = 8\n", "line_8 = 'changed'\n").replace("line_10 = 10\n", "line_10 = 'changed'\n")
    repo, shas = _history(tmp_path, [base, pr, later])
    [h], t = _trails(repo, shas)
    assert t[id(h)].touched == [] and t[id(h)].form == [b"added = 'pr'"]


def test_removing_a_larger_block_is_rewriting_and_removing_just_the_lines_is_undoing(tmp_path):
    base = lines(40)
    pr = base.replace("line_20 = 20\n", "line_20 = 20\nadded = 'pr'\n")
    block_gone = "".join(x for x in pr.splitlines(keepends=True) if not any(f"line_{i} =" in x for i in range(15, 26)) and "added" not in x)
    repo, shas = _history(tmp_path, [base, pr, block_gone + "new_code = 1\n"])
    [h], t = _trails(repo, shas)
    assert not trail.undone(h, t[id(h)])
    repo2, shas2 = _history(tmp_path / "b", [base, pr, base])
    [h2], t2 = _trails(repo2, shas2)
    assert trail.undone(h2, t2[id(h2)])


def test_a_reordering_hunk_is_undone_only_when_the_old_order_is_back(tmp_path):
    base = lines(20)
    swapped = base.replace("line_5 = 5\nline_6 = 6\n", "line_6 = 6\nline_5 = 5\n")
    more = swapped.replace("line_5 = 5\n", "line_5 = 5\nline_5b = 'new'\n")
    repo, shas = _history(tmp_path, [base, swapped, more])
    hunks, t = _trails(repo, shas)
    assert not any(_undone(repo, h, t[id(h)], shas[-1]) for h in hunks)
    repo2, shas2 = _history(tmp_path / "b", [base, swapped, base])
    hunks2, t2 = _trails(repo2, shas2)
    assert all(_undone(repo2, h, t2[id(h)], shas2[-1]) for h in hunks2)


def test_code_moved_within_the_file_is_followed(tmp_path):
    body = [f"line_{i} = {i}" for i in range(40)]
    pr = body[:10] + ["def helper():", "    return 'pr'"] + body[10:]
    moved = body[:10] + body[10:35] + ["def helper():", "    return 'pr'"] + body[35:]
    repo, shas = _history(tmp_path, ["\n".join(body) + "\n", "\n".join(pr) + "\n", "\n".join(moved) + "\n"])
    [h], t = _trails(repo, shas)
    assert t[id(h)].form == [b"def helper():", b"    return 'pr'"] and not trail.undone(h, t[id(h)])


def test_seeded_random_histories_the_untouched_lines_are_where_git_has_them(tmp_path):
    """Oracle: for 60 seeded random histories of edits (insertions, deletions, rewrites) that never
    touch the PR's line, the trail says untouched and points at the very line in git's file."""
    for seed in range(60):
        rnd = random.Random(seed)
        text = [f"v = {i}" for i in range(30)]
        pr = list(text)
        at = rnd.randrange(5, 25)
        pr.insert(at, "marker = 'pr'")
        versions = ["\n".join(text) + "\n", "\n".join(pr) + "\n"]
        cur = list(pr)
        for k in range(rnd.randrange(1, 6)):
            i = rnd.randrange(len(cur))
            if cur[i] == "marker = 'pr'" or (i + 1 < len(cur) and cur[i + 1] == "marker = 'pr'"):
                continue
            op = rnd.choice(["ins", "del", "edit"])
            if op == "ins":
                cur.insert(i, f"ins_{seed}_{k} = 1")
            elif op == "del" and cur[i] != "marker = 'pr'":
                del cur[i]
            else:
                cur[i] = f"edit_{seed}_{k} = 2"
            versions.append("\n".join(cur) + "\n")
        repo, shas = _history(tmp_path / f"s{seed}", versions)
        [h], t = _trails(repo, shas)
        tr = t[id(h)]
        final = _git(tmp_path / f"s{seed}" / "r", "show", "HEAD:f.py").splitlines()
        [line_no] = [n for n, kind, _ in tr.items if kind == trail.LINE]
        assert final[line_no - 1] == "marker = 'pr'", (seed, line_no)
        assert not trail.undone(h, tr)


def test_a_removed_blank_line_reverted_and_removed_again_by_a_re_land_is_not_undone(tmp_path):
    """vLLM #50092 (df2735ea2e): one hunk only removes a blank line; upstream's revert puts it back
    and the re-land removes it again. At upstream's tip the hunk's post-image is there: not undone
    (it was called 'undone upstream by the revert', so upstream main itself was 'undone-upstream').
    At the revert, it is undone."""
    text = lines(20)
    without = "\n".join(line for i, line in enumerate(text.split("\n")[:-1]) if i != 9) + "\n"
    gap = text.replace("line_9 = 9\n", "\n")  # the PR removes this blank line
    repo, shas = _history(tmp_path, [gap, without, gap, without])
    [h], t = _trails(repo, shas)
    assert not h.added_lines() and [c.sha for c in t[id(h)].touched] == shas[2:]
    assert not _undone(repo, h, t[id(h)], shas[3])

    repo2, shas2 = _history(tmp_path / "b", [gap, without, gap])
    [h2], t2 = _trails(repo2, shas2)
    assert _undone(repo2, h2, t2[id(h2)], shas2[2]) and t2[id(h2)].touched[-1].sha == shas2[2]


def _block(body: list[str], at: int, inner: list[str]) -> list[str]:
    return body[:at] + inner + body[at:]


def test_a_revert_that_moves_the_prs_lines_back_de_indented_is_undone_not_a_move(tmp_path):
    """Real case: #48641's vllm/v1/worker/gpu/sample/sampler.py. The PR moves four lines from a
    function's body into an `if` block (indented deeper); upstream's revert moves them back, at the
    old indentation. Stripped, the restored pre-image reads as the PR's lines "moved": it is not."""
    four = ["a = states.max_num(idx)", "b = state.max_ids(", "    idx", ")"]
    gap = [""] + [f"    w_{i} = {i}" for i in range(8)] + [""]
    base = (["def f(idx):", "    x = 1"] + [f"    {line}" for line in four] + ["    ok = a or b"] + gap + ["    if ok:", "        y = 2"]
            + [f"        z_{i} = {i}" for i in range(12)])
    pr = (["def f(idx):", "    x = 1", "    ok = has(idx)"] + gap + ["    if ok:", "        y = 2"] + [f"        {line}" for line in four]
          + [f"        z_{i} = {i}" for i in range(12)])
    repo, shas = _history(tmp_path, ["\n".join(base) + "\n", "\n".join(pr) + "\n", "\n".join(base) + "\n"])
    hunks, t = _trails(repo, shas)
    inner = [h for h in hunks if any(line.startswith(b"        a = ") for line in h.added_lines())]
    assert len(inner) == 1
    h = inner[0]
    assert trail.undone(h, t[id(h)]), t[id(h)].form
    assert t[id(h)].touched[-1].sha == shas[2] and t[id(h)].lost == []
    assert all(trail.undone(x, t[id(x)]) for x in hunks)  # every hunk: the revert undid them all


def test_the_pre_image_restored_then_re_indented_upstream_is_undone_by_the_revert(tmp_path):
    """Real case: #48641's topk_topp_triton.py. The PR rewrites two lines; upstream reverts it, then
    a later commit wraps the restored lines in a `with` block (re-indented). Upstream's newest form
    is the pre-image, re-indented: undone, by the revert (not present after the later churn)."""
    base = lines(30, l10="    t1 = logits.new_tensor(A)", l11="    t2 = logits.new_tensor(B)")
    pr = lines(30, l10="    t1 = torch.tensor(\n        A, dtype=f32\n    )", l11="    t2 = torch.tensor(\n        B, dtype=f32\n    )")
    wrapped = lines(30, l10="    with allowed():\n        t1 = logits.new_tensor(A)", l11="        t2 = logits.new_tensor(B)")
    repo, shas = _history(tmp_path, [base, pr, base, wrapped])
    [h], t = _trails(repo, shas)
    assert t[id(h)].touched[-1].sha == shas[3]
    assert trail.undone(h, t[id(h)]) and trail.undone_index(h, t[id(h)]) == 0  # the revert (touch 0)

    repo2, shas2 = _history(tmp_path / "b", [base, pr, lines(30, l10="    with allowed():\n        t1 = torch.tensor(\n            A, dtype=f32\n        )",
                                                                   l11="        t2 = logits.new_tensor(B)")])
    [h2], t2 = _trails(repo2, shas2)
    assert not trail.undone(h2, t2[id(h2)])  # one of the PR's lines is left (re-indented): not undone


def test_a_pr_that_only_re_indents_is_not_undone_by_a_later_edit(tmp_path):
    """A hunk that only changes indentation has no line of its own once stripped: only the exact
    pre-image says undone; a later edit of the re-indented lines is churn."""
    base = lines(20, l5="x = 1", l6="y = 2")
    pr = lines(20, l5="if True:\n    x = 1", l6="    y = 2")
    repo, shas = _history(tmp_path, [base, pr, lines(20, l5="if True:\n    x = 1", l6="    y = 3")])
    [h], t = _trails(repo, shas)
    assert not trail.undone(h, t[id(h)])


def test_a_revert_in_place_is_undone_though_the_same_commit_adds_like_lines_elsewhere(tmp_path):
    """Real case: #43108's cutlass_moe.py. The PR replaces `expert_map,` by a comment and `None,`;
    a later commit puts `expert_map,` back where it stood and, in another file, adds a `None,`.
    Stripped and half-matched, that read as the PR's lines moved out of the file: it is a revert."""
    from porttrack.converge.decide import MergedPR, decide

    repo_dir = tmp_path / "r"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo_dir)], check=True)
    call = ["def run(x):", "    return kernel(", "        x,", "        topk_ids,", "        expert_map,", "        scale,", "    )"]
    body = lambda lines: "\n".join([f"line_{i} = {i}" for i in range(20)] + lines + [f"tail_{i} = {i}" for i in range(20)]) + "\n"
    tests = "\n".join(f"def test_{i}():\n    assert {i}" for i in range(10)) + "\n"

    def commit(a: str, b: str, message: str) -> str:
        (repo_dir / "a.py").write_text(a)
        (repo_dir / "b.py").write_text(b)
        _git(repo_dir, "add", "a.py", "b.py")
        _git(repo_dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)
        return _git(repo_dir, "rev-parse", "HEAD").strip()

    commit(body(call), tests, "base")
    pr = call[:4] + ["        # our own expert map.", "        None,"] + call[5:]
    merge = commit(body(pr), tests, "Use our own expert map (#1)")
    commit(body(call), tests + "def test_more():\n    f(\n        None,\n    )\n", "Fix the tests (#2)")
    repo = GitRepo.open(repo_dir)
    v = decide(repo, MergedPR(1, "x", merge, None, "recorded"), fork_ref="refs/heads/main", upstream_base="refs/heads/main")
    assert [h.state for h in v.hunks] == ["undone-upstream"], [h.detail for h in v.hunks]


def test_the_restored_pre_image_moved_later_stays_undone(tmp_path):
    """Real case: #49659's kernel_warmup.py. Upstream restores the PR's pre-image (undone), then a
    later commit moves those restored lines elsewhere in the file. Following the pre-image's move
    is right (it is still the pre-image): only the change's own lines replaced by its pre-image are
    "restored, not moved"."""
    body = [f"line_{i} = {i}" for i in range(40)]
    block = ["if cap(90):", "    warm()"]
    base = body[:10] + block + body[10:]
    pr = body[:10] + ["if cap(90) and moe:", "    warm()"] + body[10:]
    moved = body[:30] + block + body[30:]
    repo, shas = _history(tmp_path, ["\n".join(v) + "\n" for v in (base, pr, base, moved)])
    [h], t = _trails(repo, shas)
    assert t[id(h)].form == [b"if cap(90):"], t[id(h)].form
    assert trail.undone(h, t[id(h)]) and trail.undone_index(h, t[id(h)]) == 0  # the revert undid it


def test_a_hunk_that_removed_only_a_bracket_is_not_undone_by_a_rewrite_with_a_bracket(tmp_path):
    """Real case: #45074's mla_attention.py. The PR turns `)` into `).pin_memory()`; upstream later
    rewrites the expression (pinning another way), and its new lines hold a `)` again. A lone `)`
    back is no revert: present after churn. A true revert (only the `)` left) is undone."""
    base = lines(30, l10="    starts = (", l11="        arange(n)", l12="    )")
    pr = lines(30, l10="    starts = (", l11="        arange(n)", l12="    ).pin_memory()")
    rewrite = lines(30, l10="    starts = empty(n, pin_memory=True).copy_(", l11="        arange(n).mul_(k)", l12="    )")
    repo, shas = _history(tmp_path, [base, pr, rewrite])
    [h], t = _trails(repo, shas)
    assert t[id(h)].touched and not trail.undone(h, t[id(h)])
    repo2, shas2 = _history(tmp_path / "b", [base, pr, base])
    [h2], t2 = _trails(repo2, shas2)
    assert trail.undone(h2, t2[id(h2)])
