"""Separability: which of a PR's candidate hunk groups go onto the fork's tip, probed in a scratch
index (`git.repo.ScratchIndex`; the fork's work tree, index and branches are never touched).

Per group: plain apply, else the change already there (reverse apply: *present*), else a 3-way
merge judged by its exit status and the unmerged entries it leaves (`apply --check --3way` exits 0
on conflicts, library notes §2.4), else a conflict at the files git names.

The common case, every candidate going in as it is, costs one `git apply`: all candidates are
applied at once, for real, into a copy of the probe's index (`apply_all`). A failed `git apply` is
atomic (it writes nothing: every file is checked before the index is written), so that one real
apply answers what `--check` would; when it succeeds it is also the together check
(`check_together`), the patched index `checks.check_taken` reads, and, with `--stat --apply`, the
diffstat the mail carries (the same `stat_patch_list` of the same parsed patch as `git apply --stat`
alone). When it fails, each group is probed alone, as `probe_one_by_one` would, but on copies of
its files under paths of their own in one index file (`copies_of`): two `git apply` for all groups,
whatever their number (the groups `copies_of` cannot copy are probed together, `_probe_together`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from porttrack.common.errors import ConflictError
from porttrack.diff.hunks import FileDiff, _quote, build_patch
from porttrack.git.repo import ScratchIndex, ThreeWay, read_index_file, write_index_file
from porttrack.queue import series as series_mod

TAKEN = "taken"  # the scratch index file `apply_all` writes: the probe's index plus every candidate

_FAILED_AT = re.compile(
    r"^error: (?:patch failed: (?P<a>.+):\d+|(?P<b>.+): (?:does not exist in index|already exists in index|"
    r"patch does not apply|does not match index|wrong type|does not exist))$"
)


@dataclass(frozen=True)
class AllAtOnce:
    """What `git apply --cached -v --stat --apply` of every candidate group at once did in index
    file TAKEN (a copy of the probe's "index")."""

    patch: bytes
    ok: bool
    stat: str  # its stdout: `git apply --stat` of `patch` ("" when it failed)
    moved: bool  # some hunk went in at an offset (`-v`), so `apply` would not call it clean
    merged: tuple[bytes, str] | None = None  # (a diff, the index file where `--3way` put it cleanly on "index"'s entries)

    def holds(self, diff: bytes) -> bool:
        """TAKEN is the probe's index with exactly `diff` applied, plainly."""
        return self.ok and self.patch == diff


def probe_base(probe: ScratchIndex, tip: str, below: Sequence[bytes]) -> list[int]:
    """The fork tip in the scratch index, then the queued patches this PR is stacked on, as `apply`
    would put them (plainly, else by 3-way); returns the positions of those that did not apply.
    (With nothing stacked, `only_paths` may stand in for it.)"""
    probe.read_tree(tip)
    failed = []
    for n, patch in enumerate(below):
        if probe.apply(patch).returncode == 0:
            continue  # a failed `git apply` changes nothing: it is atomic
        if probe.threeway(patch, into="index3").clean:
            probe.copy("index3", "index")
        else:
            failed.append(n)
    return failed


MAX_PATHS = 2000  # a diff naming more paths than this reads the whole tree (and is diffed without a pathspec)


def only_paths(probe: ScratchIndex, tip: str, paths: Sequence[str]) -> bool:
    """The scratch index holds the tip's entries at `paths` and nothing else (written here, no
    process): `git apply --cached` reads only the entries of the paths it patches (and, for a new
    one, the entry there), so it answers there as over the whole tree, except where a folder and a
    file meet: a path under a file or symlink of the tip (git refuses it: beyond a symlink, or a
    file in the way), or a path where the tip has a folder. Then False, and nothing is written (the
    caller reads the whole tree). A caller that diffs this index names `paths` as its pathspec."""
    if len(paths) >= MAX_PATHS:
        return False
    above = {p[:n] for p in paths for n, ch in enumerate(p) if ch == "/"}
    entries = probe.repo.tree_entries(tip, [*paths, *above])
    if any(entries[p][0] in ("40000", "040000") for p in paths if p in entries):
        return False
    if any(entries[d][0] not in ("40000", "040000") for d in above if d in entries):
        return False
    hash_len = len(next(iter(entries.values()))[1]) // 2 if entries else len(probe.repo.rev_parse("HEAD") or "0" * 40) // 2
    write_index_file(probe.path("index"), {p: (int(entries[p][0], 8), entries[p][1]) for p in paths if p in entries}, hash_len)
    return True


def apply_all(probe: ScratchIndex, patch: bytes) -> AllAtOnce:
    """`patch` (every candidate group) applied for real into TAKEN, a copy of "index"."""
    probe.copy("index", TAKEN)
    proc = probe.apply(patch, "-v", "--stat", "--apply", index=TAKEN)
    if proc.returncode != 0:
        return AllAtOnce(patch, False, "", False)
    return AllAtOnce(patch, True, proc.stdout.decode("utf-8", "replace"),
                     series_mod.moved_hunks(proc.stderr.decode("utf-8", "replace")))


def probe_groups(probe: ScratchIndex, files: Sequence[FileDiff], groups: Sequence[frozenset[str]], candidates: Sequence[int],
                 first: AllAtOnce, merged: list[tuple[bytes, str]] | None = None) -> dict[int, tuple[str, str]]:
    """(clean | 3-way | present | conflict, file) per candidate group. `first`: all of them applied
    at once (`apply_all`); when that went in, every group is clean. Otherwise git is asked per
    batch, not per group: one `git apply --check --reject -v` of every candidate says which hunks
    go in as they are (`--reject` goes on past a failing hunk: git names each one); a group whose
    hunks all do is clean. One `--reverse` pass of the rest says which are already there (every
    hunk reverse-applies: *present*). The rest are merged 3-way in rounds, one group per file per
    round (git merges a file's whole patch at once), each round one real `--3way` into a copy and
    the unmerged entries it leaves; a round git refuses outright (a pre-image blob missing) is
    probed group by group (`probe_one_by_one`). So a PR with conflicts costs three `git apply`
    plus two per round, not four per group."""
    if first.ok:
        return {n: ("clean", "") for n in candidates}
    alone = copies_of(probe, files, groups, candidates, merged)
    if alone is None:
        return _probe_together(probe, files, groups, candidates)
    verdicts, rest, plain, reports = alone
    if rest and plain:
        verdicts.update(_probe_together(probe, files, groups, rest, (plain, reports)))
    elif rest:
        verdicts.update(_probe_together(probe, files, groups, rest))
    return verdicts


def _probe_together(probe: ScratchIndex, files: Sequence[FileDiff], groups: Sequence[frozenset[str]], candidates: Sequence[int],
                    asked: tuple[dict[str, bool], list] | None = None) -> dict[int, tuple[str, str]]:
    """`probe_groups` of `candidates` on the probe's index itself: checked together, per hunk
    (`asked`: that check, already made)."""
    owner = {h.id: fd for fd in files for h in fd.hunks}
    verdicts: dict[int, tuple[str, str]] = {}
    plain, reports = asked or _asked(probe, files, set().union(*(groups[n] for n in candidates)))
    first = AllAtOnce(b"", False, "", False)
    if not plain:
        return probe_one_by_one(probe, files, groups, candidates, first)
    suspect = [n for n in candidates if not all(plain.get(hid, False) for hid in groups[n])]
    verdicts.update({n: ("clean", "") for n in candidates if n not in suspect})
    if not suspect:
        return verdicts
    reverse = _hunks_that_apply(probe, files, set().union(*(groups[n] for n in suspect)), reverse=True)
    if not reverse:
        verdicts.update({n: _probe_one(probe, files, groups[n]) for n in suspect})
        return verdicts
    for n in suspect:
        if all(reverse.get(hid, False) for hid in groups[n]):
            verdicts[n] = ("present", ", ".join(fd.path for fd in files if any(h.id in groups[n] for h in fd.hunks)))
    rest = [n for n in suspect if n not in verdicts]
    # A file the fork does not have cannot be merged: git refuses the whole 3-way apply for it, so
    # its groups conflict, at the files git named (as the group alone would be told), and stay out
    # of the rounds.
    for n in list(rest):
        entries = [fd for fd in files if any(h.id in groups[n] for h in fd.hunks)]
        said = [(name, errors) for name, (errors, _at) in reports
                if any(name in (fd.path, f"{fd.old_path} => {fd.new_path}") for fd in entries)]
        if any(_MISSING.search(e) for _name, errors in said for e in errors):
            # named as the group alone would be: the files where one of its own hunks failed, in git's order
            failing = {fd.path for fd in entries if any(h.id in groups[n] and not plain.get(h.id, False) for h in fd.hunks)}
            named = [m.group("a") or m.group("b") for _name, errors in said for m in map(_FAILED_AT.match, errors) if m]
            named = [p for p in named if p in failing]
            verdicts[n] = ("conflict", ", ".join(dict.fromkeys(named or [fd.path for fd in entries])))
            rest.remove(n)
    rounds: list[list[int]] = []
    for n in rest:  # one group per file per round: git merges each file's patch as a whole
        paths = {p for hid in groups[n] for p in (owner[hid].old_path, owner[hid].new_path) if p}
        for r in rounds:
            if not paths & {p for m in r for hid in groups[m] for p in (owner[hid].old_path, owner[hid].new_path) if p}:
                r.append(n)
                break
        else:
            rounds.append([n])
    for r in rounds:
        merged = threeway(probe, patch_of(files, set().union(*(groups[n] for n in r))))
        if merged.rc != 0 and not merged.unmerged:  # git refused the round as a whole: ask per group
            verdicts.update({n: _probe_one(probe, files, groups[n]) for n in r})
            continue
        unmerged = set(merged.unmerged)
        # a file git could not merge at all (it fell back to applying it as it is, and that failed)
        # fails the whole apply: its groups are asked alone; the others merged, or conflicted
        refused = {m.group("a") or m.group("b") for m in map(_FAILED_AT.match, merged.stderr.splitlines()) if m}
        for n in [n for n in r if {p for hid in groups[n] for p in (owner[hid].old_path, owner[hid].new_path) if p} & refused]:
            verdicts[n] = _probe_one(probe, files, groups[n])
            r = [m for m in r if m != n]
        for n in r:
            named = [fd.path for fd in files if any(h.id in groups[n] for h in fd.hunks)]
            touched = {p for fd in files if any(h.id in groups[n] for h in fd.hunks) for p in (fd.old_path, fd.new_path) if p}
            conflicted = sorted(unmerged & touched)
            verdicts[n] = ("conflict", ", ".join(dict.fromkeys(conflicted or named))) if conflicted else ("3-way", "")
    return verdicts


def _hunks_that_apply(probe: ScratchIndex, files: Sequence[FileDiff], ids: set[str], reverse: bool = False) -> dict[str, bool]:
    """Per hunk of `ids`: does it go in as it is (or, `reverse`, come out: the change is there)? One
    `git apply --check --reject -v` of all of them (git reports each hunk that fails and goes on).
    git's report is read per file by the name it prints (it does not always check the files in the
    patch's order); a report that cannot be read so is asked again group by group by the caller
    (the answer then holds no hunk: `{}`)."""
    return _asked(probe, files, ids, reverse)[0]


def _asked(probe: ScratchIndex, files: Sequence[FileDiff], ids: set[str], reverse: bool = False
           ) -> tuple[dict[str, bool], list[tuple[str, tuple[list[str], set[int]]]]]:
    """`_hunks_that_apply`, and git's report per file (in the order git gave it)."""
    patch = patch_of(files, ids)
    proc = probe.apply(patch, "--check", "--reject", "-v", *(["--reverse"] if reverse else []))
    reports = _reports(proc.stderr.decode("utf-8", "surrogateescape"))
    if reports is None:
        return {}, []
    out = _read_asked(files, ids, reports, reverse)
    return (out, reports) if out else ({}, [])


def _read_asked(files: Sequence[FileDiff], ids: set[str], reports: list, reverse: bool = False) -> dict[str, bool]:
    """Per hunk of `ids` (`patch_of(files, ids)` was checked): did it go in, by git's report per
    file ({} when it cannot be read so)."""
    said: dict[str, list] = {}
    for name, r in reports:
        said.setdefault(name, []).append(r)
    out: dict[str, bool] = {}
    # git names a failed hunk by its first line in the patch as given: the old side, or reversed the
    # new side, whose numbers `build_patch` recomputes when hunks before it are left out (as here)
    for fd in files:
        chosen = [h for h in fd.hunks if h.id in ids]
        if not chosen:
            continue
        meta = fd.meta_hunk
        old, new = fd.old_path, fd.new_path
        if fd.status == "renamed" and meta is not None and meta.id not in ids:
            new = old  # `build_patch` made it an edit of the old path
        names = dict.fromkeys([new if new is not None else old or "", f"{old} => {new}"])
        found = [r for name in names for r in said.get(name, [])]
        if len(found) != 1:
            return {}
        errors, failed_at = found[0]
        hunk_level = [e for e in errors if _PATCH_FAILED.match(e) or e.endswith(": patch does not apply")]
        whole = bool(errors) and (len(hunk_level) != len(errors) or not failed_at)
        shift = 0  # net lines added by the text hunks left out before this one
        for h in fd.hunks:
            if h.id not in ids:
                if h.kind == "text":
                    shift += h.new_len - h.old_len
                continue
            at = (h.new_start - shift) if reverse else h.old_start
            out[h.id] = not (whole or (h.kind == "text" and at in failed_at))
    return out


_CHECKING = re.compile(r"^Checking patch (.*)\.\.\.$")
_MISSING = re.compile(r": (?:does not exist in index|No such file or directory)$")
_PATCH_FAILED = re.compile(r"^error: patch failed: .*:(\d+)$")


def _reports(stderr: str) -> list[tuple[str, tuple[list[str], set[int]]]] | None:
    """git apply -v's report per file: (the name it prints, (its error lines, the first lines of the
    hunks that failed)); None when an error comes before any file."""
    out: list[tuple[str, tuple[list[str], set[int]]]] = []
    searching = False
    for line in stderr.splitlines():
        if searching:  # git echoes the lines it looked for, then says which hunk failed
            searching = not line.startswith("error: patch failed: ")
            if searching:
                continue
        if m := _CHECKING.match(line):
            out.append((m.group(1), ([], set())))
        elif line.startswith("error: while searching for:"):
            searching = True
        elif line.startswith("error: "):
            if not out:
                return None
            out[-1][1][0].append(line)
            if m := _PATCH_FAILED.match(line):
                out[-1][1][1].add(int(m.group(1)))
    return out


def probe_one_by_one(probe: ScratchIndex, files: Sequence[FileDiff], groups: Sequence[frozenset[str]], candidates: Sequence[int],
                     first: AllAtOnce) -> dict[int, tuple[str, str]]:
    """The per-group probes `probe_groups` batches (kept as its reference and its fallback): all at
    once with `--check` (its stderr names the failing files), the groups of the other files
    confirmed together, then each suspect group alone: plain, reverse, 3-way."""
    if first.ok:
        return {n: ("clean", "") for n in candidates}
    chosen = set().union(*(groups[n] for n in candidates))
    ok, stderr = _plain(probe, patch_of(files, chosen))
    if ok:
        return {n: ("clean", "") for n in candidates}
    verdicts: dict[int, tuple[str, str]] = {}
    failed = {m.group("a") or m.group("b") for m in map(_FAILED_AT.match, stderr.splitlines()) if m}
    owner = {h.id: fd for fd in files for h in fd.hunks}
    suspect = [n for n in candidates if any({owner[h].path, owner[h].old_path} & failed for h in groups[n])]
    rest = [n for n in candidates if n not in suspect]
    if failed and rest and _plain(probe, patch_of(files, set().union(*(groups[n] for n in rest))))[0]:
        verdicts.update({n: ("clean", "") for n in rest})
    else:
        suspect = list(candidates)
    for n in suspect:
        verdicts[n] = _probe_one(probe, files, groups[n])
    return verdicts


def _probe_one(probe: ScratchIndex, files: Sequence[FileDiff], group: frozenset[str]) -> tuple[str, str]:
    patch = patch_of(files, group)
    ok, stderr = _plain(probe, patch)
    if ok:
        return "clean", ""
    paths = [fd.path for fd in files if any(h.id in group for h in fd.hunks)]
    if _plain(probe, patch, reverse=True)[0]:
        return "present", ", ".join(paths)
    merged = probe.threeway(patch)
    conflicted = list(merged.unmerged)
    if merged.clean:
        return "3-way", ""
    failed = [m.group("a") or m.group("b") for m in map(_FAILED_AT.match, stderr.splitlines()) if m]
    return "conflict", ", ".join(dict.fromkeys(conflicted or failed or paths))


_WITH_CONFLICTS = re.compile(r"^Applied patch to '(.*)' with conflicts\.$", re.M)
_CLEANLY = re.compile(r"^Applied patch to '(.*)' cleanly\.$", re.M)


def threeway(probe: ScratchIndex, patch: bytes, *flags: str, into: str = "index3") -> ThreeWay:
    """`ScratchIndex.threeway` without the `ls-files -u` after it: the files left unmerged are
    those git says it applied "with conflicts" (each such file leaves unmerged entries, and only
    those do). Exit 0 and none named: merged clean; exit non-zero and none named: git refused."""
    probe.copy("index", into)
    proc = probe.apply(patch, "--3way", *flags, index=into)
    stderr = proc.stderr.decode("utf-8", "surrogateescape")
    return ThreeWay(proc.returncode, stderr, tuple(sorted(set(_WITH_CONFLICTS.findall(stderr)))))


@dataclass(frozen=True)
class Taken:
    """The hunks to take applied together onto the probe's index, in index file `index`: `how`
    they went in (clean | offset: plainly, a hunk moved | 3-way), as `apply` would build them on
    that same tree."""

    index: str
    how: str

    @property
    def exact(self) -> bool:
        return self.how == "clean"


def apply_taken(probe: ScratchIndex, diff: bytes, needs_threeway: bool, first: AllAtOnce, into: str = "checked") -> Taken:
    """The taken groups (each probed alone) applied together, for real, into index file `into`, as
    `apply` builds a patch: plainly (`-v`: a hunk moved is an offset), else, when some group needed
    a merge, by `--3way` (git 2.32 and later merge first when asked to, so the plain step comes
    first and alone; a diff with such a group cannot go in plainly, so only the merge is asked).
    `first` when it holds this very diff. A diff that does not go in so: its
    groups apply one at a time but not together, ConflictError."""
    if first.holds(diff):
        return Taken(TAKEN, "offset" if first.moved else "clean")
    if needs_threeway and first.merged is not None and first.merged[0] == diff:
        return Taken(first.merged[1], "3-way")  # merged beside the groups' own probes (`copies_of`)
    if not needs_threeway:
        probe.copy("index", into)
        proc = probe.apply(diff, "-v", index=into)
        if proc.returncode == 0:
            return Taken(into, "offset" if series_mod.moved_hunks(proc.stderr.decode("utf-8", "replace")) else "clean")
    # A group that needed a merge has a hunk that does not go in as it is, alone or with groups
    # that are not adjacent to it: the plain step would fail, so it is not asked.
    elif threeway(probe, diff, into=into).clean:
        return Taken(into, "3-way")
    raise ConflictError("the hunks to take apply to the fork one group at a time but not together; "
                        "take fewer with --hunk or --exclude (a bug report with the PR would help)")


def check_together(probe: ScratchIndex, diff: bytes, needs_threeway: bool, first: AllAtOnce) -> bool:
    """The taken groups applied one by one; make sure they also apply together. True when they go
    in exactly as they are: no merge, no hunk moved (`apply` would call that *clean*). When `first`
    applied this very diff, it already said so."""
    if first.holds(diff):
        return not first.moved
    ok, said = _plain(probe, diff, verbose=True)
    if ok:
        return not series_mod.moved_hunks(said)
    if needs_threeway and probe.threeway(diff).clean:
        return False
    raise ConflictError("the hunks to take apply to the fork one group at a time but not together; "
                        "take fewer with --hunk or --exclude (a bug report with the PR would help)")


def patch_of(files: Sequence[FileDiff], ids: set[str] | frozenset[str]) -> bytes:
    return build_patch([(fd, [h for h in fd.hunks if h.id in ids]) for fd in files])


def _plain(probe: ScratchIndex, patch: bytes, reverse: bool = False, verbose: bool = False) -> tuple[bool, str]:
    proc = probe.apply(patch, "--check", *(["--reverse"] if reverse else []), *(["-v"] if verbose else []))
    return proc.returncode == 0, proc.stderr.decode("utf-8", "replace")


# -- each group alone, in one process: copies of its files under paths of their own -----------------

COPIES = "copies"  # the scratch index file `copies_of` writes: copies of the files the groups touch
_COPY_ROOT = ".porttrack-probe"
_HEAD_AT = re.compile(rb"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@", re.M)
_INDEX_LINE = re.compile(rb"^index ([0-9a-f]+)\.\.([0-9a-f]+)(?: [0-7]+)?$", re.M)


def copies_of(probe: ScratchIndex, files: Sequence[FileDiff], groups: Sequence[frozenset[str]], candidates: Sequence[int],
              merged: list[tuple[bytes, str]] | None = None
              ) -> tuple[dict[int, tuple[str, str]], list[int], dict[str, bool], list] | None:
    """Each candidate group probed alone, as `probe_one_by_one` probes it (plain, else reverse:
    *present*, else 3-way), at most two `git apply` for all of them: an index file of copies
    (`COPIES`, written here, no process) holds, for group n, the probe index's entry of each file
    it touches under `.porttrack-probe/f<n>/PATH` and `.porttrack-probe/r<n>/PATH`; one `git apply
    --check --reject -v` of every group's hunks at its f-copy and their reverse (made here, as
    `--reverse` makes it) at its r-copy says which groups go in, and which are present; one real
    `--3way` of the rest at their f-copies says which merge and which conflict (git merges each
    file's patch on its own, so the copies cannot meet). Only groups whose files are modified text
    files that the index holds are copied, and none under a `.gitattributes` (a merge driver chosen
    by path could read the copy differently); the rest (`rest`) are checked at their own paths in
    the same process, together, and returned with that check (`plain`, `reports`) for
    `_probe_together`. None: nothing copied (the caller probes as before).

    `merged` (a list, given when the probe's index holds only the PR's paths, so that an index file
    of copies can stand in for it): when every group is decided here, the same `--3way` also puts
    the diff of every group that is clean or merges (the diff `apply_taken` would merge next) on
    the entries of the probe's index at their own paths; when all of it merges cleanly, (that
    diff, the index file) is appended, for `apply_taken`."""
    repo = probe.repo
    hash_len = len(repo.rev_parse("HEAD") or "0" * 40) // 2
    entries = read_index_file(probe.path("index").read_bytes(), hash_len)
    if entries is None or any(p.startswith(_COPY_ROOT + "/") for p in entries):
        return None
    if (repo.git_dir / "info" / "attributes").exists() or (repo.common_dir / "info" / "attributes").exists():
        return None
    attributed = _merge_attributes(repo, {p: sha for p, (_mode, sha) in entries.items() if p.rpartition("/")[2] == ".gitattributes"})
    group_of = {hid: n for n in candidates for hid in groups[n]}
    held: dict[int, dict[int, list]] = {n: {} for n in candidates}  # group -> file's position -> its hunks there
    for k, fd in enumerate(files):
        for h in fd.hunks:
            if h.id in group_of:
                held[group_of[h.id]].setdefault(k, []).append(h)
    parts = {n: [(files[k], hs) for k, hs in sorted(held[n].items())] for n in candidates}

    def copyable(fd: FileDiff, hs: list) -> bool:  # (a file the index lacks: no copy, the group conflicts there)
        return (fd.status == "modified" and not fd.is_binary and fd.old_path == fd.new_path
                and (fd.path not in entries or entries[fd.path][0] >> 12 in (0o10, 0o12)) and all(h.kind == "text" for h in hs)
                and _INDEX_LINE.search(fd.header) is not None
                and not any(d == "" or fd.path.startswith(d + "/") for d in attributed))

    alone = [n for n in candidates if parts[n] and all(copyable(fd, hs) for fd, hs in parts[n])]
    if not alone:
        return None
    rest = [n for n in candidates if n not in alone]
    real = patch_of(files, set().union(*(groups[n] for n in rest))) if rest else b""
    index: dict[str, tuple[int, str]] = {}
    resting = set(rest)
    for fd in files:
        if any(group_of.get(h.id) in resting for h in fd.hunks):
            index.update({p: entries[p] for p in (fd.old_path, fd.new_path) if p and p in entries})
    forward: list[bytes] = []
    backward: list[bytes] = []
    at: dict[str, tuple[int, FileDiff, list[tuple[str, int]]]] = {}  # copy -> (group, file, (hunk, line git names it by))
    for n in alone:
        for fd, hs in parts[n]:
            if fd.path not in entries:
                continue
            entry = build_patch([(fd, hs)])
            cut = entry.index(b"\n@@ ") + 1
            body = entry[cut:]
            old, new = _INDEX_LINE.search(fd.header).group(1, 2)  # type: ignore[union-attr]
            starts = [(int(m.group(1)), int(m.group(2))) for m in _HEAD_AT.finditer(body)]
            for side, chunks, ids in (("f", forward, old + b".." + new), ("r", backward, new + b".." + old)):
                copy = f"{_COPY_ROOT}/{side}{n}/{fd.path}"
                index[copy] = entries[fd.path]
                chunks.append(_header(copy, ids) + (body if side == "f" else _reversed(body)))
                at[copy] = (n, fd, [(h.id, s[0] if side == "f" else s[1]) for h, s in zip(hs, starts)])
    write_index_file(probe.path(COPIES), index, hash_len)
    proc = probe.apply(real + b"".join(forward) + b"".join(backward), "--check", "--reject", "-v", index=COPIES)
    reports = _reports(proc.stderr.decode("utf-8", "surrogateescape"))
    if reports is None:
        return None
    plain = _read_asked(files, set().union(*(groups[n] for n in rest)), reports) if rest else {}
    passed: dict[str, bool | None] = {}  # copy -> every hunk went in (None: git's report could not be read)
    said: dict[str, list] = {}
    for name, r in reports:
        said.setdefault(name, []).append(r)
    for copy, (n, fd, hunks_at) in at.items():
        found = said.get(copy, [])
        if len(found) != 1:
            passed[copy] = None
            continue
        errors, failed_at = found[0]
        hunk_level = [e for e in errors if _PATCH_FAILED.match(e) or e.endswith(": patch does not apply")]
        whole = bool(errors) and (len(hunk_level) != len(errors) or not failed_at)
        passed[copy] = not whole and not any(line in failed_at for _hid, line in hunks_at)
    verdicts: dict[int, tuple[str, str]] = {}
    merge: list[int] = []
    for n in alone:
        fwd = [passed[f"{_COPY_ROOT}/f{n}/{fd.path}"] if fd.path in entries else False for fd, _hs in parts[n]]
        rev = [passed[f"{_COPY_ROOT}/r{n}/{fd.path}"] if fd.path in entries else False for fd, _hs in parts[n]]
        if None in fwd or None in rev:
            verdicts[n] = _probe_one(probe, files, groups[n])
        elif any(fd.path not in entries for fd, _hs in parts[n]):
            # git refuses the whole 3-way apply of a file it does not have: the group conflicts at the
            # files its plain check names (those missing, those where a hunk failed), in order
            verdicts[n] = ("conflict", ", ".join(dict.fromkeys(fd.path for (fd, _hs), ok in zip(parts[n], fwd) if not ok)))
        elif all(fwd):
            verdicts[n] = ("clean", "")
        elif all(rev):
            verdicts[n] = ("present", ", ".join(fd.path for fd, _hs in parts[n]))
        else:
            merge.append(n)
    if merge:
        # Beside the groups' copies, when every candidate is decided here: for each file the taken
        # groups touch, a copy per outcome of its merging groups (`_variants`), so that the 3-way of
        # the whole taken diff (what `apply_taken` asks next) is read off this same apply.
        variants = _variants(files, parts, verdicts, merge, entries) if merged is not None and not rest else None
        for copy, _key, _fd, _hs in variants or ():
            index[copy] = entries[_fd.path]
        if variants:
            write_index_file(probe.path(COPIES), index, hash_len)
        patch = b"".join(_copy_entry(f"{_COPY_ROOT}/f{n}/{fd.path}", fd, hs) for n in merge for fd, hs in parts[n])
        patch += b"".join(_copy_entry(copy, fd, hs) for copy, _key, fd, hs in variants or ())
        probe.copy(COPIES, COPIES + "3")
        proc = probe.apply(patch, "--3way", index=COPIES + "3")
        stderr = proc.stderr.decode("utf-8", "surrogateescape")
        unmerged = set(_WITH_CONFLICTS.findall(stderr))
        refused = {m.group("a") or m.group("b") for m in map(_FAILED_AT.match, stderr.splitlines()) if m}
        merged_clean = set(_CLEANLY.findall(stderr))
        for n in merge:
            copies = {f"{_COPY_ROOT}/f{n}/{fd.path}": fd.path for fd, _hs in parts[n]}
            if variants:  # a variant may fail the apply on its own: each copy by what git said of it
                asked_alone = bool(copies.keys() & refused) or not copies.keys() <= (merged_clean | unmerged)
            else:
                asked_alone = (proc.returncode != 0 and not unmerged) or bool(copies.keys() & refused)
            if asked_alone:
                verdicts[n] = _probe_one(probe, files, groups[n])  # git refused it: asked alone, as before
                continue
            conflicted = sorted(path for copy, path in copies.items() if copy in unmerged)
            verdicts[n] = ("conflict", ", ".join(conflicted)) if conflicted else ("3-way", "")
        if variants:
            _read_variants(probe, files, groups, verdicts, merge, variants, entries, hash_len, merged_clean, merged)  # type: ignore[arg-type]
    return verdicts, rest, plain, reports


_MERGE_ATTRIBUTES = {"merge", "conflict-marker-size", "binary", "text", "eol", "crlf", "ident", "filter", "diff",
                     "working-tree-encoding", "whitespace"}


def _merge_attributes(repo, files: dict[str, str]) -> list[str]:
    """The folders of the `.gitattributes` files (path -> blob id) that set an attribute a merge or
    an apply could read (a merge driver, a marker size, text/eol conversion, a macro): a copy of a
    file under one is not read as the file would be."""
    got = repo.objects(sorted(set(files.values()))) if files else {}
    out = []
    for path, sha in files.items():
        obj = got.get(sha)
        text = obj[2].decode("utf-8", "replace") if obj is not None else "[attr]"
        for line in text.splitlines():
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            if words[0].startswith("[attr]") or any(w.lstrip("-!").split("=")[0] in _MERGE_ATTRIBUTES for w in words[1:]):
                out.append(path.rpartition("/")[0])
                break
    return out


def _copy_entry(copy: str, fd: FileDiff, hs: Sequence) -> bytes:
    """`fd`'s entry of hunks `hs` (`build_patch`), at path `copy`."""
    entry = build_patch([(fd, hs)])
    return _header(copy, b"..".join(_INDEX_LINE.search(fd.header).group(1, 2))) + entry[entry.index(b"\n@@ ") + 1:]  # type: ignore[union-attr]


MAX_VARIANTS = 32  # copies of one file, one per outcome of the merging groups on it (5 groups)
MAX_ALL_VARIANTS = 128  # copies of all files together (each a small 3-way merge, in one process)


def _variants(files: Sequence[FileDiff], parts: dict, verdicts: dict[int, tuple[str, str]], merge: list[int],
              entries: dict[str, tuple[int, str]]) -> list[tuple[str, frozenset[int], FileDiff, list]] | None:
    """(copy, the merging groups it holds, file, hunks) for each file a clean or merging group
    touches and each subset of the merging groups on it: the clean groups' hunks plus the subset's.
    None when a file has more than MAX_VARIANTS such subsets, all files more than MAX_ALL_VARIANTS,
    or a file has a mode change (a copy has none)."""
    taken = [n for n, v in verdicts.items() if v[0] == "clean"] + merge
    on: dict[int, tuple[FileDiff, dict[int, list]]] = {}
    for n in taken:
        for fd, hs in parts[n]:
            on.setdefault(id(fd), (fd, {}))[1][n] = hs
    out = []
    for fd, held in on.values():
        if fd.meta_hunk is not None or fd.path not in entries:
            return None
        merging = sorted(n for n in held if n in merge)
        if 2 ** len(merging) > MAX_VARIANTS:
            return None
        for mask in range(2 ** len(merging)):
            subset = frozenset(n for k, n in enumerate(merging) if mask >> k & 1)
            chosen = {h.id for n, hs in held.items() if n not in merge or n in subset for h in hs}
            hs = [h for h in fd.hunks if h.id in chosen]
            if hs:
                out.append((f"{_COPY_ROOT}/t{mask}/{fd.path}", subset, fd, hs))
    return out if len(out) <= MAX_ALL_VARIANTS else None


def _read_variants(probe: ScratchIndex, files: Sequence[FileDiff], groups: Sequence[frozenset[str]],
                   verdicts: dict[int, tuple[str, str]], merge: list[int], variants: list, entries: dict[str, tuple[int, str]], hash_len: int,
                   merged_clean: set[str], merged: list[tuple[bytes, str]]) -> None:
    """The taken diff (the clean and 3-way groups) and an index file of it merged (the probe's
    entries, each file as its variant of the groups that merged made it), appended to `merged`;
    nothing when a variant needed did not merge cleanly."""
    if any(verdicts[n][0] not in ("3-way", "conflict") for n in merge):
        return  # a group git refused here was asked alone: its copies say nothing
    taken = {n for n, v in verdicts.items() if v[0] in ("clean", "3-way")}
    if not any(verdicts[n][0] == "3-way" for n in merge):
        return  # nothing merges: `apply_taken` applies plainly, and says how
    result = read_index_file(probe.path(COPIES + "3").read_bytes(), hash_len)
    if result is None:
        return
    ids = set().union(*(groups[n] for n in taken))
    index = dict(entries)
    for copy, subset, fd, hs in variants:
        merges_here = frozenset(n for n in merge if verdicts[n][0] == "3-way" and any(h.id in groups[n] for h in fd.hunks))
        if subset != merges_here:
            continue  # (the taken hunks of a file: its clean groups' and those of its groups that merged)
        if copy not in merged_clean or copy not in result:
            return
        index[fd.path] = result[copy]
    write_index_file(probe.path("merged"), index, hash_len)
    merged.append((patch_of(files, ids), "merged"))


def _header(path: str, ids: bytes) -> bytes:
    a, b = _quote("a/", path), _quote("b/", path)
    return b"diff --git " + a + b" " + b + b"\nindex " + ids + b"\n--- " + a + b"\n+++ " + b + b"\n"


def _reversed(body: bytes) -> bytes:
    """Hunks as `git apply --reverse` reads them: old and new swapped, `-` and `+` swapped."""
    out = []
    for line in body.split(b"\n"):
        if line[:1] == b"+":
            line = b"-" + line[1:]
        elif line[:1] == b"-":
            line = b"+" + line[1:]
        elif line[:3] == b"@@ ":
            m = re.match(rb"@@ -(\d+(?:,\d+)?) \+(\d+(?:,\d+)?) @@", line)
            assert m is not None
            line = b"@@ -" + m.group(2) + b" +" + m.group(1) + b" @@" + line[m.end():]
        out.append(line)
    return b"\n".join(out)
