"""Upstream's newest form of a merged hunk's lines ("Upstream's newest form decides", DESIGN.md).

Each hunk of the merged change leaves a **trail** in the merge commit's file: the lines it added
(with their content), and a gap where it removed lines without adding any. The trail is followed
through every later commit on upstream's first-parent history that touched the PR's paths (one
`git log --first-parent -p -U0 <start>..<upstream base> -- <paths>` for all of them, `walk`): a
later change whose lines overlap the trail *touched* it, and the lines it put there become the
trail; one that only changed neighbouring (context) lines shifts it. At the end the trail's lines
are upstream's newest form of the hunk, and the commits that touched it, oldest first, say who
made that form.

- Not touched: upstream still has the hunk's own lines (whatever happened to its context).
- Touched, and the newest form is the hunk's pre-image (the lines it removed are back and none of
  the lines it added is left; for a hunk that only added lines: nothing but its context is left):
  **undone upstream** by the last commit that touched it (a revert, one resolved by hand, or a
  later change that removed it).
- Touched otherwise: upstream's newest form is the later commit's; a fork holding it has the
  change "after churn".

Lines are compared stripped of indentation only to follow code that moved or was re-indented,
never to let the change's own pre-image pass for its lines: lines the change removed from a file,
byte for byte, put back into that file are the pre-image restored (a revert), not the change's
lines moved (`Trail.restored`, `moved_out`); the pre-image back with other indentation (a revert,
then a later commit that wrapped the restored lines in a block) is undone all the same
(`_reindented_back`); and lines "moved out" to another file are told by their telling lines, not
by a `None,` the same commit added elsewhere (`moved_out`).

Line tracking follows git's own `-U0` hunks; a gap (lines removed, none added) counts as touched
by a change that inserts within one line of it (git may slide an insertion among equal lines).
Binary changes and whole-file hunks (modes, renames, empty files) are followed per file: any later
change to the file touches them. Renames later upstream are deletions here (`--no-renames`); the
caller asks where a deleted file went.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Sequence

from porttrack.diff import hunks as hunks_mod

if TYPE_CHECKING:
    from porttrack.diff.hunks import FileDiff, Hunk
    from porttrack.git.repo import GitRepo

GAP, LINE = 0, 1  # item kinds; a gap "before line n" sorts before line n
LITERAL = {"GIT_LITERAL_PATHSPECS": "1"}


@dataclass(frozen=True)
class Commit:
    sha: str
    parents: tuple[str, ...]
    subject: str


@dataclass
class Trail:
    """One hunk's lines in upstream's file as history goes on (see the module docstring)."""

    items: list[tuple[int, int, bytes]]  # (line 1-based, LINE | GAP, content) in file order
    whole: bool = False  # followed per file (binary, meta, an empty file): any change touches it
    touched: list[Commit] = field(default_factory=list)  # oldest first
    opaque: bool = False  # a later binary change: the newest form is the file's blob, not lines
    absent: bool = False  # the file is gone at the end (deleted by the last commit that touched it)
    spans: list[tuple[int, int] | None] = field(default_factory=list)  # 1-based lines right after each touch
    lost: list[bytes] = field(default_factory=list)  # non-blank lines the last touch removed and put nowhere in the file
    targeted: bool = False  # the last touch removed mostly these lines (not a larger block they were part of)
    forms: list[tuple[list[bytes], bool]] = field(default_factory=list)  # (form, targeted) after each touch
    path: str = ""  # where the lines are at the end (a later upstream rename moves them)
    restored: frozenset[bytes] = frozenset()  # lines the PR removed from this file and did not add back, byte for byte


    @property
    def form(self) -> list[bytes]:
        """The newest form: the trail's lines, in order (empty: the lines were removed)."""
        return [content for _, kind, content in self.items if kind == LINE]

    @property
    def span(self) -> tuple[int, int] | None:
        """0-based first and last line of the trail in the file (a gap: the line before and after)."""
        if not self.items:
            return None
        lines = [n for n, kind, _ in self.items if kind == LINE] or [n - 1 for n, _, _ in self.items]
        gaps = [n for n, kind, _ in self.items if kind == GAP]
        lo = min(lines + [g - 1 for g in gaps])
        hi = max(lines + gaps)
        return max(lo - 1, 0), max(hi - 1, 0)


def start(fd: "FileDiff", h: "Hunk") -> Trail:
    """The trail of hunk `h` in the merge commit's file: the lines it added, a gap where it removed
    a run of lines."""
    if h.kind != "text" or fd.is_binary:
        return Trail([], whole=True, absent=fd.status == "deleted")
    items: list[tuple[int, int, bytes]] = []
    n = h.new_start if h.new_len else h.new_start + 1
    before = b" "
    for marker, content in h._lines():
        if marker == b"\\":
            continue
        if marker == b"+":
            items.append((n, LINE, content))
            n += 1
        elif marker == b"-":
            if before != b"-":
                items.append((n, GAP, b""))
        else:
            n += 1
        before = marker
    return Trail(items, absent=fd.status == "deleted", restored=pre_image_lines(fd))


def pre_image_lines(fd: "FileDiff") -> frozenset[bytes]:
    """The non-blank lines the change removed from the file and added nowhere in it, byte for byte
    (indentation included): a later change that puts them back restores the pre-image, it does not
    move the change's own lines (which `_mostly` compares stripped)."""
    removed: set[bytes] = set()
    added: set[bytes] = set()
    for h in fd.hunks:
        if h.kind != "text":
            continue
        removed.update(line for line in h.removed_lines() if line.strip())
        added.update(h.added_lines())
    return frozenset(removed - added)


def walk(repo: "GitRepo", start_at: str, tip: str, paths: Sequence[str]) -> list[tuple[Commit, Sequence["_File | FileDiff"]]]:
    """The commits on `tip`'s first-parent history after `start_at` that touched `paths`, oldest
    first, each with its change to them against its first parent (`-U0`, no renames): one git
    process for every path."""
    if not paths:
        return []
    proc = repo.run("log", "--first-parent", "--diff-merges=first-parent", "--reverse", "-p", "-U0", "--no-renames",
                    "--no-ext-diff", "--no-textconv", "--format=%x00%x01%H %P%x00%s%x00", f"{start_at}..{tip}", "--",
                    *paths, env=LITERAL, check=False)
    if proc.returncode != 0:
        from porttrack.common.errors import CannotEvaluate, GitError
        from porttrack.converge.history import unreadable

        err = proc.stderr.decode("utf-8", "replace")
        if "promisor" in err or "could not fetch" in err:  # a partial clone whose contents cannot come now
            raise CannotEvaluate(unreadable(repo, f"{start_at}..{tip}", list(paths)))
        raise GitError(["log", "--first-parent", f"{start_at}..{tip}"], proc.returncode, err)
    out = proc.stdout
    steps = []
    for chunk in out.split(b"\0\x01")[1:]:
        head, subject, diff = (chunk.split(b"\0", 2) + [b"", b""])[:3]
        sha, *parents = head.decode().split()
        files = _parse_u0(diff.lstrip(b"\n")) if diff.strip() else ()
        steps.append((Commit(sha, tuple(parents), subject.decode("utf-8", "replace")), files))
    return steps


@dataclass(frozen=True)
class _Change:
    """One `-U0` hunk of a later change: what `_advance` reads of it."""

    old_start: int
    old_len: int
    new_start: int
    new_len: int
    added: tuple[bytes, ...]
    removed: tuple[bytes, ...]
    kind: str = "text"

    def added_lines(self) -> list[bytes]:
        return list(self.added)

    def removed_lines(self) -> list[bytes]:
        return list(self.removed)


@dataclass(frozen=True)
class _File:
    path: str
    status: str  # added | deleted | modified
    is_binary: bool
    hunks: tuple[_Change, ...]


_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _parse_u0(diff: bytes) -> "Sequence[_File | FileDiff]":
    """A `-U0 --no-renames` diff as `_advance` needs it, read line by line (the walk's output is
    most of a verify's reading: the full parser, `porttrack.diff.hunks.parse_diff`, is used only
    for an entry whose header it must unquote)."""
    out: list[_File] = []
    lines = diff.split(b"\n")
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        if not line.startswith(b"diff --git "):
            i += 1
            continue
        rest = line[len(b"diff --git "):]
        half = (len(rest) - 3) // 2
        name = rest[2:2 + half]
        if b'"' in rest or rest != b"a/" + name + b" b/" + name:
            return hunks_mod.parse_diff(diff)  # a quoted or odd name: the full parser
        status, binary, changes = "modified", False, []
        i += 1
        while i < n and not lines[i].startswith(b"diff --git "):
            line = lines[i]
            if line.startswith(b"@@"):
                m = _HUNK.match(line)
                if m is None:
                    return hunks_mod.parse_diff(diff)
                a, b, c, d = (int(x) if x is not None else 1 for x in m.groups())
                added, removed = [], []
                i += 1
                while i < n and lines[i][:1] in (b"+", b"-", b"\\"):
                    if lines[i][:1] == b"+":
                        added.append(lines[i][1:])
                    elif lines[i][:1] == b"-":
                        removed.append(lines[i][1:])
                    i += 1
                changes.append(_Change(a, b, c, d, tuple(added), tuple(removed)))
                continue
            if line.startswith(b"new file mode"):
                status = "added"
            elif line.startswith(b"deleted file mode"):
                status = "deleted"
            elif line.startswith(b"Binary files ") or line.startswith(b"GIT binary patch"):
                binary = True
            i += 1
        out.append(_File(name.decode("utf-8", "surrogateescape"), status, binary, tuple(changes)))
    return out


def follow(trails: Iterable[tuple[str, Trail]], steps: Sequence[tuple[Commit, Sequence["_File | FileDiff"]]],
           moves: "dict[tuple[str, str], tuple[str, _File]] | None" = None, after: "dict[int, str] | None" = None) -> None:
    """Advance each (path, trail) through `steps` (from `walk`), in place. `moves`: (commit, old
    path) -> (new path, the change from the old file to the new one): that commit renamed the
    path, so the trail goes on in the new file (`Trail.path`). `after`: id(trail) -> a commit: the
    trail takes only the steps after that one (a second walk that starts earlier than its rename)."""
    moves = moves or {}
    waiting = dict(after or {})
    by_path: dict[str, list[Trail]] = {}
    for path, trail in trails:
        trail.path = trail.path or path
        by_path.setdefault(trail.path, []).append(trail)
    for commit, files in steps:
        for fd in files:
            for trail in list(by_path.get(fd.path, ())):
                if id(trail) in waiting:
                    continue
                move = moves.get((commit.sha, fd.path))
                if move is None:
                    _advance(trail, fd, commit)
                    continue
                new, change = move
                _advance(trail, change, commit)
                by_path[fd.path].remove(trail)
                by_path.setdefault(new, []).append(trail)
                trail.path, trail.absent = new, False
        for key, sha in list(waiting.items()):
            if sha == commit.sha:
                del waiting[key]


def renames(repo: "GitRepo", shas: Sequence[str]) -> dict[tuple[str, str], str]:
    """(commit, old path) -> new path, for the renames git finds in each commit against its first
    parent (one `diff-tree --stdin` for them all)."""
    if not shas:
        return {}
    out = repo.run("diff-tree", "--stdin", "-r", "-M", "--name-status", "-z", "-m", "--first-parent",
                   input=("\n".join(shas) + "\n").encode()).stdout.split(b"\0")
    found: dict[tuple[str, str], str] = {}
    commit, i = "", 0
    while i < len(out):
        word = out[i].decode("utf-8", "surrogateescape").strip("\n")
        if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", word):
            commit, i = word, i + 1
        elif word[:1] in ("R", "C") and i + 2 < len(out):
            if word[0] == "R":
                found[(commit, out[i + 1].decode("utf-8", "surrogateescape"))] = out[i + 2].decode("utf-8", "surrogateescape")
            i += 3
        else:
            i += 2 if word else 1
    return found


def renames_read(repo: "GitRepo", deleted: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Like `renames`, for the (commit, deleted path) pairs only, from the objects themselves (the
    repository's reader; no git process): the files each commit added against its first parent
    (its trees compared from the root, only where they differ); an added file with the deleted
    file's blob is its new name, else the added file most like it, when at least half of their
    lines are the same (git's own default threshold), the same file name first."""
    from porttrack.git.repo import _tree_entries

    by_commit: dict[str, list[str]] = {}
    for sha, path in deleted:
        by_commit.setdefault(sha, []).append(path)
    found: dict[tuple[str, str], str] = {}
    for sha, paths in by_commit.items():
        added = _added_files(repo, f"{sha}^", sha, _tree_entries)
        if not added:
            continue
        olds = {path: e for path, e in repo.tree_entries(f"{sha}^", paths).items()}
        for path in paths:
            if path not in olds:
                continue
            exact = [new for new, blob in added.items() if blob == olds[path][1]]
            if exact:
                found[(sha, path)] = min(exact, key=lambda new: (new.rpartition("/")[2] != path.rpartition("/")[2], new))
                continue
            kind = path.rpartition(".")[2]
            candidates = sorted(new for new in added if new.rpartition(".")[2] == kind)[:50]
            blobs = repo.read_objects([olds[path][1], *(added[new] for new in candidates)])
            old_data = (blobs.get(olds[path][1]) or ("", b""))[1]
            best = None
            for new in candidates:
                score = _similarity(old_data, (blobs.get(added[new]) or ("", b""))[1])
                key = (score, new.rpartition("/")[2] == path.rpartition("/")[2])
                if score >= 0.5 and (best is None or key > best[0]):
                    best = (key, new)
            if best is not None:
                found[(sha, path)] = best[1]
    return found


def _added_files(repo: "GitRepo", old: str, new: str, entries) -> dict[str, str]:
    """path -> blob of the files `new` has and `old` lacks, comparing trees level by level (one
    batch of the reader per level), descending only where they differ."""
    hash_len = 0
    level = [("", f"{old}^{{tree}}", f"{new}^{{tree}}")]
    out: dict[str, str] = {}
    while level:
        objects = repo.objects([spec for _, a, b in level for spec in (a, b) if spec])
        following = []
        for prefix, a, b in level:
            ob = objects.get(b)
            if ob is None:
                continue
            hash_len = len(ob[0]) // 2
            there = entries(ob[2], hash_len)
            oa = objects.get(a) if a else None
            here = entries(oa[2], hash_len) if oa is not None else {}
            for name, (mode, sha) in there.items():
                if here.get(name) == (mode, sha):
                    continue
                path = prefix + name
                if mode == "040000":
                    before = here.get(name)
                    following.append((path + "/", before[1] if before and before[0] == "040000" else "", sha))
                elif mode != "160000" and name not in here:
                    out[path] = sha
        level = following
    return out


def _similarity(a: bytes, b: bytes) -> float:
    """Shared lines over the longer file's lines (multisets)."""
    la, lb = a.split(b"\n"), b.split(b"\n")
    pool: dict[bytes, int] = {}
    for line in la:
        pool[line] = pool.get(line, 0) + 1
    same = 0
    for line in lb:
        if pool.get(line, 0):
            pool[line] -= 1
            same += 1
    return same / max(len(la), len(lb), 1)


def change_between(old: bytes, new: bytes, path: str) -> _File:
    """The change from one file's content to another's as `-U0` hunks (difflib's matching: git's
    own is not at hand for two blobs of a rename), for following a trail across a rename."""
    import difflib

    a, b = old.split(b"\n"), new.split(b"\n")
    hunks = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        hunks.append(_Change(i1 + 1 if i2 > i1 else i1, i2 - i1, j1 + 1 if j2 > j1 else j1, j2 - j1, tuple(b[j1:j2]), tuple(a[i1:i2])))
    return _File(path, "modified", False, tuple(hunks))


def _advance(trail: Trail, fd: "FileDiff | _File", commit: Commit) -> None:
    texts = [h for h in fd.hunks if h.kind == "text"]
    if trail.whole or fd.is_binary or any(h.kind == "binary" for h in fd.hunks):
        trail.touched.append(commit)
        trail.spans.append(None)
        trail.forms.append(([], False))
        trail.opaque = trail.opaque or fd.is_binary or any(h.kind == "binary" for h in fd.hunks)
        trail.absent = fd.status == "deleted"
        if not trail.whole:
            trail.items = []
        return
    regions = [(h.old_start, h.old_len, h.new_start, h.new_len, h) for h in texts]
    kept: list[tuple[int, int, bytes]] = []
    hit: set[int] = set()
    for item in trail.items:
        j = _hit(item, regions)
        if j is None:
            kept.append((item[0] + _shift(item[0], regions), item[1], item[2]))
        else:
            hit.add(j)
    if not hit:
        trail.items = kept
        if fd.status == "deleted":
            trail.absent = True
        return
    lost: list[bytes] = []
    ours = theirs = 0
    for j in sorted(hit):
        a, b, c, d, h = regions[j]
        gone = [content.strip() for n, kind, content in trail.items if kind == LINE and _hit((n, kind, content), regions) == j]
        gone = [line for line in gone if line]
        ours += len(gone)
        theirs += sum(1 for line in h.removed_lines() if line.strip())
        if gone and not _mostly(gone, h.added_lines()):  # not rewritten in place: moved elsewhere in the file?
            moved = _moved_within(gone, regions, j)
            own = [content for n, kind, content in trail.items if kind == LINE and _hit((n, kind, content), regions) == j]
            if moved is not None and not _restores(own, trail.restored) and \
                    _restores(regions[moved[0]][4].added_lines()[moved[1]:moved[2] + 1], trail.restored):
                moved = None  # the change's lines replaced by its pre-image (a revert), perhaps re-indented: not moved
                restored = True
            else:
                restored = False
            if moved is not None:
                k, first, last = moved
                if k not in hit:
                    kc, kh = regions[k][2], regions[k][4]
                    kept.extend((kc + i, LINE, kh.added_lines()[i]) for i in range(first, last + 1))
                continue
            if not restored:
                lost.extend(gone)
        if d:
            kept.extend((c + i, LINE, content) for i, content in enumerate(h.added_lines()))
        else:
            kept.append((c + 1, GAP, b""))
    trail.lost = lost
    trail.targeted = 2 * ours >= theirs
    kept.sort(key=lambda item: (item[0], item[1]))
    trail.items = kept
    trail.touched.append(commit)
    lines = [n for n, kind, _ in kept if kind == LINE]
    trail.spans.append((min(lines), max(lines)) if lines else None)
    trail.forms.append((trail.form, trail.targeted))
    trail.absent = fd.status == "deleted"


def _mostly(lines: Sequence[bytes], added: Sequence[bytes]) -> bool:
    """At least half of `lines` (stripped, non-blank) are among `added` (stripped): the same code,
    perhaps re-indented -- a move or an edit in place, not a removal."""
    pool: dict[bytes, int] = {}
    for line in added:
        pool[line.strip()] = pool.get(line.strip(), 0) + 1
    found = 0
    for line in lines:
        if pool.get(line, 0):
            pool[line] -= 1
            found += 1
    return bool(lines) and 2 * found >= len(lines)


def _restores(lines: Sequence[bytes], restored: frozenset[bytes]) -> bool:
    """Are most of the non-blank `lines` the change's own pre-image, byte for byte (`Trail.restored`)?"""
    body = [line for line in lines if line.strip()]
    return bool(body) and 2 * sum(1 for line in body if line in restored) >= len(body)


def _moved_within(gone: Sequence[bytes], regions, j: int) -> tuple[int, int, int] | None:
    """Another hunk of the same change that added most of the `gone` lines: (its index, the first
    and last of its added lines that are among them)."""
    want = set(gone)
    best = None
    for k, (_a, _b, _c, _d, h) in enumerate(regions):
        if k == j or h is None:
            continue
        added = h.added_lines()
        if not _mostly(gone, added):
            continue
        at = [i for i, line in enumerate(added) if line.strip() in want]
        if at and (best is None or len(at) > best[0]):
            best = (len(at), k, at[0], at[-1])
    return None if best is None else best[1:]


def moved_out(diff: bytes, lost: Sequence[bytes], restored: "dict[str, frozenset[bytes]] | None" = None) -> bool:
    """Does a commit's whole diff (`diff`, any context) add most of the `lost` lines somewhere
    (another file)? Then it moved them, it did not remove them. A line it adds to a file where the
    change removed that very line (`restored`: path -> `pre_image_lines`, byte for byte) is the
    change's pre-image put back (a revert of a move), not its lines moved."""
    restored = restored or {}
    added: list[bytes] = []
    back: frozenset[bytes] = frozenset()
    for line in diff.split(b"\n"):
        if line.startswith(b"+++ "):
            name = line[4:].decode("utf-8", "surrogateescape")
            back = restored.get(name[2:] if name.startswith("b/") else name, frozenset())
        elif line.startswith(b"+") and line[1:] not in back:
            added.append(line[1:])
    pool: dict[bytes, int] = {}
    for line in added:
        pool[line.strip()] = pool.get(line.strip(), 0) + 1
    found = 0
    for line in lost:  # only telling lines count as found: a `None,` or `)` added anywhere tells nothing
        key = line.strip()
        if len(key) >= 8 and pool.get(key, 0):
            pool[key] -= 1
            found += 1
    return bool(lost) and 2 * found >= len(lost)


def _hit(item: tuple[int, int, bytes], regions: Sequence[tuple[int, int, int, int, object]]) -> int | None:
    n, kind, _ = item
    for j, (a, b, _c, _d, _h) in enumerate(regions):
        if kind == LINE:
            if b and a <= n <= a + b - 1:
                return j
        elif (b and a <= n <= a + b) or (not b and n - 2 <= a <= n):
            return j
    return None


def _shift(n: int, regions: Sequence[tuple[int, int, int, int, object]]) -> int:
    return sum(d - b for a, b, _c, d, _h in regions if (a + b - 1 < n if b else a < n))


def undone(h: "Hunk", trail: Trail, upstream_file=None) -> bool:
    """Is upstream's newest form of hunk `h` its pre-image? Only a touched, line-followed trail can
    say so: none of the lines `h` added (that are not also in its pre-image) is left, and every run
    of lines it removed is back; for a hunk that only added lines, nothing but its context is left,
    and the change that removed them removed mostly them (`Trail.targeted`); for a hunk that only
    reorders lines, upstream's file there (`upstream_file()`: its bytes) has the old order."""
    if not trail.touched or trail.whole or trail.opaque:
        return False
    pre = set(h.pre_image())
    own = {line for line in h.added_lines() if line.strip()} - pre
    if not own and h.added_lines() and not any(line in own for line in trail.form):
        from porttrack.diff import presence

        data = upstream_file() if upstream_file is not None else None
        return data is not None and presence.hunk_state(h, data, trail.span) == "not-applied"
    return _form_undone(h, trail.form, trail.targeted)


def undone_index(h: "Hunk", trail: Trail) -> int:
    """For an undone hunk: which touch made it so -- the earliest from which every later form is
    the pre-image too (a later commit that only edits a neighbouring line it took into the trail
    did not undo anything)."""
    k = len(trail.touched) - 1
    while k > 0 and k - 1 < len(trail.forms) and _form_undone(h, *trail.forms[k - 1]):
        k -= 1
    return k


def _form_undone(h: "Hunk", form: list[bytes], targeted: bool) -> bool:
    pre = set(h.pre_image())
    own = {line for line in h.added_lines() if line.strip()} - pre
    if any(line in own for line in form):
        return False
    if not own and h.added_lines():
        return False  # a reordering: only upstream's file tells (see `undone`)
    removed = _runs(h)
    if not removed and not h.added_lines():
        removed = _runs(h, blank=True)  # a hunk that only removes blank lines: are they back?
    if removed and own and not any(_wordy(line) for run in removed for line in run):
        # it removed only punctuation (a lone `)`), which any rewrite of the lines has again: back
        # alone proves no revert; undone only when nothing but the pre-image is left, as below
        if not all(_contains(form, run) for run in removed):
            return False
        return targeted and all(line in pre for line in form if line.strip())
    if removed:
        if all(_contains(form, run) for run in removed):
            return True
        return _reindented_back(form, removed, own)
    # only added lines: removed, and by a change aimed at them (not a larger block they were in,
    # whose removal took the hunk's context with it: that is upstream rewriting, not undoing)
    return targeted and all(line in pre for line in form if line.strip())


def _reindented_back(form: list[bytes], removed: list[list[bytes]], own: set[bytes]) -> bool:
    """The pre-image back with other indentation (a revert, then a later change that wrapped the
    restored lines in a block): every removed run is in `form` line for line once stripped, and no
    line of the change's own with a word in it (`own`, stripped) is left. A change that only
    re-indented its lines has no own line left once stripped: then only the exact pre-image tells."""
    words = {line.strip() for line in own if _wordy(line)} - {line.strip() for run in removed for line in run}
    if not words or any(line.strip() in words for line in form):
        return False
    flat = [line.strip() for line in form]
    return all(_contains(flat, [line.strip() for line in run]) for run in removed)


def _wordy(line: bytes) -> bool:
    return re.search(rb"\w", line) is not None


def _runs(h: "Hunk", blank: bool = False) -> list[list[bytes]]:
    """The runs of lines `h` removed; those of blank lines only are left out unless `blank`."""
    runs: list[list[bytes]] = [[]]
    for marker, content in h._lines():
        if marker == b"-":
            runs[-1].append(content)
        elif marker != b"\\" and runs[-1]:
            runs.append([])
    return [run for run in runs if run and (blank or any(line.strip() for line in run))]


def _contains(hay: list[bytes], needle: list[bytes]) -> bool:
    n = len(needle)
    return any(hay[i:i + n] == needle for i in range(len(hay) - n + 1))


def holds(trail: Trail, fork_lines: list[bytes], regions: Sequence[tuple[int, int, int, int]] | None) -> bool:
    """Does a fork file hold the trail's newest form? `regions`: the `-U0` hunks (old start, old
    len, new start, new len) of the upstream file against the fork's (None: the same file, empty:
    no difference): the form is there when no difference overlaps the trail and its lines read the
    same there."""
    if regions is None or not regions:
        return True
    shaped = [(a, b, c, d, None) for a, b, c, d in regions]
    for item in trail.items:  # a fork difference over the lines, or at a gap or beside it (git may slide it)
        if _hit(item, shaped) is not None:
            return False
    for n, kind, content in trail.items:
        if kind == LINE:
            m = n + _shift(n, shaped)
            if not (1 <= m <= len(fork_lines)) or fork_lines[m - 1] != content:
                return False
    return True


def follow_upstream(repo: "GitRepo", files: Sequence["FileDiff"], start_at: str | None, merge: str, base_sha: str) -> "dict[int, Trail] | None":
    """id(hunk) -> its trail through upstream's first-parent history after the merge, or None when
    the base does not have the merge on its first-parent line (nothing to follow). A PR path that
    a later upstream commit deleted is asked whether that commit renamed it (`trail.renames_read`,
    from the objects); a renamed one is followed on in its new file (a second walk, from the rename)."""
    if start_at is None:
        return None
    paths = sorted({fd.path for fd in files})
    steps = walk(repo, start_at, base_sha, paths)
    shas = [c.sha for c, _ in steps]
    if merge not in shas:
        return None
    later = steps[shas.index(merge) + 1:]
    trails = {id(h): start(fd, h) for fd in files for h in fd.hunks}
    pairs = [(fd.path, trails[id(h)]) for fd in files for h in fd.hunks]
    for path, t in pairs:
        t.path = path
    order = {sha: i for i, sha in enumerate(shas)}
    after: dict[int, str] = {}
    for _ in range(8):  # a path renamed, and renamed again (and back): each round walks the new names once
        here = {path for path, _t in pairs}
        deleted = {(c.sha, fd.path) for c, changed in later for fd in changed if fd.status == "deleted" and fd.path in here}
        found = renames_read(repo, sorted(deleted)) if deleted else {}
        if not found:
            follow(pairs, later, after=after)
            break
        blobs = repo.read_objects([spec for (sha, old), new in found.items() for spec in (f"{sha}^:{old}", f"{sha}:{new}")])
        moves = {(sha, old): (new, change_between((blobs.get(f"{sha}^:{old}") or ("", b""))[1],
                                                         (blobs.get(f"{sha}:{new}") or ("", b""))[1], new))
                 for (sha, old), new in found.items()}
        before = {id(t): t.path for _p, t in pairs}
        follow(pairs, later, moves, after=after)
        moved = [t for _p, t in pairs if t.path != before[id(t)]]
        if not moved:
            break
        renamed_at = {id(t): max((sha for (sha, old), new in found.items() if new == t.path and old == before[id(t)]),
                                 key=lambda sha: order.get(sha, -1)) for t in moved}
        first = min(renamed_at.values(), key=lambda sha: order.get(sha, 1 << 30))
        later = walk(repo, first, base_sha, sorted({t.path for t in moved}))
        shas = [c.sha for c, _ in later]
        order = {sha: i for i, sha in enumerate(shas)}
        pairs = [(t.path, t) for t in moved]
        after = {id(t): sha for t in moved if (sha := renamed_at[id(t)]) != first}
    return trails


def real_commit(repo: "GitRepo", merge: Commit, path: str, span: tuple[int, int] | None) -> tuple[str, str]:
    """The commit a merge on upstream's first-parent line brought that changed lines `span` (1-based,
    in the merge's file) of `path`: `git log -L` over what the merge brought (`merge^1..merge`);
    without lines to follow, the newest non-merge commit it brought on the path."""
    args = ["log", "--no-merges", "-1", "--format=%H%x00%s", "--no-patch"]
    if span is not None:
        proc = repo.run(*args, "-L", f"{span[0]},{span[1]}:{path}", f"{merge.sha}^1..{merge.sha}", check=False, env=LITERAL)
    else:
        proc = repo.run(*args, f"{merge.sha}^1..{merge.sha}", "--", path, check=False, env=LITERAL)
    line = proc.stdout.decode("utf-8", "replace").strip().split("\n")[0] if proc.returncode == 0 else ""
    if "\0" in line:
        sha, _, subject = line.partition("\0")
        return sha, subject
    return merge.sha, merge.subject


def file_lines(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines
