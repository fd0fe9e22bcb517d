"""Separability is more than textual: names that one hunk uses and only another brings, and the
proof after taking that the patched Python files are no worse than the base.

Seen on vLLM #48407 taken over an older fork base: every hunk taken applied cleanly, and the
patched `sparse_attn_indexer.py` used `forward_context` and `CUDAGraphMode`, which only hunks left
out as "not separable" imported; `vllm/v1/worker/utils.py` used `Mapping` in an annotation whose
import hunk was left out, so the module no longer imported. `git apply` cannot see this.

- `name_edges(files, pre, post)`: hunk B depends on hunk A when B's added lines use a name whose
  every binding in the post-image (def, class, import, assignment, parameter, ...) lies on lines
  that hunks add, one of them A's and none B's own; and, on the pre-image side, when A removes
  every binding of a name B's removed lines use (taking A alone would strand B's old use). Scopes
  are not resolved (a name bound only on added lines anywhere in the file counts): an edge too
  many makes a group larger, never a broken patch; one too few is caught by the check below.
- `check_sources(before, after)`: pyflakes on each Python file before and after the patch; new
  undefined names, and a file that no longer compiles, are findings. Files in other languages are
  listed as not checked. pyflakes is imported when a Python file is checked (it costs ~60 ms).
"""

from __future__ import annotations

import ast
import keyword
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from porttrack.common.errors import PreconditionError
from porttrack.diff.hunks import FileDiff, Hunk
from porttrack.diff.relations import Dependency

PYTHON_SUFFIXES = (".py", ".pyi")
# The largest Python file the check reads. vLLM's largest is ~0.36 MB; parsing and pyflakes cost
# about 60 bytes of memory per byte of source, so 2 MiB stays far inside the 500 MB budget.
MAX_PYTHON_BYTES = 2 * 1024 * 1024


class NotCheckable(PreconditionError):
    """A Python file the check cannot analyse within its bounds: larger than `MAX_PYTHON_BYTES`, or
    nested so deeply that Python's own parser or compiler (or pyflakes) runs out of recursion or
    memory. The import refuses it (exit 6), naming the file and how to leave it out."""

    def __init__(self, path: str, why: str) -> None:
        self.path = path
        super().__init__(f"{path}: {why}; porttrack cannot check this Python file, so it does not take it: "
                         f"leave it out with --exclude {path!r} (or take the rest with --paths)")


def _bounded(path: str, source: bytes) -> None:
    if len(source) > MAX_PYTHON_BYTES:
        raise NotCheckable(path, f"{len(source):,} bytes, more than the source check reads ({MAX_PYTHON_BYTES:,})")


def parse_shared(source: bytes, path: str, parsed: dict | None) -> ast.Module | None:
    """`parse_bounded`, once per content within one command when `parsed` (a dict) is handed round."""
    if parsed is None:
        return parse_bounded(source, path)
    key = (path, len(source), hash(source))
    if key not in parsed:
        try:
            parsed[key] = parse_bounded(source, path)
        except NotCheckable as exc:
            parsed[key] = exc
    found = parsed[key]
    if isinstance(found, NotCheckable):
        raise found
    return found


def parse_bounded(source: bytes, path: str) -> ast.Module | None:
    """`ast.parse` within the check's bounds: None when it is not Python this parser reads (a
    syntax error, null bytes); `NotCheckable` when too large or too deeply nested to analyse."""
    _bounded(path, source)
    try:
        return ast.parse(source, filename=path)
    except (SyntaxError, ValueError):
        return None
    except (RecursionError, MemoryError) as exc:
        raise NotCheckable(path, f"nested too deeply for Python's parser ({type(exc).__name__})") from None


def is_python(path: str) -> bool:
    return path.endswith(PYTHON_SUFFIXES)


# -- names hunks bring and use -----------------------------------------------------------------


@dataclass(frozen=True)
class NameUse:
    """Hunk `user` uses `name`, which only hunk `source` brings (side "post": `source` adds its
    binding; "pre": `source` removes the binding `user`'s removed lines still use)."""

    source: str
    user: str
    name: str
    path: str
    side: str = "post"


def name_uses(files: Sequence[FileDiff], pre: Mapping[str, bytes], post: Mapping[str, bytes],
              parsed: dict | None = None, cache: "FactsCache | None" = None) -> list[NameUse]:
    """Name dependencies between the text hunks of each Python entry of `files`. `pre` / `post`:
    the whole file before and after the diff, by old / new path (a missing or unparsable file
    adds no edge for its side)."""
    out: list[NameUse] = []
    for fd in files:
        hunks = [h for h in fd.text_hunks]
        if len(hunks) < 2:
            continue
        if fd.new_path and is_python(fd.new_path) and fd.new_path in post:
            lines = {h.id: _changed_lines(h, "+") for h in hunks}
            out += _uses(post[fd.new_path], lines, fd.new_path, "post", parsed, cache)
        if fd.old_path and is_python(fd.old_path) and fd.old_path in pre:
            lines = {h.id: _changed_lines(h, "-") for h in hunks}
            out += _uses(pre[fd.old_path], lines, fd.old_path, "pre", parsed, cache)
    return out


def _changed_lines(h: Hunk, marker: str) -> set[int]:
    """Line numbers (in the post-image for "+", the pre-image for "-") of the lines `h` adds / removes."""
    n = (h.new_start if marker == "+" else h.old_start) or 1
    out: set[int] = set()
    for m, _content in h._lines():
        if m == marker.encode():
            out.add(n)
            n += 1
        elif m == b" ":
            n += 1
    return out


def _uses(source: bytes, changed: Mapping[str, set[int]], path: str, side: str, parsed: dict | None = None,
          cache: "FactsCache | None" = None) -> list[NameUse]:
    try:
        if cache is not None:
            facts = cache.get(source, path)
            names = facts.names
            facts.drop_tree()
        else:
            names = _bindings_and_uses(source, path, parsed)
    except NotCheckable:
        return []  # no edge from a file the check cannot read; taken, the check after taking refuses it
    if names is None:
        return []
    bound, used = names
    owner = {line: hid for hid, lines in changed.items() for line in lines}
    out: list[NameUse] = []
    seen: set[tuple[str, str, str]] = set()
    for user, lines in changed.items():
        for name in sorted({n for line in lines for n in used.get(line, ())}):
            where = bound.get(name)
            if not where or any(line not in owner for line in where) or any(owner[line] == user for line in where):
                continue  # a builtin or a module global; bound on a line the diff keeps; or by itself
            for source_id in sorted({owner[line] for line in where}):
                if (source_id, user, name) not in seen:
                    seen.add((source_id, user, name))
                    out.append(NameUse(source_id, user, name, path, side))
    return out


def _bindings_and_uses(source: bytes, path: str = "<source>", parsed: dict | None = None
                       ) -> tuple[dict[str, set[int]], dict[int, set[str]]] | None:
    """name -> lines that bind it; line -> names loaded there. None: not Python this parser reads."""
    tree = parse_shared(source, path, parsed)
    if tree is None:
        return None
    return _bindings_and_uses_in(tree)


def _bindings_and_uses_in(tree: ast.Module) -> tuple[dict[str, set[int]], dict[int, set[str]]]:
    bound: dict[str, set[int]] = defaultdict(set)
    used: dict[int, set[str]] = defaultdict(set)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                used[node.lineno].add(node.id)
            else:
                bound[node.id].add(node.lineno)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound[node.name].add(node.lineno)
        elif isinstance(node, ast.arg):
            bound[node.arg].add(node.lineno)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name != "*":
                    bound[alias.asname or alias.name.split(".")[0]].add(getattr(alias, "lineno", node.lineno))
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound[node.name].add(node.lineno)
        elif type(node).__name__ in ("MatchAs", "MatchStar") and getattr(node, "name", None):
            bound[node.name].add(node.lineno)  # type: ignore[attr-defined]
    return bound, used


_WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
# one-line string literals, then comments: their words are no names (a prefilter only: the
# check after taking stands behind it)
_NOT_CODE = re.compile(rb"""'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|#[^\n]*""")


def may_share_words(fd: FileDiff, marker: str) -> bool:
    """Whether two text hunks of `fd` add (or remove) lines that share a word: a name one of
    them uses and only the other binds appears in both, so without such a word there is no
    edge and the whole files need not be read and parsed (most files of a big PR)."""
    if len(fd.text_hunks) < 2:
        return False
    seen: set[bytes] = set()
    for h in fd.text_hunks:
        lines = h.added_lines() if marker == "+" else h.removed_lines()
        words = set(_WORD.findall(_NOT_CODE.sub(b" ", b"\n".join(lines)))) - _KEYWORDS
        if words & seen:
            return True
        seen |= words
    return False


_KEYWORDS = {w.encode() for w in keyword.kwlist}


def as_edges(uses: Sequence[NameUse]) -> list[Dependency]:
    return [Dependency(u.source, u.user, "uses-name") for u in uses]


def describe(uses: Sequence[NameUse], shown: int = 6) -> list[str]:
    """Notes for the import: which hunk travels with which, and the names that tie them."""
    by_pair: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for u in uses:
        by_pair[(u.user, u.source, u.path)].append(u.name)
    lines = []
    for (user, source, path), names in list(by_pair.items())[:shown]:
        lines.append(f"hunk {user[:12]} of {path} uses {', '.join(f'`{n}`' for n in names)}, which only hunk "
                     f"{source[:12]} brings: they are taken together or not at all")
    if len(by_pair) > shown:
        lines.append(f"... and {len(by_pair) - shown} more pairs of hunks tied by names")
    return lines


# -- the check after taking ---------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """kind: undefined-name (detail: the name) | does-not-compile (detail: the error) |
    broken-import (detail: what cannot be imported, e.g. "cannot import name 'x' from pkg.a") |
    not-checked (detail: why: another language, a binary file). `lines`: where in the patched file
    (not recorded: only for naming the hunks responsible)."""

    kind: str
    path: str
    detail: str
    lines: tuple[int, ...] = field(default=(), compare=False)
    name: str = field(default="", compare=False)  # broken-import: the name (or module) missing
    target: str = field(default="", compare=False)  # broken-import: the module's path(s) looked at

    @property
    def words(self) -> str:
        if self.kind == "undefined-name":
            return f"{self.path}: new undefined name '{self.detail}'"
        if self.kind == "does-not-compile":
            return f"{self.path} no longer compiles: {self.detail}"
        if self.kind == "broken-import":
            return f"{self.path}: {self.detail}"
        return f"{self.path} not checked ({self.detail})"


@dataclass(frozen=True)
class SourceCheck:
    """What the check after taking found: `checked` the Python files analysed; `findings` new
    undefined names, files that no longer compile, imports of the project's own modules that no
    longer resolve, and files not checked (other languages)."""

    tool: str
    checked: tuple[str, ...]
    findings: tuple[Finding, ...]

    @property
    def failed(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.kind != "not-checked")

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def not_checked(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.kind == "not-checked")

    @property
    def text(self) -> str:
        """One line: the verdict and what it rests on."""
        if self.failed:
            shown = "; ".join(f.words for f in self.failed[:4]) + (f" (+{len(self.failed) - 4} more)" if len(self.failed) > 4 else "")
            head = f"source check FAILED ({self.tool}): {shown}"
        else:
            head = f"source check passed ({self.tool}: {len(self.checked)} Python file(s), no new undefined names, all compile)"
        if self.not_checked:
            head += f"; not checked: {', '.join(f.path for f in self.not_checked[:6])}" + (" ..." if len(self.not_checked) > 6 else "")
        return head

    def to_json(self) -> dict[str, Any]:
        return {"tool": self.tool, "ok": self.ok, "checked": list(self.checked),
                "findings": [{"kind": f.kind, "path": f.path, "detail": f.detail} for f in self.findings]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> "SourceCheck | None":
        if not data:
            return None
        return cls(str(data.get("tool", "")), tuple(data.get("checked") or ()),
                   tuple(Finding(str(f["kind"]), str(f["path"]), str(f.get("detail", ""))) for f in data.get("findings") or ()))


class FileFacts:
    """What the check needs of one Python file's content, each part computed on first use and kept
    (the object is cached by blob id: `file_facts`): its compile error, pyflakes' undefined names
    with their lines, its imports, and the names it binds at module level (None: any name may
    be there). `to_json` / `from_json`: the parts computed so far, for a cache on disk."""

    def __init__(self, source: bytes | None, path: str, data: Mapping[str, Any] | None = None) -> None:
        self._source, self.path = source, path
        self._data: dict[str, Any] = dict(data or {})
        self._tree: ast.Module | None = None

    def _parsed(self) -> ast.Module:
        if self._tree is None:
            assert self._source is not None
            tree = parse_bounded(self._source, self.path)
            assert tree is not None, "compiled, so it parses"
            self._tree = tree
        return self._tree

    @property
    def error(self) -> str | None:
        if "error" not in self._data:
            assert self._source is not None
            self._data["error"] = _compile_error(self._source, self.path)
        return self._data["error"]

    @property
    def undefined(self) -> tuple[tuple[str, int], ...]:
        if "undefined" not in self._data:
            self._data["undefined"] = [] if self.error else [list(x) for x in _undefined_in(self._parsed(), self.path)]
        return tuple((str(n), int(ln)) for n, ln in self._data["undefined"])

    def _parsed_or_none(self) -> ast.Module | None:
        """The tree without asking the compiler first (None: Python's parser does not read it)."""
        if self._tree is None and self._data.get("parses", True):
            assert self._source is not None
            self._tree = parse_bounded(self._source, self.path)
            self._data["parses"] = self._tree is not None
        return self._tree

    @property
    def imports(self) -> tuple["ImportOf", ...]:
        if "imports" not in self._data:
            tree = self._parsed_or_none()
            self._data["imports"] = [] if tree is None else [[i.module, i.name, i.line, i.guarded] for i in _imports(tree, self.path)]
        return tuple(ImportOf(str(m), str(n), int(ln), bool(g)) for m, n, ln, g in self._data["imports"])

    @property
    def names(self) -> tuple[dict[str, set[int]], dict[int, set[str]]] | None:
        """`_bindings_and_uses` of the file (None: it does not parse)."""
        if "names" not in self._data:
            tree = self._parsed_or_none()
            if tree is None:
                self._data["names"] = None
            else:
                bound, used = _bindings_and_uses_in(tree)
                self._data["names"] = [{n: sorted(ls) for n, ls in bound.items()},
                                       {str(ln): sorted(ns) for ln, ns in used.items()}]
        data = self._data["names"]
        if data is None:
            return None
        return ({n: set(ls) for n, ls in data[0].items()}, {int(ln): set(ns) for ln, ns in data[1].items()})

    @property
    def top_lines(self) -> dict[str, set[int]] | None:
        """`top_level_lines` of the file (None: it does not parse, or any name may be there)."""
        if "top_lines" not in self._data:
            tree = self._parsed_or_none()
            found = None if tree is None else top_level_lines(tree)
            self._data["top_lines"] = None if found is None else {n: sorted(ls) for n, ls in found.items()}
        data = self._data["top_lines"]
        return None if data is None else {n: set(ls) for n, ls in data.items()}

    @property
    def parses(self) -> bool:
        if "parses" not in self._data:
            self._parsed_or_none()
        return bool(self._data["parses"])

    def drop_tree(self) -> None:
        """Forget the parsed tree (what was computed from it stays): trees are large."""
        self._tree = None

    @property
    def top(self) -> frozenset[str] | None:
        if "top" not in self._data:
            names = None if self.error else _top_level(self._parsed())
            self._data["top"] = None if names is None else sorted(names)
        return None if self._data["top"] is None else frozenset(self._data["top"])

    def release(self) -> None:
        """Drop the source and its tree (kept: what was computed)."""
        self._source, self._tree = None, None

    def to_json(self) -> dict[str, Any]:
        return dict(self._data)


@dataclass(frozen=True)
class ImportOf:
    """`from MODULE import NAME` (NAME "" for `import MODULE`) on `line` of a file; `guarded`:
    inside a `try` (an optional import, allowed to fail)."""

    module: str
    name: str
    line: int
    guarded: bool


class FactsCache:
    """`FileFacts` by blob id: in memory for one command, and, with `folder`, on disk for the next
    (the base's files are analysed once; an import over the same fork tip reads their findings
    back). One JSON file per blob, written atomically; a damaged one is analysed again."""

    def __init__(self, folder: "Any | None" = None) -> None:
        self.folder = folder
        self.memory: dict[str, FileFacts] = {}
        self._stored: dict[str, int] = {}  # blob id -> how many parts its file on disk holds
        self.hits = self.misses = 0

    def get(self, source: bytes, path: str) -> FileFacts:
        key = blob_id(source)
        facts = self.memory.get(key)
        if facts is not None:
            facts.path = path
            return facts
        data = self._load(key)
        if data is not None:
            self.hits += 1
            facts = FileFacts(source, path, data)
            self._stored[key] = len(facts._data)
        else:
            self.misses += 1
            _bounded(path, source)
            facts = FileFacts(source, path)
        self.memory[key] = facts
        return facts

    def _load(self, key: str) -> dict[str, Any] | None:
        if self.folder is None:
            return None
        import json

        try:
            data = json.loads((self.folder / f"{key}.json").read_text("utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and data.get("schema") == FACTS_SCHEMA else None

    def save(self) -> None:
        """Write what this command computed (best effort: a cache that cannot be written is only slower)."""
        if self.folder is None:
            return
        import json
        import os
        import tempfile

        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            for key, facts in self.memory.items():
                if self._stored.get(key) == len(facts._data):
                    continue  # read from disk, nothing computed since
                target = self.folder / f"{key}.json"
                data = {"schema": FACTS_SCHEMA, **facts.to_json()}
                fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-")
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    json.dump(data, out)
                os.replace(tmp, target)
        except OSError:
            pass


FACTS_SCHEMA = "porttrack/pycheck-facts/v1"


def file_facts(source: bytes, path: str, cache: "FactsCache | None" = None) -> FileFacts:
    """`FileFacts` of `source`, from `cache` when given."""
    if cache is not None:
        return cache.get(source, path)
    _bounded(path, source)
    return FileFacts(source, path)


def blob_id(source: bytes) -> str:
    """git's blob id of `source` (SHA-1 object format)."""
    import hashlib

    return hashlib.sha1(b"blob %d\0" % len(source) + source).hexdigest()


def check_sources(before: Mapping[str, bytes | None], after: Mapping[str, bytes | None], *,
                  project: "Project | None" = None, cache: FactsCache | None = None) -> SourceCheck:
    """Each path of `after` (None: deleted) against `before` (None: absent there). A Python file
    is no worse when it compiles, pyflakes finds no undefined name that it did not find before
    (counted per name, so a second use of a name already undefined is not news), and, with a
    `project` (the tree around the patched files), each `from M import n` of the project's own
    modules still finds `n` (bound at M's module level, or a submodule) where it did before.
    `cache`: `FileFacts` by blob id (the base's files are analysed once, then reused)."""
    checked: list[str] = []
    findings: list[Finding] = []
    for path in sorted(after):
        new = after[path]
        if new is None:
            continue  # deleted: nothing left to check here (its importers are checked through `project`)
        if not is_python(path):
            findings.append(Finding("not-checked", path, "not Python: no analyser for it"))
            continue
        checked.append(path)
        old = before.get(path)
        if new == old:
            continue  # unchanged (a rename, a mode change): no worse
        now = file_facts(new, path, cache)
        was = file_facts(old, path, cache) if old is not None else None
        if now.error:
            if was is None or not was.error:  # broken by the patch, not before it
                findings.append(Finding("does-not-compile", path, now.error, _error_line(now.error)))
            continue
        now_undefined = Counter(n for n, _ in now.undefined)
        # the base is only analysed by pyflakes when the patched file has undefined names at all
        was_undefined = Counter(n for n, _ in was.undefined) if now_undefined and was is not None and not was.error else Counter()
        if project is not None:
            now.imports  # noqa: B018 - read while the tree is at hand: the cross-module check asks
        for facts in (now, was):
            if facts is not None:
                facts.drop_tree()
        findings += [Finding("undefined-name", path, name, tuple(sorted({ln for n, ln in now.undefined if n == name})))
                     for name in sorted(now_undefined) if now_undefined[name] > was_undefined.get(name, 0)]
    if project is not None:
        findings += project.broken_imports(before, after, cache)
    return SourceCheck(checker_label(), tuple(checked), tuple(findings))


def _error_line(error: str) -> tuple[int, ...]:
    m = re.search(r"\(line (\d+)\)$", error)
    return (int(m.group(1)),) if m else ()


def _compile_error(source: bytes, path: str) -> str | None:
    _bounded(path, source)
    try:
        compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return f"{exc.msg} (line {exc.lineno})"
    except ValueError as exc:  # null bytes
        return str(exc)
    except (RecursionError, MemoryError) as exc:
        raise NotCheckable(path, f"nested too deeply for Python's compiler ({type(exc).__name__})") from None
    return None


def _undefined_in(tree: ast.Module, path: str) -> list[tuple[str, int]]:
    from pyflakes import checker, messages  # lazy: only when a Python file is checked

    try:
        found = checker.Checker(tree, filename=path)
    except (RecursionError, MemoryError) as exc:
        raise NotCheckable(path, f"nested too deeply for pyflakes ({type(exc).__name__})") from None
    return [(str(m.message_args[0]), int(m.lineno)) for m in found.messages
            if isinstance(m, (messages.UndefinedName, messages.UndefinedLocal))]


def undefined_names(source: bytes, path: str) -> Counter:
    """name -> how many times pyflakes reports it undefined in `source` (which must compile)."""
    tree = parse_bounded(source, path)
    if tree is None:
        raise SyntaxError(f"{path} does not parse")
    return Counter(name for name, _line in _undefined_in(tree, path))


# -- the project's own modules: names imported across files -----------------------------------------


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


def cross_module_uses(files: Sequence[FileDiff], pre: Mapping[str, bytes], post: Mapping[str, bytes],
                      importing_pre: Sequence[str], importing_post: Sequence[str], parsed: dict | None = None,
                      cache: "FactsCache | None" = None) -> list[NameUse]:
    """Name dependencies across the PR's modules. Post side: hunk U adds `from M import n` (the
    line naming n), M is one of the PR's files, and every module-level binding of n in M's
    post-image lies on lines that hunks of M add (none of them U): U travels with those hunks.
    Pre side: hunk U removes such an import line and hunks of M remove every binding of n that
    M's pre-image has (taking them without U would leave U's file importing a name that is gone).
    A file that cannot be read within the check's bounds adds no edge."""
    out: list[NameUse] = []
    seen: set[tuple[str, str, str]] = set()
    for side, contents, importers in (("post", post, importing_post), ("pre", pre, importing_pre)):
        marker = "+" if side == "post" else "-"
        owner: dict[str, dict[int, str]] = defaultdict(dict)
        for fd in files:
            path = fd.new_path if side == "post" else fd.old_path
            if path and path in contents:
                for h in fd.text_hunks:
                    for line in _changed_lines(h, marker):
                        owner[path][line] = h.id
        tops: dict[str, dict[str, set[int]] | None] = {}
        for path in dict.fromkeys(importers):
            if path not in contents or not owner.get(path):
                continue
            try:
                if cache is not None:
                    facts = cache.get(contents[path], path)
                    imports = facts.imports if facts.parses else None
                    facts.drop_tree()
                else:
                    tree = parse_shared(contents[path], path, parsed)
                    imports = None if tree is None else tuple(_imports(tree, path))
            except NotCheckable:
                continue
            if imports is None:
                continue
            for imp in imports:
                user = owner[path].get(imp.line)
                if user is None or not imp.name:
                    continue
                target = next((p for p in module_paths(imp.module) if p in contents), None)
                if target is None or not owner.get(target):
                    continue
                if target not in tops:
                    try:
                        if cache is not None:
                            target_facts = cache.get(contents[target], target)
                            tops[target] = target_facts.top_lines
                            target_facts.drop_tree()
                        else:
                            target_tree = parse_shared(contents[target], target, parsed)
                            tops[target] = top_level_lines(target_tree) if target_tree is not None else None
                    except NotCheckable:
                        tops[target] = None
                top = tops[target]
                where = (top or {}).get(imp.name)
                if not where or any(line not in owner[target] for line in where):
                    continue  # bound where the diff keeps it (or not at all, or anything goes)
                for source in sorted({owner[target][line] for line in where} - {user}):
                    if (source, user, imp.name) not in seen:
                        seen.add((source, user, imp.name))
                        out.append(NameUse(source, user, imp.name, path, side))
    return out


DIRECTORY = b"\0directory"  # what a `Project` reader returns for a folder


class Project:
    """The tree around the patched files, for the cross-module check. `read(paths)` returns, per
    path, its content at the fork tip (bytes), `DIRECTORY` for a folder, or None where there is
    nothing (asked in batches; answers are kept). `expected`: paths the PR's own tree has (a module
    the fork lacks and the PR's tree has is a broken import; one neither has -- compiled, generated,
    another package -- is not judged). `importers`: more files (path -> content, which the patch
    leaves as they are) whose imports are judged too, only those of modules the patch changes: the
    PR's files left out, which may import what a taken hunk removes."""

    def __init__(self, read: Callable[[list[str]], Mapping[str, bytes | None]], expected: frozenset[str] = frozenset(),
                 importers: Mapping[str, bytes] | None = None) -> None:
        self._read = read
        self._known: dict[str, bytes | None] = {}
        self.expected = expected
        self.importers = dict(importers or {})

    def _fetch(self, paths: list[str]) -> None:
        wanted = [p for p in dict.fromkeys(paths) if p not in self._known]
        if wanted:
            got = self._read(wanted)
            for p in wanted:
                self._known[p] = got.get(p)

    def broken_imports(self, before: Mapping[str, bytes | None], after: Mapping[str, bytes | None],
                       cache: "FactsCache | None") -> list[Finding]:
        """Imports of the project's own modules that resolve at the fork tip (or did not exist there)
        and no longer resolve with the patch: `from M import n` where M has no module-level `n` and
        no submodule `n`, or M itself gone (or never brought: a module of the PR's tree left out)."""
        changed = {p for p in after if before.get(p) != after[p]}
        if not changed:
            return []
        files: dict[str, tuple[bytes, bool]] = {}  # path -> (content after, changed by the patch)
        for p, c in after.items():
            if c is not None and is_python(p):
                files[p] = (c, p in changed)
        for p, c in self.importers.items():
            if p not in after and is_python(p) and c is not None:
                files[p] = (c, False)
        facts: dict[str, FileFacts] = {}
        for path, (content, touched) in files.items():
            try:
                f = file_facts(content, path, cache)
                if f.error:
                    continue  # does-not-compile is its own finding (or was so before)
                f.imports  # noqa: B018 - parse now, so an unreadable left-out file is skipped here
            except NotCheckable:
                if touched:
                    raise
                continue
            facts[path] = f
        asked = [c for f in facts.values() for imp in f.imports if not imp.guarded for c in _candidates(imp)]
        self._fetch([p for p in asked if p not in after])
        sides = {"after": after, "before": before}
        findings: list[Finding] = []
        for path, f in sorted(facts.items()):
            touched = files[path][1]
            now = self._problems(f, sides, "after", relevant=None if touched else changed, cache=cache)
            if not now:
                continue
            old = before.get(path) if path in after else files[path][0]
            was: dict = {}
            if old is not None:
                try:
                    old_facts = file_facts(old, path, cache)
                    if not old_facts.error:
                        self._fetch([c for imp in old_facts.imports if not imp.guarded for c in _candidates(imp) if c not in before])
                        was = self._problems(old_facts, sides, "before", relevant=None, cache=cache)
                except NotCheckable:
                    was = {}
            for key, (line, detail, target) in sorted(now.items()):
                if key not in was:
                    findings.append(Finding("broken-import", path, detail, (line,), key[1] or key[0], target))
        return findings

    def _content(self, path: str, side: Mapping[str, bytes | None]) -> bytes | None:
        return side[path] if path in side else self._known.get(path)

    def _is_dir(self, folder: str, side: Mapping[str, bytes | None]) -> bool:
        if any(p.startswith(folder + "/") and c is not None for p, c in side.items()):
            return True
        if self._known.get(folder) != DIRECTORY:
            return False
        # a folder at the fork tip: still one unless the patch deleted what it held (judged leniently)
        return True

    def _problems(self, f: FileFacts, sides: Mapping[str, Mapping[str, bytes | None]], which: str, *,
                  relevant: set[str] | None, cache: "FactsCache | None") -> dict[tuple[str, str], tuple[int, str, str]]:
        """(module, name) -> (line, words, module path) for each import of `f` that does not resolve
        in the tree `sides[which]` (those files over the fork tip). `relevant`: judge only imports of
        these paths' modules (a file the patch leaves as it is can break only through them)."""
        side = sides[which]
        out: dict[tuple[str, str], tuple[int, str, str]] = {}
        for imp in f.imports:
            if imp.guarded:
                continue
            paths = module_paths(imp.module)
            folder = imp.module.replace(".", "/")
            if relevant is not None and not ({*paths, folder} & relevant or (imp.name and set(module_paths(f"{imp.module}.{imp.name}")) & relevant)):
                continue
            source = next((c for c in (self._content(p, side) for p in paths) if c is not None and c != DIRECTORY), None)
            where = next((p for p in paths if self._content(p, side) not in (None, DIRECTORY)), paths[0])
            if source is None and not self._is_dir(folder, side):
                known = any(p in self.expected for p in paths) or any(
                    self._content(p, sides["before"]) not in (None, DIRECTORY) for p in paths)
                if known:
                    out[(imp.module, "")] = (imp.line, f"no module named {imp.module} (neither {paths[0]} nor {paths[1]})", paths[0])
                continue
            if not imp.name:
                continue
            sub = f"{imp.module}.{imp.name}"
            if any(self._content(p, side) not in (None, DIRECTORY) for p in module_paths(sub)) or self._is_dir(sub.replace(".", "/"), side):
                continue  # a submodule (or a package folder)
            if source is None:
                continue  # a namespace package: anything but a submodule is judged leniently
            try:
                top = file_facts(source, where, cache).top
            except NotCheckable:
                continue
            if top is None or imp.name in top:
                continue
            out[(imp.module, imp.name)] = (imp.line, f"cannot import name '{imp.name}' from {imp.module} ({where})", where)
        return out


def _candidates(imp: ImportOf) -> list[str]:
    """The paths that tell whether `imp` resolves: the module's file, package and folder, the
    submodule's, and the packages above."""
    out = [*module_paths(imp.module), imp.module.replace(".", "/")]
    if imp.name:
        sub = f"{imp.module}.{imp.name}"
        out += [*module_paths(sub), sub.replace(".", "/")]
    return out


def checker_label() -> str:
    try:
        from importlib.metadata import version

        return f"pyflakes {version('pyflakes')}"
    except Exception:  # the version is decoration; the check itself imports pyflakes and fails loudly
        return "pyflakes"


__all__ = ["DIRECTORY", "FactsCache", "Finding", "FileFacts", "ImportOf", "MAX_PYTHON_BYTES", "NameUse", "NotCheckable", "Project", "SourceCheck", "as_edges", "check_sources", "checker_label", "describe", "is_python",
           "blob_id", "cross_module_uses", "file_facts", "may_share_words", "module_of", "module_paths", "name_uses", "parse_bounded", "top_level_lines", "undefined_names"]
