"""What porttrack checks in a taken diff with the git door: the names one hunk needs from another
(whole files read from the PR's commits, within a file and across the project's modules) and the
patched files after taking (the fork tip in a scratch index), and which taken hunks a failed
check comes from. The analysis itself, on bytes, is `porttrack.diff.pycheck`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping, Sequence

from porttrack.common.errors import CheckFailed
from porttrack.diff.hunks import FileDiff, Hunk, build_patch, parse_diff
from porttrack.diff.pycheck import (
    FactsCache,
    Finding,
    NameUse,
    SourceCheck,
    check_sources,
    checker_label,
    is_python,
    may_share_words,
    name_uses,
)
from porttrack.diff.pymodules import DIRECTORY, Project, cross_module_uses
from porttrack.git.repo import GitRepo, ScratchIndex, read_index_file
from porttrack.queue.manifest import DEPENDS, SOURCE_CHECK, Reason
from porttrack.take.separability import AllAtOnce, Taken, apply_taken

CACHE_FOLDER = "pycheck"  # under .git/porttrack/: the base's findings by blob id (`pycheck.FactsCache`)


def facts_cache(repo: GitRepo) -> FactsCache:
    """The fork checkout's cache of analysed Python blobs (a blob's findings never change; the
    folder's name carries the checker's version, so a new pyflakes starts afresh)."""
    label = re.sub(r"[^A-Za-z0-9.]+", "-", checker_label())
    return FactsCache(Path(repo.common_dir) / "porttrack" / CACHE_FOLDER / label)


def name_dependencies(repo: GitRepo, files: Sequence[FileDiff], base: str, tip: str, cache: FactsCache | None = None) -> list[NameUse]:
    """`name_uses` of a PR's diff `base..tip`, the whole files read from those commits (only the
    Python entries with more than one text hunk: a single hunk has nobody to depend on), and
    `cross_module_uses`: a hunk importing from another of the PR's modules a name that only a hunk
    of that module brings (or one removing what another file's removed import still names). Only
    the files whose changed lines may import are read for that, and of the PR's modules only those
    their hunks name (a word of a hunk, context included, that is the module's last name); each
    file is parsed once."""
    old = [fd.old_path for fd in files if fd.old_path and is_python(fd.old_path) and may_share_words(fd, "-")]
    new = [fd.new_path for fd in files if fd.new_path and is_python(fd.new_path) and may_share_words(fd, "+")]
    importing = {side: [p for fd in files for p in [fd.new_path if side == "+" else fd.old_path]
                        if p and is_python(p) and _imports_in(fd, side)] for side in "+-"}
    if importing["+"] or importing["-"]:
        words: set[bytes] = set()
        for fd in files:
            if (fd.new_path in importing["+"]) or (fd.old_path in importing["-"]):
                for h in fd.text_hunks:
                    words.update(_WORD.findall(h.body))
        for fd in files:
            for side, path in (("+", fd.new_path), ("-", fd.old_path)):
                if path and path.endswith(".py") and _module_word(path) in words:
                    (new if side == "+" else old).append(path)
        new += importing["+"]
        old += importing["-"]
    old, new = list(dict.fromkeys(old)), list(dict.fromkeys(new))
    blobs = repo.blobs([f"{base}:{p}" for p in old] + [f"{tip}:{p}" for p in new])
    pre = {p: b for p, b in zip(old, blobs[:len(old)]) if b is not None}
    post = {p: b for p, b in zip(new, blobs[len(old):]) if b is not None}
    parsed: dict = {}
    uses = name_uses(files, pre, post, parsed, cache)
    if importing["+"] or importing["-"]:
        uses += cross_module_uses(files, pre, post, importing["-"], importing["+"], parsed, cache)
    return uses


def _module_word(path: str) -> bytes:
    """The name an import of the module at `path` ends with (`pkg/mod.py` -> mod, `pkg/__init__.py` -> pkg)."""
    parts = path[:-3].split("/")
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return parts[-1].encode("utf-8", "surrogateescape")


_IMPORT_WORD = re.compile(rb"\bimport\b")
_IMPORTED_NAME = re.compile(rb"^\s*\(?\s*[A-Za-z_][A-Za-z0-9_]*(\s+as\s+[A-Za-z_][A-Za-z0-9_]*)?\s*,?\s*\)?\s*(#.*)?$")


def _imports_in(fd: FileDiff, side: str) -> bool:
    """Whether `fd`'s added (removed) lines may hold an import: the word, or a line that is only
    a name, as inside a parenthesised `from m import (...)` (a prefilter: the parse decides)."""
    lines = [line for h in fd.text_hunks for line in (h.added_lines() if side == "+" else h.removed_lines())]
    return any(_IMPORT_WORD.search(line) or _IMPORTED_NAME.match(line) for line in lines)


def check_taken(probe: ScratchIndex, diff: bytes, *, applied: str | None = None, tip: str | None = None,
                pr_files: Sequence[FileDiff] = (), cache: FactsCache | None = None) -> SourceCheck:
    """`checked_files`' verdict alone."""
    return checked_files(probe, diff, applied=applied, tip=tip, pr_files=pr_files, cache=cache)[0]


def checked_files(probe: ScratchIndex, diff: bytes, *, applied: str | None = None, tip: str | None = None,
                  pr_files: Sequence[FileDiff] = (), cache: FactsCache | None = None, paths: Sequence[str] | None = None
                  ) -> tuple[SourceCheck, dict[str, bytes | None]]:
    """`check_sources` of `diff` applied on `probe`'s index (the fork tip, plus the patches a
    stacked PR sits on), in a copy of it: the index itself is left as it was. `applied`: an index
    file of `probe` that already holds `diff` applied plainly on that index (the separability
    probe's), read as it is. `tip`: the commit the index holds unchanged (nothing stacked below),
    so the files before are read from it by the repository's open reader, no process of their own.
    `pr_files`: the PR's whole diff: the modules its tree has (an import of one the taken hunks
    leave out is broken) and its files left out (their imports of the patched modules are judged).
    `paths`: the paths `diff` touches, when the caller knows them (else `diff` is parsed for them).
    Returns the verdict and the patched files (path -> content; b"" for a file not read)."""
    into = applied or "checked"
    if applied is None:
        probe.copy("index", into)
        if probe.apply(diff, index=into).returncode != 0 and not probe.threeway(diff, into=into).clean:
            return SourceCheck(checker_label(), (), (Finding("not-checked", "*", "the taken hunks did not apply for the check"),)), {}
    if paths is None:
        paths = sorted({p for fd in parse_diff(diff) for p in (fd.old_path, fd.new_path) if p})
    python = [p for p in paths if is_python(p)]
    left_out = sorted({p for fd in pr_files for p in (fd.old_path, fd.new_path) if p and is_python(p)} - set(paths))
    wanted = python + left_out
    old = probe.repo.blobs([f"{tip}:{p}" for p in wanted]) if tip is not None else probe.read(wanted)
    before = {**dict.fromkeys(paths, b""), **dict(zip(python, old))}
    after = {**dict.fromkeys(paths, b""), **dict(zip(python, read_index(probe, python, into)))}
    importers = {p: b for p, b in zip(left_out, old[len(python):]) if b is not None}
    expected = frozenset(fd.new_path for fd in pr_files if fd.new_path and is_python(fd.new_path))
    project = Project(_reader(probe, tip), expected, importers)
    return check_sources(before, after, project=project, cache=cache), after


def read_index(probe: ScratchIndex, paths: Sequence[str], index: str) -> list[bytes | None]:
    """The blobs staged at `paths` (stage 0) in the probe's index file `index`, as `probe.read`
    gives them, without a process of their own: the blob ids are read from the index file (format
    versions 2 and 3) and the blobs by the repository's open reader. Any other format (a v4 index,
    a split index), or anything unexpected in it: `probe.read`."""
    ids = _index_entries(probe.path(index).read_bytes(), len(probe.repo.rev_parse("HEAD") or "0" * 40) // 2)
    if ids is None:
        return probe.read(paths, index)
    wanted = {p: ids.get(p) for p in paths}
    got = probe.repo.objects(sorted({sha for sha in wanted.values() if sha}))
    out: list[bytes | None] = []
    for p in paths:
        sha = wanted[p]
        obj = got.get(sha) if sha else None
        out.append(obj[2] if obj is not None and obj[1] == "blob" else None)
    return out


def _index_entries(data: bytes, hash_len: int) -> dict[str, str] | None:
    """path -> blob id of each stage-0 regular file or symlink of a git index file (versions 2, 3); None otherwise."""
    entries = read_index_file(data, hash_len)
    if entries is None:
        return None
    return {p: sha for p, (mode, sha) in entries.items() if mode >> 12 in (0o10, 0o12)}


def _reader(probe: ScratchIndex, tip: str | None):
    """Paths at the fork tip: contents, `DIRECTORY` for folders, None where nothing is (read by
    the repository's open reader: trees, then blobs). Stacked (no tip): from the probe's index."""
    repo = probe.repo

    def read(paths: list[str]) -> Mapping[str, bytes | None]:
        if tip is None:
            return dict(zip(paths, probe.read(paths)))
        entries = repo.tree_entries(tip, paths)
        out: dict[str, bytes | None] = {p: None for p in paths}
        blobs = {p: sha for p, (mode, sha) in entries.items() if mode.startswith("100")}
        got = repo.objects(sorted(set(blobs.values())))
        for p, (mode, sha) in entries.items():
            if mode == "40000" or mode == "040000":
                out[p] = DIRECTORY
            elif p in blobs:
                obj = got.get(sha)
                out[p] = obj[2] if obj is not None and obj[1] == "blob" else None
        return out

    return read


# -- taking only what passes ---------------------------------------------------------------------

MAX_CHECK_ROUNDS = 8  # each round leaves out the hunks the check names; a chain longer than this is refused


def take_what_passes(
    probe: ScratchIndex, files: Sequence[FileDiff], hunks: Sequence[Hunk], groups: Sequence[frozenset[str]],
    reasons: dict[str, Reason], applies: Mapping[str, str], first: AllAtOnce, wanted: set[str] | None, tip: str | None,
    cache: FactsCache, notes: list[str],
) -> tuple[bytes, Taken | None, SourceCheck | None]:
    """The diff of the hunks to take, how it goes onto the probe's tip (`separability.Taken`), and
    its source check, which passes: a failed check never reaches the queue. When the patched files fail it
    (a new undefined name, a file that no longer compiles, an import of the project's own modules
    that no longer resolves), the hunks the check names (`checks.blame`) leave with their reason
    (`fails the source check: ...`), their dependency groups with them (`depends on left-out
    hunk`), and the rest is checked again: a hunk that needed what left (an import of a name
    another file's left-out hunk defined) is named in the next round. Refused (CheckFailed, exit
    1, nothing written) when a finding names no taken hunk, when it names a hunk chosen with
    --hunk, or after MAX_CHECK_ROUNDS rounds."""
    group_of = {hid: n for n, group in enumerate(groups) for hid in group}
    path_of = {h.id: h.path for h in hunks}
    first_failure: SourceCheck | None = None
    for _round in range(MAX_CHECK_ROUNDS):
        taken_ids = {h.id for h in hunks if h.id not in reasons}
        if not taken_ids:
            if first_failure is not None:
                notes.append(f"the source check failed for every separable hunk ({first_failure.text}); nothing is taken")
            return b"", None, None
        diff = build_patch([(fd, [h for h in fd.hunks if h.id in taken_ids]) for fd in files])
        taken = apply_taken(probe, diff, any(applies.get(h) == "3-way" for h in taken_ids), first)
        checked, after = checked_files(probe, diff, applied=taken.index, tip=tip, pr_files=files, cache=cache,
                                       paths=_paths_of(files, taken_ids))
        if checked.ok:
            if first_failure is not None:
                out = sum(1 for r in reasons.values() if r.kind == SOURCE_CHECK)
                notes.append(f"the source check of the separable hunks failed ({first_failure.text}); {out} hunk(s) it named "
                             f"left the patch with their dependants (reason `{SOURCE_CHECK}`), and the rest passes it")
            return diff, taken, checked
        first_failure = first_failure or checked
        blamed, unblamed = blame(checked, files, taken_ids, after)
        if unblamed:
            raise CheckFailed(
                "the source check of the hunks to take failed, and no taken hunk can be named for it: "
                + "; ".join(f.words for f in unblamed[:4])
                + f". Nothing was written; taken were {_listed(taken_ids, path_of)}. Leave hunks out with --exclude "
                  f"or --hunk, or fix the fork first")
        chosen = sorted(hid for hid in blamed if wanted is not None and hid in wanted)
        if chosen:
            raise CheckFailed(
                "the hunks chosen with --hunk fail the source check: "
                + "; ".join(f"{hid} ({path_of[hid]}): {blamed[hid].words}" for hid in chosen[:6])
                + ". Nothing was written; leave them out of --hunk")
        for hid, finding in blamed.items():
            reasons[hid] = Reason(SOURCE_CHECK, finding.words)
        for hid in blamed:
            for other in groups[group_of[hid]]:
                if other not in reasons:
                    reasons[other] = Reason(DEPENDS, hid)
    raise CheckFailed(f"the source check still fails after leaving out what it named {MAX_CHECK_ROUNDS} times "
                      f"({checked.text}); nothing was written")


def _paths_of(files: Sequence[FileDiff], ids: set[str]) -> list[str]:
    """The paths `build_patch` of hunks `ids` touches, sorted (a rename whose meta hunk is left out
    becomes an edit of its old path)."""
    out: set[str] = set()
    for fd in files:
        if not any(h.id in ids for h in fd.hunks):
            continue
        meta = fd.meta_hunk
        if fd.status == "renamed" and meta is not None and meta.id not in ids:
            out.add(fd.old_path)  # type: ignore[arg-type]
        else:
            out.update(p for p in (fd.old_path, fd.new_path) if p)
    return sorted(out)


def _listed(ids: set[str], path_of: Mapping[str, str], shown: int = 8) -> str:
    items = sorted(ids, key=lambda i: (path_of[i], i))
    text = ", ".join(f"{hid} ({path_of[hid]})" for hid in items[:shown])
    return text + (f" and {len(items) - shown} more" if len(items) > shown else "")


# -- which taken hunks a failed check comes from --------------------------------------------------

_WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")


def blame(check: SourceCheck, files: Sequence[FileDiff], taken: set[str],
          after: Mapping[str, bytes | None]) -> tuple[dict[str, Finding], list[Finding]]:
    """The taken hunks each failed finding comes from: the hunk that added the line it is on (the
    undefined use, the broken import, the line that no longer compiles); else, for a name, the
    hunk that removed its binding (in that file, or in the imported module); for a module gone, the
    hunk that deleted or moved it. Returns {hunk id: the finding}, and the findings no taken hunk
    can be named for."""
    by_path: dict[str, list[tuple[FileDiff, Hunk]]] = {}
    for fd in files:
        for h in fd.hunks:
            if h.id in taken:
                for p in {fd.old_path, fd.new_path}:
                    if p is not None:
                        by_path.setdefault(p, []).append((fd, h))
    blamed: dict[str, Finding] = {}
    unblamed: list[Finding] = []
    for f in check.failed:
        content = after.get(f.path) or b""
        lines = content.split(b"\n")
        texts = {lines[n - 1].rstrip() for n in f.lines if 0 < n <= len(lines)}
        here = by_path.get(f.path, [])
        found = [h for fd, h in here if fd.new_path == f.path and texts & {a.rstrip() for a in h.added_lines()}]
        if not found and f.kind == "undefined-name":
            found = [h for fd, h in here if _mentions(h.removed_lines(), f.detail)]
        elif not found and f.kind == "does-not-compile":
            found = [h for fd, h in here if fd.new_path == f.path]
        elif not found and f.kind == "broken-import":
            there = by_path.get(f.target, [])
            found = [h for fd, h in there if _mentions(h.removed_lines(), f.name)] or [
                h for fd, h in there if fd.status in ("deleted", "renamed") and h.kind != "text"] or [
                h for fd, h in there if fd.status == "deleted"]
        if not found:
            unblamed.append(f)
        for h in found:
            blamed.setdefault(h.id, f)
    return blamed, unblamed


def _mentions(lines: Sequence[bytes], name: str) -> bool:
    word = name.encode("utf-8", "surrogateescape")
    return any(word in _WORD.findall(line) for line in lines)
