"""What a shell completes from the workspace: PR numbers (tracks.yaml), patch names (the queue),
and track, target and proof ids (tracks.yaml), as (value, help) pairs.

The command layer hands these to click's `shell_complete=` (`porttrack.cli.completes`); this
module knows nothing of click. Completion runs inside the user's prompt, at every Tab: a broken or
missing workspace, an unreadable queue, anything at all, completes nothing rather than print a
traceback into the command line being typed (`candidates` is the one place that catches).
"""

from __future__ import annotations

from typing import Callable, Iterable

from porttrack.queue import manifest as queue_mod
from porttrack.tracks.config import Config
from porttrack.tracks.file import load_config
from porttrack.workspace.files import Workspace

Candidate = tuple[str, str]  # (what is inserted, what zsh and fish show beside it)


def _config(ws: Workspace) -> Config:
    return load_config(ws.tracks_file, cache_dir=ws.cache_dir)


def pr_numbers(ws: Workspace) -> list[Candidate]:
    """Every PR a track lists, with the track it belongs to."""
    seen: dict[int, str] = {}
    for track_id, track in _config(ws).tracks.items():
        for number in track.prs:
            seen.setdefault(int(number), f"{track_id}: {track.title}")
    return [(str(n), words) for n, words in sorted(seen.items())]


def patch_names(ws: Workspace) -> list[Candidate]:
    """The queue's patches, live ones first (a retired one is still a valid name for `evidence`)."""
    patches = sorted(queue_mod.load(ws).patches, key=lambda p: not p.live)
    return [(p.name, f"#{p.pr} {p.state}") for p in patches]


def track_ids(ws: Workspace) -> list[Candidate]:
    return [(tid, track.title) for tid, track in _config(ws).tracks.items()]


def target_ids(ws: Workspace) -> list[Candidate]:
    return [(tid, target.name) for tid, target in _config(ws).targets.items()]


def proof_ids(ws: Workspace) -> list[Candidate]:
    return [(pid, "proof") for pid in _config(ws).proofs]


def subjects(ws: Workspace) -> list[Candidate]:
    """What evidence is about: a patch or a proof."""
    return patch_names(ws) + proof_ids(ws)


KINDS: dict[str, Callable[[Workspace], Iterable[Candidate]]] = {
    "pr": pr_numbers,
    "patch": patch_names,
    "track": track_ids,
    "target": target_ids,
    "proof": proof_ids,
    "subject": subjects,
}


def candidates(kind: str, incomplete: str, workspace: str | None = None) -> list[Candidate]:
    """The `kind` values starting with `incomplete`, from the workspace named by --workspace (or
    PORTTRACK_WORKSPACE, or the nearest folder up). Never raises: see the module docstring."""
    try:
        found = list(KINDS[kind](Workspace.locate(workspace)))
    except Exception:  # noqa: BLE001 — completion must never break the prompt (module docstring)
        return []
    return [(value, words) for value, words in found if value.startswith(incomplete)]
