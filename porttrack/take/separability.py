"""Separability: which of a PR's candidate hunk groups go onto the fork's tip, probed in a scratch
index (`gitrepo.ScratchIndex`; the fork's work tree, index and branches are never touched).

Per group: plain apply, else the change already there (reverse apply: *present*), else a 3-way
merge judged by its exit status and the unmerged entries it leaves (`apply --check --3way` exits 0
on conflicts, library notes §2.4), else a conflict at the files git names.

The common case, every candidate going in as it is, costs one `git apply`: all candidates are
applied at once, for real, into a copy of the probe's index (`apply_all`). A failed `git apply` is
atomic (it writes nothing: every file is checked before the index is written), so that one real
apply answers what `--check` would; when it succeeds it is also the together check
(`check_together`), the patched index `checks.check_taken` reads, and, with `--stat --apply`, the
diffstat the mail carries (the same `stat_patch_list` of the same parsed patch as `git apply --stat`
alone). When it fails, the groups are probed as below: the groups of the files git did not name
are confirmed with one more check and only the named files' groups are probed one by one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from porttrack import apply as apply_mod
from porttrack.common.errors import ConflictError
from porttrack.diff.hunks import FileDiff, build_patch, parse_diff
from porttrack.gitrepo import ScratchIndex, ThreeWay

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

    def holds(self, diff: bytes) -> bool:
        """TAKEN is the probe's index with exactly `diff` applied, plainly."""
        return self.ok and self.patch == diff


def probe_base(probe: ScratchIndex, tip: str, below: Sequence[bytes]) -> list[int]:
    """The fork tip in the scratch index, then the queued patches this PR is stacked on, as `apply`
    would put them (plainly, else by 3-way); returns the positions of those that did not apply."""
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


def apply_all(probe: ScratchIndex, patch: bytes) -> AllAtOnce:
    """`patch` (every candidate group) applied for real into TAKEN, a copy of "index"."""
    probe.copy("index", TAKEN)
    proc = probe.apply(patch, "-v", "--stat", "--apply", index=TAKEN)
    if proc.returncode != 0:
        return AllAtOnce(patch, False, "", False)
    return AllAtOnce(patch, True, proc.stdout.decode("utf-8", "replace"),
                     apply_mod.moved_hunks(proc.stderr.decode("utf-8", "replace")))


def probe_groups(probe: ScratchIndex, files: Sequence[FileDiff], groups: Sequence[frozenset[str]], candidates: Sequence[int],
                 first: AllAtOnce) -> dict[int, tuple[str, str]]:
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
    owner = {h.id: fd for fd in files for h in fd.hunks}
    verdicts: dict[int, tuple[str, str]] = {}
    plain, reports = _asked(probe, files, set().union(*(groups[n] for n in candidates)))
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
            paths = [fd.path for fd in files if any(h.id in groups[n] for h in fd.hunks)]
            touched = {p for fd in files if any(h.id in groups[n] for h in fd.hunks) for p in (fd.old_path, fd.new_path) if p}
            conflicted = sorted(unmerged & touched)
            verdicts[n] = ("conflict", ", ".join(dict.fromkeys(conflicted or paths))) if conflicted else ("3-way", "")
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
    out: dict[str, bool] = {}
    # git names a failed hunk by its first line in the patch as given: the old side, or reversed the
    # new side, whose numbers `build_patch` recomputes when hunks before it are left out
    for fd in parse_diff(patch):
        names = {fd.path, f"{fd.old_path} => {fd.new_path}"}
        found = [r for name, r in reports if name in names]
        if len(found) != 1:
            return {}, []
        errors, failed_at = found[0]
        hunk_level = [e for e in errors if _PATCH_FAILED.match(e) or e.endswith(": patch does not apply")]
        whole = bool(errors) and (len(hunk_level) != len(errors) or not failed_at)
        for h in fd.hunks:
            at = h.new_start if reverse else h.old_start
            out[h.id] = not (whole or (h.kind == "text" and at in failed_at))
    return out, reports


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
    if not needs_threeway:
        probe.copy("index", into)
        proc = probe.apply(diff, "-v", index=into)
        if proc.returncode == 0:
            return Taken(into, "offset" if apply_mod.moved_hunks(proc.stderr.decode("utf-8", "replace")) else "clean")
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
        return not apply_mod.moved_hunks(said)
    if needs_threeway and probe.threeway(diff).clean:
        return False
    raise ConflictError("the hunks to take apply to the fork one group at a time but not together; "
                        "take fewer with --hunk or --exclude (a bug report with the PR would help)")


def patch_of(files: Sequence[FileDiff], ids: set[str] | frozenset[str]) -> bytes:
    return build_patch([(fd, [h for h in fd.hunks if h.id in ids]) for fd in files])


def _plain(probe: ScratchIndex, patch: bytes, reverse: bool = False, verbose: bool = False) -> tuple[bool, str]:
    proc = probe.apply(patch, "--check", *(["--reverse"] if reverse else []), *(["-v"] if verbose else []))
    return proc.returncode == 0, proc.stderr.decode("utf-8", "replace")
