"""Many open upstream PRs at once, each a real commit with `refs/pull/N/head` in the upstream git
repository and a matching pull request in the GitHub emulator: one `git fast-import` for all of
them (a World.open_pr each would cost ~0.1 s apiece at 1,000 PRs).

`seed(world, prs, base)` takes {number: {path: content or None (deleted)}}; each PR is one
commit on `base` (default: upstream's main tip). The emulator's file lists are the real diff's
(`files_from_git`) when `real_files` is set, else one synthetic entry per path for a file
the PR adds (what the token-less budget tests need: the lists are never asked for when git answers).
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path

from testing.github_emulator import files_from_git

__all__ = ["seed"]


def _added(path: str, content: str | None) -> dict:
    """The files endpoint's entry for a file the PR adds (or removes: None)."""
    if content is None:
        return {"filename": path, "status": "removed", "additions": 0, "deletions": 1, "changes": 1}
    lines = content.splitlines()
    patch = f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}\n" for line in lines)
    return {"filename": path, "status": "added", "additions": len(lines), "deletions": 0, "changes": len(lines), "patch": patch}


def seed(world, prs: Mapping[int, Mapping[str, str | None]], base: str | None = None, *, real_files: bool = False,
         updated: Mapping[int, datetime] | None = None, renames: Mapping[int, tuple[str, str]] | None = None) -> dict[int, str]:
    """Create the PRs; returns {number: head SHA}. `renames`: {number: (old, new)} made as a
    pure rename (the same blob under the new path), on top of the PR's other files."""
    path = world.upstream.path
    base = base or world.upstream.tip()
    renames = renames or {}
    stream = bytearray()
    for n, files in prs.items():
        msg = f"PR {n}".encode()
        stream += f"commit refs/pull/{n}/head\nmark :{n}\ncommitter Dev <dev@example.invalid> 1754000000 +0000\n".encode()
        stream += b"data %d\n%s\n" % (len(msg), msg)
        stream += f"from {base}\n".encode()
        if n in renames:
            old, new = renames[n]
            stream += f'R "{old}" "{new}"\n'.encode()
        for p, content in files.items():
            if content is None:
                stream += f'D "{p}"\n'.encode()
            else:
                data = content.encode()
                stream += f'M 100644 inline "{p}"\n'.encode() + b"data %d\n%s\n" % (len(data), data)
        stream += b"\n"
    with tempfile.TemporaryDirectory() as tmp:
        marks = Path(tmp) / "marks"
        subprocess.run(["git", "-C", str(path), "fast-import", "--quiet", "--force", f"--export-marks={marks}"], input=bytes(stream),
                       check=True, capture_output=True)
        heads = {int(mark[1:]): sha for mark, sha in (line.split() for line in marks.read_text().splitlines())}
    start = datetime(2026, 8, 1, tzinfo=timezone.utc)
    for i, n in enumerate(prs):
        when = (updated or {}).get(n, start - timedelta(minutes=i))
        if real_files:
            mb = base
            files = files_from_git(path, mb, heads[n])
        else:
            files = [_added(p, c) for p, c in prs[n].items()]
        world.fake.put_pull(world.upstream_repo, n, title=f"open {n}", head_sha=heads[n], base_sha=base, head_ref=f"pr{n}",
                            user=f"dev{n % 40}", files=files, updated_at=when.isoformat())
    return heads
