"""The patch queue in `patches/`: what was taken from upstream, from where, and in what state.

Files (all text, committed with the workspace):
  patches/manifest.json   the truth: every patch ever queued, in order, with provenance, hunks taken
                          and left out (with reasons), dependencies, lifecycle state and history
  patches/series          quilt's series file, derived from the manifest (live patches, in order)
  patches/*.patch         one `git format-patch` file per live patch; `git am` (no `-3`) and
                          `quilt push -a` apply them, in `series` order, on the build base
                          (`fork.build_base`, default `fork.branch`) they were imported on, and
                          give the tree `porttrack apply --staging` builds (see "Context" below)
  patches/retired/*.patch the files of dropped or converged patches (kept for provenance)

Crash safety: patch file names carry a hash of their content, so a new or refreshed patch is always
written to a new name first; then the manifest is replaced atomically (the commit point); then
`series` is rewritten from it; then files no longer referenced are removed. A crash before the
commit point leaves an unreferenced file (swept by the next write); a crash after it leaves a stale
`series` that `load` detects and the next command holding the workspace lock repairs
(`load(ws, repair=True)`), even one that then changes nothing. Readers derive the order from the
manifest, never from `series`.

Context: a patch holds the PR's own diff (upstream's context) when that applies as it is on the
build base plus the patches before it in `series`. When it went in only at an offset, by 3-way
merge or with fuzz, the file holds instead the diff from that tree to the tree after it applied
(`--binary --full-index`), i.e. the fork's context, and the entry's `regenerated` says so: how it
went in, the base commit and the patches below, and the stored diff's own hunks. `hunks_taken`
always lists upstream's hunk ids (the mail's `Porttrack-Hunks` trailer too): refresh, coverage
and convergence compare those with upstream, never the regenerated ones. An entry without
`regenerated` (every manifest written before it existed) stores upstream's diff. Once the base
moves on, or a patch below it is refreshed or dropped, a patch may need `apply`'s 3-way fallback
again until `refresh --update` regenerates it; quilt cannot read git's binary patches at all.

Lifecycle (DESIGN.md): queued -> gated-pass | gated-fail -> default-enabled; ungated (no gate on
the track: can never be promoted); dropped (reason); converged (upstream has it; evidence kept).

The queue's own verbs live here too: `queue_entries` (`porttrack queue`) and `drop_patch`
(`porttrack drop`); `porttrack.take.importer` adds and refreshes patches.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from porttrack.common.clock import utcnow
from porttrack.common.errors import InputError, NotFound, PreconditionError
from porttrack.diff.paths import check_file_name, resolve_inside
from porttrack.diff.pycheck import SourceCheck
from porttrack.workspace.files import (
    Workspace,
    actor,
    atomic_write_bytes,
    atomic_write_text,
    commit_point,
    dump_json,
    lock,
    read_json,
)

SCHEMA = "porttrack/queue/v1"
LIVE_STATES = frozenset({"queued", "ungated", "gated-pass", "gated-fail", "default-enabled"})
RETIRED_STATES = frozenset({"dropped", "converged"})
STATES = LIVE_STATES | RETIRED_STATES
STAGING_STATES = LIVE_STATES  # the staging build carries every live patch
DEFAULT_STATES = frozenset({"default-enabled"})  # the default build carries promoted patches only
QUEUE_SCHEMA = "porttrack/queue-list/v1"
DROP_SCHEMA = "porttrack/drop/v1"

# Why a hunk is left out: the kind, and the prose it is written as ({} takes the detail).
NOT_SELECTED = "not selected"
EXCLUDED = "excluded by path rule"
UNSTABLE = "unstable"
DEPENDS = "depends on left-out hunk"
NOT_SEPARABLE = "not separable"
PRESENT = "already in the fork"
SOURCE_CHECK = "fails the source check"  # taken, the patched files would not pass `porttrack.diff.pycheck`
REASON_KINDS = (NOT_SELECTED, EXCLUDED, UNSTABLE, DEPENDS, NOT_SEPARABLE, PRESENT, SOURCE_CHECK)
_REASON_PROSE = {
    NOT_SELECTED: NOT_SELECTED,
    EXCLUDED: EXCLUDED + ": {}",
    UNSTABLE: UNSTABLE + ": changed in revision {}",
    DEPENDS: DEPENDS + " {}",
    NOT_SEPARABLE: NOT_SEPARABLE + ": conflicts with fork at {}",
    PRESENT: PRESENT + ": {} already has this change",
    SOURCE_CHECK: SOURCE_CHECK + ": {}",
}


@dataclass(frozen=True)
class Reason:
    """Why a hunk is left out: one of `REASON_KINDS` and its detail (a path rule, a revision, the
    left-out hunk it depends on, the files)."""

    kind: str
    detail: str = ""

    @property
    def text(self) -> str:
        return _REASON_PROSE[self.kind].format(self.detail)


def _flat(record: Any) -> dict[str, Any]:
    """`asdict` of a record whose fields are all str, int, bool or None (HunkRef, Revision, and the
    plain fields of Patch), without its deep copy of each value: a manifest holds thousands of
    hunk references, and asdict cost most of a big import's queue save."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


@dataclass(frozen=True)
class HunkRef:
    id: str
    path: str
    kind: str = "text"  # text | binary | meta
    reason: str | None = None  # for hunks left out: why, as prose (`Reason.text`)
    reason_kind: str | None = None  # ... and its kind (one of REASON_KINDS)

    @classmethod
    def left_out(cls, id: str, path: str, kind: str, reason: Reason) -> "HunkRef":
        return cls(id, path, kind, reason.text, reason.kind)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "HunkRef":
        ref = cls(**data)
        if ref.reason and not ref.reason_kind:
            # Manifests written before `reason_kind` existed hold the prose only; it always began
            # with its kind, so the kind is recovered once, here, where the record is read.
            kind = next((k for k in REASON_KINDS if ref.reason.startswith(k)), "other")
            ref = replace(ref, reason_kind=kind)
        return ref


@dataclass(frozen=True)
class Transition:
    at: str
    to: str
    why: str
    by: str = ""
    evidence: tuple[str, ...] = ()
    from_: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["from"] = data.pop("from_")
        data["evidence"] = list(self.evidence)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Transition":
        data = dict(data)
        data["from_"] = data.pop("from", None)
        data["evidence"] = tuple(data.get("evidence") or ())
        return cls(**data)


@dataclass(frozen=True)
class Selection:
    """What the import was asked to take, kept so `refresh --update` can ask the same again."""

    paths: tuple[str, ...] = ()  # --paths: only files matching one of these globs
    exclude: tuple[str, ...] = ()  # --exclude: never files matching these globs
    hunks: tuple[str, ...] = ()  # --hunk: only these hunk ids (empty: every qualifying hunk)
    force_unstable: bool = False  # --force-unstable: take hunks that changed in recent revisions

    def to_json(self) -> dict[str, Any]:
        return {"paths": list(self.paths), "exclude": list(self.exclude), "hunks": list(self.hunks),
                "force_unstable": self.force_unstable}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> "Selection":
        data = data or {}
        return cls(tuple(data.get("paths") or ()), tuple(data.get("exclude") or ()),
                   tuple(data.get("hunks") or ()), bool(data.get("force_unstable")))


@dataclass(frozen=True)
class Revision:
    """Exactly which upstream content the patch was made from."""

    head: str  # the PR head imported (or the merge commit for a merged PR)
    base: str  # the merge base the diff was computed against
    through: str | None = None  # --through: the PR taken only up to this commit
    merged: bool = False
    merge_commit: str | None = None

    def to_json(self) -> dict[str, Any]:
        return _flat(self)


@dataclass(frozen=True)
class Regenerated:
    """The stored diff is the fork's, not upstream's: upstream's diff went onto `base` plus the
    patches `below` only by `how`, so the file holds the diff of what it did there."""

    how: str  # offset | 3-way | fuzz (apply's outcomes)
    base: str  # the build base commit (fork.build_base) it was regenerated on
    below: tuple[str, ...]  # names of the queued patches applied before it, in series order
    hunks: tuple[HunkRef, ...]  # the stored diff's own hunks (ids over the fork's content)

    def to_json(self) -> dict[str, Any]:
        return {"how": self.how, "base": self.base, "below": list(self.below), "hunks": [_flat(h) for h in self.hunks]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> "Regenerated | None":
        if not data:
            return None
        return cls(data["how"], data["base"], tuple(data.get("below") or ()),
                   tuple(HunkRef.from_json(h) for h in data.get("hunks") or ()))


@dataclass(frozen=True)
class Patch:
    name: str  # stable identifier, e.g. "0003-pr46849-fuse-ar-speculator"
    file: str  # current file name under patches/ (retired/ for retired patches)
    sha256: str
    track: str
    pr: int
    upstream: str
    title: str
    revision: Revision
    hunks_taken: tuple[HunkRef, ...]  # upstream's hunk ids, even when the stored diff is regenerated
    hunks_left_out: tuple[HunkRef, ...]
    depends_on: tuple[str, ...]
    state: str
    gate: str | None  # the track whose gate proves this patch; None = ungated
    history: tuple[Transition, ...] = ()
    fork_commits: tuple[str, ...] = ()
    selection: Selection = Selection()
    regenerated: Regenerated | None = None  # None: the file holds upstream's own diff
    source_check: SourceCheck | None = None  # the patched files against the base at import (None: older manifests)

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES

    def to_json(self) -> dict[str, Any]:
        data = _flat(self)  # every field not plain is replaced below
        data["revision"] = _flat(self.revision)
        data["hunks_taken"] = [_flat(h) for h in self.hunks_taken]
        data["hunks_left_out"] = [_flat(h) for h in self.hunks_left_out]
        data["depends_on"] = list(self.depends_on)
        data["history"] = [t.to_json() for t in self.history]
        data["fork_commits"] = list(self.fork_commits)
        data["selection"] = self.selection.to_json()
        data["regenerated"] = None if self.regenerated is None else self.regenerated.to_json()
        data["source_check"] = None if self.source_check is None else self.source_check.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Patch":
        data = dict(data)
        data["revision"] = Revision(**data["revision"])
        data["hunks_taken"] = tuple(HunkRef.from_json(h) for h in data.get("hunks_taken") or ())
        data["hunks_left_out"] = tuple(HunkRef.from_json(h) for h in data.get("hunks_left_out") or ())
        data["depends_on"] = tuple(data.get("depends_on") or ())
        data["history"] = tuple(Transition.from_json(t) for t in data.get("history") or ())
        data["fork_commits"] = tuple(data.get("fork_commits") or ())
        data["selection"] = Selection.from_json(data.get("selection"))
        data["regenerated"] = Regenerated.from_json(data.get("regenerated"))  # absent in older manifests
        data["source_check"] = SourceCheck.from_json(data.get("source_check"))  # absent in older manifests
        if data["state"] not in STATES:
            raise ValueError(f"unknown state {data['state']!r}")
        return cls(**data)

    def transition(self, to: str, why: str, by: str = "", evidence: Iterable[str] = (), at: str | None = None) -> "Patch":
        if to not in STATES:
            raise ValueError(f"unknown state {to!r}")
        step = Transition(at or utcnow(), to, why, by or actor(), tuple(evidence), self.state)
        return replace(self, state=to, history=self.history + (step,))


@dataclass(frozen=True)
class Queue:
    patches: tuple[Patch, ...] = ()
    series_stale: bool = False  # `series` on disk does not match the manifest (repaired on next write)

    def live(self) -> tuple[Patch, ...]:
        return tuple(p for p in self.patches if p.live)

    def get(self, name_or_pr: str | int) -> Patch:
        """By name, unique name prefix, or PR number (the live patch for it)."""
        key = str(name_or_pr).lstrip("#")
        exact = [p for p in self.patches if p.name == key or p.file == key]
        if exact:
            return exact[0]
        if key.isdigit():
            by_pr = [p for p in self.patches if p.pr == int(key) and p.live] or [p for p in self.patches if p.pr == int(key)]
            if len(by_pr) == 1:
                return by_pr[0]
            if len(by_pr) > 1:
                raise PreconditionError(f"PR #{key} has several patches: {', '.join(p.name for p in by_pr)}; name one")
        prefixed = [p for p in self.patches if p.name.startswith(key)]
        if len(prefixed) == 1:
            return prefixed[0]
        raise NotFound(f"no queued patch {name_or_pr!r} (see `porttrack queue`)")

    def for_pr(self, pr: int) -> tuple[Patch, ...]:
        return tuple(p for p in self.patches if p.pr == pr)

    def series(self, states: frozenset[str] = STAGING_STATES) -> tuple[Patch, ...]:
        return tuple(p for p in self.patches if p.state in states)

    def next_name(self, pr: int, title: str) -> str:
        seq = max((int(p.name[:4]) for p in self.patches if p.name[:4].isdigit()), default=0) + 1
        return f"{seq:04d}-pr{pr}-{slug(title)}"

    def replace_patch(self, patch: Patch) -> "Queue":
        return replace(self, patches=tuple(patch if p.name == patch.name else p for p in self.patches))

    def add(self, patch: Patch) -> "Queue":
        if any(p.name == patch.name for p in self.patches):
            raise PreconditionError(f"patch {patch.name} already exists")
        return replace(self, patches=self.patches + (patch,))


def slug(text: str, limit: int = 40) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", re.sub(r"\[[^\]]*\]", " ", text.lower())).strip("-")
    return (words[:limit].rstrip("-") or "change")


def patch_file_name(name: str, content: bytes) -> str:
    return f"{name}.{hashlib.sha256(content).hexdigest()[:10]}.patch"


# -- persistence -------------------------------------------------------------------------------

# patches/ is committed by others: every file name the manifest holds and every file or folder
# under patches/ that is read or written goes through `resolve_inside`, so a `file` of
# "../../secret.txt" or a committed symlink `patches/retired -> /elsewhere` is refused (UnsafeInput,
# exit 6) before anything is read or written.


def manifest_path(ws: Workspace) -> Path:
    return resolve_inside(ws.patches_dir, "manifest.json", "the queue manifest")


def series_path(ws: Workspace) -> Path:
    return resolve_inside(ws.patches_dir, "series", "the quilt series")


def retired_dir(ws: Workspace) -> Path:
    return resolve_inside(ws.patches_dir, "retired", "the retired patches folder")


def patch_path(ws: Workspace, patch: Patch) -> Path:
    return _in_patches(ws, patch.file, retired=not patch.live)


def _in_patches(ws: Workspace, file: str, *, retired: bool) -> Path:
    what = f"patches/manifest.json: file of a {'retired' if retired else 'live'} patch"
    return resolve_inside(ws.patches_dir, f"retired/{file}" if retired else file, what)


def _check_entries(patches: Iterable[Patch]) -> None:
    """Every name the manifest holds that becomes a file name is one plain file name."""
    for p in patches:
        check_file_name(p.name, "patches/manifest.json: patch name")
        check_file_name(p.file, f"patches/manifest.json: file of {p.name}")


def load(ws: Workspace, *, repair: bool = False) -> Queue:
    """The queue, from the manifest. With `repair` (the caller holds the workspace lock), what a
    process killed inside `save` left is put right as that `save` would have: a stale `series` is
    rewritten from the manifest, temp files and unreferenced patch files are swept."""
    path = manifest_path(ws)
    if not path.is_file():
        return Queue()
    try:
        data = read_json(path)
        if data.get("schema") != SCHEMA:
            raise ValueError(f"schema is {data.get('schema')!r}, expected {SCHEMA}")
        patches = tuple(Patch.from_json(p) for p in data.get("patches") or ())
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InputError(f"{path}: malformed queue manifest ({exc}); restore it from git") from None
    _check_entries(patches)
    queue = Queue(patches, series_stale=_read_series(ws) != _series_lines(patches))
    if repair:
        if queue.series_stale:
            atomic_write_text(series_path(ws), _series_text(queue.patches))
            queue = replace(queue, series_stale=False)
        _sweep(ws, queue)  # and the debris of a killed write (temp files, unreferenced patches)
    return queue


def read_patch(ws: Workspace, patch: Patch) -> bytes:
    path = patch_path(ws, patch)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: missing; the queue manifest names it (restore it from git)") from None
    if hashlib.sha256(data).hexdigest() != patch.sha256:
        raise InputError(f"{path}: content does not match the manifest's sha256 (edited by hand?)")
    return data


def save(ws: Workspace, queue: Queue, new_files: Mapping[str, bytes] | None = None) -> Queue:
    """Commit a new queue: new files first, then the manifest (commit point), then series, then sweep.

    `new_files` maps file name -> content for patches created or refreshed in this change. The
    caller holds the workspace lock.
    """
    ws.patches_dir.mkdir(parents=True, exist_ok=True)
    _check_entries(queue.patches)
    for name, content in (new_files or {}).items():
        check_file_name(name, "new patch file")
        atomic_write_bytes(_in_patches(ws, name, retired=False), content)
    _retire_files(ws, queue)
    atomic_write_text(manifest_path(ws), dump_json({"schema": SCHEMA, "patches": [p.to_json() for p in queue.patches]}))
    atomic_write_text(series_path(ws), _series_text(queue.patches))
    _sweep(ws, queue)
    return replace(queue, series_stale=False)


def _series_lines(patches: Iterable[Patch]) -> list[str]:
    return [p.file for p in patches if p.live]


def _series_text(patches: Iterable[Patch]) -> str:
    lines = _series_lines(patches)
    header = "# quilt series, written by porttrack from manifest.json: do not edit by hand\n"
    return header + "".join(f"{line}\n" for line in lines)


def _read_series(ws: Workspace) -> list[str]:
    try:
        text = series_path(ws).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _retire_files(ws: Workspace, queue: Queue) -> None:
    """Copy files of newly retired patches into retired/ before the manifest says they are there."""
    for patch in queue.patches:
        if patch.live:
            continue
        target = _in_patches(ws, patch.file, retired=True)
        source = _in_patches(ws, patch.file, retired=False)
        if not target.exists() and source.exists():
            atomic_write_bytes(target, source.read_bytes())


def _sweep(ws: Workspace, queue: Queue) -> None:
    live = {p.file for p in queue.patches if p.live}
    retired = {p.file for p in queue.patches if not p.live}
    for path in ws.patches_dir.glob("*.patch"):
        if path.name not in live:
            path.unlink(missing_ok=True)
    for path in ws.patches_dir.glob(".*.tmp"):
        path.unlink(missing_ok=True)
    retired_folder = retired_dir(ws)  # refused first if it leads out: never delete files elsewhere
    if retired_folder.is_dir():
        for path in retired_folder.glob("*.patch"):
            if path.name not in retired:
                path.unlink(missing_ok=True)


# -- the queue's verbs: list and drop -----------------------------------------------------------


@dataclass(frozen=True)
class QueueEntry:
    patch: Patch
    left_out_by_reason: Mapping[str, int]


def queue_entries(ws: Workspace, include_retired: bool = False) -> tuple[tuple[QueueEntry, ...], bool]:
    """The patches to list (live ones, or all) and whether `series` is stale."""
    queue = load(ws)
    entries = tuple(QueueEntry(p, reason_counts(p.hunks_left_out)) for p in queue.patches if include_retired or p.live)
    return entries, queue.series_stale


def reason_counts(refs: Iterable[HunkRef]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for ref in refs:
        kind = ref.reason_kind or "other"
        counts[kind] = counts.get(kind, 0) + 1
    return counts


@dataclass(frozen=True)
class DropResult:
    before: Patch
    after: Patch
    written: bool


def drop_patch(ws: Workspace, name: str, reason: str, *, dry_run: bool = False, force: bool = False) -> DropResult:
    """Retire a live patch with a reason; its file moves to patches/retired/, its record stays."""
    reason = " ".join((reason or "").split())
    if not reason:
        raise InputError("--reason must say why the patch is dropped")
    with contextlib.nullcontext() if dry_run else lock(ws, f"drop {name}"):
        queue = load(ws, repair=not dry_run)
        patch = queue.get(name)
        if not patch.live:
            raise PreconditionError(f"{patch.name} is already {patch.state}")
        dependents = [p.name for p in queue.live() if patch.name in p.depends_on]
        if dependents and not force:
            raise PreconditionError(f"{', '.join(dependents)} depend(s) on {patch.name}; drop them first or pass --force")
        after = patch.transition("dropped", reason)
        if not dry_run:
            with commit_point("the queue was being written"):
                save(ws, queue.replace_patch(after))
    return DropResult(patch, after, not dry_run)
