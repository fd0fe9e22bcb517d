"""The architecture, checked: no import cycles, one door each to git, GitHub and local jobs, and
modules of one idea (STYLE.md 2, 12-14).

These read the source with `ast`, so they hold for every import, also one inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "porttrack"
# A module may grow past this only with a reason stated here: the idea it holds, and why it is one.
MAX_LINES = 700
LONG_MODULES: dict[str, str] = {
    "porttrack/github.py": "the one door to GitHub: every request porttrack sends, with its deadline, retries, "
                           "conditional cache and the endpoints it calls; its records (github_records), policy "
                           "(github_policy) and GraphQL batching (github_graphql) already live apart",
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
    assert sorted(name for name, tree in modules.items() if _imports_of(tree) & http) == ["porttrack.github"]


def test_processes_start_in_the_doors_only() -> None:
    """git runs only in gitrepo; a user's job command only in the one job runner; `gh auth token`
    only where the token is resolved; the user's pager only where output meets the terminal."""
    allowed = {"porttrack.gitrepo", "porttrack.jobs.runner", "porttrack.secrets", "porttrack.cli.terminal"}
    starts = {name: _process_calls(tree) for name, tree in _modules().items()}
    assert {name: lines for name, lines in starts.items() if lines and name not in allowed} == {}
    assert starts.get("porttrack.jobs.runner"), "the job runner exists and starts the jobs"


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
    assert holders == ["gitrepo.py"]
