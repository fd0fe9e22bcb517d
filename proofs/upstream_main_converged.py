"""Proof on real vLLM history (issue 30): with the fork at upstream main, every squash merge on
upstream main in the three months to 2026-08-17 that touches Python is converged -- or, where
upstream itself later took the change away, "undone upstream" by a commit that really touched
those lines; 0 hunks missing or unknown; every PR upstream reverted is never converged.

    python proofs/upstream_main_converged.py --history <vLLM git dir> [--since 2026-05-17]
        [--until 2026-08-17] [--json FILE] [--limit N]
    (or PORTTRACK_VLLM_HISTORY=<vLLM git dir>)

The history is read only (the fork shares its objects through `alternates`; a commit-graph with
changed-path Bloom filters is written in the fork, as `porttrack init` does). The merges are the
first-parent commits of main with one parent whose subject ends in "(#N)", committed in the window,
whose change touches a `.py` file. Each is decided as `verify-converged` decides it
(`porttrack.converge.decide.decide`, in this process, fork ref `refs/heads/main` = upstream main,
upstream base `refs/remotes/upstream/main`).

Independent checks of what the verdicts claim:
- "undone upstream by C": C is a first-parent commit of main after the merge, and C's own change
  (against its first parent, the hunk's file or the file it was renamed to) removes a line the hunk
  added or adds back a line it removed -- C touched those lines, it is not merely the newest
  commit on the file;
- upstream's reverts: a PR whose merge a later first-parent commit reverts (subject
  `Revert "<the PR's subject>"`) is never converged;
- present / present after churn against upstream main's file itself, byte for byte
  (`ground_truth`): a present hunk's added lines are all there; a hunk present after churn is not
  one whose added lines are all gone while the lines it removed are all back.
The JSON result lists every commit checked with its verdict and counts.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from porttrack.converge.decide import MergedPR, decide, summary  # noqa: E402
from porttrack.git.repo import GitRepo  # noqa: E402
from testing.gitfixtures import isolated_environ  # noqa: E402
from testing.realhistory import git, make_fork  # noqa: E402

_PR = re.compile(r"\(#(\d+)\)\s*$")


def merges_in_window(repo: Path, since: str, until: str) -> list[dict]:
    """The squash merges on main's first-parent line committed in [since, until] touching Python."""
    out = subprocess.run(["git", "-C", str(repo), "log", "--first-parent", "--no-renames", "--name-only", "-z",
                          f"--since={since}", f"--until={until}", "--format=%x01%H %P%x00%cI%x00%s%x00", "refs/heads/main"],
                         capture_output=True, check=True).stdout
    found = []
    for chunk in out.split(b"\x01")[1:]:
        head, date, subject, *names = chunk.split(b"\0")
        sha, *parents = head.decode().split()
        title = subject.decode("utf-8", "replace")
        m = _PR.search(title)
        files = [n.decode("utf-8", "surrogateescape").strip("\n") for n in names if n.strip(b"\n")]
        if len(parents) == 1 and m and any(f.endswith(".py") for f in files):
            found.append({"commit": sha, "pr": int(m.group(1)), "subject": title, "date": date.decode()})
    return found[::-1]


def reverted_prs(repo: Path, merges: list[dict]) -> dict[int, str]:
    """PR -> the first-parent commit after its merge that reverts it: a subject `Revert ...` that
    names the PR's number besides its own (`Revert "X (#N)" (#M)`, `Revert "X" (#N) (#M)`), else
    whose quoted title is the PR's title (or its start, where GitHub cut it with "…")."""
    log = git(repo, "log", "--first-parent", "--reverse", "--format=%H%x00%s", "refs/heads/main").splitlines()
    order = {line.split("\0", 1)[0]: i for i, line in enumerate(log)}
    by_number = {m["pr"]: m for m in merges}
    out: dict[int, str] = {}
    for line in log:
        sha, _, subject = line.partition("\0")
        if not subject.startswith("Revert "):
            continue
        numbers = [int(n) for n in re.findall(r"\(#(\d+)\)", subject)]
        named = [n for n in numbers[:-1] if n in by_number]
        if named:
            targets = named
        else:
            inner = re.sub(r"\s*\(#\d+\)\s*$", "", subject[len("Revert "):]).strip().strip('"').strip()
            inner = re.sub(r"\s*\(#\d+\)$", "", inner).rstrip('"').strip()
            cut = inner.endswith("…")
            inner = inner.rstrip("…").strip()
            targets = [m["pr"] for m in merges if (lambda t: t.startswith(inner) if cut else t == inner)(_PR.sub("", m["subject"]).strip())]
        for n in targets:
            if n in by_number and order.get(sha, -1) > order.get(by_number[n]["commit"], 1 << 30) and n not in out:
                out[n] = sha
    return out


def touches_lines(repo: Path, commit: str, paths: list[str], added: list[bytes], removed: list[bytes]) -> bool:
    """Does `commit`'s own change (first parent) remove one of `added` or add back one of `removed`
    (in `paths`; none: in any file -- the hunk's file may have been renamed since the merge)?"""
    diff = subprocess.run(["git", "-C", str(repo), "diff", "-U0", "--no-renames", f"{commit}^", commit, "--", *paths],
                          capture_output=True, check=True).stdout
    minus = {line[1:].strip() for line in diff.split(b"\n") if line.startswith(b"-") and not line.startswith(b"---")}
    plus = {line[1:].strip() for line in diff.split(b"\n") if line.startswith(b"+") and not line.startswith(b"+++")}
    if not any(line.strip() for line in (*added, *removed)):  # a hunk of blank lines only: a blank line changed
        return (bool(added) and b"" in minus) or (bool(removed) and b"" in plus)
    return any(line.strip() in minus for line in added if line.strip()) or any(line.strip() in plus for line in removed if line.strip())


_CTX: dict = {}


def check_one(m: dict) -> tuple[dict, list[str], Counter]:
    """One merge decided with the fork at upstream main, and the proof's checks of its verdict."""
    if "repo" not in _CTX:
        _CTX["repo"] = GitRepo.open(_CTX["fork"])  # one per worker process (its own reader)
    repo, fork, reverted, after, order = (_CTX[k] for k in ("repo", "fork", "reverted", "after", "order"))
    failures: list[str] = []
    pr = MergedPR(m["pr"], m["subject"], m["commit"], m["date"], "recorded")
    try:
        v = decide(repo, pr, fork_ref="refs/heads/main", upstream_base="refs/remotes/upstream/main", now="2026-08-17T00:00:00Z")
    except Exception as exc:  # a verdict the tool cannot give is a failure of the proof, with its reason
        failures.append(f"#{m['pr']} {m['commit'][:12]}: {type(exc).__name__}: {exc}"[:400])
        return {**m, "verdict": "error", "error": str(exc)[:300]}, failures, Counter()
    s = summary(v.hunks)
    row = {"commit": m["commit"], "pr": m["pr"], "subject": m["subject"][:100], "verdict": v.verdict, "method": v.method,
           "summary": s}
    if s["missing"] or s["unknown"]:
        bad = [f"{h.path} {h.header[:40]} {h.state}: {h.detail[-160:]}" for h in v.hunks if h.state in ("missing", "unknown")]
        failures.append(f"#{m['pr']} {m['commit'][:12]}: {s['missing']} missing, {s['unknown']} unknown: {bad[:2]}")
    if v.verdict not in ("converged", "undone-upstream"):
        failures.append(f"#{m['pr']} {m['commit'][:12]}: verdict {v.verdict}")
    if m["pr"] in reverted:
        revert = reverted[m["pr"]]
        row["reverted_by"] = revert
        if v.verdict == "converged":
            # converged after a revert only where upstream put the lines back later (a re-land):
            # some hunk's newest form is from a commit after the revert, none from the revert
            later = {h.changed_by.commit for h in v.hunks if h.changed_by} - {revert}
            relanded = bool(later) and all(c in after and order[c] > order[revert] for c in later) and \
                not any(h.changed_by and h.changed_by.commit == revert for h in v.hunks)
            row["relanded"] = relanded
            if not relanded:
                failures.append(f"#{m['pr']} {m['commit'][:12]}: reverted upstream by {revert[:12]}, yet converged")
    from porttrack.diff import hunks as hunks_mod

    by_id = {h.id: h for fd in hunks_mod.parse_diff(repo.diff(v.commits.merge_parent or f"{m['commit']}^", m["commit"]))
             for h in fd.hunks}
    truth = ground_truth(repo, v, by_id)
    if truth["disagree"]:
        row["ground_truth"] = truth
        for item in truth["disagree"]:
            failures.append(f"#{m['pr']} {item}")
    row["ground_truth_counts"] = {k: (len(val) if isinstance(val, list) else val) for k, val in truth.items() if k != "disagree"}
    for key in ("reindented_only", "pre_image_back_reindented"):
        if truth[key]:
            row[key] = truth[key]
    undone = [h for h in v.hunks if h.state == "undone-upstream"]
    if undone:
        row["undone_by"] = sorted({h.changed_by.commit for h in undone if h.changed_by})
        for h in undone:
            c = h.changed_by
            if c is None or c.commit not in after:
                failures.append(f"#{m['pr']} hunk {h.id}: undone upstream by {c and c.commit[:12]}, not a first-parent commit of main")
                continue
            ph = by_id.get(h.id)
            if ph is None or ph.kind != "text":
                continue
            if touches_lines(fork, c.commit, [], ph.added_lines(), ph.removed_lines()):
                row.setdefault("undone_checked", {})[h.id] = "the named commit removes a line the hunk added or adds back one it removed"
            elif through := touches_through(fork, m["commit"], c.commit, ph.added_lines()):
                row.setdefault("undone_checked", {})[h.id] = f"the named commit changes a line that {through[:12]} put in place of the hunk's"
            else:
                failures.append(f"#{m['pr']} hunk {h.id} ({h.path}): named {c.commit[:12]} does not touch its lines")
    return row, failures, Counter(h.state for h in v.hunks)


def ground_truth(repo, v, by_id: dict) -> dict:
    """An independent look at every text hunk called present or present-after-churn, in upstream
    main's own file at the hunk's path (no trail involved):

    - present (upstream never touched the lines): every non-blank line the hunk added (and not in
      its own pre-image) occurs in the file byte for byte, indentation included -- else a
      disagreement;
    - present after churn (a later commit rewrote them, so the PR's lines may be gone): a
      disagreement when it removed lines, none of its worded added lines is left, byte for byte,
      and its whole pre-image -- context and removed lines, byte for byte -- is in the file more
      often than in the merge commit's own file: the pre-image restored where it was, so undone,
      not churn (a lone common line such as `return True` back elsewhere is not evidence). Listed for a look, not failures (stripped
      matching finds the same words anywhere in the file, e.g. an import moved under
      `if TYPE_CHECKING:` by a rewrite): `pre_image_back_reindented`, the same with indentation
      ignored; `reindented_only`, most of its worded lines are there only with other indentation;
    - a hunk whose file is not at main under its path (renamed since) is counted, not judged."""
    tip = v.commits.upstream_base_sha or v.commits.fork_sha
    wanted = [h for h in v.hunks if h.state in ("present", "present-after-churn") and h.kind == "text"
              and by_id.get(h.id) is not None and by_id[h.id].kind == "text"]
    merge = v.commits.merge_commit
    blobs = repo.read_objects([f"{rev}:{p}" for p in sorted({h.path for h in wanted}) for rev in (tip, merge)])
    counts = {"judged": 0, "agree": 0, "not_at_main_path": 0, "reindented_only": [], "pre_image_back_reindented": [], "disagree": []}
    for h in wanted:
        ph = by_id[h.id]
        got = blobs.get(f"{tip}:{h.path}")
        if got is None:
            counts["not_at_main_path"] += 1
            continue
        text = got[1].split(b"\n")
        have, flat = set(text), [line.strip() for line in text]
        own = [line for line in ph.added_lines() if line.strip() and line not in set(ph.pre_image())]
        if not own:
            continue
        counts["judged"] += 1
        left = [line for line in own if line in have]
        if h.state == "present" and len(left) < len(own):
            counts["disagree"].append(f"hunk {h.id} ({h.path}) present, but {len(own) - len(left)} of its {len(own)} added lines "
                                      f"are not in upstream main's file")
            continue
        worded_left = [line for line in left if re.search(rb"\w", line)]
        if h.state == "present-after-churn" and not worded_left:
            then = ((blobs.get(f"{merge}:{h.path}") or ("", b""))[1]).split(b"\n")
            runs = _removed_runs(ph)
            pre = ph.pre_image()
            if runs and _count(text, pre) > _count(then, pre):  # back where it was, context and indentation and all
                counts["disagree"].append(f"hunk {h.id} ({h.path}) present after churn, but none of its added lines is in upstream "
                                          f"main's file and its whole pre-image (context and removed lines) is back there, byte for byte: undone")
                continue
            stripped = set(flat)
            worded = [line.strip() for line in own if re.search(rb"\w", line)]
            runs_s = [[x.strip() for x in r] for r in runs]
            then_s = [line.strip() for line in then]
            if runs_s and not any(line in stripped for line in worded) and all(_count(flat, r) > _count(then_s, r) for r in runs_s):
                counts["pre_image_back_reindented"].append(f"{h.id} {h.path}")
            elif worded and 2 * sum(1 for line in worded if line in stripped) >= len(worded):
                counts["reindented_only"].append(f"{h.id} {h.path}")
        counts["agree"] += 1
    return counts


def _count(hay: list[bytes], run: list[bytes]) -> int:
    return sum(1 for i in range(len(hay) - len(run) + 1) if hay[i:i + len(run)] == run)


def _removed_runs(h) -> list[list[bytes]]:
    """The runs of non-blank lines the hunk removed (read from the hunk itself, not from porttrack's trail)."""
    runs: list[list[bytes]] = [[]]
    for marker, content in h._lines():
        if marker == b"-":
            runs[-1].append(content)
        elif marker != b"\\" and runs[-1]:
            runs.append([])
    return [r for r in runs if r and any(x.strip() for x in r)]


def touches_through(repo: Path, merge: str, commit: str, added: list[bytes]) -> str | None:
    """The lines were rewritten before `commit` undid them: an earlier first-parent commit X after
    the merge that removed one of the hunk's `added` lines (`git log -S`, git's pickaxe), whose own
    added lines `commit` removes. X, or None."""
    def changed(sha: str, sign: bytes) -> set[bytes]:
        diff = subprocess.run(["git", "-C", str(repo), "diff", "-U0", "--no-renames", f"{sha}^", sha], capture_output=True, check=True).stdout
        return {line[1:].strip() for line in diff.split(b"\n") if line.startswith(sign) and not line.startswith(sign * 3)} - {b""}

    gone = changed(commit, b"-")
    wanted = sorted({line.strip() for line in added if len(line.strip()) > 3})[:3]
    for line in wanted:
        found = subprocess.run(["git", "-C", str(repo), "log", "--first-parent", "--format=%H", "-S", line.decode("utf-8", "replace"),
                                f"{merge}..{commit}^"], capture_output=True).stdout.decode().split()
        for x in found:
            if changed(x, b"+") & gone:
                return x
    return None


def as_text(result: dict) -> str:
    """The result as JSON, one merge a line (a reviewable diff between runs)."""
    rows = ",\n".join("  " + json.dumps(r, separators=(",", ":")) for r in result["merges"])
    return json.dumps({**result, "merges": []}, indent=1).replace('"merges": []', '"merges": [\n' + rows + "\n ]") + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--history", type=Path, default=os.environ.get("PORTTRACK_VLLM_HISTORY"))
    ap.add_argument("--since", default="2026-05-17T00:00:00Z")
    ap.add_argument("--until", default="2026-08-17T23:59:59Z")
    ap.add_argument("--limit", type=int, help="check only the newest N merges (a quick look)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (each with its own git reader)")
    args = ap.parse_args()
    if args.history is None or not Path(args.history).exists():
        raise SystemExit("give the vLLM history with --history or PORTTRACK_VLLM_HISTORY")
    history = Path(args.history).resolve()
    with tempfile.TemporaryDirectory(prefix="porttrack-proof-") as tmp, isolated_environ(Path(tmp) / "home"):
        tip = git(history, "rev-parse", "refs/heads/main")
        world = {"history": "upstream vLLM main (real history)", "tip": tip, "tip_date": git(history, "log", "-1", "--format=%cI", tip),
                 "commits": int(git(history, "rev-list", "--count", tip)), "window": [args.since, args.until]}
        print(f"history: {world['history']}, tip {tip[:12]} of {world['tip_date']}, {world['commits']} commits; "
              f"window {args.since} .. {args.until}", flush=True)
        merges = merges_in_window(history, args.since, args.until)
        if args.limit:
            merges = merges[-args.limit:]
        reverted = reverted_prs(history, merges)
        fork = make_fork(history, Path(tmp) / "fork", main=tip)
        git(fork, "commit-graph", "write", "--reachable", "--changed-paths", "--no-progress")
        line = git(fork, "rev-list", "--first-parent", "--reverse", tip).split()
        after = set(line)
        order = {sha: i for i, sha in enumerate(line)}
        print(f"{len(merges)} squash merges touching Python; {len(reverted)} of them reverted upstream later", flush=True)
        rows: list[dict] = []
        failures: list[str] = []
        verdicts: Counter = Counter()
        states: Counter = Counter()
        t0 = time.perf_counter()
        _CTX.update(fork=fork, reverted=reverted, after=after, order=order)
        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            for k, (row, found, hunk_states) in enumerate(pool.imap(check_one, merges, chunksize=4)):
                rows.append(row)
                verdicts[row["verdict"]] += 1
                states.update(hunk_states)
                for item in found:
                    print(f"  FAIL {item}", flush=True)
                failures += found
                if (k + 1) % 100 == 0:
                    print(f"  {k + 1}/{len(merges)} in {time.perf_counter() - t0:.0f}s: {dict(verdicts)}; failures {len(failures)}", flush=True)
        took = time.perf_counter() - t0
        result = {"schema": "porttrack/proof-upstream-main-converged/v1", "world": world,
                  "checked": len(rows), "verdicts": dict(verdicts), "hunk_states": dict(states),
                  "reverted_upstream": {str(pr): sha for pr, sha in reverted.items()},
                  "failures": list(failures), "seconds": round(took, 1), "merges": rows}
        print(f"checked {len(rows)} merges in {took:.0f}s: verdicts {dict(verdicts)}; hunks {dict(states)}")
        print(f"reverted upstream: {len(reverted)}; their verdicts: "
              f"{dict(Counter(r['verdict'] for r in rows if r.get('reverted_by')))}; converged after a re-land: "
              f"{sum(1 for r in rows if r.get('relanded'))}")
        gt = Counter()
        for r in rows:
            gt.update(r.get("ground_truth_counts", {}))
        result["ground_truth"] = {**dict(gt), "disagreements": sum(len(r.get("ground_truth", {}).get("disagree", [])) for r in rows)}
        print(f"ground truth (upstream main's files, byte for byte) on present / present-after-churn hunks: {result['ground_truth']}")
        print("failures: " + ("\n  " + "\n  ".join(failures) if failures else "none"))
        if args.json:
            args.json.write_text(as_text(result))
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
