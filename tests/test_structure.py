"""The architecture, checked: no import cycles, one door each to git, GitHub and local jobs, and
modules of one idea (STYLE.md 2, 12-14).

These read the source with `ast`, so they hold for every import, also one inside a function.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "porttrack"
# A module may grow past this only with a reason stated here: the idea it holds, and why it is one.
MAX_LINES = 700
LONG_MODULES: dict[str, str] = {
    "porttrack/github/client.py": "the one door to GitHub: every request porttrack sends, with its deadline, retries, "
                           "conditional cache and the endpoints it calls; its records (github/records), policy "
                           "(github/policy) and GraphQL batching (github/graphql) already live apart",
    "porttrack/git/repo.py": "the one door to git: every process porttrack starts in a repository (commands, fetch, "
                            "clone, worktrees, scratch indexes) and the one object reader they share; the "
                            "commit-graph reader (git/commitgraph) and the pinned settings (git/config) "
                            "already live apart",
    "porttrack/tracks/config.py": "tracks.yaml's records, both profiles' (vllm-gpu, neutral), with the field rules "
                                  "pydantic reads from their annotations; reading and validating the file "
                                  "(tracks/file, tracks/validation) already live apart",
    "porttrack/converge/decide.py": "the verdict of verify-converged: its documented records and JSON, the three "
                                    "steps and every hunk's state; following lines through upstream's history "
                                    "(converge/trail), history reads (converge/history) and byte presence "
                                    "(diff/presence) already live apart",
}


def _modules() -> dict[str, ast.Module]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        found[name] = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return found


def _own_imports(name: str, tree: ast.Module, known: set[str]) -> set[str]:
    """porttrack modules `name` imports, anywhere in the file ("from porttrack import x" names the
    module x when x is one)."""
    deps: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("porttrack"):
            deps.add(node.module)
            deps.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in known)
        elif isinstance(node, ast.Import):
            deps.update(a.name for a in node.names if a.name.startswith("porttrack"))
    # A package may import its own children (its map); a child importing its package is a cycle.
    return {d for d in deps & known if d != name and not d.startswith(name + ".")}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found, done = [], set()

    def visit(node: str, stack: list[str]) -> None:
        if node in stack:
            found.append(stack[stack.index(node):] + [node])
            return
        if node in done:
            return
        for dep in sorted(graph[node]):
            visit(dep, stack + [node])
        done.add(node)

    for node in sorted(graph):
        visit(node, [])
    return found


def _imports_of(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _process_calls(tree: ast.Module) -> list[int]:
    """Lines that start a process: subprocess.run/Popen/call/check_call/check_output, os.system,
    os.exec*/spawn*."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            owner, attr = node.func.value.id, node.func.attr
            if owner == "subprocess" and attr in ("run", "Popen", "call", "check_call", "check_output"):
                lines.append(node.lineno)
            elif owner == "os" and (attr == "system" or attr.startswith(("exec", "spawn", "posix_spawn"))):
                lines.append(node.lineno)
    return lines


def test_no_import_cycles_among_porttrack_modules() -> None:
    modules = _modules()
    graph = {name: _own_imports(name, tree, set(modules)) for name, tree in modules.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c", "a"]]


def test_only_the_github_door_speaks_http() -> None:
    """The door sends with plain requests (since issue 17; PyGithub is now only the tests'
    independent client of the emulator), and nothing else imports an HTTP client."""
    modules = _modules()
    assert sorted(name for name, tree in modules.items() if "github" in _imports_of(tree)) == []
    http = {"requests", "urllib3", "httpx", "http"}
    assert sorted(name for name, tree in modules.items() if _imports_of(tree) & http) == ["porttrack.github.client"]


def test_processes_start_in_the_doors_only() -> None:
    """git runs only in git.repo; a user's job command only in the one job runner; `gh auth token`
    only where the token is resolved; the user's pager only where output meets the terminal."""
    allowed = {"porttrack.git.repo", "porttrack.runner.local", "porttrack.common.secrets", "porttrack.cli.terminal"}
    starts = {name: _process_calls(tree) for name, tree in _modules().items()}
    assert {name: lines for name, lines in starts.items() if lines and name not in allowed} == {}
    assert starts.get("porttrack.runner.local"), "the job runner exists and starts the jobs"


def test_no_import_error_guard_on_an_own_module() -> None:
    guarded = []
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Try):
                continue
            catches = {ast.unparse(h.type) for h in node.handlers if h.type is not None}
            if not catches & {"ImportError", "ModuleNotFoundError", "(ImportError, ModuleNotFoundError)"}:
                continue
            own = [s for s in node.body if isinstance(s, ast.ImportFrom) and (s.module or "").startswith("porttrack")]
            own += [s for s in node.body if isinstance(s, ast.Import) and any(a.name.startswith("porttrack") for a in s.names)]
            if own:
                guarded.append(f"{name}:{node.lineno}")
    assert guarded == []


def test_modules_hold_one_idea() -> None:
    sizes = {path.relative_to(PACKAGE.parent).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
             for path in PACKAGE.rglob("*.py")}
    too_long = {path: n for path, n in sizes.items() if n > MAX_LINES and path not in LONG_MODULES}
    assert too_long == {}, f"over {MAX_LINES} lines without a reason in LONG_MODULES: {too_long}"


def test_one_no_fork_checkout_message() -> None:
    sources = {path: path.read_text(encoding="utf-8") for path in PACKAGE.rglob("*.py")}
    holders = sorted(p.relative_to(PACKAGE).as_posix() for p, text in sources.items() if "no fork checkout" in text.lower())
    assert holders == ["git/repo.py"]


# The layering the subpackages' docstrings state (issue 23): a module may import its own
# subpackage, the root package (the map and __version__), and the subpackages listed here.
# Lower layers first; a lifecycle step imports only the doors and the steps before it.
DOORS = {"common", "diff", "workspace", "git", "github", "tracks", "queue", "runner"}
LAYERS: dict[str, set[str]] = {
    "common": set(),
    "diff": {"common"},
    "workspace": {"common", "diff"},
    "git": {"common", "workspace"},
    "github": {"common", "workspace"},
    "tracks": {"common", "workspace"},
    "queue": {"common", "diff", "workspace", "git", "tracks"},
    "runner": {"common"},  # the job runner and the results contract a job writes (jobs import porttrack.runner.results)
    "observe": DOORS,
    "take": DOORS | {"observe"},
    "apply": DOORS,
    "prove": DOORS | {"apply"},
    "probe": set(),  # loaded into the process under test (vLLM's engine and workers): nothing else of porttrack
    "jobs": DOORS | {"prove", "probe"},
    "converge": DOORS | {"observe", "prove"},
    "report": DOORS | {"observe", "take", "apply", "prove", "converge"},
    "bootstrap": DOORS,
    "cli": DOORS | {"observe", "take", "apply", "prove", "converge", "report", "bootstrap", "jobs"},
    "__main__": {"cli"},
}


def _part(module: str) -> str:
    """The subpackage (or top-level module) a porttrack module belongs to; "" for the root."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _layering_violations(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for module, deps in sorted(graph.items()):
        mine = _part(module)
        for dep in sorted(deps):
            theirs = _part(dep)
            if theirs in ("", mine):
                continue
            if theirs not in LAYERS.get(mine, set()):
                bad.append(f"{module} -> {dep}")
    return bad


def test_every_part_of_the_package_has_a_layer() -> None:
    parts = {_part(name) for name in _modules()} - {""}
    assert parts == set(LAYERS)


def test_subpackages_import_only_the_layers_below_them() -> None:
    modules = _modules()
    graph = {name: _own_imports(name, tree, set(modules)) for name, tree in modules.items()}
    assert _layering_violations(graph) == []


def test_a_planted_import_against_the_layers_is_found() -> None:
    """The guardian guards: a door that imports a lifecycle step, and a step that imports a later
    one, are reported, read from real source the same way as the package's own modules."""
    modules = _modules()
    planted = dict(modules)
    planted["porttrack.workspace.planted"] = ast.parse("from porttrack.converge.verify import verify\n")
    planted["porttrack.observe.planted"] = ast.parse("def f():\n    from porttrack.report import gather\n")
    graph = {name: _own_imports(name, tree, set(planted)) for name, tree in planted.items()}
    assert _layering_violations(graph) == ["porttrack.observe.planted -> porttrack.report",
                                           "porttrack.observe.planted -> porttrack.report.gather",
                                           "porttrack.workspace.planted -> porttrack.converge.verify"]


def test_each_subpackage_says_what_it_owns_and_may_import() -> None:
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert len(doc.splitlines()) >= 2, f"{init.parent.name}/__init__.py has no package docstring"
        part = init.parent.name
        if part in LAYERS and LAYERS[part] and part not in ("cli", "report", "jobs"):
            stated = re.search(r"May import: ([^.]*)\.", doc)
            assert stated, f"{part}/__init__.py does not say what it may import"
            assert {s.strip() for s in stated.group(1).split(",")} == LAYERS[part], part


# -- the map is the import order (issue 35) ---------------------------------------------------------

# What `ls porttrack/` may show besides the parts of the map: the entry points and the data the
# package ships (package-data in pyproject.toml: the weekly template, the JSON Schemas, PEP 561).
NOT_IN_MAP = {"__init__.py", "__main__.py", "py.typed", "templates", "schemas"}


def _map_order() -> list[str]:
    """The parts porttrack/__init__.py's map names, in its order ("observe/", "apply.py" -> "apply")."""
    doc = ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))) or ""
    return [m.group(1) for m in re.finditer(r"^ {4,6}(\w+)(?:/|\.py) ", doc, re.M)]


def _order_violations(order: list[str], graph: dict[str, set[str]]) -> list[str]:
    """Imports of a part that comes later in the map than the importer (or that the map lacks)."""
    rank = {part: i for i, part in enumerate(order)}
    bad = []
    for module, deps in sorted(graph.items()):
        mine = _part(module)
        for dep in sorted(deps):
            theirs = _part(dep)
            if theirs in ("", mine) or mine == "__main__":
                continue
            if theirs not in rank or mine not in rank or rank[theirs] > rank[mine]:
                bad.append(f"{module} -> {dep}")
    return bad


def test_the_map_names_every_part_once_and_is_the_import_order() -> None:
    order = _map_order()
    modules = _modules()
    assert len(order) == len(set(order)), order
    assert set(order) == {_part(name) for name in modules} - {"", "__main__"}
    graph = {name: _own_imports(name, tree, set(modules)) for name, tree in modules.items()}
    assert _order_violations(order, graph) == []


def test_a_planted_import_against_the_map_order_is_found() -> None:
    order = _map_order()
    planted = {"porttrack.git.planted": ast.parse("from porttrack.queue.manifest import Patch\n"),
               "porttrack.queue.manifest": ast.parse("")}
    graph = {name: _own_imports(name, tree, set(planted)) for name, tree in planted.items()}
    assert _order_violations(order, graph) == ["porttrack.git.planted -> porttrack.queue.manifest"]


def test_ls_porttrack_shows_the_map_and_nothing_else() -> None:
    shown = {p.name for p in PACKAGE.iterdir() if p.name != "__pycache__"}
    parts = {p.removesuffix(".py") for p in shown - NOT_IN_MAP}
    assert parts == set(_map_order())
    assert {p for p in shown if p.endswith(".py")} == {"__init__.py", "__main__.py", "apply.py"}


# -- imports a reader can follow: absolute, static, never back up ---------------------------------

# Dynamic imports of own modules a part may make, and why.
DYNAMIC_IMPORTS = {
    "porttrack.cli": "the lazy command table (COMMANDS): a command's module is imported when the command is resolved",
}


# Packages whose __init__ holds names their modules import, and why.
UP_ALLOWED = {
    "porttrack": "__version__, the one version string",
    "porttrack.cli": "the command group `cli` and its context: each command module registers itself on it",
    "porttrack.probe": "WARMUP_DONE, the marker a job writes and the probe's plugin reads, defined beside the plugin's hook",
}


def _import_problems(modules: dict[str, ast.Module]) -> list[str]:
    """Relative imports; `importlib.import_module`/`__import__` of an own module outside
    DYNAMIC_IMPORTS; and imports back up: a module importing a name its own package's __init__
    defines, rather than the module that defines it."""
    problems = []
    for name, tree in sorted(modules.items()):
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                problems.append(f"{name}:{node.lineno}: relative import")
            elif isinstance(node, ast.Call) and name not in DYNAMIC_IMPORTS:
                func = ast.unparse(node.func)
                if func in ("importlib.import_module", "import_module", "__import__") and node.args:
                    target = ast.unparse(node.args[0])
                    if "porttrack" in target or "__name__" in target or "__package__" in target:
                        problems.append(f"{name}:{node.lineno}: dynamic import of an own module")
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and name.startswith(node.module + ".") \
                    and node.module not in UP_ALLOWED:
                below = [a.name for a in node.names if f"{node.module}.{a.name}" not in modules]
                if below:
                    problems.append(f"{name}:{node.lineno}: imports {', '.join(below)} back up from {node.module}")
    return problems


def test_imports_are_absolute_static_and_never_back_up() -> None:
    assert _import_problems(_modules()) == []


def test_planted_relative_dynamic_and_upward_imports_are_found(tmp_path) -> None:
    """Planted in a copy of the package, read the same way as the real one."""
    import shutil

    copy = tmp_path / "porttrack"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "diff" / "planted_relative.py").write_text("from .hunks import parse_diff\n", encoding="utf-8")
    (copy / "diff" / "planted_dynamic.py").write_text(
        "import importlib\n\ndef f():\n    return importlib.import_module('porttrack.diff.hunks')\n", encoding="utf-8")
    (copy / "report" / "planted_up.py").write_text("from porttrack.report import SOMETHING\n", encoding="utf-8")
    found = {}
    for path in sorted(copy.rglob("*.py")):
        name = ".".join(path.relative_to(tmp_path).with_suffix("").parts).removesuffix(".__init__")
        found[name] = ast.parse(path.read_text(encoding="utf-8"))
    assert _import_problems(found) == ["porttrack.diff.planted_dynamic:4: dynamic import of an own module",
                                       "porttrack.diff.planted_relative:1: relative import",
                                       "porttrack.report.planted_up:1: imports SOMETHING back up from porttrack.report"]


# -- tests mirror the code (issue 35) -------------------------------------------------------------

TESTS = PACKAGE.parent / "tests"
# Modules without a test file named after them, and why (each one line).
UNTESTED_BY_NAME: dict[str, str] = {
    "porttrack.cli.apply": "the command is driven end to end by tests/test_apply.py",
    "porttrack.cli.converge": "the command is driven end to end by tests/converge/test_verify.py",
    "porttrack.cli.doctor": "the command is driven end to end by tests/bootstrap/test_doctor.py",
    "porttrack.cli.eligibility": "the command is driven end to end by tests/tracks/test_eligibility.py and tests/cli/test_terminal.py",
    "porttrack.cli.gates": "the commands are driven end to end by tests/prove/test_gates.py",
    "porttrack.cli.init": "the command is driven end to end by tests/bootstrap/test_init.py and test_doctor.py",
    "porttrack.cli.params": "the PR-number type is driven through import, refresh and verify-converged by tests/cli/test_first_run.py",
    "porttrack.cli.report": "the command is driven end to end by tests/report/test_render.py and tests/report/test_weekly_*.py",
    "porttrack.cli.take": "the commands are driven end to end by tests/cli/test_queue.py and tests/take/test_importer.py",
    "porttrack.cli.testhooks": "test-only pause points, used by tests/workspace/test_files.py and the crash tests",
    "porttrack.common.errors": "the exit codes are checked by every command's tests; the table by tests/cli/test_help.py",
    "porttrack.converge.coverage": "tested with the importer in tests/take/test_importer.py (issue 35: a file of its own is left to do)",
    "porttrack.diff.pyimports": "tested by tests/properties/test_import_modules_oracle.py (a file of its own is left to do)",
    "porttrack.diff.pymodules": "tested by tests/properties/test_import_modules_oracle.py (a file of its own is left to do)",
    "porttrack.diff.relations": "tested in tests/diff/test_hunks.py and tests/properties/test_separability_oracle.py",
    "porttrack.git.commitgraph": "tested through the git door in tests/git/test_repo.py and benchmarks/commitgraph_fetch.py",
    "porttrack.github.graphql": "tested by tests/observe/test_poll_scale.py and tests/testing/test_github_emulator.py",
    "porttrack.github.policy": "tested by tests/github/test_client.py and tests/github/test_budget.py (a file of its own is left to do)",
    "porttrack.github.records": "frozen records, tested by what the client returns in tests/github/test_client.py",
    "porttrack.jobs.importwatch.sitecustomize": "runs inside the job's Python; tested by tests/jobs/test_timed.py",
    "porttrack.observe.prdiff": "tested by tests/observe/test_poll.py and tests/take/test_importer.py (a file of its own is left to do)",
    "porttrack.probe.events": "tested by tests/probe/test_instruments.py and tests/properties/test_probe_log_fuzz.py",
    "porttrack.probe.summary": "tested by tests/probe/test_instruments.py and tests/properties/test_probe_log_fuzz.py",
    "porttrack.probe.vllm_plugin": "tested by tests/probe/test_instruments.py (the plugin in a real subprocess)",
    "porttrack.prove.gate_output": "tested by tests/prove/test_gates.py (the golden gate_check_fail.json)",
    "porttrack.prove.gaterun": "tested by tests/prove/test_gates.py and tests/jobs/test_cells_gate_e2e.py",
    "porttrack.prove.interleave": "tested by tests/prove/test_gates.py (a file of its own is left to do)",
    "porttrack.prove.promote": "tested by tests/prove/test_gates.py",
    "porttrack.queue.manifest": "tested by tests/cli/test_queue.py and tests/queue/test_mail.py (a file of its own is left to do)",
    "porttrack.queue.series": "tested by tests/test_apply.py (split out of apply.py by the house move)",
    "porttrack.report.gather": "tested by tests/report/test_render.py and tests/report/test_weekly_*.py",
    "porttrack.report.history": "tested by tests/report/test_post.py and tests/report/test_weekly_ci.py",
    "porttrack.report.knowledge": "tested by tests/report/test_status.py and tests/report/test_weekly_agrees.py",
    "porttrack.report.records": "records and their JSON, tested by tests/report/test_render.py",
    "porttrack.runner.results": "tested by tests/prove/test_gates.py and tests/jobs/test_cells.py (a file of its own is left to do)",
    "porttrack.take.checks": "tested by tests/take/test_separability.py and tests/take/test_importer_processes.py",
    "porttrack.take.refresh": "tested by tests/cli/test_queue.py (refresh) (a file of its own is left to do)",
    "porttrack.take.source": "tested by tests/take/test_importer.py and tests/cli/test_first_run.py",
    "porttrack.tracks.examples": "the commented examples `init` writes, tested by tests/tracks/test_schema.py and tests/bootstrap/test_doctor.py",
    "porttrack.tracks.validation": "tested by tests/tracks/test_file.py (every malformed tracks.yaml)",
    "porttrack.workspace.state": "tested by tests/report/test_status.py and tests/common/test_clock.py",
}


def _expected_test(module: str) -> Path:
    parts = module.split(".")[1:]
    return TESTS.joinpath(*parts[:-1], f"test_{parts[-1]}.py")


def test_every_module_has_a_test_file_named_after_it_or_a_reason() -> None:
    modules = [m for m in _modules() if not (PACKAGE.parent / (m.replace(".", "/") + "/__init__.py")).exists()
               and m not in ("porttrack.__main__",)]
    missing = sorted(m for m in modules if not _expected_test(m).exists() and m not in UNTESTED_BY_NAME)
    assert missing == [], f"no tests/<package>/test_<module>.py and no reason in UNTESTED_BY_NAME: {missing}"
    stale = sorted(m for m in UNTESTED_BY_NAME if m not in modules or _expected_test(m).exists())
    assert stale == [], f"UNTESTED_BY_NAME names modules that are gone or now have a test file: {stale}"
