"""git's commit-graph files read as bytes (`objects/info/commit-graph`, or a split chain): whether
one exists, holds given commits and has changed-path Bloom filters. No process: the git door
(`GitRepo.commit_graph`) asks this for `init` and `doctor`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable


@dataclass(frozen=True)
class CommitGraph:
    """What `git commit-graph write` left in `objects/info/` (a single file or a split chain)."""

    files: int  # 0: none
    commits: int
    bloom: bool  # every file has changed-path Bloom filters (BIDX and BDAT chunks)
    missing_tips: tuple[str, ...]  # asked-for commits the graph does not hold (stale)

    @property
    def state(self) -> str:
        """missing | no-bloom | stale | ok"""
        if not self.files:
            return "missing"
        if not self.bloom:
            return "no-bloom"
        return "stale" if self.missing_tips else "ok"


def read_commit_graph(objects: Path, tips: Iterable[str] = ()) -> CommitGraph:
    """Read the commit-graph file(s) under `objects/info/` (format: git's
    Documentation/gitformat-commit-graph.txt): the chunk table says whether Bloom filters are there,
    the OID fanout and lookup say which commits it holds. A file that cannot be read counts as none."""
    info = objects / "info"
    chain = info / "commit-graphs" / "commit-graph-chain"
    try:
        if chain.is_file():
            paths = [info / "commit-graphs" / f"graph-{h}.graph" for h in chain.read_text().split()]
        elif (info / "commit-graph").is_file():
            paths = [info / "commit-graph"]
        else:
            paths = []
        graphs = [_graph_file(p.read_bytes()) for p in paths]
    except (OSError, ValueError):
        return CommitGraph(0, 0, False, tuple(tips))
    wanted = sorted(set(tips))
    held = {tip for tip in wanted if any(g.holds(tip) for g in graphs)}
    return CommitGraph(len(graphs), sum(g.commits for g in graphs), bool(graphs) and all(g.bloom for g in graphs),
                       tuple(t for t in wanted if t not in held))


@dataclass(frozen=True)
class _GraphFile:
    bloom: bool
    commits: int
    data: bytes
    lookup: int  # offset of the OID lookup chunk (the commits' ids, sorted)
    hash_len: int

    def holds(self, sha: str) -> bool:
        try:
            want = bytes.fromhex(sha)
        except ValueError:
            return False
        lo, hi = 0, self.commits
        while lo < hi:
            mid = (lo + hi) // 2
            oid = self.data[self.lookup + mid * self.hash_len:self.lookup + (mid + 1) * self.hash_len]
            if oid == want:
                return True
            lo, hi = (mid + 1, hi) if oid < want else (lo, mid)
        return False


def _graph_file(data: bytes) -> _GraphFile:
    if data[:4] != b"CGPH" or len(data) < 8:
        raise ValueError("not a commit-graph file")
    hash_len = {1: 20, 2: 32}.get(data[5])
    if hash_len is None:
        raise ValueError("unknown hash version")
    chunks: dict[bytes, int] = {}
    for k in range(data[6]):
        at = 8 + 12 * k
        chunks[data[at:at + 4]] = int.from_bytes(data[at + 4:at + 12], "big")
    fanout, lookup = chunks[b"OIDF"], chunks[b"OIDL"]
    commits = int.from_bytes(data[fanout + 255 * 4:fanout + 256 * 4], "big")
    return _GraphFile(b"BIDX" in chunks and b"BDAT" in chunks, commits, data, lookup, hash_len)
