"""Paths that come from untrusted input (an upstream diff, a PR field) and glob rules for paths.

A pull request is written by a stranger, so every path in its diff is checked before anything is
written: it must stay inside the fork's work tree, must not reach into ``.git``, and a symlink it
creates must not point out of the tree. Paths are repository-relative POSIX strings as
`porttrack.diff.hunks` returns them (non-UTF-8 bytes held as surrogate escapes).

Refusals raise `UnsafeInput`, whose message names the path and the reason.
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from porttrack.common.errors import UnsafeInput
from porttrack.diff.hunks import SYMLINK_MODE, FileDiff

# Characters that HFS+ ignores in names, so ".g\u200cit" would be ".git" there (git refuses them too).
_IGNORABLE = dict.fromkeys(
    map(ord, "\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
             "\u206a\u206b\u206c\u206d\u206e\u206f\ufeff")
)


def _is_git_dir(component: str) -> bool:
    """``.git`` in any spelling that some file system would treat as ``.git``: any case,
    trailing dots/spaces (NTFS), the 8.3 short name ``git~1``, HFS+-ignorable characters."""
    name = component.translate(_IGNORABLE).rstrip(". ").casefold()
    return name in (".git", "git~1")


def check_repo_path(path: str) -> str:
    """Return `path` if it is a safe repository-relative path, else raise `UnsafeInput`.

    Refused: empty; NUL or another control character; absolute (``/x``, ``C:/x``) or with a
    backslash (a separator on Windows); an empty, ``.`` or ``..`` component (``a//b``, ``./a``,
    ``a/``); any component that is ``.git`` (see `_is_git_dir`).
    """
    if not isinstance(path, str) or not path:
        raise UnsafeInput("empty path in untrusted input")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        raise UnsafeInput(f"path {path!r} contains a control character")
    if path.startswith("/") or re.match(r"[A-Za-z]:", path):
        raise UnsafeInput(f"path {path!r} is absolute")
    if "\\" in path:
        raise UnsafeInput(f"path {path!r} contains a backslash")
    for part in path.split("/"):
        if part in ("", ".", ".."):
            shown = {"": "an empty", ".": "a '.'", "..": "a '..'"}[part]
            raise UnsafeInput(f"path {path!r} has {shown} component")
        if _is_git_dir(part):
            raise UnsafeInput(f"path {path!r} reaches into the .git directory")
    return path


def check_diff_paths(files: Iterable[FileDiff]) -> None:
    """`check_repo_path` on every old and new path of a parsed diff."""
    for fd in files:
        for path in (fd.old_path, fd.new_path):
            if path is not None:
                check_repo_path(path)


def check_symlink_targets(files: Iterable[FileDiff]) -> None:
    """Refuse a symlink (mode 120000) the diff creates or retargets whose target leaves the tree.

    The target is the entry's single added line. Refused: an absolute target; one that climbs
    above the work tree once resolved from the link's directory; one with ``..`` after a normal
    component (``x/../..``: if ``x`` is itself a link, the lexical answer would be wrong); one
    into ``.git``; an empty or multi-line target; a binary symlink entry; a file turned into a
    link by a mode change alone (its target cannot be read from the diff).
    """
    for fd in files:
        if fd.new_path is None or fd.new_mode != SYMLINK_MODE:
            continue
        where = f"symlink {fd.new_path!r}"
        if fd.is_binary:
            raise UnsafeInput(f"{where}: binary symlink entry, target cannot be checked")
        added = [line for h in fd.text_hunks for line in h.added_lines()]
        if not added:
            if fd.old_mode != SYMLINK_MODE and fd.status not in ("renamed", "copied"):
                raise UnsafeInput(f"{where}: becomes a symlink without a target in the diff")
            continue  # an existing link renamed or copied: its target is not new input
        if len(added) != 1 or not added[0]:
            raise UnsafeInput(f"{where}: target is not a single non-empty line")
        _check_link_target(fd.new_path, added[0].decode("utf-8", "surrogateescape"), where)


def _check_link_target(link: str, target: str, where: str) -> None:
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in target):
        raise UnsafeInput(f"{where}: target {target!r} contains a control character")
    if target.startswith("/") or re.match(r"[A-Za-z]:", target) or "\\" in target:
        raise UnsafeInput(f"{where}: target {target!r} is absolute or not a POSIX path")
    parts = target.split("/")
    climbing = True
    for part in parts:
        if part == "..":
            if not climbing:
                raise UnsafeInput(f"{where}: target {target!r} has '..' after a directory name")
        elif part not in ("", "."):
            climbing = False
            if _is_git_dir(part):
                raise UnsafeInput(f"{where}: target {target!r} points into .git")
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(link), target))
    if resolved == ".." or resolved.startswith("../"):
        raise UnsafeInput(f"{where}: target {target!r} points outside the work tree")
    if any(_is_git_dir(p) for p in resolved.split("/")):
        raise UnsafeInput(f"{where}: target {target!r} points into .git")


def check_no_symlinked_parent(root: Path, rel: str, where: str = "the work tree") -> None:
    """Refuse to write `rel` under `root` through an existing symlinked directory that resolves
    outside `root` (or into its ``.git``). Checks `rel` itself with `check_repo_path` first.
    `where` names `root` in the message (the fork's work tree, the workspace).

    Only the parent directories are checked: the last component may be a symlink the patch
    itself modifies (git replaces a link, it does not write through it).
    """
    check_repo_path(rel)
    real_root = root.resolve()
    current = root
    for part in rel.split("/")[:-1]:
        current = current / part
        if current.is_symlink():
            resolved = current.resolve()
            inside = resolved == real_root or real_root in resolved.parents
            if not inside:
                raise UnsafeInput(
                    f"path {rel!r}: {current.relative_to(root).as_posix()!r} is a symlink "
                    f"to {str(resolved)!r}, outside {where}; porttrack does not write through it"
                )
            if any(_is_git_dir(p) for p in resolved.relative_to(real_root).parts):
                raise UnsafeInput(f"path {rel!r}: {part!r} is a symlink into .git")
        elif not current.is_dir():
            return  # nothing further exists yet (or a file is in the way: git will say so)


# --------------------------------------------------------------------------------------------
# Paths inside the workspace
#
# The workspace is a git repository others commit to: a name in patches/manifest.json, a line of
# `series`, a folder such as state/ or patches/retired/ may have been written by a stranger. A
# path read from it (or a folder porttrack writes into) is resolved, symlinks and all, and must
# stay inside the folder it belongs to.


def is_inside(path: Path, folder: Path) -> bool:
    """Does `path`, symlinks resolved, lie in `folder` (resolved too) or is it `folder` itself?"""
    real, target = folder.resolve(), path.resolve()
    return target == real or real in target.parents


def resolve_inside(folder: Path, rel: str, what: str) -> Path:
    """`folder / rel`, refused with `UnsafeInput` unless `rel` is a plain relative path (no ``..``,
    not absolute, no ``.git``; see `check_repo_path`) and, once every symlink on the way is
    resolved, still names something inside `folder`. `what` says where `rel` was read from."""
    try:
        check_repo_path(rel)
    except UnsafeInput as exc:
        raise UnsafeInput(f"{what}: {exc}; refusing to read or write outside {folder}") from None
    path = folder / rel
    if not is_inside(path, folder):
        raise UnsafeInput(f"{what}: {path} leads to {str(path.resolve())!r}, outside {folder} (a "
                          f"committed symlink?); porttrack does not read or write through it")
    return path


def check_file_name(name: str, what: str) -> str:
    """`name` if it is one plain file name (no folder, not hidden, not ``.git``), else `UnsafeInput`."""
    if not isinstance(name, str) or "/" in name or name.startswith("."):
        raise UnsafeInput(f"{what}: {name!r} is not a plain file name")
    try:
        return check_repo_path(name)
    except UnsafeInput as exc:
        raise UnsafeInput(f"{what}: {exc}") from None


# --------------------------------------------------------------------------------------------
# Glob rules


def path_matches(path: str, include: Sequence[str] = (), exclude: Sequence[str] = ()) -> bool:
    """True if `path` matches some `include` pattern (or `include` is empty) and no `exclude`.

    Patterns match the whole repository-relative path, like gitignore patterns that contain a
    slash:

    * ``*`` matches any run of characters except ``/`` (a leading ``.`` included);
      ``?`` one character except ``/``; ``[abc]``, ``[a-z]``, ``[!abc]`` one character of a set
      (never ``/``);
    * ``**`` as a whole component matches zero or more directories (``a/**/b`` matches
      ``a/b`` and ``a/x/y/b``); a trailing ``/**`` matches everything below (``a/**`` matches
      ``a/x`` and ``a/x/y``, not ``a``); ``**`` alone matches every path;
    * a pattern ending in ``/`` means everything below it (``vllm/`` == ``vllm/**``);
    * a leading ``/`` is ignored (every pattern is anchored at the root);
    * anything else is literal. ``*.py`` therefore matches only top-level files: write
      ``**/*.py`` for all of them.
    """
    if include and not any(_glob(p).fullmatch(path) for p in include):
        return False
    return not any(_glob(p).fullmatch(path) for p in exclude)


@functools.lru_cache(maxsize=512)
def _glob(pattern: str) -> re.Pattern[str]:
    if pattern.endswith("/"):
        pattern += "**"
    parts = pattern.lstrip("/").split("/")
    out = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            out.append(".+" if last else "(?:[^/]+/)*")
        else:
            out.append(_component(part) + ("" if last else "/"))
    return re.compile("".join(out), re.S)


def _component(part: str) -> str:
    out, i = [], 0
    while i < len(part):
        c = part[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (close := _class_end(part, i)) != -1:
            body = part[i + 1:close]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            escaped = "".join("\\" + ch if ch in "\\^[]" else ch for ch in body)
            out.append(f"[^/{escaped}]" if negate else f"(?!/)[{escaped}]")
            i = close
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _class_end(part: str, start: int) -> int:
    """Index of the ``]`` closing the class opened at `start`, or -1 (then ``[`` is literal)."""
    i = start + 1
    if part[i:i + 1] in ("!", "^"):
        i += 1
    if part[i:i + 1] == "]":
        i += 1  # a leading ']' is a member
    close = part.find("]", i)
    return close
