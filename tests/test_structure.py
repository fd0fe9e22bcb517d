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
                           "conditional cache and the endpoints it calls; its records (github_records), policy "
                           "(github_policy) and GraphQL batching (github_graphql) already live apart",
    "porttrack/git/repo.py": "the one door to git: every process porttrack starts in a repository (commands, fetch, "
                            "clone, worktrees, scratch indexes) and the one object reader they share; the "
                            "commit-graph reader (common/commitgraph) and the pinned settings (common/gitconfig) "
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
    """git runs only in gitrepo; a user's job command only in the one job runner; `gh auth token`
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
    holders = sorted(p.name for p, text in sources.items() if "no fork checkout" in text.lower())
    assert holders == ["git/repo.py"]


# The layering the subpackages' docstrings state (issue 23): a module may import its own
# subpackage, the root package (the map and __version__), and the subpackages listed here.
# Lower layers first; a lifecycle step imports only the doors and the steps before it.
DOORS = {"common", "diff", "workspace", "gitrepo", "github", "tracks"}
LAYERS: dict[str, set[str]] = {
    "common": set(),
    "diff": {"common"},
    "workspace": {"common", "diff"},
    "gitrepo": {"common", "workspace"},
    "github": {"common", "workspace"},
    "tracks": {"common", "workspace"},
    "observe": DOORS,
    "apply": DOORS,
    "take": DOORS | {"observe", "apply"},
    "results": {"common"},  # the contract a job writes and prove reads (jobs import porttrack.runner.results)
    "prove": DOORS | {"apply", "results"},
    "probe": set(),  # loaded into the process under test (vLLM's engine and workers): nothing else of porttrack
    "jobs": DOORS | {"prove", "probe", "results"},
    "converge": DOORS | {"observe", "prove"},
    "report": DOORS | {"observe", "take", "apply", "prove", "results", "converge"},
    "bootstrap": DOORS,
    "cli": DOORS | {"observe", "take", "apply", "prove", "results", "converge", "report", "bootstrap", "jobs"},
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
