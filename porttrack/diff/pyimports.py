"""What a Python module imports and binds at module level, read from its syntax tree (no
analysis of values): the facts `porttrack.diff.pycheck` caches per blob and
`porttrack.diff.pymodules` resolves across the project's files."""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass


@dataclass(frozen=True)
class ImportOf:
    """`from MODULE import NAME` (NAME "" for `import MODULE`) on `line` of a file; `guarded`:
    inside a `try` (an optional import, allowed to fail)."""

    module: str
    name: str
    line: int
    guarded: bool


def module_of(path: str) -> str | None:
    """`pkg/sub/mod.py` -> "pkg.sub.mod"; `pkg/__init__.py` -> "pkg"; None for other files."""
    if not path.endswith(".py"):
        return None
    parts = path[:-3].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts) if parts and all(p.isidentifier() for p in parts) else None


def module_paths(module: str) -> tuple[str, str]:
    """Where module "a.b" lives in a source tree: a/b.py or a/b/__init__.py."""
    base = module.replace(".", "/")
    return f"{base}.py", f"{base}/__init__.py"


def _imports(tree: ast.Module, path: str) -> list[ImportOf]:
    """Every `from M import n` and `import M` of the file, relative ones resolved against its
    package (stubs and files outside packages resolve as their folder says)."""
    package = path.split("/")[:-1]
    out: list[ImportOf] = []
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, guarded = stack.pop()
        if isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level - 1 > len(package):
                    continue
                base = package[:len(package) - (node.level - 1)]
                module = ".".join(base + (node.module.split(".") if node.module else []))
            else:
                module = node.module or ""
            if module:
                for alias in node.names:
                    out.append(ImportOf(module, alias.name, getattr(alias, "lineno", node.lineno), guarded))
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                out.append(ImportOf(alias.name, "", getattr(alias, "lineno", node.lineno), guarded))
            continue
        inside = guarded or isinstance(node, ast.Try) or type(node).__name__ == "TryStar"
        for child in ast.iter_child_nodes(node):
            if isinstance(node, ast.Try) and child in node.finalbody:
                stack.append((child, guarded))
            else:
                stack.append((child, inside))
    return out


def _top_level(tree: ast.Module) -> frozenset[str] | None:
    """Names bound at module level (what `from this import NAME` finds); None when anything may
    be there: a star import, a module `__getattr__`, or `globals()` / `vars()` / `setattr` used."""
    lines = top_level_lines(tree)
    return None if lines is None else frozenset(lines)


def top_level_lines(tree: ast.Module) -> dict[str, set[int]] | None:
    """name -> the lines that bind it at module level (definitions, imports, assignments, also
    inside `if` / `try` / `with` / loops at module level, and `global` names); None as above."""
    names: dict[str, set[int]] = defaultdict(set)
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            for name in node.names:
                names[name].add(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("globals", "vars", "setattr"):
            return None
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name].add(node.lineno)
            continue
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue  # their names stay inside
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None
                bound = alias.asname or (alias.name.split(".")[0] if isinstance(node, ast.Import) else alias.name)
                names[bound].add(getattr(alias, "lineno", node.lineno))
            continue
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names[node.id].add(node.lineno)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names[node.name].add(node.lineno)
        elif type(node).__name__ in ("MatchAs", "MatchStar") and getattr(node, "name", None):
            names[node.name].add(node.lineno)  # type: ignore[attr-defined]
        stack.extend(ast.iter_child_nodes(node))
    if "__getattr__" in names:
        return None
    return dict(names)
