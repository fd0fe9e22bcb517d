"""#48630 merged by "Rebase and merge" on real vLLM history (issue 30, item 3): its five real commits
replayed onto the squash's parent, as GitHub replays them; its real head is a "Merge branch 'main'"
commit, which is not replayed.

    python proofs/rebase_merge_real.py --history <vLLM git dir> [--json FILE]
    (or PORTTRACK_VLLM_HISTORY=<vLLM git dir>)

The history is a clone of upstream vLLM (main = upstream main to 2026-08-17, 20,050 commits) with
the PR's branch `chunk-rejection-sampler` (head 27f5f08189, "Merge branch 'main' into
chunk-rejection-sampler"); it is only read (the fork shares its objects through `alternates`). In
that history the PR was squash-merged (ac36a7a1e7); here upstream instead gets the five commits
replayed onto ac36a7a1e7^ (each commit's change against its first parent applied with
`git apply --3way` in a scratch index, author and message kept; a file that conflicts -- the
PR's later commits sit on main merged in -- is taken as the PR commit has it), the last copy being GitHub's
`merge_commit_sha`. Cases (`verify-converged 48630 --json --dry-run --fork-ref X`, the merge and the
PR head in the recorded state as `status` leaves them):

  upstream          the fork at the replayed tip: converged by ancestry, merge kind "rebase";
  last-copy         ac36a7a1e7^ plus a cherry-pick of the last copy only: not converged (the other
                    commits' hunks missing) -- before issue 30 this was converged, exit 0;
  all-copies        ac36a7a1e7^ plus cherry-picks of the five copies: converged by patch-id;
  dropped-last-copy the same PR where upstream already had commit 3's change (landed on its own by
                    someone else before the merge), so the replay dropped it: the fork with the last
                    copy only is not converged, and the change judged is the four replayed commits.

`--code DIR` runs porttrack from another checkout (e.g. `main`, for the figures before).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from testing.gitfixtures import isolated_environ  # noqa: E402
from testing.realhistory import commit_tree, git, make_fork  # noqa: E402
from testing.workspace import make_workspace, track  # noqa: E402

PR = 48630
HEAD = "27f5f08189"
SQUASH = "ac36a7a1e7"


def replay(fork: Path, onto: str, commit: str, author_env: dict[str, str] | None = None, message: str | None = None) -> str:
    """`commit`'s change against its first parent as a new commit on `onto`, its author (name,
    email, date) and message kept unless given: what a rebase makes."""
    index = fork / ".git" / f"replay-{os.getpid()}.index"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        git(fork, "read-tree", onto, env=env)
        patch = subprocess.run(["git", "-C", str(fork), "diff", "--binary", "--full-index", f"{commit}^", commit],
                               capture_output=True, check=True).stdout
        applied = subprocess.run(["git", "-C", str(fork), "apply", "--cached", "--3way", "-"], input=patch, capture_output=True,
                                 env={**os.environ, **env})
        if applied.returncode != 0:  # a conflict (the PR's later commits sit on main merged in): the PR commit's file, as a
            # maintainer resolving the rebase by taking the PR's side would
            for path in sorted({line.split("\t", 1)[1] for line in git(fork, "ls-files", "-u", env=env).splitlines()}):
                entry = git(fork, "ls-tree", commit, "--", path)
                if entry:
                    mode, _, blob = entry.split("\t")[0].split()
                    git(fork, "update-index", "--force-remove", "--", path, env=env)
                    git(fork, "update-index", "--add", "--cacheinfo", f"{mode},{blob},{path}", env=env)
                else:
                    git(fork, "update-index", "--force-remove", "--", path, env=env)
        tree = git(fork, "write-tree", env=env)
    finally:
        index.unlink(missing_ok=True)
    name, email, date = git(fork, "log", "-1", "--format=%an%x00%ae%x00%ad", "--date=raw", commit).split("\0")
    who = author_env or {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date}
    body = message or git(fork, "log", "-1", "--format=%B", commit)
    return git(fork, "commit-tree", tree, "-p", onto, "-m", body, env=who)


class _keep:
    """KEEP=DIR: build there and keep it (to look at a case by hand)."""

    def __init__(self, where: str) -> None:
        self.where = where

    def __enter__(self) -> str:
        Path(self.where).mkdir(parents=True, exist_ok=True)
        return self.where

    def __exit__(self, *exc: object) -> None:
        return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--history", type=Path, default=os.environ.get("PORTTRACK_VLLM_HISTORY"))
    ap.add_argument("--code", type=Path, default=ROOT, help="the porttrack checkout to run (default: this one)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.history is None or not Path(args.history).exists():
        raise SystemExit("give the vLLM history with --history or PORTTRACK_VLLM_HISTORY")
    history = Path(args.history).resolve()
    with (tempfile.TemporaryDirectory(prefix="porttrack-rebase-real-") if not os.environ.get("KEEP") else _keep(os.environ["KEEP"])) as tmp, isolated_environ(Path(tmp) / "home"):
        root = Path(tmp)
        tip = git(history, "rev-parse", "refs/heads/main")
        world = {"history": "upstream vLLM main (real history)", "tip": tip,
                 "tip_date": git(history, "log", "-1", "--format=%cI", tip),
                 "commits": int(git(history, "rev-list", "--count", tip)), "code": "this checkout" if args.code.resolve() == ROOT else "another checkout (--code: the figures before)"}
        print(f"history: {world['history']}, tip {tip[:12]} of {world['tip_date']}, {world['commits']} commits; porttrack from {args.code}")
        head = git(history, "rev-parse", HEAD)
        base = git(history, "rev-parse", f"{SQUASH}^")
        fork = make_fork(history, root / "fork", main=base)
        own = git(fork, "rev-list", "--reverse", "--no-merges", "--topo-order", head, "--not", base).split()
        print(f"#{PR}: head {head[:12]} ({git(fork, 'log', '-1', '--format=%s', head)}), {len(own)} own commits, "
              f"replayed onto {base[:12]}")
        copies, at = [], base
        for c in own:
            at = replay(fork, at, c)
            copies.append(at)
        merge = copies[-1]
        # the same PR where upstream already had commit 3's change: landed first, dropped by the replay
        landed = replay(fork, base, own[2], {"GIT_AUTHOR_NAME": "someone else", "GIT_AUTHOR_EMAIL": "else@example.invalid",
                                            "GIT_AUTHOR_DATE": "1784000000 +0000"}, "Land the unit tests on their own")
        at, dropped_copies = landed, []
        for c in own[:2] + own[3:]:
            at = replay(fork, at, c)
            dropped_copies.append(at)
        dropped_merge = dropped_copies[-1]
        git(fork, "update-ref", "refs/heads/upstream-rebased", merge)
        git(fork, "update-ref", "refs/heads/upstream-dropped", dropped_merge)
        for name, onto, picks in (("last-copy", base, [merge]), ("all-copies", base, copies),
                                  ("dropped-last-copy", landed, [dropped_merge])):
            at = commit_tree(fork, onto, git(fork, "rev-parse", f"{onto}^{{tree}}"), "The fork's own commit (empty)")
            for c in picks:
                at = replay(fork, at, c, message=f"Cherry-pick {c[:12]}")
            git(fork, "update-ref", f"refs/heads/{name}", at)
        cases = {}
        failures = []
        for name, ref, upstream, merge_sha, want in (
                ("upstream", "upstream-rebased", merge, merge, "converged"),
                ("last-copy", "last-copy", merge, merge, "not converged"),
                ("all-copies", "all-copies", merge, merge, "converged"),
                ("dropped-last-copy", "last-copy-dropped", dropped_merge, dropped_merge, "not converged")):
            ref = {"last-copy-dropped": "dropped-last-copy"}.get(ref, ref)
            git(fork, "update-ref", "refs/remotes/upstream/main", upstream)
            ws = make_workspace(root / f"ws-{name}", {"t": track([PR])}, fork=fork, token=None)
            state = {"schema": "porttrack/upstream-state/v1", "upstream": "vllm-project/vllm", "observed_at": "2026-08-25T00:00:00Z",
                     "source": "real history", "prs": {str(PR): {
                         "number": PR, "title": "[MRV2][Spec Decode] Avoid rejection sampler OOM by chunking", "author": "mgoin",
                         "state": "merged", "html_url": "", "created_at": None, "updated_at": None, "merged_at": "2026-07-23T10:13:13Z",
                         "closed_at": None, "merge_commit_sha": merge_sha, "head_sha": head, "head_ref": "chunk-rejection-sampler",
                         "base_ref": "main", "base_sha": None, "default_branch": "main", "observed_at": "2026-08-25T00:00:00Z"}}}
            (ws.root / "state").mkdir(parents=True, exist_ok=True)
            (ws.root / "state" / "upstream.json").write_text(json.dumps(state))
            env = {**ws.env(PYTHONDONTWRITEBYTECODE=None), "PYTHONPATH": str(args.code)}
            proc = subprocess.run([sys.executable, "-m", "porttrack", "verify-converged", str(PR), "--json", "--dry-run", "--fork-ref", ref],
                                  env=env, cwd=ws.root, capture_output=True, text=True)
            data = json.loads(proc.stdout) if proc.stdout.startswith("{") else None
            if data is None:
                case = {"exit": proc.returncode, "error": proc.stderr.strip().splitlines()[-1:] if proc.stderr else []}
                print(f"  {name:<18} exit {proc.returncode}: {case['error']}")
                failures.append(f"{name}: no verdict, exit {proc.returncode}")
            else:
                s = data["summary"]
                files = sorted({h["path"] for h in data["hunks"]})
                case = {"exit": proc.returncode, "verdict": data["verdict"], "method": data["method"],
                        "merge_kind": data["commits"]["merge_kind"], "merge_parent": data["commits"]["merge_parent"],
                        "summary": s, "files": len(files)}
                print(f"  {name:<18} {data['verdict']} by {data['method']}, exit {proc.returncode}, merge kind "
                      f"{case['merge_kind']}, change from {str(case['merge_parent'])[:12]}: {s['present']} present / "
                      f"{s['missing']} missing / {s['unknown']} unknown of {s['hunks']} hunks in {len(files)} files")
                start = landed if name == "dropped-last-copy" else base
                if (case["merge_kind"], case["merge_parent"]) != ("rebase", start):
                    failures.append(f"{name}: the change taken from {case['merge_parent']} ({case['merge_kind']}), not from {start} (rebase)")
                ok = data["verdict"] == "converged" if want == "converged" else data["verdict"] != "converged"
                if not ok or (want == "converged") != (proc.returncode == 0):
                    failures.append(f"{name}: {data['verdict']}, exit {proc.returncode} (want {want})")
            cases[name] = case
        result = {"schema": "porttrack/bench-rebase-merge-real/v1", "world": world, "pr": PR, "head": head, "base": base,
                  "copies": copies, "dropped_variant": {"landed": landed, "copies": dropped_copies}, "cases": cases, "failures": failures}
        if args.json:
            args.json.write_text(json.dumps(result, indent=1) + "\n")
        print("failures: " + ("; ".join(failures) if failures else "none"))
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
