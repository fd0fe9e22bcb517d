"""Is a hunk in a file? The content checks behind `verify-converged` and hand-port coverage.

`hunk_state(hunk, file_bytes)` says *applied*, *not-applied*, *file-missing* or *ambiguous* by
looking for the hunk's pre- and post-image in the file's bytes, anchored at the start or the end
of the file where the hunk is, as `git apply` anchors it; `change_undone` sees a revert whose
surroundings changed since. The bytes decide, as they decide for `git apply`: trailing spaces and
a CR are content (a hunk that only strips them is a change; the hunk ids, which ignore them, are
for recognising a hunk, not for proving it is there). So is the newline at the end of the file: an
image that ends the file (`\\ No newline at end of file`, or a hunk with no context after its last
change) matches only a file that ends as it does, so a hunk that only adds or removes the final
newline is decided like any other (issue 30).

Every check takes `near`, the hunk's own location in the file as the caller mapped it through
the history (a 0-based line range): an image counts only where it overlaps that range, give or
take `SLACK` lines. Without it, the same text elsewhere in the file -- a second copy of a block,
a `}` or `# ---` line -- would count as the hunk (issue 21). The hunks themselves (parsing, ids,
selection) are `porttrack.diff.hunks`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Literal

from porttrack.diff.hunks import Hunk

HunkState = Literal["applied", "not-applied", "file-missing", "ambiguous"]
# How far an image may sit from its mapped location: the mapping of a line inside a region the
# fork changed is only known to that region, and an insertion's image spans its context.
SLACK = 3


def _normalise(lines: Iterable[bytes]) -> list[bytes]:
    return list(lines)


def _near(found: list[int], length: int, near: "tuple[int, int] | None") -> list[int]:
    """The occurrences (start positions of a `length`-line block) that overlap `near` ± SLACK."""
    if near is None:
        return found
    lo, hi = near[0] - SLACK, near[1] + SLACK
    return [p for p in found if p <= hi and p + max(length, 1) - 1 >= lo]


def _file_lines(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return _normalise(lines)


def _find_all(hay: list[bytes], needle: list[bytes]) -> list[int]:
    """Start positions of `needle` as a contiguous block of `hay`."""
    if not needle:
        return []
    found: list[int] = []
    n, i = len(needle), 0
    while True:
        try:
            i = hay.index(needle[0], i)
        except ValueError:
            return found
        if hay[i:i + n] == needle:
            found.append(i)
        i += 1


def _git_blob_id(data: bytes, length: int) -> str:
    algo = hashlib.sha256 if length == 64 else hashlib.sha1
    return algo(b"blob %d\0" % len(data) + data).hexdigest()


def _binary_blobs(h: Hunk) -> tuple[str, str] | None:
    m = re.search(rb"^index ([0-9a-f]+)\.\.([0-9a-f]+)", h.body, re.M)
    return (m.group(1).decode(), m.group(2).decode()) if m else None


def _image_present(h: Hunk, file_bytes: bytes, post: bool, near: "tuple[int, int] | None" = None) -> bool:
    if h.kind == "meta":
        raise ValueError(f"meta hunk {h.id} has no content image; use hunk_state")
    if h.kind == "binary":
        blobs = _binary_blobs(h)
        if not blobs:
            return False
        want = blobs[1] if post else blobs[0]
        return _git_blob_id(file_bytes, len(want)).startswith(want)
    needle = _normalise(h.post_image() if post else h.pre_image())
    return not needle or bool(_anchored(h, _file_lines(file_bytes), needle, near, post, file_bytes.endswith(b"\n")))


def _anchored(h: Hunk, hay: list[bytes], needle: list[bytes], near: "tuple[int, int] | None" = None,
              post: bool | None = None, file_nl: bool | None = None) -> list[int]:
    """Start positions of `needle` in `hay` where hunk `h` may sit, by `git apply`'s own rule: a
    hunk whose old range starts at line 1 must match at the start of the file, and one with no
    context after its last change must match at the end (a diff with context stops short of it
    only at the end of the file). Without this, deleting a file's first or last line looks
    applied wherever the remaining context occurs -- including in the untouched file.
    `post` (which image `needle` is) and `file_nl` (the file ends with a newline): an image that
    ends the file matches only where the file ends as it does (`ends_with_newline`)."""
    found = _near(_find_all(hay, needle), len(needle), near)
    nl = ends_with_newline(h, post) if post is not None and file_nl is not None else None
    if nl is not None:
        found = [p for p in found if p + len(needle) == len(hay) and nl == file_nl]
    if not h.old_len:  # an added file, or an insertion without context: no pre-image to anchor
        return found
    at_start, at_end = h.old_start == 1, _trailing_context(h) == 0
    return [p for p in found if (not at_start or p == 0) and (not at_end or p + len(needle) == len(hay))]


def _trailing_context(h: Hunk) -> int:
    trailing = 0
    for marker, _ in reversed(h._lines()):
        if marker == b"\\":
            continue
        if marker != b" ":
            break
        trailing += 1
    return trailing


def ends_with_newline(h: Hunk, post: bool) -> bool | None:
    """For a text hunk's image (post- or pre-) that ends the file: does the file end with a
    newline there? None: the image need not end the file. An image ends the file when its last
    line is marked `\\ No newline at end of file` (the marker after a `-` line is the pre-image's,
    after a `+` line the post-image's, after a context line both), when the hunk has no context
    after its last change (a whole added or deleted file's image counts only when marked: a fork's
    lines after an added file's are its own)."""
    side = b"+" if post else b"-"
    marked, prev = False, None
    lines = h._lines()
    for marker, _ in lines:
        if marker == b"\\" and prev in (b" ", side):
            marked = True
        prev = marker
    image = [m for m, _ in lines if m in (b" ", side)]
    if not image:
        return None
    if marked or (h.old_len and h.new_len and _trailing_context(h) == 0):
        return not marked
    return None


def post_image_present(hunk: Hunk, file_bytes: bytes, near: "tuple[int, int] | None" = None) -> bool:
    """The hunk's context + added lines occur as one block of `file_bytes` (at `near`).

    Byte for byte. An empty image is trivially present.
    For a binary pseudo-hunk: the file's git blob id matches the ``index`` line's new id.
    """
    return _image_present(hunk, file_bytes, post=True, near=near)


def pre_image_present(hunk: Hunk, file_bytes: bytes, near: "tuple[int, int] | None" = None) -> bool:
    """Like `post_image_present`, for context + removed lines (the old blob id for binary)."""
    return _image_present(hunk, file_bytes, post=False, near=near)


def change_undone(hunk: Hunk, file_bytes: bytes, near: "tuple[int, int] | None" = None) -> bool:
    """Are the lines a text hunk removes back in the file, and the lines it adds gone?

    Each run of consecutive removed (and added) lines is looked for as a block; runs of blank
    lines prove nothing and are skipped. This sees a revert whose surroundings changed since (so
    the whole pre-image no longer matches), which `hunk_state` calls neither applied nor not.
    A hunk that only adds lines, or only blank ones, is never called undone here. With `near`,
    only runs at the hunk's location count (a `}` elsewhere in the file is not the hunk's).
    """
    removed, added = _runs(hunk, b"-"), _runs(hunk, b"+")
    if not removed:
        return False
    hay = _file_lines(file_bytes)
    return all(_near(_find_all(hay, run), len(run), near) for run in removed) and \
        not any(_near(_find_all(hay, run), len(run), near) for run in added)


def _runs(hunk: Hunk, marker: bytes) -> list[list[bytes]]:
    """The hunk's runs of consecutive `marker` lines, normalised, without all-blank runs."""
    runs: list[list[bytes]] = [[]]
    for m, content in hunk._lines():
        if m == marker:
            runs[-1].append(content)
        elif runs[-1]:
            runs.append([])
    return [_normalise(run) for run in runs if any(line.strip() for line in run)]


def hunk_state(hunk: Hunk, file_bytes: bytes | None, near: "tuple[int, int] | None" = None) -> HunkState:
    """Is `hunk` applied in a file whose content is `file_bytes` (None: no such file)?

    Pass the content at `hunk.path`. A hunk of a deleted file is ``applied`` when the file is
    gone; one of an added file is ``not-applied`` while it is missing; otherwise a missing file is
    ``file-missing``. For a text hunk, occurrences of the pre- and post-image are counted,
    discounting any occurrence that lies inside an occurrence of the other image (an insertion's
    pre-image sits inside its post-image): only post-image found → ``applied``; only pre-image →
    ``not-applied``; both or neither → ``ambiguous``. A meta pseudo-hunk whose change is not
    visible in bytes (a mode change) is ``ambiguous`` when the file exists. `near`: the hunk's
    location (see the module docstring); a whole-file check (deleted, binary) ignores it.
    """
    status = hunk.file_status
    if file_bytes is None:
        if status == "deleted":
            return "applied"
        return "not-applied" if status == "added" else "file-missing"
    if status == "deleted":
        if hunk.kind == "meta" or pre_image_present(hunk, file_bytes):
            return "not-applied"
        return "ambiguous"
    if hunk.kind == "meta":
        mode_change = re.search(rb"^(old|new) mode ", hunk.body, re.M)
        return "ambiguous" if mode_change else "applied"
    if hunk.kind == "binary":
        if post_image_present(hunk, file_bytes):
            return "applied"
        return "not-applied" if pre_image_present(hunk, file_bytes) else "ambiguous"
    return _text_state(hunk, _file_lines(file_bytes), near, file_bytes.endswith(b"\n"))


def _text_state(hunk: Hunk, hay: list[bytes], near: "tuple[int, int] | None" = None, file_nl: bool | None = None) -> HunkState:
    pre, post = _normalise(hunk.pre_image()), _normalise(hunk.post_image())
    if not pre:  # a new file's hunk, or an insertion without context
        if _anchored(hunk, hay, post, near, True, file_nl):
            return "applied"
        return "ambiguous" if hunk.file_status == "added" else "not-applied"
    pre_at = _anchored(hunk, hay, pre, near, False, file_nl)
    if not post:  # a deletion without context: nothing to find once applied
        return "not-applied" if pre_at else "applied"
    post_at = _anchored(hunk, hay, post, near, True, file_nl)
    unexplained_pre = set(pre_at) - _inside(post_at, post, pre)
    unexplained_post = set(post_at) - _inside(pre_at, pre, post)
    if unexplained_post and not unexplained_pre:
        return "applied"
    if unexplained_pre and not unexplained_post:
        return "not-applied"
    return "ambiguous"


def _inside(outer_at: list[int], outer: list[bytes], inner: list[bytes]) -> set[int]:
    """Positions where `inner` occurs only because `outer` occurs (it is a block of `outer`)."""
    offsets = _find_all(outer, inner)
    return {p + off for p in outer_at for off in offsets}
