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
from porttrack.diff.hunks import FileDiff, build_patch
from porttrack.gitrepo import ScratchIndex

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
    at once (`apply_all`); when that went in, every group is clean. Otherwise: all at once again
    with `--check` (its stderr names the failing files), then the groups of the files git did not
    complain about, then one by one; so a PR with a conflict costs three `git apply` plus a few per
    group of its file."""
    if first.ok:
        return {n: ("clean", "") for n in candidates}
    chosen = set().union(*(groups[n] for n in candidates))
    ok, stderr = _plain(probe, patch_of(files, chosen))
    if ok:
        return {n: ("clean", "") for n in candidates}
    verdicts: dict[int, tuple[str, str]] = {}
    # git checks every file entry and names each one that fails: the groups of the other files
    # are confirmed with one more check, and only the failing files' groups are probed one by one.
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
