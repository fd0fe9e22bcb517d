"""`porttrack import` of a 60-hunk PR: how many git processes it starts (issue 25: at most 10), and
the one real `git apply` of every candidate group that replaced the per-probe checks
(`porttrack.take.separability.apply_all`) against git answering the old way, over seeded random
diffs and forks; and whole import plans made both ways over random PRs and forks (not one verdict,
note or mail byte may change; PORTTRACK_IMPORT_SCENARIOS=N for more than 30).

Counted by the wrapper `git` of testing/gitcount.py put first on PATH (the real CLI as a
subprocess, real repositories, the emulator on loopback), as tests/git/test_repo_processes.py counts."""

from __future__ import annotations

import json
import random
from collections import Counter

from porttrack.git.repo import GitRepo
from porttrack.queue.series import moved_hunks
from porttrack.take.checks import check_taken
from porttrack.take.separability import TAKEN, apply_all
from testing.gitcount import GitCounter, describe
from testing.gitfixtures import git, git_bytes
from testing.workspace import make_workspace, track

IMPORT_GOAL = 10
FILES, HUNKS_PER_FILE, SPACING = 6, 10, 12


def _module(n: int) -> str:
    # one line per k, so the PR's edits (`_sixty_hunks`, by line) land on whole statements: the
    # patched modules compile (a PR that broke them would now be refused by the source check)
    return "".join(f"def f{n}_{k}(x): return x + {k}\n" if k % SPACING == 0 else f"VALUE_{n}_{k} = {k}\n"
                   for k in range(HUNKS_PER_FILE * SPACING))


def _sixty_hunks(text: str, n: int) -> str:
    """One edit every SPACING lines: ten hunks per file, none within three lines of another."""
    lines = text.splitlines(keepends=True)
    for k in range(HUNKS_PER_FILE):
        at = k * SPACING + SPACING // 2
        lines[at] = f"VALUE_{n}_{at} = helper_{n}({at})  # changed\n" if k else f"def helper_{n}(v):\n    return v * 2\n"
    return "".join(lines)


def test_import_of_a_sixty_hunk_pr_starts_at_most_ten_git_processes(tmp_path, world):
    base = {f"pkg/m{n}.py": _module(n) for n in range(FILES)}
    world.upstream.commit(base, "project files")
    git(world.fork, "pull", "-q", "--ff-only", "upstream", "main")
    (world.fork / "FORK.md").write_text("the fork's own work\n")  # the fork a commit ahead, as forks are
    git(world.fork, "add", "FORK.md")
    git(world.fork, "commit", "-q", "-m", "the fork's own commit")
    world.open_pr(601, {path: _sixty_hunks(text, n) for n, (path, text) in enumerate(sorted(base.items()))}, "sixty hunks")
    ws = make_workspace(tmp_path / "ws", {"t": track([601])}, api_url=world.fake.base_url, fork=world.fork, token=world.token)
    assert (polled := ws.run("status")).returncode == 0, polled.stderr
    planned = ws.run("import", "601", "--dry-run", "--json")  # uncounted: what the counted run must also say
    assert planned.returncode == 0, planned.stderr

    counter = GitCounter(tmp_path / "gitcount")
    env = ws.env()
    env.update(counter.env(env))
    proc = ws.run("import", "601", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    summary = counter.summary()
    out, dry = json.loads(proc.stdout), json.loads(planned.stdout)
    assert len(out["hunks"]) == FILES * HUNKS_PER_FILE and out["taken"] == FILES * HUNKS_PER_FILE
    assert {h["applies"] for h in out["hunks"]} == {"clean"}
    assert len(out["source_check"]["checked"]) == FILES and out["source_check"]["ok"], "the taken files were checked"
    for key in ("hunks", "source_check", "regenerated", "notes", "patch"):
        assert out[key] == dry[key], key
    mail = next((ws.root / "patches").glob("*.patch")).read_bytes()
    stat = git_bytes(world.fork, "apply", "--stat", "-", input=mail)
    assert stat.decode() in mail.decode(), "the mail's diffstat is git's"
    print(f"import of a {FILES * HUNKS_PER_FILE}-hunk PR: {describe(summary)}")
    assert summary["processes"] <= IMPORT_GOAL, (
        f"{describe(summary)}; goal <= {IMPORT_GOAL}:\n" + "\n".join(" ".join(c.argv) for c in counter.calls()))


# -- apply_all against git answering the old way ----------------------------------------------------

def _random_text(rng: random.Random, lines: int) -> str:
    return "".join(f"line {rng.randrange(10**6)} {'x' * rng.randrange(0, 30)}\n" for _ in range(lines))


def _edit(rng: random.Random, text: str, edits: int) -> str:
    lines = text.splitlines(keepends=True)
    for _ in range(edits):
        if not lines:
            break
        at = rng.randrange(len(lines))
        how = rng.choice(("change", "insert", "delete"))
        if how == "change":
            lines[at] = f"changed {rng.randrange(10**6)}\n"
        elif how == "insert":
            lines[at:at] = [f"inserted {rng.randrange(10**6)}\n" for _ in range(rng.randrange(1, 4))]
        else:
            del lines[at:at + rng.randrange(1, 3)]
    return "".join(lines)


def _commit(repo, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def _scenario(rng: random.Random, root) -> tuple[GitRepo, str, bytes]:
    """A base; upstream's change of it (edits, new, deleted, renamed and binary files, mode changes,
    long paths); the fork's tip from the same base with its own changes: lines inserted above
    (offsets), the same lines changed (conflicts), part of upstream's change already made, files
    deleted. Returns the repository, the fork tip and upstream's diff."""
    git(root.parent, "init", "-q", "--initial-branch=main", str(root))
    names = [f"d{n % 3}/" + ("long_" * rng.randrange(0, 30)) + f"f{n}.py" for n in range(rng.randrange(3, 8))]
    files = {name: _random_text(rng, rng.randrange(5, 80)) for name in names}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "blob.bin").write_bytes(bytes(rng.randrange(256) for _ in range(300)))
    (root / "run.sh").write_text("#!/bin/sh\necho run\n")
    base = _commit(root, "base")
    upstream = {}
    for name in names:
        what = rng.choices(("edit", "delete", "rename", "keep"), (6, 1, 1, 1))[0]
        if what == "edit":
            upstream[name] = _edit(rng, files[name], rng.randrange(1, 6))
            (root / name).write_text(upstream[name])
        elif what == "delete":
            (root / name).unlink()
        elif what == "rename":
            (root / name).rename(root / (name + ".moved.py"))
            if rng.random() < 0.5:
                (root / (name + ".moved.py")).write_text(_edit(rng, files[name], 1))
    if rng.random() < 0.5:
        (root / "new" / ("n" * rng.randrange(1, 90))).parent.mkdir(exist_ok=True)
        (root / "new" / ("n" * rng.randrange(1, 90) + ".py")).write_text(_random_text(rng, rng.randrange(1, 30)))
    if rng.random() < 0.4:
        (root / "blob.bin").write_bytes(bytes(rng.randrange(256) for _ in range(rng.randrange(10, 400))))
    if rng.random() < 0.4:
        (root / "run.sh").chmod(0o755)
    head = _commit(root, "upstream")
    diff = git_bytes(root, "diff", "--binary", "--full-index", "-M", base, head)
    git(root, "checkout", "-q", "-B", "fork", base)
    clean = rng.random() < 0.6  # most of these forks take upstream's change: at offsets, or as it is
    for name in names:
        what = rng.choices(("offset", "conflict", "present", "delete", "keep"), (3, 1, 1, 0.3, 3))[0]
        if clean and not (what == "offset" and name in upstream):
            what = "keep"
        if what == "offset":
            (root / name).write_text(_random_text(rng, rng.randrange(1, 5)) + files[name])
        elif what == "conflict":
            (root / name).write_text(_edit(rng, files[name], 2))
        elif what == "present" and name in upstream:
            (root / name).write_text(upstream[name])
        elif what == "delete":
            (root / name).unlink()
    tip = _commit(root, "fork")
    return GitRepo.open(root), tip, diff


def test_one_real_apply_says_what_check_check_v_the_copy_and_stat_said(tmp_path):
    """For each random scenario, `apply_all` (one `git apply --cached -v --stat --apply` into a copy
    of the fork tip's index) against git asked the old way: `apply --check` (goes in or not),
    `apply --check -v` (a hunk moved), a real apply into another copy (the tree check_taken read),
    `apply --stat` alone (the mail's diffstat), and check_taken the old way (copy, apply, two reads
    of the scratch indexes). A failed apply must leave its copy exactly as the index was."""
    rng = random.Random(2525)
    table: Counter[str] = Counter()
    for n in range(150):
        repo, tip, diff = _scenario(rng, tmp_path / f"s{n}")
        with repo.scratch_index("import") as probe:
            probe.read_tree(tip)
            first = apply_all(probe, diff)
            checked = probe.apply(diff, "--check", "-v")
            assert first.ok == (checked.returncode == 0), n
            table[f"applies: old {checked.returncode == 0}, new {first.ok}"] += 1
            if not first.ok:
                same = repo.run("ls-files", "-s", env=probe.env(TAKEN)).stdout == repo.run("ls-files", "-s", env=probe.env()).stdout
                assert same, f"scenario {n}: a failed apply changed its index"
                table["failed apply left the index as it was"] += same
                continue
            old_moved = moved_hunks(checked.stderr.decode("utf-8", "replace"))
            assert first.moved == old_moved, n
            table[f"moved: old {old_moved}, new {first.moved}"] += 1
            assert first.stat == repo.run("apply", "--stat", "-", input=diff).stdout.decode("utf-8", "replace"), n
            table["stat byte-identical"] += 1
            for kind, mark in (("rename", b"\nrename from "), ("binary", b"\nGIT binary patch\n"), ("mode", b"\nnew mode "),
                               ("new file", b"\nnew file mode "), ("long path", b"long_" * 12)):
                table[f"stat byte-identical with a {kind}"] += mark in diff
            probe.copy("index", "old")
            assert probe.apply(diff, index="old").returncode == 0
            trees = [repo.run("write-tree", env=probe.env(name)).stdout for name in (TAKEN, "old")]
            assert trees[0] == trees[1], n
            table["same tree"] += 1
            assert check_taken(probe, diff, applied=TAKEN, tip=tip) == check_taken(probe, diff), n
            table["same source check"] += 1
    print("apply_all vs the old checks:", dict(sorted(table.items())))
    assert table["applies: old True, new True"] >= 50 and table["applies: old False, new False"] >= 30
    assert table["moved: old True, new True"] >= 20 and table["moved: old False, new False"] >= 10
    assert min(table[f"stat byte-identical with a {kind}"] for kind in ("rename", "binary", "mode", "new file", "long path")) >= 5


# -- whole plans: the one real apply against the old checks ------------------------------------------

def _plan_scenario(rng: random.Random, world, number: int, root):
    """Upstream Python modules; a PR of random edits (changes, inserts, deletes, a new helper and
    its uses); the fork's own commit: lines added above (offsets), the same lines changed
    (conflicts or 3-way), upstream's change already made (present). Returns the workspace."""
    names = [f"pkg/m{n}.py" for n in range(rng.randrange(2, 6))] + ["docs/notes.txt"]
    base = {name: "".join(f"v{n}_{k} = {rng.randrange(1000)}\n" if k % 7 else f"def v{n}_f{k}(x):\n    return x\n"
                          for k in range(rng.randrange(20, 90))) for n, name in enumerate(names)}
    world.upstream.commit(base, "files")
    git(world.fork, "pull", "-q", "--ff-only", "upstream", "main")
    pr = {name: _edit(rng, text, rng.randrange(1, 8)).replace("changed", "helper_up() and changed", 1)
          for name, text in base.items() if rng.random() < 0.8}
    if rng.random() < 0.3:
        pr["pkg/new.py"] = "def helper_up():\n    return 1\n"
    world.open_pr(number, pr or {"pkg/new.py": "X = 1\n"}, f"random {number}")
    for name in names:
        r, path = rng.random(), world.fork / name
        if r < 0.25:
            path.write_text("# the fork's\n" * rng.randrange(1, 4) + path.read_text())
        elif r < 0.4:
            path.write_text(_edit(rng, path.read_text(), 2))
        elif r < 0.5 and name in pr:
            path.write_text(pr[name])
    _commit(world.fork, "the fork's own")
    options = {"fork_options": {"build_base": "upstream/main"}} if rng.random() < 0.4 else {}
    return make_workspace(root, {"t": track([number])}, api_url=world.fake.base_url, fork=world.fork, token=world.token, **options)


def test_plans_with_one_real_apply_equal_plans_made_with_the_old_checks(tmp_path, fake, monkeypatch):
    """Random imports planned twice on the same fork: as `import` plans them, and with the one real
    apply made to fail without running (so every check runs as before it: `apply --check` of all
    groups, per-group probes, `--check -v` together, a copy applied for the source check, `apply
    --stat` for the mail). Every field of the plan — verdicts, where each hunk goes, notes, the
    regenerated diff, the source check, the mail byte for byte — must be the same."""
    from dataclasses import replace

    from porttrack.take import importer
    from porttrack.take.separability import AllAtOnce
    from porttrack.tracks.file import load_config
    from porttrack.workspace.files import Workspace
    from testing.world import World

    old_way = lambda probe, patch: AllAtOnce(patch, False, "", False)  # noqa: E731
    rng = random.Random(2526)
    table: Counter[str] = Counter()
    for n in range(int(__import__("os").environ.get("PORTTRACK_IMPORT_SCENARIOS", "30"))):
        world = World(tmp_path / f"s{n}", fake)
        ws = _plan_scenario(rng, world, 700 + n, tmp_path / f"s{n}" / "ws")
        assert (status := ws.run_in_process("status")).returncode == 0, status.stderr
        config, workspace, repo = load_config(ws.root / "tracks.yaml"), Workspace(ws.root), GitRepo.open(world.fork)
        plans = []
        for apply_all_now in (importer.apply_all, old_way):
            # a context of its own: `monkeypatch.undo()` would also undo the autouse git isolation
            # (HOME, git config, identities), and the next scenario would commit as the machine's user
            with monkeypatch.context() as patched:
                patched.setattr(importer, "apply_all", apply_all_now)
                plans.append(replace(importer.plan_import(workspace, config, 700 + n, repo=repo), timings={}))
        assert plans[0] == plans[1], f"scenario {n}"
        kinds = "+".join(sorted({h.applies for h in plans[0].hunks}))
        table[f"same plan; {kinds}{'; regenerated' if plans[0].regenerated else ''}"] += 1
    print("plans, one real apply vs the old checks:", dict(sorted(table.items())))
    seen = "".join(table)
    assert all(kind in seen for kind in ("clean", "3-way", "present", "conflict", "regenerated")), table


# -- the batched group probes against the one-by-one probes ------------------------------------------

def test_batched_group_probes_give_the_verdicts_of_the_one_by_one_probes(tmp_path):
    """`probe_groups` (one `--check --reject` of every group, one `--reverse` pass, 3-way in rounds)
    against `probe_one_by_one` (each suspect group alone: plain, reverse, 3-way), over seeded random
    diffs and forks: every group's verdict and the files it names must be the same."""
    from porttrack.diff.hunks import parse_diff
    from porttrack.diff.relations import dependency_groups
    from porttrack.take.separability import patch_of, probe_groups, probe_one_by_one

    rng = random.Random(3434)
    table: Counter[str] = Counter()
    for n in range(int(__import__("os").environ.get("PORTTRACK_PROBE_SCENARIOS", "150"))):
        repo, tip, diff = _scenario(rng, tmp_path / f"p{n}")
        files = parse_diff(diff)
        groups = dependency_groups(files)
        rng.shuffle(groups)  # groups across files, as names tie them (`pycheck.cross_module_uses`)
        while len(groups) > 2 and rng.random() < 0.5:
            groups = [groups[0] | groups[1], *groups[2:]]
            rng.shuffle(groups)
        candidates = list(range(len(groups)))
        owner = {h.id: fd.path for fd in files for h in fd.hunks}
        with repo.scratch_index("import") as probe:
            probe.read_tree(tip)
            first = apply_all(probe, patch_of(files, set().union(*groups)))
            new = probe_groups(probe, files, groups, candidates, first)
            old = probe_one_by_one(probe, files, groups, candidates, first)
        assert new == old, (n, {k: (old[k], new[k]) for k in old if old[k] != new[k]})
        table.update(how for how, _where in new.values())
        table["groups over several files"] += sum(1 for g in groups if len({owner[h] for h in g}) > 1)
        table["scenarios with several suspect groups in one file"] += any(
            sum(1 for g in groups if any(h.id in g for h in fd.hunks) and new[groups.index(g)][0] != "clean") > 1 for fd in files)
    print("group verdicts, batched = one by one:", dict(sorted(table.items())))
    assert min(table[k] for k in ("clean", "3-way", "present", "conflict")) >= 10, table


def test_plans_made_from_the_probe_equal_plans_made_with_the_trial_build(tmp_path, fake, monkeypatch):
    """The probe's patched index stands in for the trial build (`importer.REUSE_PROBE`: the diff
    from the fork tip to it is the regenerated mail) and the patched files are read from the index
    file itself (`checks.read_index`). Random imports planned both ways on the same fork: every
    field of the plan, the mail byte for byte, must be the same."""
    from dataclasses import replace

    from porttrack.take import checks, importer
    from porttrack.tracks.file import load_config
    from porttrack.workspace.files import Workspace
    from testing.world import World

    rng = random.Random(2527)
    table: Counter[str] = Counter()
    for n in range(int(__import__("os").environ.get("PORTTRACK_IMPORT_SCENARIOS", "30"))):
        world = World(tmp_path / f"s{n}", fake)
        ws = _plan_scenario(rng, world, 800 + n, tmp_path / f"s{n}" / "ws")
        assert (status := ws.run_in_process("status")).returncode == 0, status.stderr
        config, workspace, repo = load_config(ws.root / "tracks.yaml"), Workspace(ws.root), GitRepo.open(world.fork)
        plans = []
        for reuse in (True, False):
            with monkeypatch.context() as patched:
                patched.setattr(importer, "REUSE_PROBE", reuse)
                if not reuse:
                    patched.setattr(checks, "read_index", lambda probe, paths, index: probe.read(paths, index))
                plans.append(replace(importer.plan_import(workspace, config, 800 + n, repo=repo), timings={}))
        assert plans[0] == plans[1], f"scenario {n}"
        how = plans[0].regenerated.how if plans[0].regenerated else "as upstream's"
        table[f"same plan; mail {how}{'; build base upstream/main' if config.fork.build_base else ''}"] += 1
    print("plans, probe's index vs trial build:", dict(sorted(table.items())))
    assert table["same plan; mail offset"] >= 1 and table["same plan; mail 3-way"] >= 1, table  # the shortcut was taken
