"""Issue 11's differential run: porttrack's convergence verdicts against an independent oracle.

    python proofs/converge_differential.py [--scenarios 500] [--seed 0] [--kinds 0] [--keep DIR] [--verbose] [--rebase]

`--kinds N`: also N of issue 30's kind scenarios. `--rebase`: the rebase-merge scenarios of
`testing.convergence_rebase` (issue 30) in place of the random ones.

Scenario i is built from seed `--seed + i` by `testing.convergence_scenarios` (real git
repositories in a temporary folder, isolated from your git configuration): an upstream with a
merged PR (squash or true merge), later churn (edits of the PR's lines, deletions, renames), and a
fork cut at a random point with random hand ports. The oracle (`git apply --check` of each hunk
in a scratch index at the fork ref, plus the generator's own record; defined in that module's
docstring) is compared with `porttrack.converge.decide` on the same fork.

`--kinds N` adds N scenarios of issue 30's family (`build_kind_scenario`, seeds `--seed` ..
`--seed + N - 1`: renames against copies, symlinks, empty files, added files moved upstream,
submodule bumps, end-of-file newlines, byte-identical files; seed % 7 picks the kind), judged by
that family's oracle (tree entries and `git apply`); they are named "kinds seed S" below.

Prints every scenario where porttrack and the oracle disagree (with its story and hunks; the
allowed conservative answers too), the hunk confusion table (oracle state x porttrack state), the
verdict table, and timing. Exits 1 on any violation. To look at one scenario:
`--seed S --scenarios 1 --keep /tmp/s --verbose` keeps its repositories (`/tmp/s/s<S>/fork`, fork
ref `fork`).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from porttrack.converge.verify import MergedPR, decide, summary  # noqa: E402
from porttrack.git.repo import GitRepo  # noqa: E402
from testing.convergence_rebase import build_rebase_scenario  # noqa: E402
from testing.convergence_scenarios import (  # noqa: E402
    KIND_NAMES,
    Check,
    Scenario,
    build_kind_scenario,
    build_scenario,
    check_scenario,
    confusion_tables,
    oracle_states,
)
from testing.gitfixtures import isolated_environ  # noqa: E402


def ask_porttrack(s: Scenario) -> tuple[str, list[tuple[str, str]], dict[str, int]]:
    v = decide(GitRepo.open(s.fork), MergedPR(s.pr, s.title, s.merge, None, "recorded", head_sha=s.head or None,
                                               base_sha=getattr(s, "base", "") or None),
               fork_ref=s.fork_ref, upstream_base=s.upstream_base)
    return v.verdict, [(h.path, h.state) for h in v.hunks], summary(v.hunks)


def run_one(seed: int, where: Path, timing: dict[str, float], verbose: bool, build=build_scenario) -> Check:
    t0 = time.perf_counter()
    s = build(seed, where)
    t1 = time.perf_counter()
    states = oracle_states(s)
    t2 = time.perf_counter()
    verdict, reported, counts = ask_porttrack(s)
    t3 = time.perf_counter()
    for key, dt in (("build", t1 - t0), ("oracle", t2 - t1), ("porttrack", t3 - t2)):
        timing[key] = timing.get(key, 0.0) + dt
    c = check_scenario(s, states, verdict, reported, counts)
    # every disagreement is shown, the allowed (conservative, unverifiable) ones too
    notable = c.violations or c.conservative or c.unverifiable or c.verdicts[0] != c.verdicts[1]
    if verbose or notable:
        print(f"{'kinds ' if build is build_kind_scenario else ''}seed {seed}: cut {s.cut}, {s.merge_kind}, oracle {c.verdicts[0]}, porttrack {verdict}")
        for line in s.story:
            print(f"    {line}")
        for (o, p), h in zip(c.cells, s.hunks):
            print(f"    {h.path}#{h.position}: oracle {o}, porttrack {p}")
        for v in c.violations:
            print(f"    VIOLATION {v}")
    return c


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0, help="seed of the first scenario (default 0)")
    ap.add_argument("--kinds", type=int, default=0, help="also run this many of issue 30's kind scenarios (default 0)")
    ap.add_argument("--keep", type=Path, help="build here and keep the repositories")
    ap.add_argument("--verbose", action="store_true", help="print every scenario's story and hunks")
    ap.add_argument("--rebase", action="store_true", help="testing.convergence_rebase's rebase-merge scenarios")
    args = ap.parse_args(argv)
    if args.scenarios < 0 or args.kinds < 0 or args.scenarios + args.kinds < 1:
        ap.error("--scenarios and --kinds must not be negative, and one of them at least 1")
    base = args.keep or Path(tempfile.mkdtemp(prefix="porttrack-differential-"))
    base.mkdir(parents=True, exist_ok=True)
    timing: dict[str, float] = {}
    checks: list[Check] = []
    t0 = time.perf_counter()
    try:
        with isolated_environ(base / "home"):
            first = build_rebase_scenario if args.rebase else build_scenario
            runs = [(seed, first) for seed in range(args.seed, args.seed + args.scenarios)]
            runs += [(seed, build_kind_scenario) for seed in range(args.seed, args.seed + args.kinds)]
            for seed, build in runs:
                where = base / f"{'k' if build is build_kind_scenario else 's'}{seed}"
                checks.append(run_one(seed, where, timing, args.verbose, build))
                if not args.keep:
                    shutil.rmtree(where, ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    wall = time.perf_counter() - t0
    print()
    print(f"{len(checks)} scenarios: {args.scenarios} random (seeds {args.seed}..{args.seed + args.scenarios - 1}), "
          f"{args.kinds} of issue 30's kinds (seeds {args.seed}..{args.seed + args.kinds - 1}; "
          f"{', '.join(f'{k} {sum(1 for x in range(args.seed, args.seed + args.kinds) if x % len(KIND_NAMES) == i)}' for i, k in enumerate(KIND_NAMES))})")
    print(confusion_tables(checks))
    print(f"time: {wall:.1f} s in all ({wall / len(checks):.2f} s a scenario); build "
          f"{timing['build']:.1f} s, oracle {timing['oracle']:.1f} s, porttrack decide {timing['porttrack']:.1f} s")
    bad = [("kinds " if k else "") + str(c.seed) for c, (_, k) in zip(checks, runs) if c.violations]
    if bad:
        print(f"FAILED: violations in seeds {bad}")
        return 1
    print("OK: no violation")
    return 0


if __name__ == "__main__":
    sys.exit(main())
