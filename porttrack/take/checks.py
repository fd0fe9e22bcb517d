"""What porttrack checks in a taken diff with the git door: the names one hunk needs from another
(whole files read from the PR's commits) and the patched files after taking (the fork tip in a
scratch index). The analysis itself, on bytes, is `porttrack.diff.pycheck`."""

from __future__ import annotations

from typing import Sequence

from porttrack.diff.hunks import FileDiff, parse_diff
from porttrack.diff.pycheck import Finding, NameUse, SourceCheck, check_sources, checker_label, is_python, may_share_words, name_uses
from porttrack.gitrepo import GitRepo, ScratchIndex


def name_dependencies(repo: GitRepo, files: Sequence[FileDiff], base: str, tip: str) -> list[NameUse]:
    """`name_uses` of a PR's diff `base..tip`, the whole files read from those commits (only the
    Python entries with more than one text hunk: a single hunk has nobody to depend on)."""
    old = [fd.old_path for fd in files if fd.old_path and is_python(fd.old_path) and may_share_words(fd, "-")]
    new = [fd.new_path for fd in files if fd.new_path and is_python(fd.new_path) and may_share_words(fd, "+")]
    blobs = repo.blobs([f"{base}:{p}" for p in old] + [f"{tip}:{p}" for p in new])
    pre = {p: b for p, b in zip(old, blobs[:len(old)]) if b is not None}
    post = {p: b for p, b in zip(new, blobs[len(old):]) if b is not None}
    return name_uses(files, pre, post)


def check_taken(probe: ScratchIndex, diff: bytes, *, applied: str | None = None, tip: str | None = None) -> SourceCheck:
    """`check_sources` of `diff` applied on `probe`'s index (the fork tip, plus the patches a
    stacked PR sits on), in a copy of it: the index itself is left as it was. `applied`: an index
    file of `probe` that already holds `diff` applied plainly on that index (the separability
    probe's), read as it is. `tip`: the commit the index holds unchanged (nothing stacked below),
    so the files before are read from it by the repository's open reader, no process of their own."""
    into = applied or "checked"
    if applied is None:
        probe.copy("index", into)
        if probe.apply(diff, index=into).returncode != 0 and not probe.threeway(diff, into=into).clean:
            return SourceCheck(checker_label(), (), (Finding("not-checked", "*", "the taken hunks did not apply for the check"),))
    paths = sorted({p for fd in parse_diff(diff) for p in (fd.old_path, fd.new_path) if p})
    python = [p for p in paths if is_python(p)]
    old = probe.repo.blobs([f"{tip}:{p}" for p in python]) if tip is not None else probe.read(python)
    before = {**dict.fromkeys(paths, b""), **dict(zip(python, old))}
    after = {**dict.fromkeys(paths, b""), **dict(zip(python, probe.read(python, into)))}
    return check_sources(before, after)
