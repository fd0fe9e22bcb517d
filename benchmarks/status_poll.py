#!/usr/bin/env python3
"""How much a `porttrack status` poll costs: wall time, round trips, requests and rate-limit
points, cold and warm.

Runs the real CLI as a subprocess against the GitHub emulator on loopback with injected latency
(default 100 ms per request), for 4, 100 and 500 tracked PRs, with no fork checkout (API only),
once as porttrack chooses (`PORTTRACK_GRAPHQL=auto`: GraphQL past one wave of 8 REST requests)
and once REST only (`never`). Prints, over --repeat runs, the number of round trips on the critical
path two ways:
  counted  from the emulator's log: the longest chain of requests each sent after the previous one
           was answered (exact, and independent of the machine's load);
  timed    (wall at the given latency - wall of the same poll at 0 ms, run right before it) / the
           latency, per pair of runs, shown as median [min..max]: under load the 0 ms run can be
           the slower one, which a single subtraction of medians once printed as -3.9 round trips;
           a spread wider than one round trip says the timing cannot tell.
Also the requests the emulator logged, and the points it took from the token's REST core budget
and from its GraphQL budget (the emulator's own accounting: a 304 costs no core point, a GraphQL
query of up to 100 PRs 1 point); wall times as median [min..max]; the median time of `porttrack --help`.

The weekly ritual (issue 24, `--ritual`): the workspace of testing/weekly_budget.py (5 tracked PRs,
one closed without merging, one queued patch, ~270 open upstream PRs), no token, GitHub's rule of
60 requests an hour: `status`, `report weekly --dry-run`, `report weekly --post` cold (the
workspace's `.porttrack/etags.json` removed, a fresh hour) and then warm (the same hour, nothing
changed upstream). Counted = requests answered other than 304 (what costs rate limit).
Targets: cold `status` <= 2.0 s, warm <= 1.0 s at 100 ms; <= 20 counted cold, <= 3 warm.

Targets: issue 2: cold poll <= 1 request per PR; 4 PRs within 3 round trips plus start-up;
`--help` <= 150 ms median. Issue 15: 100 PRs in at most 3 round trips cold and warm, and a warm
poll costing at most 1 point per 100 PRs.

    python benchmarks/status_poll.py [--latency 0.1] [--repeat 5] [--prs 4,100,500] [--modes auto,never] [--ritual]
    python benchmarks/status_poll.py --week 244 [--latency 0.1] [--repeat 5]   (issue 32: cold <= 2.0 s, warm <= 1.0 s)
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from testing.github_emulator import DEFAULT_TOKEN, running_emulator  # noqa: E402
from testing.weekly_budget import critical_path  # noqa: E402
from testing.workspace import make_workspace, track  # noqa: E402

UPSTREAM = "vllm-project/vllm"


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return elapsed, proc


def spread(xs: list[float], fmt: str = "{:.3f}") -> str:
    return f"{fmt.format(statistics.median(xs))} [{fmt.format(min(xs))}..{fmt.format(max(xs))}]"


def bench_poll(n_prs: int, latency: float, repeat: int, mode: str) -> dict:
    """Cold (no ETags or fingerprints kept) and warm polls, each run against the same emulator
    with no added latency and then with `latency`, in pairs: per pair, the difference divided by
    the latency estimates the round trips on the critical path; the emulator's log counts them."""
    times: dict[tuple[str, float], list[float]] = {}
    counted: dict[str, list[int]] = {"cold": [], "warm": []}
    cost: dict[str, dict[str, int]] = {}
    with running_emulator(latency_s=0.0) as fake:
        fake.add_repo(UPSTREAM, default_branch="main")
        for n in range(1, n_prs + 1):
            fake.put_pull(UPSTREAM, 1000 + n, title=f"PR {n}", head_sha=f"{n:040x}")
        tracks = {f"t{i}": track([1000 + i], f"track {i}") for i in range(1, n_prs + 1)}
        for _ in range(repeat):
            for lat in (0.0, latency):
                fake.latency_s = lat
                tmp = Path(tempfile.mkdtemp(prefix="porttrack-bench-"))
                try:
                    ws = make_workspace(tmp / "ws", tracks, api_url=fake.base_url, token=DEFAULT_TOKEN)
                    env = {**ws.env(), "PORTTRACK_GRAPHQL": mode}
                    for poll in ("cold", "warm"):
                        t, cost[poll] = measured(fake, [sys.executable, "-m", "porttrack", "status"], env, ws.root)
                        times.setdefault((poll, lat), []).append(t)
                        if lat:
                            counted[poll].append(critical_path(fake.log))
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
    result: dict = {"prs": n_prs, "cold0_s": spread(times[("cold", 0.0)])}
    for poll in ("cold", "warm"):
        result[f"{poll}_s"] = spread(times[(poll, latency)])
        pairs = [(slow - fast) / latency for slow, fast in zip(times[(poll, latency)], times[(poll, 0.0)])]
        result[f"{poll}_timed"] = spread(pairs, "{:.1f}")
        result[f"{poll}_noisy"] = max(pairs) - min(pairs) > 1
        result[f"{poll}_counted"] = spread([float(c) for c in counted[poll]], "{:.0f}")
        result.update({f"{poll}_{k}": v for k, v in cost[poll].items()})
    return result


def measured(fake, cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, dict[str, int]]:
    """One run, and what it cost by the emulator's accounting (both budgets refilled first, so
    repeated 500-PR REST polls never run into the hourly limit)."""
    fake.set_rate_limit(DEFAULT_TOKEN, remaining=5000)
    fake.set_graphql_rate_limit(DEFAULT_TOKEN, remaining=5000)
    fake.clear_log()
    t, _ = timed(cmd, env, cwd)
    return t, {"requests": len(fake.log),
               "rest_points": 5000 - fake.rate_limit(DEFAULT_TOKEN)["remaining"],
               "graphql_points": 5000 - fake.graphql_rate_limit(DEFAULT_TOKEN)["remaining"]}


RITUAL = (("status",), ("report", "weekly", "--dry-run"), ("report", "weekly", "--post"))


def bench_ritual(latency: float, repeat: int) -> None:
    import os

    from testing.gitfixtures import isolated_git_env
    from testing.weekly_budget import build, counted

    tmp = Path(tempfile.mkdtemp(prefix="porttrack-ritual-"))
    saved = dict(os.environ)
    os.environ.update(isolated_git_env(tmp / "home"))
    rows: dict[tuple[str, str], dict[str, list[float]]] = {}
    try:
        with running_emulator(latency_s=0.0) as fake:
            ws, _world = build(tmp, fake)
            fake.latency_s = latency
            for _ in range(repeat):
                (ws.root / ".porttrack" / "etags.json").unlink(missing_ok=True)
                fake.set_anonymous_rate_limit(remaining=60)
                for poll in ("cold", "warm"):
                    for args in RITUAL:
                        fake.clear_log()
                        started = time.perf_counter()
                        proc = ws.run(*args)
                        elapsed = time.perf_counter() - started
                        if proc.returncode not in (0, 3):
                            raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
                        row = rows.setdefault((poll, " ".join(args)), {"s": [], "counted": [], "sent": [], "rts": []})
                        row["s"].append(elapsed)
                        row["counted"].append(counted(fake))
                        row["sent"].append(len(fake.log))
                        row["rts"].append(critical_path(fake.log))
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nweekly ritual, no token, 5 tracked PRs (1 orphan), ~270 open upstream PRs, {latency * 1000:.0f} ms, "
          f"{repeat} repeats: median [min..max]")
    print(f"{'run':>5} {'command':>28} {'wall s':>20} {'counted':>12} {'sent':>12} {'RTs counted':>12}")
    for (poll, command), row in rows.items():
        print(f"{poll:>5} {command:>28} {spread(row['s']):>20} {spread(row['counted'], '{:.0f}'):>12} "
              f"{spread(row['sent'], '{:.0f}'):>12} {spread(row['rts'], '{:.0f}'):>12}")
    for poll in ("cold", "warm"):
        totals = [sum(rows[(poll, ' '.join(a))]["counted"][i] for a in RITUAL) for i in range(repeat)]
        print(f"{poll} ritual, counted requests in all: {spread(totals, '{:.0f}')}")


def bench_week_latency(latency: float, repeat: int, open_prs: int) -> dict:
    """Issue 32, item 4: `status` with a token at `latency` over the weekly world (5 tracked PRs,
    one orphaned with a successor, one queued patch, `open_prs` open upstream PRs with real heads):
    cold (no ETags, no collision cache, no open-PR head in the checkout) and warm (nothing moved)
    runs interleaved, `repeat` of each; medians. Goals: cold <= 2.0 s, warm <= 1.0 s."""
    import os

    from testing.gitfixtures import git, isolated_git_env
    from testing.weekly_budget import build

    tmp = Path(tempfile.mkdtemp(prefix="porttrack-week-"))
    saved = dict(os.environ)
    os.environ.update(isolated_git_env(tmp / "home"))
    times: dict[str, list[float]] = {"cold": [], "warm": []}
    rts: dict[str, list[int]] = {"cold": [], "warm": []}
    try:
        with running_emulator(latency_s=0.0) as fake:
            ws, world = build(tmp, fake, open_prs=open_prs)
            env = {k: v for k, v in ws.env().items() if k != "PYTHONDONTWRITEBYTECODE"}
            env.update(GITHUB_TOKEN=DEFAULT_TOKEN, PYTHONPYCACHEPREFIX=str(tmp / "pycache"))
            timed([sys.executable, "-m", "porttrack", "status"], env, ws.root)  # bytecode compiled, state recorded
            fake.latency_s = latency
            for _ in range(repeat):
                for poll in ("cold", "warm"):
                    if poll == "cold":
                        for name in ("etags.json", "collisions.json"):
                            (ws.root / ".porttrack" / name).unlink(missing_ok=True)
                        refs = git(world.fork, "for-each-ref", "--format=%(refname)", "refs/porttrack/open/").split()
                        if refs:
                            git(world.fork, "update-ref", "--stdin", input="".join(f"delete {r}\n" for r in refs).encode())
                    fake.clear_log()
                    t, _ = timed([sys.executable, "-m", "porttrack", "status"], env, ws.root)
                    times[poll].append(t)
                    rts[poll].append(critical_path(fake.log))
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nstatus with a token, {open_prs} open upstream PRs (git heads), {latency * 1000:.0f} ms a request, "
          f"{repeat} interleaved cold/warm runs: median [min..max]; load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for poll in ("cold", "warm"):
        print(f"{poll:>5}: {spread(times[poll])} s, round trips (counted) {spread([float(x) for x in rts[poll]], '{:.0f}')}")
    return {"world": "generated (testing/weekly_budget.py), GitHub emulator on loopback", "open_prs": open_prs,
            "latency_s": latency, "repeat": repeat, "load": os.getloadavg(), "cpus": os.cpu_count(),
            **{f"{poll}_s": {"median": statistics.median(times[poll]), "min": min(times[poll]), "max": max(times[poll]),
                             "runs": times[poll]} for poll in times},
            **{f"{poll}_round_trips": rts[poll] for poll in rts}}


def bench_help(repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        t, _ = timed([sys.executable, "-m", "porttrack", "--help"], {**_env()}, ROOT)
        times.append(t)
    return times


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(ROOT)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.1, help="seconds added to every request")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--prs", default="4,100,500", help="tracked PR counts, comma-separated")
    parser.add_argument("--modes", default="auto,never", help="PORTTRACK_GRAPHQL values to measure")
    parser.add_argument("--ritual", action="store_true", help="measure only the tokenless weekly ritual (issue 24)")
    parser.add_argument("--week", type=int, metavar="OPEN_PRS", default=0,
                        help="measure only status cold/warm, interleaved, over the weekly world with this many open PRs (issue 32)")
    parser.add_argument("--json", metavar="FILE", help="with --week: also write the figures as JSON")
    args = parser.parse_args()
    import os

    if args.week:
        data = bench_week_latency(args.latency, args.repeat, args.week)
        if args.json:
            import json

            Path(args.json).write_text(json.dumps(data, indent=1) + "\n")
        return 0

    if args.ritual:
        bench_ritual(args.latency, args.repeat)
        return 0

    print(f"porttrack status poll, emulator latency {args.latency * 1000:.0f} ms, {args.repeat} repeats: median [min..max]")
    print(f"machine: {os.cpu_count()} cpus, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    columns = ("PRs", "mode", "cold s", "warm s", "cold@0ms s", "cold RTs counted", "cold RTs timed",
               "warm RTs counted", "warm RTs timed", "cold req", "warm req",
               "cold REST pts", "warm REST pts", "cold GQL pts", "warm GQL pts")
    print(" ".join(f"{c:>{max(len(c), 5)}}" for c in columns))
    for n in (int(x) for x in args.prs.split(",")):
        for mode in args.modes.split(","):
            r = bench_poll(n, args.latency, args.repeat, mode)
            cells = (r["prs"], mode, r["cold_s"], r["warm_s"], r["cold0_s"],
                     r["cold_counted"], r["cold_timed"] + ("!" if r["cold_noisy"] else ""),
                     r["warm_counted"], r["warm_timed"] + ("!" if r["warm_noisy"] else ""), r["cold_requests"], r["warm_requests"],
                     r["cold_rest_points"], r["warm_rest_points"], r["cold_graphql_points"], r["warm_graphql_points"])
            print(" ".join(f"{c!s:>{max(len(h), 5)}}" for c, h in zip(cells, columns)), flush=True)
    print("RTs counted: the longest chain of requests each sent after the previous was answered (emulator log)")
    print("RTs timed: (wall at the given latency - wall at 0 ms) / latency, per pair of runs; '!': spread > 1 round trip, the timing cannot tell")
    print("points: taken from the emulator's REST core budget and its GraphQL budget (requests/points of the last run)")
    bench_ritual(args.latency, args.repeat)
    helps = bench_help(max(args.repeat, 15))
    print(f"porttrack --help: {spread([t * 1000 for t in helps], '{:.0f}')} ms ({len(helps)} runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
