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
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from porttrack.common.errors import PreconditionError
from porttrack.diff.hunks import FileDiff, Hunk
from porttrack.diff.pyimports import ImportOf, _imports, _top_level, top_level_lines
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
    names: tuple[Mapping[str, Collection[int]], Mapping[int, Collection[str]]] | None
    try:
        if cache is not None:
            facts = cache.get(source, path)
            stored = facts.name_lists
            facts.drop_tree()
            names = None if stored is None else (stored[0], {ln: stored[1][str(ln)] for lines in changed.values()
                                                             for ln in lines if str(ln) in stored[1]})  # the changed lines' uses alone
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
        data = self.name_lists
        if data is None:
            return None
        return ({n: set(ls) for n, ls in data[0].items()}, {int(ln): set(ns) for ln, ns in data[1].items()})

    @property
    def name_lists(self) -> tuple[dict[str, list[int]], dict[str, list[str]]] | None:
        """`names` as the cache keeps them (lines keyed as text, sorted lists), not copied: a
        caller that asks about a few lines does not pay for converting the whole file's names."""
        if "names" not in self._data:
            tree = self._parsed_or_none()
            if tree is None:
                self._data["names"] = None
            else:
                bound, used = _bindings_and_uses_in(tree)
                self._data["names"] = [{n: sorted(ls) for n, ls in bound.items()},
                                       {str(ln): sorted(ns) for ln, ns in used.items()}]
        data = self._data["names"]
        return None if data is None else (data[0], data[1])

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


class FactsCache:
    """`FileFacts` by blob id: in memory for one command, and, with `folder`, on disk for the next
    (the base's files are analysed once; an import over the same fork tip reads their findings
    back). One JSON file per blob, written atomically; a damaged one is analysed again."""

    def __init__(self, folder: "Any | None" = None) -> None:
        self.folder = folder
        self.memory: dict[str, FileFacts] = {}
        self._stored: dict[str, int] = {}  # blob id -> how many parts its file on disk holds
        self.hits = self.misses = 0
        self._ids: dict[int, tuple[bytes, str]] = {}  # id(source) -> (source, its blob id): hashed once

    def get(self, source: bytes, path: str) -> FileFacts:
        known = self._ids.get(id(source))
        if known is not None and known[0] is source:
            key = known[1]
        else:
            key = blob_id(source)
            self._ids[id(source)] = (source, key)
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
                  project: Any = None, cache: FactsCache | None = None) -> SourceCheck:
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


def checker_label() -> str:
    """"pyflakes X.Y.Z": the package's own `__version__` (importlib.metadata costs ~10 ms of start-up
    to read the same string from the installed distribution's METADATA)."""
    try:
        import pyflakes

        return f"pyflakes {pyflakes.__version__}"
    except Exception:  # the version is decoration; the check itself imports pyflakes and fails loudly
        return "pyflakes"


__all__ = ["FactsCache", "Finding", "FileFacts", "MAX_PYTHON_BYTES", "NameUse", "NotCheckable", "SourceCheck", "as_edges",
           "blob_id", "check_sources", "checker_label", "describe", "file_facts", "is_python", "may_share_words", "name_uses",
           "parse_bounded", "parse_shared", "undefined_names"]
