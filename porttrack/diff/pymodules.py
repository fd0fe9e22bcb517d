"""Names across the project's own modules: which hunks must travel together because one imports
what only another's module defines (`cross_module_uses`), and, after taking, which imports of
the project's modules no longer resolve in the patched tree (`Project.broken_imports`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

from porttrack.diff.hunks import FileDiff
from porttrack.diff.pycheck import (
    FactsCache,
    FileFacts,
    Finding,
    NameUse,
    NotCheckable,
    _changed_lines,
    file_facts,
    is_python,
    parse_shared,
)
from porttrack.diff.pyimports import ImportOf, _imports, module_paths, top_level_lines


def cross_module_uses(files: Sequence[FileDiff], pre: Mapping[str, bytes], post: Mapping[str, bytes],
                      importing_pre: Sequence[str], importing_post: Sequence[str], parsed: dict | None = None,
                      cache: FactsCache | None = None) -> list[NameUse]:
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
        self._folders: dict[int, tuple[Mapping[str, bytes | None], set[str]]] = {}

    def _fetch(self, paths: list[str]) -> None:
        wanted = [p for p in dict.fromkeys(paths) if p not in self._known]
        if wanted:
            got = self._read(wanted)
            for p in wanted:
                self._known[p] = got.get(p)

    def broken_imports(self, before: Mapping[str, bytes | None], after: Mapping[str, bytes | None],
                       cache: FactsCache | None) -> list[Finding]:
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
        held = self._folders.get(id(side))
        if held is None or held[0] is not side:  # the folders above each file of `side`, once per side
            folders = {p[:at] for p, c in side.items() if c is not None for at in _slashes(p)}
            held = self._folders[id(side)] = (side, folders)
        if folder in held[1]:
            return True
        if self._known.get(folder) != DIRECTORY:
            return False
        # a folder at the fork tip: still one unless the patch deleted what it held (judged leniently)
        return True

    def _problems(self, f: FileFacts, sides: Mapping[str, Mapping[str, bytes | None]], which: str, *,
                  relevant: set[str] | None, cache: FactsCache | None) -> dict[tuple[str, str], tuple[int, str, str]]:
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


def _slashes(path: str) -> list[int]:
    return [n for n, ch in enumerate(path) if ch == "/"]


def _candidates(imp: ImportOf) -> list[str]:
    """The paths that tell whether `imp` resolves: the module's file, package and folder, the
    submodule's, and the packages above."""
    out = [*module_paths(imp.module), imp.module.replace(".", "/")]
    if imp.name:
        sub = f"{imp.module}.{imp.name}"
        out += [*module_paths(sub), sub.replace(".", "/")]
    return out
