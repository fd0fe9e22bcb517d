"""Name dependencies across the project's modules (issue 30, item 14), proven against Python itself.

Each seeded scenario is a small package `pkg` (modules importing each other) and a PR that
defines names in one module and imports them in another, renames a function and its importers,
adds a module and imports it, and edits values; upstream may have moved on between the fork's
base and the PR's (a name the PR's import expects that the fork lacks, as `Mapping` in vLLM
#46849); the fork changed some of the same lines (so some hunks are not separable) or added a
module of the same name. `porttrack import` runs; the oracle is the interpreter: the queue is
applied with `git am` on a clone of the fork and every module of `pkg` is imported in a fresh
`python`. A module that imported on the fork and does not with the queue, or an import that exits
0 with a failing source check, is a failure; a refusal (exit 1, nothing written) is allowed.
PORTTRACK_MODULE_SCENARIOS=N for more than 24.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter

from testing.gitfixtures import git
from testing.workspace import make_workspace, track
from testing.world import World

MODULES = ("a", "b", "c", "d")
SLOTS, SPACING = 8, 8


def _pad(m: str) -> list[str]:
    lines = [f'"""module {m}."""', "import os"]
    for s in range(SLOTS):
        lines += [f"PAD_{m}_{s}_{j} = {j}" for j in range(SPACING)]
    return lines


def _site(slot: int) -> int:
    return 2 + slot * SPACING + SPACING // 2


def _text(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def _scenario(rng: random.Random):
    """base, later (upstream between the fork's base and the PR's), pr, fork: {path: text}."""
    base = {m: _pad(m) for m in MODULES}
    free = {m: list(range(SLOTS)) for m in MODULES}
    rng.shuffle(free["a"]), rng.shuffle(free["b"]), rng.shuffle(free["c"]), rng.shuffle(free["d"])

    def take(m: str) -> int | None:
        return free[m].pop() if free[m] else None

    later = {m: list(lines) for m, lines in base.items()}
    pr_edits: list[tuple[str, int, str]] = []  # (module, slot, new line)
    new_files: dict[str, str] = {}
    ops = []
    for k in range(rng.randrange(3, 8)):
        op = rng.choice(("define", "define", "rename", "module", "later", "value", "package"))
        x, y = rng.sample(MODULES, 2)
        i, j = take(x), take(y)
        if i is None or j is None:
            continue
        ops.append(op)
        if op == "define":
            pr_edits += [(x, i, f"def shared_{k}(): return {k}"), (y, j, f"from pkg.{x} import shared_{k}; USE_{k} = shared_{k}()")]
        elif op == "rename":
            for lines in (base[x], later[x]):
                lines[_site(i)] = f"def old_{k}(): return {k}"
            for lines in (base[y], later[y]):
                lines[_site(j)] = f"from pkg.{x} import old_{k}; OLD_{k} = old_{k}()"
            pr_edits += [(x, i, f"def new_{k}(): return {k}"), (y, j, f"from pkg.{x} import new_{k}; OLD_{k} = new_{k}()")]
        elif op == "module":
            new_files[f"pkg/new_{k}.py"] = f"def fresh_{k}():\n    return {k}\n"
            pr_edits.append((y, j, f"from pkg.new_{k} import fresh_{k}; FRESH_{k} = fresh_{k}()"))
        elif op == "package":
            new_files[f"pkg/sub_{k}/__init__.py"] = f"VALUE_{k} = {k}\n"
            pr_edits.append((y, j, f"from pkg.sub_{k} import VALUE_{k}; V_{k} = VALUE_{k}"))
        elif op == "later":  # upstream defined it after the fork's base: the PR only imports it
            later[x][_site(i)] = f"def helper_{k}(): return {k}"
            pr_edits.append((y, j, f"from pkg.{x} import helper_{k}; H_{k} = helper_{k}()"))
        else:
            pr_edits.append((x, i, f"PAD_{x}_{i}_{SPACING // 2} = 'changed {k}'"))
    pr = {m: list(lines) for m, lines in later.items()}
    for m, slot, line in pr_edits:
        pr[m][_site(slot)] = line
    fork = {m: list(lines) for m, lines in base.items()}
    fork_files: dict[str, str] = {}
    for m, slot, _line in pr_edits:
        if rng.random() < 0.3:
            fork[m][_site(slot)] += "  # the fork's"  # the same line changed: a conflict, the meaning kept
    for path in new_files:
        if rng.random() < 0.25:
            fork_files[path] = "FORK_OWN = 1\n"
    files = lambda d: {f"pkg/{m}.py": _text(lines) for m, lines in d.items()}  # noqa: E731
    init = {"pkg/__init__.py": ""}
    return ({**init, **files(base)}, {**init, **files(later)}, {**init, **files(pr), **new_files},
            {**init, **files(fork), **fork_files}, ops)


_IMPORT_ALL = """
import importlib, json, pathlib, sys
sys.path.insert(0, sys.argv[1])
failed = {}
for path in sorted(pathlib.Path(sys.argv[1], "pkg").rglob("*.py")):
    rel = path.relative_to(sys.argv[1]).with_suffix("")
    name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps(failed))
"""


def _import_failures(tree) -> dict[str, str]:
    """The oracle: every module of pkg imported by the interpreter, in a fresh process."""
    proc = subprocess.run([sys.executable, "-I", "-c", _IMPORT_ALL, str(tree)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _applied(world, ws, where):
    git(where.parent, "clone", "-q", str(world.fork), str(where))
    series = ws.root / "patches" / "series"
    names = [ln for ln in series.read_text().splitlines() if ln.strip() and not ln.startswith("#")] if series.exists() else []
    for name in names:
        subprocess.run(["git", "am", "-q", str(ws.root / "patches" / name)], cwd=where, check=True,
                       env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
                            "GIT_COMMITTER_EMAIL": "t@e"})
    return where


def test_the_queues_modules_import_wherever_the_import_takes_hunks(tmp_path, fake):
    rng = random.Random(3014)
    table: Counter[str] = Counter()
    for n in range(int(os.environ.get("PORTTRACK_MODULE_SCENARIOS", "24"))):
        world = World(tmp_path / f"s{n}", fake)
        base, later, pr, fork_files, ops = _scenario(rng)
        own = tmp_path / f"s{n}" / "pr-tree"  # the PR's own tree must import (the generator can make a cycle)
        for path, text in pr.items():
            (own / path).parent.mkdir(parents=True, exist_ok=True)
            (own / path).write_text(text)
        if _import_failures(own):
            table["the PR's own tree does not import (a cycle): skipped"] += 1
            continue
        world.upstream.commit(base, "the package")
        git(world.fork, "pull", "-q", "--ff-only", "upstream", "main")
        world.upstream.commit(later, "upstream moves on")
        number = 900 + n
        world.open_pr(number, {p: t for p, t in pr.items() if later.get(p) != t}, f"random {n}")
        for path, text in fork_files.items():
            (world.fork / path).parent.mkdir(parents=True, exist_ok=True)
            (world.fork / path).write_text(text)
        git(world.fork, "add", "-A")
        git(world.fork, "commit", "-q", "--allow-empty", "-m", "the fork's own")
        assert not _import_failures(world.fork), "the fork imports before the import"
        ws = make_workspace(tmp_path / f"s{n}" / "ws", {"t": track([number])}, api_url=fake.base_url, fork=world.fork,
                            token=world.token)
        assert ws.run_in_process("status", "--no-search").returncode == 0
        out = ws.run_in_process("import", str(number), "--json")
        if out.returncode != 0:
            assert out.returncode == 1, (n, out.returncode, out.stderr)
            assert "Nothing was written" in out.stderr or "nothing of" in out.stderr, out.stderr
            assert not (ws.root / "patches" / "series").exists() or not (ws.root / "patches" / "series").read_text().strip()
            table["refused" if "Nothing was written" in out.stderr else "nothing taken"] += 1
            continue
        plan = json.loads(out.stdout)
        assert plan["source_check"]["ok"], (n, plan["source_check"])  # exit 0 only with a passing check
        failures = _import_failures(_applied(world, ws, tmp_path / f"s{n}" / "applied"))
        assert not failures, (n, ops, failures, [(h["path"], h["taken"], h["reason"]) for h in plan["hunks"]])
        kinds = Counter(h["reason_kind"] for h in plan["hunks"] if not h["taken"])
        table["imports, all hunks taken" if not kinds else "imports, some left out"] += 1
        table["scenarios with a hunk left out by the source check"] += bool(kinds["fails the source check"])
        table["scenarios with a cross-module name edge"] += any(" uses `" in note and "pkg/" in note for note in plan["notes"])
    print("the queue's modules, imported by python:", dict(sorted(table.items())))
    assert table["scenarios with a hunk left out by the source check"] >= 2, table
    assert table["imports, some left out"] >= 5, table
