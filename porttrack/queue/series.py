"""Build a series of queued patches over a base commit, in a scratch index: the queue's builder.

`build_series` applies and commits each patch (`git apply --cached`, then `--3way`, then reduced
context; message and author from the mail, committer porttrack) without moving a ref or touching a
work tree, and says per patch and per hunk how it applied (`PatchResult`, `HunkResult`: clean,
offset, 3-way, fuzz, conflict, not-tried). `porttrack apply` builds its branches with it,
`porttrack import` its trial build, `gate run` its baseline; `build_base` is where every build
starts. (How each step is decided: porttrack/apply.py's docstring.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from porttrack.common.errors import GitError, InputError, UnsafeInput
from porttrack.diff.hunks import SYMLINK_MODE, FileDiff, Hunk, build_patch, parse_diff
from porttrack.diff.paths import check_diff_paths, check_symlink_targets
from porttrack.git.repo import CommitInfo, GitRepo, ScratchIndex, fork_branch_ref
from porttrack.queue.manifest import Patch
from porttrack.tracks.config import Config
from porttrack.workspace.files import checkpoint

COMMITTER = ("porttrack", "porttrack@localhost")
FUZZ_CONTEXT = "-C1"  # at least one context line must match: patch(1)'s fuzz 2 for 3-line context
# Outcomes, best first. A patch's outcome is the worst of its hunks'.
OUTCOMES = ("clean", "offset", "3-way", "fuzz", "conflict")
NOT_TRIED = "not-tried"
_CHECKING = re.compile(r"^Checking patch (.*)\.\.\.$")
_OFFSET = re.compile(r"^Hunk #(\d+) succeeded at (\d+) \(offset (-?\d+) lines?\)\.$")
_REDUCED = re.compile(r"^Context reduced to \((\d+)/(\d+)\) to apply fragment at (\d+)$")
_FAILED_AT = re.compile(r"^error: patch failed: .*:(\d+)$")
_WITH_CONFLICTS = re.compile(r"^Applied patch to '(.*)' with conflicts\.$")
_NO_BLOB = "lacks the necessary blob"
_BEYOND_SYMLINK = "beyond a symbolic link"  # git's refusal to write under a symlinked folder
_MBOX_FROM = re.compile(rb"^From [0-9a-f]{40,64} Mon Sep 17 00:00:00 2001$", re.M)


# -- records -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HunkResult:
    id: str
    path: str
    kind: str  # text | binary | meta
    index: int  # 1, 2, ... for text hunks in file order; 0 for binary/meta
    header: str  # the "@@ -a,b +c,d @@" line ("" for binary/meta)
    outcome: str  # clean | offset | 3-way | fuzz | conflict | not-tried
    offset: int | None = None  # lines moved (offset)
    fuzz: int | None = None  # context lines ignored at an end, as patch(1) counts fuzz


@dataclass(frozen=True)
class PatchResult:
    name: str
    file: str
    pr: int
    track: str
    state: str
    outcome: str  # clean | offset | 3-way | fuzz | conflict | not-tried
    commit: str | None = None
    empty: bool = False  # applied but changed nothing: upstream base already has it
    hunks: tuple[HunkResult, ...] = ()
    conflict_files: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()  # git's own words for a conflict
    notes: tuple[str, ...] = ()


# -- the command ---------------------------------------------------------------------------------


def build_base(repo: GitRepo, config: Config) -> str:
    """Where builds start: `fork.build_base` as given (e.g. `upstream/main`), else the fork branch
    read as every command reads it (`git.repo.qualify_branch`: `refs/heads/X`, else the
    remote-tracking `refs/remotes/origin/X` of a fresh clone; never a tag; none: refused)."""
    return config.fork.build_base or fork_branch_ref(repo, config.fork.branch)


def build_series(repo: GitRepo, base_sha: str, patches: Sequence[Patch], contents: dict[str, bytes],
                 progress: Callable[[str], None] | None = None) -> tuple[tuple["PatchResult", ...], str | None]:
    """Build `patches` over `base_sha` in a scratch index, moving no ref and touching no work tree.

    Returns the per-patch results and the new commit (None when a patch conflicts). Gates use it
    to build the baseline (the queue without the patch under test).
    """
    base = repo.commits([base_sha])[base_sha]
    if base is None:
        raise GitError(["cat-file", "--batch", f"{base_sha}^{{commit}}"], 1, f"{base_sha}: no such commit")
    with repo.scratch_index("apply") as scratch:
        results, sha = _build(scratch, base, patches, contents, progress or (lambda _line: None))
    return tuple(results), sha


# -- building ------------------------------------------------------------------------------------


def _build(scratch: ScratchIndex, base: CommitInfo, patches: Sequence[Patch], contents: dict[str, bytes],
           say: Callable[[str], None]) -> tuple[list[PatchResult], str | None]:
    """Apply and commit each patch on the base in the scratch index; the tip, or None on a conflict."""
    repo = scratch.repo
    tree, parent, parent_time = base.tree, base.sha, base.committer_time
    scratch.read_tree(base.sha)
    results: list[PatchResult] = []
    for n, patch in enumerate(patches):
        data = contents[patch.name]
        file = scratch.path("patch")
        file.write_bytes(data)
        files = _parse(patch, data)
        _refuse_beyond_symlink(repo, tree, files, patch)
        result = _apply_one(scratch, file, files, tree, patch)
        notes = _dependency_notes(patch, patches[:n], {p.name for p in patches})
        if notes:
            result = replace(result, notes=result.notes + notes)
        if result.outcome == "conflict":
            results.append(result)
            results += [_not_tried(p, _parse(p, contents[p.name])) for p in patches[n + 1:]]
            say(f"CONFLICT {patch.name}: {', '.join(result.conflict_files) or 'see the report'}")
            return results, None
        new_tree = repo.text("write-tree", env=scratch.env())
        commit, parent_time = _commit(scratch, data, new_tree, parent, parent_time)
        results.append(replace(result, commit=commit, empty=new_tree == tree))
        say(f"applied {patch.name}: {result.outcome} -> {commit[:12]}")
        parent, tree = commit, new_tree
        checkpoint("apply:patch")
    return results, parent


def _parse(patch: Patch, data: bytes) -> tuple[FileDiff, ...]:
    if len(_MBOX_FROM.findall(data)) > 1:
        raise InputError(f"patches/{patch.file}: holds several mails; a queued patch is one `git format-patch` mail")
    try:
        files = parse_diff(data)
    except InputError as exc:
        raise InputError(f"patches/{patch.file}: {exc}") from None
    # The queue is a committed folder: a patch edited there is as untrusted as a PR. The checks
    # `import` makes (no path out of the tree or into .git, no symlink pointing out) hold here too.
    try:
        check_diff_paths(files)
        check_symlink_targets(files)
    except UnsafeInput as exc:
        raise UnsafeInput(f"patches/{patch.file}: {exc}") from None
    return files


def _refuse_beyond_symlink(repo: GitRepo, tree: str, files: tuple[FileDiff, ...], patch: Patch) -> None:
    """A patch that writes under a folder that is a symlink, in the tree it goes onto or created by
    the patch itself, is unsafe (exit 6), not a conflict: git refuses it ("beyond a symbolic link")
    and no merge by a human could make it apply. Such a link may lead anywhere, outside the tree too."""
    paths = {p for fd in files for p in (fd.old_path, fd.new_path) if p}
    parents = {"/".join(parts[:i]) for parts in (p.split("/") for p in paths) for i in range(1, len(parts))}
    if not parents:
        return
    made = {fd.new_path for fd in files if fd.new_mode == SYMLINK_MODE and fd.new_path in parents}
    in_tree = {path: sha for path, (mode, sha) in repo.tree_entries(tree, parents).items() if mode == "120000"}
    for link in sorted(made | (set(in_tree) & parents)):
        under = sorted(p for p in paths if p.startswith(link + "/"))
        target = "made by this patch" if link in made else (
            "to " + repr(repo.run("cat-file", "blob", in_tree[link]).stdout.decode("utf-8", "replace")))
        raise UnsafeInput(f"patches/{patch.file}: {_display(under[0])!r} lies beyond the symlink "
                          f"{_display(link)!r} ({target}); git does not write through a symlink and "
                          f"neither does porttrack")


def _dependency_notes(patch: Patch, before: Sequence[Patch], in_build: set[str]) -> tuple[str, ...]:
    missing = [d for d in patch.depends_on if d not in in_build]
    late = [d for d in patch.depends_on if d in in_build and d not in {p.name for p in before}]
    notes = [f"depends on {d}, which is not in this build" for d in missing]
    notes += [f"depends on {d}, which comes later in the series" for d in late]
    return tuple(notes)


def _not_tried(patch: Patch, files: tuple[FileDiff, ...]) -> PatchResult:
    hunks = tuple(_hunk_result(h, NOT_TRIED) for fd in files for h in fd.hunks)
    return PatchResult(patch.name, patch.file, patch.pr, patch.track, patch.state, NOT_TRIED, hunks=hunks)


def _commit(scratch: ScratchIndex, data: bytes, tree: str, parent: str, parent_time: int) -> tuple[str, int]:
    """Commit `tree` with the patch's message and author, as `git am` would; committer porttrack."""
    repo = scratch.repo
    msg, body = scratch.path("msg"), scratch.path("body")
    info = repo.run("mailinfo", "-u", str(msg), str(body), input=data).stdout.decode("utf-8", "surrogateescape")
    fields = dict(line.split(": ", 1) for line in info.splitlines() if ": " in line)
    subject = fields.get("Subject", "").strip()
    if not fields.get("Email") or not subject:
        raise InputError("a queued patch has no author e-mail or subject (is it a `git format-patch` file?)")
    text = msg.read_bytes().decode("utf-8", "surrogateescape").strip("\n")
    message = subject + "\n" + (f"\n{text}\n" if text else "")
    author_time = _epoch(fields.get("Date")) or parent_time
    when = max(author_time, parent_time)
    env = {
        "GIT_AUTHOR_NAME": fields.get("Author") or fields["Email"],
        "GIT_AUTHOR_EMAIL": fields["Email"],
        "GIT_AUTHOR_DATE": fields.get("Date") or f"{author_time} +0000",
        "GIT_COMMITTER_NAME": COMMITTER[0],
        "GIT_COMMITTER_EMAIL": COMMITTER[1],
        "GIT_COMMITTER_DATE": f"{when} +0000",
    }
    sha = repo.text("commit-tree", "--no-gpg-sign", tree, "-p", parent,
                    input=message.encode("utf-8", "surrogateescape"), env=env)
    return sha, when


def _epoch(date: str | None) -> int | None:
    if not date:
        return None
    from email.utils import parsedate_to_datetime  # lazy: email.utils pulls in socket (~15 ms of start-up)

    try:
        return int(parsedate_to_datetime(date).timestamp())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


# -- one patch -----------------------------------------------------------------------------------


@dataclass
class _Attempt:
    """What one `git apply -v` said, per file entry of the patch (entries in the patch's order)."""

    rc: int
    errors: dict[int, list[str]]  # file entry -> git's error lines (-1: before any entry)
    offsets: dict[tuple[int, int], int]  # (entry, hunk number) -> offset
    failed_at: set[tuple[int, int]]  # (entry, old start line) of each hunk that did not apply
    stderr: str

    def whole_entry_failed(self, entry: int) -> bool:
        """The entry failed for a reason other than its hunks (file missing, already exists, ...)."""
        if -1 in self.errors:
            return True
        hunk_level = [e for e in self.errors.get(entry, []) if _FAILED_AT.match(e) or e.endswith(": patch does not apply")]
        hunk_failed = any(e == entry for e, _line in self.failed_at)
        return len(hunk_level) != len(self.errors.get(entry, [])) or (entry in self.errors and not hunk_failed)

    def hunk_failed(self, entry: int, h: Hunk) -> bool:
        return self.whole_entry_failed(entry) or (entry, h.old_start) in self.failed_at


def _run_apply(scratch: ScratchIndex, file: Path | None, *flags: str, index: str = "index", patch: bytes | None = None) -> _Attempt:
    """`git apply --cached -v` of `file` (or of `patch` bytes) to a scratch index."""
    source = file if file is not None else patch
    assert source is not None, "a file or the patch's bytes"
    proc = scratch.apply(source, "-v", *flags, index=index)
    stderr = proc.stderr.decode("utf-8", "surrogateescape")
    return _parse_verbose(proc.returncode, stderr)


def moved_hunks(stderr: str) -> bool:
    """Did a successful `git apply -v` place any hunk at an offset (an outcome worse than clean)?"""
    return bool(_parse_verbose(0, stderr).offsets)


def _parse_verbose(rc: int, stderr: str) -> _Attempt:
    attempt = _Attempt(rc, {}, {}, set(), stderr)
    entry, searching = -1, False
    for line in stderr.splitlines():
        if searching:  # git echoes the lines it looked for, then says which hunk failed
            searching = not line.startswith("error: patch failed: ")
            if searching:
                continue
        if _CHECKING.match(line):
            entry += 1
        elif m := _OFFSET.match(line):
            attempt.offsets[(entry, int(m.group(1)))] = int(m.group(3))
        elif line.startswith("error: while searching for:"):
            searching = True
        elif line.startswith("error: ") or _WITH_CONFLICTS.match(line):
            attempt.errors.setdefault(entry, []).append(line)
            if m := _FAILED_AT.match(line):
                attempt.failed_at.add((entry, int(m.group(1))))
    return attempt


def _apply_one(scratch: ScratchIndex, file: Path, files: tuple[FileDiff, ...], tree: str, patch: Patch) -> PatchResult:
    plain = _run_apply(scratch, file)
    if plain.rc == 0:
        return _result(patch, tuple(_plain_hunk(h, e, plain) for e, fd in enumerate(files) for h in fd.hunks))
    # Which hunks did not apply as they are: --reject goes on past a failing hunk, --check writes nothing.
    plain = _run_apply(scratch, file, "--check", "--reject")
    final, outcome = _run_apply(scratch, file, "--3way"), "3-way"
    if final.rc != 0 and _NO_BLOB in final.stderr and not _unmerged(scratch):
        final, outcome = _run_apply(scratch, file, "--3way", FUZZ_CONTEXT), "fuzz"
    if final.rc == 0:
        return _result(patch, _classify(scratch, files, tree, plain, outcome, conflicted=set()), outcome)
    if _BEYOND_SYMLINK in final.stderr:  # a case `_refuse_beyond_symlink` did not foresee: still unsafe
        said = next(line for line in final.stderr.splitlines() if _BEYOND_SYMLINK in line)
        raise UnsafeInput(f"patches/{patch.file}: {_display(said)}")
    conflicted = set(final.errors) or {-1}
    files_named = {_display(files[e].path) for e in conflicted if 0 <= e < len(files)}
    errors = [line for lines in final.errors.values() for line in lines] or [final.stderr.strip()[-300:]]
    hunks = _classify(scratch, files, tree, plain, outcome, conflicted)
    return _result(patch, hunks, "conflict", conflict_files=tuple(sorted(files_named | set(_unmerged(scratch)))),
                   errors=tuple(_display(e) for e in errors))


def _classify(scratch: ScratchIndex, files: tuple[FileDiff, ...], tree: str, plain: _Attempt, outcome: str,
              conflicted: set[int]) -> tuple[HunkResult, ...]:
    """Per hunk, once the whole patch went in by `outcome` (3-way or fuzz) or conflicted in the
    `conflicted` entries (-1: all).

    A hunk that applied as it is in `plain` (the `--check --reject` run) is clean or offset. One
    that did not went in by the patch's outcome, except where that cannot tell: with fuzz (some
    files may have merged 3-way) and in a conflicting file, such hunks are probed one by one.
    Probes see a hunk alone, so they are reconciled with the whole: in a file that went in, no
    hunk conflicts; in a file that conflicted, at least one does. Pseudo-hunks (binary, rename,
    mode change) take their file's outcome.
    """
    results: list[HunkResult] = []
    for e, fd in enumerate(files):
        in_conflict = e in conflicted or -1 in conflicted
        failed = [h for h in fd.text_hunks if plain.hunk_failed(e, h)]
        probe = bool(failed) and (in_conflict or outcome == "fuzz")
        if probe:
            _probe_index(scratch, tree, fd)
        texts = {h.id: (_probe_one(scratch, fd, h) if probe else _hunk_result(h, outcome)) if h in failed
                 else _plain_hunk(h, e, plain) for h in fd.text_hunks}
        if not in_conflict:
            texts = {i: replace(r, outcome=outcome) if r.outcome == "conflict" else r for i, r in texts.items()}
        elif not any(r.outcome == "conflict" for r in texts.values()):  # the hunks conflict only together
            blame = {h.id for h in failed} or set(texts)
            texts = {i: replace(r, outcome="conflict") if i in blame else r for i, r in texts.items()}
        file_outcome = "conflict" if in_conflict else max(
            [outcome if plain.whole_entry_failed(e) else "clean", *(r.outcome for r in texts.values())],
            key=OUTCOMES.index)
        results += [texts.get(h.id) or _hunk_result(h, file_outcome) for h in fd.hunks]
    return tuple(results)


def _result(patch: Patch, hunks: tuple[HunkResult, ...], outcome: str = "clean", **kw: Any) -> PatchResult:
    """The patch's outcome: the worst of its hunks' and of how the whole patch went in."""
    rank = max([OUTCOMES.index(outcome)] + [OUTCOMES.index(h.outcome) for h in hunks if h.outcome in OUTCOMES])
    return PatchResult(patch.name, patch.file, patch.pr, patch.track, patch.state, OUTCOMES[rank], hunks=hunks, **kw)


def _plain_hunk(h: Hunk, entry: int, attempt: _Attempt) -> HunkResult:
    offset = attempt.offsets.get((entry, h.index)) if h.kind == "text" else None
    return _hunk_result(h, "offset" if offset else "clean", offset=offset or None)


def _hunk_result(h: Hunk, outcome: str, offset: int | None = None, fuzz: int | None = None) -> HunkResult:
    header = h.body.split(b"\n", 1)[0].decode("utf-8", "replace") if h.kind == "text" else ""
    header = header[: header.index("@@", 2) + 2] if header.count("@@") >= 2 else header
    return HunkResult(h.id, _display(h.path), h.kind, h.index, header, outcome, offset, fuzz)


def _unmerged(scratch: ScratchIndex, index: str = "index") -> list[str]:
    return [_display(p) for p in scratch.unmerged(index)]


def _probe_index(scratch: ScratchIndex, tree: str, fd: FileDiff) -> None:
    paths = sorted({p for p in (fd.old_path, fd.new_path) if p})
    listing = scratch.repo.run("ls-tree", "-z", tree, "--", *paths).stdout
    probe = scratch.path("probe")
    probe.unlink(missing_ok=True)
    scratch.repo.run("update-index", "-z", "--index-info", input=listing, env=scratch.env("probe"))
    if not probe.exists():  # none of the paths exist yet: an empty index
        scratch.repo.run("read-tree", "--empty", env=scratch.env("probe"))


def _probe_one(scratch: ScratchIndex, fd: FileDiff, h: Hunk) -> HunkResult:
    """A hunk that did not apply as it is, alone on the file: 3-way, else fuzz, else conflict."""
    single = build_patch([(fd, [h])])
    merged = scratch.threeway(single, "-v", source="probe", into="probe3")
    if merged.rc == 0:
        return _hunk_result(h, "3-way")
    if not merged.unmerged:
        fuzzy = _run_apply(scratch, None, "--check", FUZZ_CONTEXT, index="probe", patch=single)
        if fuzzy.rc == 0:
            return _hunk_result(h, "fuzz", fuzz=_fuzz(fuzzy.stderr, h))
    return _hunk_result(h, "conflict")


def _fuzz(stderr: str, h: Hunk) -> int | None:
    """Context lines git ignored at an end of the hunk ("Context reduced to (a/b)"), as patch(1)
    counts fuzz."""
    m = next(filter(None, map(_REDUCED.match, stderr.splitlines())), None)
    if m is None:
        return None
    markers = [line[:1] or b" " for line in h.body.split(b"\n")[1:] if line and not line.startswith(b"\\")]
    lead = next((i for i, mk in enumerate(markers) if mk != b" "), 0)
    trail = next((i for i, mk in enumerate(reversed(markers)) if mk != b" "), 0)
    return max(lead - int(m.group(1)), trail - int(m.group(2)), 0)


def _display(text: str) -> str:
    """Text safe for JSON and terminals' encoders: undecodable bytes become U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
