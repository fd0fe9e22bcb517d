#!/usr/bin/env python3
"""What fetching PR heads costs inside a `porttrack status` poll: wall time and git processes.

Builds an upstream (bare repo with refs/pull/N/head) linked to the GitHub emulator and a fork clone,
for 4 and for 20 tracked PRs, and runs `observe.poll` in-process with the fork checkout:
  first   the first poll (every head is new to the fork: all are fetched)
  moved   every PR appended to, polled again (all heads fetched and classified by local git)
  missing every PR appended to again, one PR's refs/pull/N/head deleted upstream
Counts every git process porttrack starts (and the `git fetch`es among them). The upstream is a
local path, so a fetch costs a process, not a network round trip: on GitHub each `git fetch` is
one more round trip (~0.3-1 s), which is why the fetch count is the figure to watch.

    PYTHONPATH=$PWD python benchmarks/fetch_heads.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from porttrack.git.repo import GitRepo  # noqa: E402
from porttrack.github.client import GitHubClient  # noqa: E402
from porttrack.observe.poll import poll  # noqa: E402
from porttrack.workspace.state import UpstreamState  # noqa: E402
from testing.gitfixtures import git, isolated_environ  # noqa: E402
from testing.github_emulator import DEFAULT_TOKEN, running_emulator  # noqa: E402
from testing.world import World  # noqa: E402

_real_popen = subprocess.Popen


class _Counter:
    """Counts the git processes started through subprocess.Popen (it starts them unchanged)."""

    def __init__(self) -> None:
        self.git = self.fetch = 0

    def __enter__(self) -> "_Counter":
        counter = self

        class Counting(_real_popen):  # type: ignore[misc, valid-type]
            def __init__(self, args, *a, **kw):
                if isinstance(args, (list, tuple)) and args and args[0] == "git":
                    counter.git += 1
                    counter.fetch += "fetch" in args
                super().__init__(args, *a, **kw)

        subprocess.Popen = Counting  # type: ignore[misc]
        return self

    def __exit__(self, *exc) -> None:
        subprocess.Popen = _real_popen  # type: ignore[misc]


def _one_run(n_prs: int, tmp: Path, fake) -> dict[str, tuple[float, int, int, int]]:
    world = World(tmp, fake)
    numbers = [1000 + i for i in range(n_prs)]
    for n in numbers:
        world.open_pr(n, {f"f{n}.py": "x = 1\n"}, f"PR {n}")
    client = GitHubClient(world.upstream_repo, DEFAULT_TOKEN, fake.base_url, backoff_s=0.01)
    repo = GitRepo.open(world.fork)
    state = UpstreamState(upstream=world.upstream_repo, observed_at=None, source="bench", prs={})
    out: dict[str, tuple[float, int, int, int]] = {}
    for phase in ("first", "moved", "missing"):
        if phase != "first":
            for n in numbers:
                world.append(n, {f"f{n}.py": f"x = '{phase}'\n"})
        if phase == "missing":
            git(world.upstream.path, "update-ref", "-d", f"refs/pull/{numbers[-1]}/head")
        with _Counter() as count:
            started = time.perf_counter()
            result = poll(state, numbers, client, repo)
            elapsed = time.perf_counter() - started
        state = result.state
        out[phase] = (elapsed, count.git, count.fetch, len(result.notes))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"observe.poll with a fork checkout, emulator at 0 ms, median of {args.repeat}")
    print(f"{'PRs':>4} {'phase':>8} {'wall s':>8} {'git procs':>10} {'fetches':>8} {'notes':>6}")
    for n_prs in (4, 20):
        runs = []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory(prefix="porttrack-fetch-bench-") as tmp, \
                    isolated_environ(Path(tmp) / "home"), running_emulator() as fake:
                runs.append(_one_run(n_prs, Path(tmp), fake))
        for phase in ("first", "moved", "missing"):
            wall = statistics.median(r[phase][0] for r in runs)
            _, procs, fetches, notes = runs[-1][phase]
            print(f"{n_prs:>4} {phase:>8} {wall:>8.3f} {procs:>10} {fetches:>8} {notes:>6}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
