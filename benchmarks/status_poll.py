#!/usr/bin/env python3
"""How much a `porttrack status` poll costs: wall time and requests, cold and warm.

Runs the real CLI as a subprocess against the GitHub emulator on loopback with injected latency
(default 100 ms per request), for 4 and for 100 tracked PRs, with no fork checkout (API only).
Prints medians over --repeat runs, the number of round trips on the critical path (the wall time
at the given latency minus the wall time of the same poll at 0 ms, divided by the latency), and the
median time of `porttrack --help`.

Targets (issue 2): cold poll <= 1 request per PR; warm poll 0 non-conditional requests; 4 PRs
within 3 round trips plus start-up (start-up = the same poll against a 0 ms emulator);
`--help` <= 150 ms median.

    python benchmarks/status_poll.py [--latency 0.1] [--repeat 5]
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
from testing.workspace import make_workspace, track  # noqa: E402

UPSTREAM = "vllm-project/vllm"


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return elapsed, proc


def bench_poll(n_prs: int, latency: float, repeat: int) -> dict[str, float]:
    """Cold (no ETags) and warm (ETags stored) polls, each run against the same emulator with no
    added latency and with `latency`: the difference divided by the latency is the number of
    round trips on the critical path; the zero-latency run is the command's own cost."""
    times: dict[tuple[str, float], list[float]] = {}
    cold_req = warm_req = warm_unconditional = 0
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
                    env = ws.env()
                    cmd = [sys.executable, "-m", "porttrack", "status"]
                    fake.clear_log()
                    t, _ = timed(cmd, env, ws.root)
                    times.setdefault(("cold", lat), []).append(t)
                    cold_req = len(fake.log)
                    fake.clear_log()
                    t, _ = timed(cmd, env, ws.root)
                    times.setdefault(("warm", lat), []).append(t)
                    warm_req = len(fake.log)
                    warm_unconditional = sum(1 for r in fake.log if not (r.conditional and r.status == 304))
                    t, _ = timed(cmd + ["--offline"], env, ws.root)
                    times.setdefault(("offline", lat), []).append(t)
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
    med = {key: statistics.median(values) for key, values in times.items()}
    return {
        "prs": n_prs,
        "cold_s": med[("cold", latency)],
        "warm_s": med[("warm", latency)],
        "cold0_s": med[("cold", 0.0)],
        "offline_s": med[("offline", 0.0)],
        "cold_round_trips": (med[("cold", latency)] - med[("cold", 0.0)]) / latency,
        "warm_round_trips": (med[("warm", latency)] - med[("warm", 0.0)]) / latency,
        "cold_requests": cold_req,
        "warm_requests": warm_req,
        "warm_unconditional": warm_unconditional,
    }


def bench_help(repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t, _ = timed([sys.executable, "-m", "porttrack", "--help"], {**_env()}, ROOT)
        times.append(t)
    return statistics.median(times)


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(ROOT)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.1, help="seconds added to every request")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"porttrack status poll, emulator latency {args.latency * 1000:.0f} ms, median of {args.repeat}")
    print(f"{'PRs':>5} {'cold s':>8} {'warm s':>8} {'cold@0ms s':>11} {'offline s':>10} {'cold RTs':>9} {'warm RTs':>9} {'cold req':>9} {'warm req':>9} {'warm non-304':>13}")
    for n in (4, 100):
        r = bench_poll(n, args.latency, args.repeat)
        print(
            f"{r['prs']:>5} {r['cold_s']:>8.3f} {r['warm_s']:>8.3f} {r['cold0_s']:>11.3f} {r['offline_s']:>10.3f} "
            f"{r['cold_round_trips']:>9.1f} {r['warm_round_trips']:>9.1f} {r['cold_requests']:>9} {r['warm_requests']:>9} {r['warm_unconditional']:>13}"
        )
    print("RTs = (wall at the given latency - wall at 0 ms) / latency: round trips on the critical path")
    print(f"porttrack --help: median {bench_help(max(args.repeat, 15)) * 1000:.0f} ms (15+ runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
