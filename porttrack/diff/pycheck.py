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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from porttrack.diff.hunks import FileDiff, Hunk
from porttrack.diff.relations import Dependency

PYTHON_SUFFIXES = (".py", ".pyi")


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


def name_uses(files: Sequence[FileDiff], pre: Mapping[str, bytes], post: Mapping[str, bytes]) -> list[NameUse]:
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
            out += _uses(post[fd.new_path], lines, fd.new_path, "post")
        if fd.old_path and is_python(fd.old_path) and fd.old_path in pre:
            lines = {h.id: _changed_lines(h, "-") for h in hunks}
            out += _uses(pre[fd.old_path], lines, fd.old_path, "pre")
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


def _uses(source: bytes, changed: Mapping[str, set[int]], path: str, side: str) -> list[NameUse]:
    names = _bindings_and_uses(source)
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


def _bindings_and_uses(source: bytes) -> tuple[dict[str, set[int]], dict[int, set[str]]] | None:
    """name -> lines that bind it; line -> names loaded there. None: not Python this parser reads."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
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
    not-checked (detail: why: another language, a binary file)."""

    kind: str
    path: str
    detail: str

    @property
    def words(self) -> str:
        if self.kind == "undefined-name":
            return f"{self.path}: new undefined name '{self.detail}'"
        if self.kind == "does-not-compile":
            return f"{self.path} no longer compiles: {self.detail}"
        return f"{self.path} not checked ({self.detail})"


@dataclass(frozen=True)
class SourceCheck:
    """What the check after taking found: `checked` the Python files analysed; `findings` new
    undefined names, files that no longer compile, and files not checked (other languages)."""

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


def check_sources(before: Mapping[str, bytes | None], after: Mapping[str, bytes | None]) -> SourceCheck:
    """Each path of `after` (None: deleted) against `before` (None: absent there). A Python file
    is no worse when it compiles and pyflakes finds no undefined name that it did not find before
    (counted per name, so a second use of a name already undefined is not news)."""
    checked: list[str] = []
    findings: list[Finding] = []
    for path in sorted(after):
        new = after[path]
        if new is None:
            continue  # deleted: nothing left to check here (its users are other files' business)
        if not is_python(path):
            findings.append(Finding("not-checked", path, "not Python: no analyser for it"))
            continue
        checked.append(path)
        old = before.get(path)
        old_compiles = old is not None and not _compile_error(old, path)
        problem = _compile_error(new, path)
        if problem:
            if old is None or old_compiles:  # broken by the patch, not before it
                findings.append(Finding("does-not-compile", path, problem))
            continue
        if new == old:
            continue  # unchanged (a rename, a mode change): no worse
        now = undefined_names(new, path)
        # the base is only analysed when the patched file has undefined names at all (rarely)
        was = undefined_names(old, path) if now and old is not None and old_compiles else Counter()
        findings += [Finding("undefined-name", path, name) for name in sorted(now) if now[name] > was.get(name, 0)]
    return SourceCheck(checker_label(), tuple(checked), tuple(findings))


def _compile_error(source: bytes, path: str) -> str | None:
    try:
        compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return f"{exc.msg} (line {exc.lineno})"
    except ValueError as exc:  # null bytes
        return str(exc)
    return None


def undefined_names(source: bytes, path: str) -> Counter:
    """name -> how many times pyflakes reports it undefined in `source` (which must compile)."""
    from pyflakes import checker, messages  # lazy: only when a Python file is checked

    tree = ast.parse(source, filename=path)
    found = checker.Checker(tree, filename=path)
    return Counter(str(m.message_args[0]) for m in found.messages
                   if isinstance(m, (messages.UndefinedName, messages.UndefinedLocal)))


def checker_label() -> str:
    try:
        from importlib.metadata import version

        return f"pyflakes {version('pyflakes')}"
    except Exception:  # the version is decoration; the check itself imports pyflakes and fails loudly
        return "pyflakes"


__all__ = ["Finding", "NameUse", "SourceCheck", "as_edges", "check_sources", "checker_label", "describe", "is_python",
           "may_share_words", "name_uses", "undefined_names"]
