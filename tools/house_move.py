#!/usr/bin/env python3
"""Issue 35, "The house": the structural move, as one re-runnable script.

Run it at the root of a clean checkout of main (plain Python 3.10+ and git; nothing else):

    python3 tools/house_move.py            # do the move
    python3 tools/house_move.py --check    # only say what would move and what is missing

What it does, in order (each step skips what is already done, so a second run changes nothing):

  1. split:   the series builder and the hunk results out of porttrack/apply.py into
              porttrack/queue/series.py, by top-level names (`SPLIT_ROOTS` and every top-level
              name they reach), cut by `ast` line ranges, so it works on a newer apply.py too;
  2. move:    `git mv` every file of `MOVES` (the package), `TEST_MOVES` (tests/) and
              `SCRIPT_MOVES` (benchmarks/ -> proofs/, with their recorded results);
  3. inits:   the new packages' `__init__.py` (`NEW_INITS`), tests/**/__init__.py;
  4. imports: every `from porttrack.pkg import module` of a moved module, and every use of a name
              that moved out of apply.py, rewritten (ast positions, not regular expressions);
  5. text:    every dotted module path ('porttrack.x.y', 'tests.test_x') and file path
              ('porttrack/x/y.py', 'benchmarks/x.py', '"benchmarks" / "results" / "x.json"') in the
              tracked text files: code, tests, docs, pyproject.toml, .ci, .github, results notes
              (recorded results themselves — *.json, *.log, *.txt under results/ — are left as they
              were written), and `Path(__file__)` depths in the files that moved a level;
  6. map:     the package map in porttrack/__init__.py (`PACKAGE_MAP`);
  7. isort:   `ruff check --fix --select I` when ruff is installed and pyproject.toml configures it.

It refuses, before changing anything, when a source of a move is missing and its destination is
not there either (a file renamed on main since the table was written: adjust the table), when
both exist, or when the tree has uncommitted changes (`--allow-dirty` to override).
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

# ---------------------------------------------------------------------------------------------
# The mapping (read and adjust this; everything below is mechanism)
# ---------------------------------------------------------------------------------------------

# The package: old path -> new path.
MOVES: dict[str, str] = {
    # queue/: the patch queue in its own room (the manifest, the mail, the series builder)
    "porttrack/workspace/queue.py": "porttrack/queue/manifest.py",
    "porttrack/take/mail.py": "porttrack/queue/mail.py",
    # git/: the door to git, shaped like github/
    "porttrack/gitrepo.py": "porttrack/git/repo.py",
    "porttrack/common/gitconfig.py": "porttrack/git/config.py",
    "porttrack/common/commitgraph.py": "porttrack/git/commitgraph.py",
    # runner/: the door to local jobs — the one runner, and the results file a job writes back
    "porttrack/prove/runner.py": "porttrack/runner/local.py",
    "porttrack/results.py": "porttrack/runner/results.py",
    # names that say what the module is
    "porttrack/prove/run.py": "porttrack/prove/gaterun.py",  # its callers import it as `gaterun`
}

# apply.py keeps the command (`apply`, its records, the run log); these names, and every top-level
# name of apply.py they use, go to SPLIT_TO. Names apply.py still uses are imported back from there.
SPLIT_FROM = "porttrack/apply.py"
SPLIT_TO = "porttrack/queue/series.py"
SPLIT_ROOTS = ("build_base", "build_series", "moved_hunks", "NOT_TRIED", "OUTCOMES", "HunkResult", "PatchResult")
SPLIT_ALIAS = "series_mod"  # how `apply_mod.build_series` reads after the split: `series_mod.build_series`
SPLIT_DOC = '''"""Build a series of queued patches over a base commit, in a scratch index: the queue's builder.

`build_series` applies and commits each patch (`git apply --cached`, then `--3way`, then reduced
context; message and author from the mail, committer porttrack) without moving a ref or touching a
work tree, and says per patch and per hunk how it applied (`PatchResult`, `HunkResult`: clean,
offset, 3-way, fuzz, conflict, not-tried). `porttrack apply` builds its branches with it,
`porttrack import` its trial build, `gate run` its baseline; `build_base` is where every build
starts. (How each step is decided: porttrack/apply.py's docstring.)
"""
'''

# New packages: their __init__ docstrings (each says what it owns and what it may import).
NEW_INITS: dict[str, str] = {
    "porttrack/queue/__init__.py": '''"""The door to the patch queue (patches/): what is queued, how each patch is stored, how a series builds.

  manifest   the queue: series order, *.patch files, the manifest of states and provenance
  mail       the git format-patch mail a queued patch is stored as, with its provenance
  series     the series builder: patches applied and committed over a base in a scratch index,
             with per-hunk results (clean, offset, 3-way, fuzz, conflict)

May import: common, diff, workspace, git, tracks.
"""
''',
    "porttrack/git/__init__.py": '''"""The door to git: the only package that starts git.

  repo         the one runner: commands, fetch, clone, worktrees, scratch indexes, the object reader
  config       the git settings pinned for every git process (a user's config cannot change a verdict)
  commitgraph  git's commit-graph files read as bytes (no process; the runner asks it)

May import: common, workspace.
"""
''',
    "porttrack/runner/__init__.py": '''"""The door to local jobs: the one place a user's command runs, and the file it writes back.

  local      the one local job runner (argv, placeholders per argument, no shell, process group)
  results    the results file a job writes and prove reads (porttrack/results/v1, v2)

May import: common.
"""
''',
}

# Tests: tests/<package>/test_<module>.py; cross-cutting properties and oracles in tests/properties/;
# the project as a whole (layout, packaging, structure, set-up, workflows) stays at tests/ top level,
# and so do tests/reliability/ (its own conftest and harness) and tests/golden/ (data).
TEST_MOVES: dict[str, str] = {
    "tests/test_backend_identity.py": "tests/probe/test_engine_record.py",
    "tests/test_clock.py": "tests/common/test_clock.py",
    "tests/test_collisions.py": "tests/observe/test_collisions.py",
    "tests/test_collisions_git.py": "tests/observe/test_gitcollide.py",
    "tests/test_collisions_oracle.py": "tests/properties/test_collisions_oracle.py",
    "tests/test_completion.py": "tests/cli/test_completion.py",
    "tests/test_config.py": "tests/tracks/test_file.py",
    "tests/test_converge.py": "tests/converge/test_verify.py",
    "tests/test_converge_binding.py": "tests/converge/test_record.py",
    "tests/test_converge_differential.py": "tests/properties/test_converge_differential.py",
    "tests/test_converge_differential_rebase.py": "tests/properties/test_converge_differential_rebase.py",
    "tests/test_converge_fork_edits.py": "tests/converge/test_verify_fork_edits.py",
    "tests/test_converge_history.py": "tests/converge/test_history.py",
    "tests/test_converge_kinds.py": "tests/converge/test_kinds.py",
    "tests/test_converge_merge_heavy.py": "tests/converge/test_decide_merge_heavy.py",
    "tests/test_converge_patch_id.py": "tests/converge/test_history_patch_id.py",
    "tests/test_converge_presence.py": "tests/diff/test_presence.py",
    "tests/test_converge_real_history.py": "tests/properties/test_converge_real_history.py",
    "tests/test_converge_trail.py": "tests/converge/test_trail.py",
    "tests/test_eligibility.py": "tests/tracks/test_eligibility.py",
    "tests/test_emulator.py": "tests/testing/test_github_emulator.py",
    "tests/test_first_run.py": "tests/cli/test_first_run.py",
    "tests/test_gate_probe_e2e.py": "tests/jobs/test_cells_gate_e2e.py",
    "tests/test_evidence.py": "tests/prove/test_evidence.py",
    "tests/test_gates.py": "tests/prove/test_gates.py",
    "tests/test_gfm.py": "tests/testing/test_gfm.py",
    "tests/test_git_config.py": "tests/git/test_config.py",
    "tests/test_git_speed.py": "tests/git/test_repo_processes.py",
    "tests/test_gitfixtures.py": "tests/testing/test_gitfixtures.py",
    "tests/test_gitrepo.py": "tests/git/test_repo.py",
    "tests/test_help.py": "tests/cli/test_help.py",
    "tests/test_hostile_upstream.py": "tests/properties/test_hostile_upstream.py",
    "tests/test_hunks.py": "tests/diff/test_hunks.py",
    "tests/test_import_bounds.py": "tests/diff/test_pycheck.py",
    "tests/test_import_modules_oracle.py": "tests/properties/test_import_modules_oracle.py",
    "tests/test_import_perf.py": "tests/take/test_importer_perf.py",
    "tests/test_import_speed.py": "tests/take/test_importer_processes.py",
    "tests/test_import_vllm_slice.py": "tests/take/test_importer_vllm_slice.py",
    "tests/test_init_branches.py": "tests/bootstrap/test_init.py",
    "tests/test_init_doctor.py": "tests/bootstrap/test_doctor.py",
    "tests/test_jobs_cells.py": "tests/jobs/test_cells.py",
    "tests/test_jobs_runner.py": "tests/runner/test_local.py",
    "tests/test_jobs_vllm.py": "tests/jobs/test_vllm.py",
    "tests/test_markdown.py": "tests/common/test_markdown.py",
    "tests/test_neutral_fork.py": "tests/cli/test_neutral_fork.py",
    "tests/test_observe.py": "tests/observe/test_poll.py",
    "tests/test_partial_clone.py": "tests/git/test_repo_partial_clone.py",
    "tests/test_paths.py": "tests/diff/test_paths.py",
    "tests/test_ports.py": "tests/converge/test_ports.py",
    "tests/test_probe.py": "tests/probe/test_instruments.py",
    "tests/test_probe_jit_kinds.py": "tests/probe/test_jit_kinds.py",
    "tests/test_probe_log_fuzz.py": "tests/properties/test_probe_log_fuzz.py",
    "tests/test_profiles.py": "tests/tracks/test_config.py",
    "tests/test_progress.py": "tests/cli/test_terminal_progress.py",
    "tests/test_queue_cli.py": "tests/cli/test_queue.py",
    "tests/test_queue_tools.py": "tests/queue/test_mail.py",
    "tests/test_rebase_merge.py": "tests/converge/test_decide.py",
    "tests/test_report.py": "tests/report/test_render.py",
    "tests/test_secrets.py": "tests/common/test_secrets.py",
    "tests/test_separability.py": "tests/take/test_separability.py",
    "tests/test_separability_oracle.py": "tests/properties/test_separability_oracle.py",
    "tests/test_shallow_fork.py": "tests/git/test_repo_shallow.py",
    "tests/test_startup.py": "tests/cli/test_startup.py",
    "tests/test_status.py": "tests/report/test_status.py",
    "tests/test_status_scale.py": "tests/observe/test_poll_scale.py",
    "tests/test_successors.py": "tests/observe/test_successors.py",
    "tests/test_take.py": "tests/take/test_importer.py",
    "tests/test_terminal.py": "tests/cli/test_terminal.py",
    "tests/test_terminal_successors.py": "tests/cli/test_status.py",
    "tests/test_text.py": "tests/common/test_text.py",
    "tests/test_timed_imports.py": "tests/jobs/test_timed.py",
    "tests/test_tracks_schema.py": "tests/tracks/test_schema.py",
    "tests/test_true_figures.py": "tests/github/test_budget.py",
    "tests/test_unauthenticated.py": "tests/github/test_client.py",
    "tests/test_verbose.py": "tests/common/test_trace.py",
    "tests/test_vllm_compat.py": "tests/jobs/test_vllm_compat.py",
    "tests/test_vllm_which_python.py": "tests/jobs/test_vllm_which_python.py",
    "tests/test_weekly_agrees.py": "tests/report/test_weekly_agrees.py",
    "tests/test_weekly_budget.py": "tests/report/test_weekly_budget.py",
    "tests/test_weekly_ci.py": "tests/report/test_weekly_ci.py",
    "tests/test_weekly_dedupe.py": "tests/report/test_post.py",
    "tests/test_weekly_reads.py": "tests/report/test_weekly_reads.py",
    "tests/test_weekly_save.py": "tests/report/test_weekly_save.py",
    "tests/test_weekly_scale.py": "tests/report/test_weekly_scale.py",
    "tests/test_workspace.py": "tests/workspace/test_files.py",
    # staying at the top: test_apply (apply.py is a top-level module), test_layout, test_packaging,
    # test_regressions (the reliability suite's defects), test_setup_contract, test_structure, test_workflows
}

# Evidence (does porttrack decide right: GPU probe, vLLM compatibility, differential and oracle runs,
# real-history checks, the reliability run) -> proofs/; speed stays in benchmarks/. A script's
# recorded results (results/<stem>.*, results/<stem>_*.*) go with it.
TO_PROOFS = (
    "backend_oracle", "converge_differential", "import_real", "probe_gpu", "probe_gpu_demo",
    "probe_gpu_failclosed", "probe_gpu_jit_kinds", "probe_gpu_kernels", "probe_gpu_overhead",
    "probe_gpu_serve", "rebase_merge_real", "reliability", "verify_real_history", "vllm_compat",
    "vllm_real_check",
)

# Speed benchmarks, which stay; any other benchmarks/*.py is reported as not classified.
SPEED = ("apply_bench", "collision_scale", "commitgraph_fetch", "converge_bench", "fetch_heads", "git_speed",
         "import_bench", "startup", "status_poll", "status_offline_real", "probe_launch_steps", "suite_cpu")

# The package map in porttrack/__init__.py: its text between the first line and "Imports:". The
# order of the parts named here is the import order (tests/test_structure.py asserts it).
PACKAGE_MAP = """
`ls porttrack/` reads as the lifecycle and its doors. Each subpackage's `__init__` says what it
owns and which others it may import; tests/test_structure.py holds the code to that picture.

  underneath
    common/      errors and exit codes, secrets, untrusted text and Markdown, the clock
    diff/        hunks, hunk ids, which hunks travel together, presence, Python names, safe paths
  the doors (each the only code that talks to what is behind it; a door imports only the ones above it)
    workspace/   the workspace's files, lock and commit point; the recorded state
    git/         git: the one runner, scratch index, three-way probe, temporary worktree; pinned config, commit-graph
    github/      GitHub: the only HTTP speaker, and the records it returns
    tracks/      tracks.yaml: intent, validated into frozen records; eligibility
    queue/       the patch queue: the manifest, the mail a patch is stored as, the series builder
    runner/      local jobs: the one runner of a user's command, and the results file a job writes
  the lifecycle (a step imports the doors and the steps before it)
    observe/     poll the tracked PRs; successors; open PRs that collide with the queue
    take/        `import PR`: the stable, separable hunks into the queue; refresh
    apply.py     build porttrack/staging or porttrack/default over the fork
    prove/       gates: run jobs, keep evidence, judge, promote
      probe/     instruments inside the process under test (a vllm.general_plugins entry point)
      jobs/      the gate jobs users name in tracks.yaml (porttrack.jobs.cells, .vllm, .timed)
    converge/    `verify-converged PR`: is upstream's merged change really in the fork
    report/      tell: `status` and the weekly issue
  around
    bootstrap/   `init` and `doctor`
    cli/         the command layer: one module per verb; opens each door once and hands it in

  verb                    cli module      core
  status                  status          observe.poll, report.status, report.knowledge
  import, refresh         take            take.importer, take.refresh
  queue, drop             queue           queue.manifest
  apply                   apply           apply, queue.series
  gate run|ingest|check   gates           prove.gaterun, prove.gates (the judge), prove.evidence, runner.results
  promote, demote         gates           prove.promote
  eligibility             eligibility     tracks.eligibility
  verify-converged        converge        converge.verify (decide, record)
  report weekly           report          report (gather, render, post, history)
  init, doctor            init, doctor    bootstrap.init, bootstrap.doctor

"""

# What each package's docstring says it may import ("May import: ..."), the layers tests/test_structure.py
# holds them to. The doors: common, diff, workspace, git, github, tracks, queue, runner.
_DOORS = "common, diff, workspace, git, github, tracks, queue, runner"
MAY_IMPORT: dict[str, str] = {
    "diff": "common",
    "workspace": "common, diff",
    "git": "common, workspace",
    "github": "common, workspace",
    "tracks": "common, workspace",
    "queue": "common, diff, workspace, git, tracks",
    "runner": "common",
    "observe": _DOORS,
    "take": f"{_DOORS}, observe",
    "prove": f"{_DOORS}, apply",
    "converge": f"{_DOORS}, observe, prove",
    "bootstrap": _DOORS,
}

# Packages whose __init__ re-exports its modules' names (a PEP 562 `_EXPORTS` table): the exports go,
# and every outside use reads the name from the module that defines it (issue 35, item 4: report/
# re-exported 26 names, three of them functions named like their own modules).
UNEXPORT = ("porttrack/report/__init__.py",)
UNEXPORT_DOC = (
    r"The package exports the functions .*?\(`from porttrack\.report\.render import chart_lines`\)\.",
    "The package exports no names: import each from the module that\ndefines it (`from porttrack.report.render "
    "import fit_body`).",
)

# Prose that names a moved module by its old short name, in backticks or as a bare file name.
PROSE: dict[str, str] = {
    "`gitrepo.": "`git.repo.",
    "`gitrepo`": "`git.repo`",
    "gitrepo.py": "git/repo.py",
}

# Tests that stay at tests/ top level (the project as a whole); any other tests/test_*.py is
# reported as not placed, so a test file added on main since this table was written is not missed.
TESTS_AT_TOP = ("tests/test_apply.py", "tests/test_layout.py", "tests/test_packaging.py", "tests/test_regressions.py",
                "tests/test_setup_contract.py", "tests/test_structure.py", "tests/test_workflows.py")

# Where text is rewritten (tracked files only). Recorded results are history: left as written.
TEXT_SUFFIXES = (".py", ".md", ".toml", ".cfg", ".ini", ".yaml", ".yml", ".sh", ".j2", ".txt", ".json", "")
SKIP_TEXT = re.compile(r"^(patches/|state/|\.git/|.*\.bundle$|(benchmarks|proofs)/results/.*\.(json|log|txt)$)")
SELF = "tools/house_move.py"

# ---------------------------------------------------------------------------------------------
# mechanism
# ---------------------------------------------------------------------------------------------

ROOT = Path.cwd()


def say(line: str) -> None:
    print(f"house_move: {line}", flush=True)


def refuse(line: str) -> None:
    print(f"house_move: REFUSED: {line}", file=sys.stderr)
    sys.exit(2)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def tracked() -> list[str]:
    return [p for p in git("ls-files", "-z").split("\0") if p and (ROOT / p).is_file()]


def dotted(path: str) -> str:
    return ".".join(Path(path).with_suffix("").parts).removesuffix(".__init__")


def script_moves() -> dict[str, str]:
    moves = {}
    for stem in TO_PROOFS:
        moves[f"benchmarks/{stem}.py"] = f"proofs/{stem}.py"
    results = sorted(p for p in git("ls-files", "benchmarks/results").split("\n") if p)
    for path in results:
        name = Path(path).name
        # the longest stem that names it: probe_gpu_demo_autotune.json belongs to probe_gpu_demo
        owners = [s for s in (*TO_PROOFS, *(Path(p).stem for p in git("ls-files", "benchmarks/*.py").split())) if
                  re.match(rf"^{re.escape(s)}([._]|$)", name)]
        if owners and max(owners, key=len) in TO_PROOFS:
            moves[path] = f"proofs/results/{name}"
    return moves


def all_moves() -> dict[str, str]:
    return {**MOVES, **TEST_MOVES, **script_moves()}


def check_sources(moves: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    todo, problems = {}, []
    for old, new in moves.items():
        have_old, have_new = (ROOT / old).exists(), (ROOT / new).exists()
        if have_old and not have_new:
            todo[old] = new
        elif have_old and have_new:
            problems.append(f"{old} and {new} both exist")
        elif not have_old and not have_new:
            problems.append(f"{old} is missing (and {new} is not there): adjust the table at the top")
    return todo, problems


# -- 1. split apply.py ---------------------------------------------------------------------------


def _top_names(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    return set()


def _used_names(nodes: list[ast.AST]) -> set[str]:
    """Names a piece of code uses, string annotations ("PatchResult") included."""
    used: set[str] = set()
    for top in nodes:
        for node in ast.walk(top):
            if isinstance(node, ast.Name):
                used.add(node.id)
            annotations = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                annotations = [a.annotation for a in (*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs,
                                                      node.args.vararg, node.args.kwarg) if a is not None and a.annotation]
                annotations += [node.returns] if node.returns else []
            elif isinstance(node, ast.AnnAssign):
                annotations = [node.annotation]
            for ann in annotations:
                for sub in ast.walk(ann):
                    if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                        try:
                            used |= {n.id for n in ast.walk(ast.parse(sub.value, mode="eval")) if isinstance(n, ast.Name)}
                        except SyntaxError:
                            pass
    return used


def _span(lines: list[str], node: ast.stmt) -> tuple[int, int]:
    """0-based [start, end) of a top-level statement: decorators and the comment lines right above it."""
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))]) - 1
    while start > 0 and lines[start - 1].startswith("#") and not lines[start - 1].startswith("# --"):
        start -= 1
    return start, node.end_lineno


def _import_lines(lines: list[str], imports: list[ast.stmt], used: set[str]) -> list[str]:
    """The import statements, each cut to the names `used` (whole statements dropped when none are)."""
    groups: dict[int, list[str]] = {0: [], 1: [], 2: []}  # __future__, the rest of the world, porttrack
    for node in imports:
        module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
        group = 0 if module == "__future__" else 2 if (module or "").split(".")[0] == "porttrack" else 1
        if group == 0:
            groups[0].append("".join(lines[node.lineno - 1:node.end_lineno]).rstrip("\n"))
            continue
        keep = [a for a in node.names if (a.asname or a.name).split(".")[0] in used]
        if not keep:
            continue
        names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in keep)
        groups[group].append(f"from {node.module} import {names}" if isinstance(node, ast.ImportFrom) else f"import {names}")
    return [line for g in (0, 1, 2) if groups[g] for line in (*groups[g], "")][:-1]


def split_apply() -> None:
    src, dst = ROOT / SPLIT_FROM, ROOT / SPLIT_TO
    if dst.exists():
        say(f"split: {SPLIT_TO} exists already, skipped")
        return
    if not src.exists():
        refuse(f"{SPLIT_FROM} is missing")
    text = src.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    tree = ast.parse(text)
    body = tree.body
    doc = body[0] if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else None
    imports = [n for n in body if isinstance(n, (ast.Import, ast.ImportFrom))]
    defs = [n for n in body if n is not doc and n not in imports]
    owner = {name: n for n in defs for name in _top_names(n)}
    missing = [r for r in SPLIT_ROOTS if r not in owner]
    if missing:
        refuse(f"{SPLIT_FROM} no longer defines {missing}: adjust SPLIT_ROOTS")
    moved: set[int] = set()
    todo = [owner[r] for r in SPLIT_ROOTS]
    while todo:
        node = todo.pop()
        if id(node) in moved:
            continue
        moved.add(id(node))
        todo += [owner[n] for n in _used_names([node]) if n in owner and id(owner[n]) not in moved]
    go = [n for n in defs if id(n) in moved]
    stay = [n for n in defs if id(n) not in moved]
    go_names = set().union(*(_top_names(n) for n in go))
    back = sorted(go_names & _used_names(stay))
    # section headers ("# -- building ---"): a section goes when all of it goes, stays when all stays
    headers = [i for i, line in enumerate(lines) if line.startswith("# -- ")]

    def section(node: ast.stmt) -> int | None:
        before = [h for h in headers if h < _span(lines, node)[0]]
        return before[-1] if before else None

    moved_sections = {section(n) for n in go} - {section(n) for n in stay} - {None}
    pieces: list[tuple[str, str]] = []  # (kind, text): header | block (def, class) | line
    last_section = None
    for n in go:
        s = section(n)
        if s is not None and s != last_section:
            pieces.append(("header", lines[s].rstrip("\n")))
            last_section = s
        start, end = _span(lines, n)
        kind = "block" if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else "line"
        pieces.append((kind, "".join(lines[start:end]).rstrip("\n")))
    code, prev = "", None
    for kind, piece in pieces:
        if prev is None:
            code = piece
        elif kind == "header" or prev == "header" or kind == "block" or prev == "block":
            code += "\n\n\n" + piece
        else:
            code += "\n" + piece
        prev = kind
    head = _import_lines(lines, imports, _used_names(go))
    new_text = SPLIT_DOC + "\n" + "\n".join(head) + "\n\n" + code + "\n"
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(new_text, encoding="utf-8")
    # apply.py: without the moved statements and sections; the names it still uses imported back
    drop = set()
    for n in go:
        start, end = _span(lines, n)
        drop |= set(range(start, end))
    drop |= moved_sections
    kept = [line for i, line in enumerate(lines) if i not in drop]
    rest = "".join(kept)
    rest = re.sub(r"\n{3,}(?=\S)", "\n\n\n", rest)
    rest_tree = ast.parse(rest)
    rest_lines = rest.splitlines(keepends=True)
    rest_imports = [n for n in rest_tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    rest_used = _used_names([n for n in rest_tree.body if n not in rest_imports])
    new_imports = _import_lines(rest_lines, rest_imports, rest_used)
    if back:
        new_imports.append(f"from {dotted(SPLIT_TO)} import {', '.join(back)}")  # after porttrack's own
    first, last = rest_imports[0].lineno - 1, rest_imports[-1].end_lineno
    rest = "".join(rest_lines[:first]) + "\n".join(new_imports) + "\n" + "".join(rest_lines[last:])
    src.write_text(rest, encoding="utf-8")
    ast.parse(rest)
    ast.parse(new_text)
    say(f"split: {len(go)} statements ({', '.join(sorted(go_names))}) -> {SPLIT_TO}; "
        f"{SPLIT_FROM} imports back {back}")


# -- 2. move files -----------------------------------------------------------------------------


def move_files(todo: dict[str, str]) -> None:
    for old, new in todo.items():
        (ROOT / new).parent.mkdir(parents=True, exist_ok=True)
        git("mv", old, new)
    say(f"moved {len(todo)} files")


# -- 3. package inits ----------------------------------------------------------------------------


def write_inits() -> None:
    made = []
    for path, text in NEW_INITS.items():
        if not (ROOT / path).exists():
            (ROOT / path).write_text(text, encoding="utf-8")
            made.append(path)
    # tests as packages (tests.cli.test_status and tests.report.test_status both import);
    # tests/reliability keeps its own sys.path (rel_harness), so it gets none
    dirs = {Path(p).parent for p in TEST_MOVES.values()} | {Path("tests")}
    for d in sorted(dirs):
        init = ROOT / d / "__init__.py"
        if not init.exists():
            init.write_text("", encoding="utf-8")
            made.append(str(d / "__init__.py"))
    if made:
        git("add", *made)
    say(f"wrote {len(made)} __init__.py")


# -- 4. imports --------------------------------------------------------------------------------


def module_map(moves: dict[str, str]) -> dict[str, str]:
    return {dotted(o): dotted(n) for o, n in moves.items() if o.endswith(".py") and n.endswith(".py")}


def split_names() -> set[str]:
    dst = ROOT / SPLIT_TO
    if not dst.exists():
        return set()
    tree = ast.parse(dst.read_text(encoding="utf-8"))
    return set().union(*(_top_names(n) for n in tree.body))


def _replace(text: str, edits: list[tuple[int, int, int, int, str]]) -> str:
    """Apply (line, col, end_line, end_col, new) edits (1-based lines, ast columns)."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line.encode("utf-8")))
    data = text.encode("utf-8")
    for line, col, end_line, end_col, new in sorted(edits, reverse=True):
        a, b = offsets[line - 1] + col, offsets[end_line - 1] + end_col
        data = data[:a] + new.encode("utf-8") + data[b:]
    return data.decode("utf-8")


# `from test_x import f` worked while tests/ had no __init__.py (pytest put tests/ on sys.path)
BARE_TESTS = {Path(o).stem: dotted(n) for o, n in {**TEST_MOVES, **{p: p for p in TESTS_AT_TOP}}.items()}


def rewrite_imports(path: Path, mods: dict[str, str], moved_names: set[str]) -> bool:
    text = path.read_text(encoding="utf-8")
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    split_old = dotted(SPLIT_FROM)
    edits = []
    apply_aliases: dict[str, ast.ImportFrom] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module):
            continue
        pad = " " * node.col_offset
        if node.module in BARE_TESTS:  # `from test_x import f`: tests/ is a package now, found from the root
            names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in node.names)
            edits.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset,
                          f"from {BARE_TESTS[node.module]} import {names}"))
            continue
        stmts: list[str] = []
        keep = []
        for a in node.names:
            full = f"{node.module}.{a.name}"
            local = a.asname or a.name
            if full in mods:  # from porttrack.pkg import module  ->  from new.pkg import newmodule as module
                parent, _, leaf = mods[full].rpartition(".")
                stmts.append(f"from {parent} import {leaf}" + (f" as {local}" if local != leaf else ""))
            elif node.module == split_old and a.name in moved_names:  # a name that left apply.py
                stmts.append(f"from {dotted(SPLIT_TO)} import {a.name}" + (f" as {a.asname}" if a.asname else ""))
            else:
                keep.append(a)
                if full == split_old:
                    apply_aliases[local] = node
        if len(keep) == len(node.names):
            continue
        if keep:
            names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in keep)
            stmts.insert(0, f"from {node.module} import {names}")
        edits.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, f"\n{pad}".join(stmts)))
    # `apply_mod.build_series` where apply_mod is porttrack.apply: -> series_mod.build_series
    for alias, imp in apply_aliases.items():
        uses = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                and n.value.id == alias]
        moved = [n for n in uses if n.attr in moved_names]
        if not moved:
            continue
        stays = [n for n in uses if n.attr not in moved_names]
        bare = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == alias and
                not any(n is u.value for u in uses)]
        for n in moved:
            edits.append((n.value.lineno, n.value.col_offset, n.value.end_lineno, n.value.end_col_offset, SPLIT_ALIAS))
        parent, _, leaf = dotted(SPLIT_TO).rpartition(".")
        pad = " " * imp.col_offset
        new_imp = f"from {parent} import {leaf} as {SPLIT_ALIAS}"
        if stays or bare:
            old = ast.get_source_segment(text, imp)
            edits.append((imp.lineno, imp.col_offset, imp.end_lineno, imp.end_col_offset, f"{old}\n{pad}{new_imp}"))
        else:
            edits.append((imp.lineno, imp.col_offset, imp.end_lineno, imp.end_col_offset, new_imp))
    if not edits:
        return False
    # one edit per import statement: when an apply import both split and aliased, merge (rare)
    seen: dict[tuple[int, int], tuple[int, int, int, int, str]] = {}
    for e in edits:
        key = (e[0], e[1])
        if key in seen and seen[key][4] != e[4]:
            refuse(f"{path}: two rewrites of the import at line {e[0]}; rewrite it by hand first")
        seen[key] = e
    path.write_text(_replace(text, list(seen.values())), encoding="utf-8")
    return True


def _imports_locally(scope: ast.AST, alias: str) -> bool:
    return any(isinstance(n, ast.ImportFrom) and any((a.asname or a.name) == alias for a in n.names) for n in ast.walk(scope))


def unexport(files: list[str]) -> None:
    for init_path in UNEXPORT:
        init = ROOT / init_path
        if not init.exists():
            refuse(f"{init_path} is missing: adjust UNEXPORT")
        text = init.read_text(encoding="utf-8")
        tree = ast.parse(text)
        table = next((n.value for n in tree.body if isinstance(n, ast.Assign) and
                      any(isinstance(t, ast.Name) and t.id == "_EXPORTS" for t in n.targets)), None)
        package = dotted(init_path)
        if table is None:
            say(f"unexport: {init_path} has no _EXPORTS, skipped")
            continue
        exports: dict[str, str] = ast.literal_eval(table)
        for rel in files:
            if not rel.endswith(".py") or rel == init_path:
                continue
            path = ROOT / rel
            src = path.read_text(encoding="utf-8")
            if package not in src and f"import {package.rpartition('.')[2]}" not in src:
                continue
            mod_tree = ast.parse(src)
            scope_of = {}  # node -> the innermost function (or the module) it sits in
            for scope in [mod_tree, *(n for n in ast.walk(mod_tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]:
                for n in ast.walk(scope):
                    scope_of[id(n)] = scope  # walks outer scopes first: inner ones overwrite
            names_in_file = {n.id for n in ast.walk(mod_tree) if isinstance(n, ast.Name)}
            edits = []
            parent, _, leaf = package.rpartition(".")
            for node in ast.walk(mod_tree):
                if not isinstance(node, ast.ImportFrom) or node.level:
                    continue
                pad = " " * node.col_offset
                if node.module == package and any(a.name in exports and not (ROOT / package.replace(".", "/") /
                                                  f"{a.name}.py").exists() for a in node.names):
                    by_module: dict[str, list[str]] = {}
                    other = []
                    for a in node.names:
                        if a.name in exports and not (ROOT / package.replace(".", "/") / f"{a.name}.py").exists():
                            by_module.setdefault(exports[a.name], []).append(a.name + (f" as {a.asname}" if a.asname else ""))
                        else:
                            other.append(a.name + (f" as {a.asname}" if a.asname else ""))
                    stmts = ([f"from {package} import {', '.join(other)}"] if other else []) + \
                        [f"from {package}.{m} import {', '.join(ns)}" for m, ns in by_module.items()]
                    edits.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, f"\n{pad}".join(stmts)))
                elif node.module == parent and any(a.name == leaf for a in node.names):
                    alias = next(a.asname or a.name for a in node.names if a.name == leaf)
                    scope = scope_of[id(node)]
                    uses = [n for n in ast.walk(scope) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                            and n.value.id == alias and n.attr in exports
                            and (scope is not mod_tree or scope_of[id(n)] is mod_tree or not _imports_locally(scope_of[id(n)], alias))]
                    if not uses:
                        continue
                    modules = sorted({exports[u.attr] for u in uses})
                    local = {}
                    for m in modules:
                        local[m] = f"{m}_mod" if f"{m}_mod" not in names_in_file else f"{alias}_{m}"
                    for u in uses:
                        edits.append((u.value.lineno, u.value.col_offset, u.value.end_lineno, u.value.end_col_offset,
                                      local[exports[u.attr]]))
                    others = [n for n in ast.walk(scope) if isinstance(n, ast.Name) and n.id == alias]
                    keep = len(others) > len(uses)
                    stmts = [ast.get_source_segment(src, node)] if keep else []
                    stmts += [f"from {package} import {m} as {local[m]}" for m in modules]
                    edits.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, f"\n{pad}".join(stmts)))
            if edits:
                edits = sorted(set(edits))
                path.write_text(_replace(src, edits), encoding="utf-8")
                say(f"unexport: {rel} reads {package}'s names from their modules")
        # the __init__: its docstring (and `from __future__`), nothing else
        doc = tree.body[0]
        new = "".join(text.splitlines(keepends=True)[:doc.end_lineno])
        new = re.sub(UNEXPORT_DOC[0], UNEXPORT_DOC[1], new, flags=re.S)
        init.write_text(new, encoding="utf-8")
        say(f"unexport: {init_path} exports nothing")


# -- 5. text: dotted paths and file paths ----------------------------------------------------------


def text_rules(moves: dict[str, str], moved_names: set[str]) -> list[tuple[str, re.Pattern[str], str]]:
    """(literal, pattern, replacement), longest literal first."""
    rules: list[tuple[str, str, str]] = []  # (kind, old, new)
    for old, new in moves.items():
        rules.append(("path", old, new))
        if old.endswith(".py"):
            rules.append(("dotted", dotted(old), dotted(new)))
            if old.startswith("porttrack/"):  # "porttrack/gitrepo" and "common/gitconfig" in prose
                rules.append(("path", old[:-3], new[:-3]))
                if old.count("/") >= 2:
                    rules.append(("path", old[len("porttrack/"):], new[len("porttrack/"):]))
        parts_old, parts_new = old.split("/"), new.split("/")
        rules.append(("join", " / ".join(f'"{p}"' for p in parts_old), " / ".join(f'"{p}"' for p in parts_new)))
    for name in sorted(moved_names):
        rules.append(("dotted", f"{dotted(SPLIT_FROM)}.{name}", f"{dotted(SPLIT_TO)}.{name}"))
    rules += [("prose", old, new) for old, new in PROSE.items()]
    compiled = []
    for kind, old, new in sorted(set(rules), key=lambda r: (-len(r[1]), r[1])):
        if kind == "dotted":
            pat = rf"(?<![\w.]){re.escape(old)}(?!\w)"
        elif kind == "path":
            # an extension-less path ("porttrack/results") never where a path goes on: "porttrack/results/v1" is a schema
            pat = rf"(?<![\w.-]){re.escape(old)}" + (r"(?![\w-])" if old.endswith(".py") else r"(?![\w/-])(?!\.\w)")
        elif kind == "prose":
            pat = rf"(?<![\w/.-]){re.escape(old)}"
        else:
            pat = re.escape(old)
        compiled.append((old, re.compile(pat), new))
    return compiled


def rewrite_text(path: Path, rules: list[tuple[str, re.Pattern[str], str]]) -> bool:
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return False
    mine = [(p, new) for old, p, new in rules if old in text]
    if not mine:
        return False
    # one pass over the rules that can match, so a rewritten path is never rewritten again
    big = re.compile("|".join(f"(?P<r{i}>{p.pattern})" for i, (p, _) in enumerate(mine)))
    new = big.sub(lambda m: mine[int(m.lastgroup[1:])][1], text)
    if new != text:
        path.write_text(new, encoding="utf-8")
        return True
    return False


_FILE_UP = re.compile(r"Path\(__file__\)(\.resolve\(\))?(\.parents\[(\d+)\]|(?:\.parent(?!s))+)")


def fix_depths(moves: dict[str, str]) -> int:
    """`Path(__file__).parent.parent` in a file that moved a level deeper reaches one level further.
    Only for the files this run moved (`moves` is this run's to-do), so a second run adds nothing."""
    fixed = 0
    for old, new in moves.items():
        delta = new.count("/") - old.count("/")
        path = ROOT / new
        if not delta or not new.endswith(".py") or not path.exists():
            continue
        text = path.read_text(encoding="utf-8")

        def up(m: re.Match[str]) -> str:
            levels = int(m.group(3)) + 1 if m.group(3) is not None else m.group(2).count(".parent")
            return f"Path(__file__).resolve().parents[{levels + delta - 1}]"

        new_text = _FILE_UP.sub(up, text)
        if new_text != text:
            path.write_text(new_text, encoding="utf-8")
            fixed += 1
    return fixed


def moved_script_results(moves: dict[str, str]) -> int:
    """A script moved to proofs/ writes its results there: `"benchmarks" / "results"` in it reads "proofs"."""
    n = 0
    for old, new in moves.items():
        if old.startswith("benchmarks/") and new.startswith("proofs/") and new.endswith(".py") and (ROOT / new).exists():
            p = ROOT / new
            text = p.read_text(encoding="utf-8")
            fixed = text.replace('"benchmarks" / "results"', '"proofs" / "results"').replace(
                "benchmarks/results/", "proofs/results/")
            if fixed != text:
                p.write_text(fixed, encoding="utf-8")
                n += 1
    return n


# -- 6. the package map ----------------------------------------------------------------------------


def write_map() -> None:
    init = ROOT / "porttrack/__init__.py"
    text = init.read_text(encoding="utf-8")
    first_end = text.index("\n") + 1
    imports_at = text.index("Imports:")
    new = text[:first_end] + PACKAGE_MAP + text[imports_at:]
    if new != text:
        init.write_text(new, encoding="utf-8")
        say("wrote the package map")


def write_package_docs(moves: dict[str, str]) -> None:
    """Each package's "May import:" from `MAY_IMPORT`; a moved module's line leaves its old package's
    list (its new package's docstring lists it), a renamed one keeps its line under the new name."""
    changed = 0
    for init in sorted((ROOT / "porttrack").glob("*/__init__.py")):
        text = init.read_text(encoding="utf-8")
        new = text
        part = init.parent.name
        if part in MAY_IMPORT:
            new = re.sub(r"May import: [^.]*\.", f"May import: {MAY_IMPORT[part]}.", new, count=1)
        for old, dest in moves.items():
            if not (old.startswith(f"porttrack/{part}/") and old.endswith(".py")):
                continue
            leaf, new_leaf = Path(old).stem, Path(dest).stem
            line = re.compile(rf"^(  ){re.escape(leaf)}( +)(.*)$", re.M)
            if Path(dest).parent == Path(old).parent:
                new = line.sub(lambda m: m.group(1) + new_leaf + " " * max(1, len(m.group(2)) + len(leaf) - len(new_leaf))
                               + m.group(3), new)
            else:  # the line, and the lines that continue it (indented deeper)
                new = re.sub(rf"^  {re.escape(leaf)} +.*\n(?:   +\S.*\n)*", "", new, flags=re.M)
        if new != text:
            init.write_text(new, encoding="utf-8")
            changed += 1
    say(f"package docstrings updated: {changed}")


# -- 7. isort --------------------------------------------------------------------------------------


def isort() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    ruff = shutil.which("ruff") or (str(ROOT / ".venv/bin/ruff") if (ROOT / ".venv/bin/ruff").exists() else None)
    if "[tool.ruff" not in pyproject:
        say("isort: pyproject.toml does not configure ruff; skipped")
        return
    if ruff is None:
        say("isort: ruff is configured but not installed (.venv/bin/ruff or PATH); skipped — run "
            "`ruff check --fix --select I .` yourself")
        return
    proc = subprocess.run([ruff, "check", "--fix", "--select", "I", "."], cwd=ROOT, capture_output=True, text=True)
    say(f"isort: ruff exited {proc.returncode}: {(proc.stdout + proc.stderr).strip().splitlines()[-1:]}")


def warn_unplaced() -> None:
    """What the tables do not place: test files and top-level modules added on main since."""
    flat = sorted(p.as_posix() for p in Path("tests").glob("test_*.py") if p.as_posix() not in TESTS_AT_TOP)
    if flat:
        say(f"NOT PLACED (add them to TEST_MOVES, or to TESTS_AT_TOP): {', '.join(flat)}")
    loose = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py") if p.stem not in SPEED)
    if loose:
        say(f"NOT CLASSIFIED (benchmarks/: add each to TO_PROOFS if it is evidence, else to SPEED): {', '.join(loose)}")
    doc = ast.get_docstring(ast.parse((ROOT / "porttrack/__init__.py").read_text(encoding="utf-8"))) or ""
    in_map = {m.group(1) for m in re.finditer(r"^ {4,6}(\w+)(?:/|\.py) ", doc, re.M)}
    extra = sorted(p.name for p in (ROOT / "porttrack").iterdir() if p.name not in
                   {"__init__.py", "__main__.py", "py.typed", "templates", "schemas", "__pycache__"}
                   and p.name.removesuffix(".py") not in in_map)
    if extra:
        say(f"NOT IN THE MAP (porttrack/ top level; move them or add them to PACKAGE_MAP): {', '.join(extra)}")
    new = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "porttrack").rglob("*.py"))
    if new:
        say(f"{len(new)} modules; tests/test_structure.py says which have no test file named after them")


# -- main ------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="say what would move and what is missing; change nothing")
    parser.add_argument("--allow-dirty", action="store_true", help="run on a tree with uncommitted changes")
    args = parser.parse_args()
    if not (ROOT / "porttrack/__init__.py").exists() or not (ROOT / ".git").exists():
        refuse("run me at the root of a porttrack checkout")
    moves = all_moves()
    todo, problems = check_sources(moves)
    if SPLIT_TO in todo.values() or (ROOT / SPLIT_TO).exists() and not (ROOT / SPLIT_FROM).exists():
        problems.append(f"{SPLIT_TO} is the split's destination; no file may move onto it")
    if problems:
        refuse("; ".join(problems))
    if args.check:
        for old, new in todo.items():
            print(f"{old} -> {new}")
        say(f"{len(todo)} to move, {len(moves) - len(todo)} moved already")
        return 0
    if not args.allow_dirty and git("status", "--porcelain", "--untracked-files=no").strip():
        refuse("the tree has uncommitted changes (commit them, or pass --allow-dirty)")
    split_apply()
    move_files(todo)
    write_inits()
    git("add", "-A", "porttrack", "tests", "proofs", "benchmarks")
    mods = module_map(moves)
    names = split_names()
    files = [p for p in tracked() if p != SELF]
    n = sum(rewrite_imports(ROOT / p, mods, names) for p in files if p.endswith(".py"))
    say(f"imports rewritten in {n} files")
    unexport(files)
    rules = text_rules(moves, names)
    n = sum(rewrite_text(ROOT / p, rules) for p in files
            if not SKIP_TEXT.match(p) and (Path(p).suffix in TEXT_SUFFIXES))
    say(f"paths and module names rewritten in {n} files")
    say(f"Path(__file__) depths fixed in {fix_depths(todo)} files; results paths in {moved_script_results(moves)} scripts")
    write_map()
    write_package_docs(moves)
    isort()
    git("add", "-u")
    git("add", "-A", "porttrack", "tests", "proofs", "benchmarks")
    warn_unplaced()
    say("done: review `git status`, run the tests, commit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
