"""A queued patch made the way `porttrack import` leaves one, for tests that need a queue without
an import (a format-patch mail, its hunk ids, the manifest entry), written through porttrack's
own queue code."""

from __future__ import annotations

import hashlib
from pathlib import Path

from porttrack.diff.hunks import parse_diff
from porttrack.queue import manifest as queue_mod
from porttrack.queue.manifest import HunkRef, Patch, Revision, patch_file_name
from porttrack.workspace.files import Workspace


def queue_mail(root: Path, data: bytes, *, name: str, track: str, pr: int, title: str, head: str, base: str,
               upstream: str = "vllm-project/vllm", gate: str | None = None, state: str = "queued") -> Patch:
    """Add the `git format-patch` mail `data` to the queue of the workspace at `root`."""
    patch = Patch(name=name, file=patch_file_name(name, data), sha256=hashlib.sha256(data).hexdigest(),
                  track=track, pr=pr, upstream=upstream, title=title, revision=Revision(head=head, base=base),
                  hunks_taken=tuple(HunkRef(h.id, h.path, h.kind) for fd in parse_diff(data) for h in fd.hunks),
                  hunks_left_out=(), depends_on=(), state=state, gate=gate)
    ws = Workspace(Path(root))
    queue_mod.save(ws, queue_mod.load(ws).add(patch), new_files={patch.file: data})
    return patch
