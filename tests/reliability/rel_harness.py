"""What every reliability case stands on: a full rig (upstream + emulator + fork + workspace with
gated tracks), CLI runners that remember what they printed (for the secrets check), snapshots of
the workspace and the fork, and the tally the figures table is made from.

Kept in one flat module (no package) so the conftest and the test modules share one `TALLY`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from testing.gitfixtures import git
from testing.github_emulator import DEFAULT_TOKEN, READONLY_TOKEN
from testing.text import edit, numbered
from testing.workspace import TOKEN, TestWorkspace, make_workspace, track

REPO_ROOT = Path(__file__).resolve().parents[2]
FULL = os.environ.get("PORTTRACK_FULL") == "1"
SECRETS = (TOKEN, DEFAULT_TOKEN, READONLY_TOKEN)
FORK_REPO = "randomvariable/vllm"
UPSTREAM_REPO = "vllm-project/vllm"
LABELS = ["porttrack", "weekly-status"]
SEED = int(os.environ.get("PORTTRACK_RELIABILITY_SEED") or 20261130)

# -- the tally (figures) ---------------------------------------------------------------------------

CATEGORIES = {
    "github-faults": "GitHub faults (5xx, rate limits, 429, timeouts, resets, bad JSON, pagination)",
    "crash": "SIGKILL at random points and checkpoints",
    "concurrency": "two processes on one workspace",
    "hostile-yaml": "malformed tracks.yaml",
    "hostile-diffs": "hostile diffs through import/apply",
    "hostile-metadata": "hostile PR metadata through status/report",
    "hostile-results": "hostile results files through gate run",
    "hostile-workspace": "hostile commits to the workspace repository (paths, symlinks, temp files)",
    "secrets": "token never printed, logged, recorded or posted",
    "regressions": "regression tests of defects found",
}
TALLY: dict[str, dict[str, int]] = {c: {"tried": 0, "passed": 0, "failed": 0} for c in CATEGORIES}
FAILURES: list[str] = []
KILLS: dict[str, int] = {}  # crash cases where the process was still running when SIGKILL arrived


def record(category: str, ok: bool, name: str = "") -> None:
    row = TALLY.setdefault(category, {"tried": 0, "passed": 0, "failed": 0})
    row["tried"] += 1
    row["passed" if ok else "failed"] += 1
    if not ok:
        FAILURES.append(f"{category}: {name}")


class Cases:
    """Sub-cases of one test: each is tallied on its own; `done()` fails the test if any failed."""

    def __init__(self, category: str):
        self.category = category
        self.count = 0
        self.failures: list[str] = []

    @contextlib.contextmanager
    def case(self, name: str) -> Iterator[None]:
        self.count += 1
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - a sub-case's failure is reported, the rest go on
            self.failures.append(f"[{name}] {type(exc).__name__}: {exc}")
            record(self.category, False, name)
        else:
            record(self.category, True, name)

    def done(self) -> None:
        if self.failures:
            pytest.fail(f"{len(self.failures)} of {self.count} cases failed:\n" + "\n".join(self.failures[:30]), pytrace=False)


# -- what porttrack printed (scanned for tokens after every test) --------------------------------

SEEN: list[str] = []


def leaks(texts: list[str]) -> list[str]:
    return [f"{secret[:12]}… in {text[:160]!r}" for text in texts for secret in SECRETS if secret in text]


# -- running the CLI -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str

    @property
    def errors(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("porttrack: error:")]

    def json(self) -> Any:
        return json.loads(self.stdout)


def cli(handle: TestWorkspace, *args: str, **env: str | None) -> Result:
    """In-process (the same entry point and error boundary as the console script)."""
    out = handle.run_in_process(*args, env=handle.env(**env))
    SEEN.extend([out.stdout, out.stderr])
    return Result(out.returncode, out.stdout, out.stderr)


def sub(handle: TestWorkspace, *args: str, timeout: float = 180, **env: str | None) -> Result:
    """As a user runs it: a separate process."""
    proc = handle.run(*args, env=handle.env(**env), timeout=timeout)
    SEEN.extend([proc.stdout, proc.stderr])
    return Result(proc.returncode, proc.stdout, proc.stderr)


def popen(handle: TestWorkspace, *args: str, **env: str | None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "porttrack", *args], cwd=handle.root, env=handle.env(**env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen, timeout: float = 120) -> Result:
    out, err = proc.communicate(timeout=timeout)
    SEEN.extend([out, err])
    return Result(proc.returncode, out, err)


def wait_for_pause(proc: subprocess.Popen, point: str, timeout: float = 90) -> str:
    """Read stderr until the process says it paused at `point`; the lines read so far."""
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        seen.append(line)
        if "porttrack-test: paused at" in line:
            return "".join(seen)
        if not line and proc.poll() is not None:
            rest = proc.stdout.read() if proc.stdout else ""
            SEEN.extend(seen + [rest])
            raise AssertionError(f"exited {proc.returncode} before reaching {point}: {''.join(seen)[-800:]}")
    raise AssertionError(f"never reached {point}")


def kill(proc: subprocess.Popen) -> bool:
    """SIGKILL; True when the process was still running (a real kill point)."""
    alive = proc.poll() is None
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    SEEN.extend([out or "", err or ""])
    return alive


# -- snapshots -----------------------------------------------------------------------------------

def files_under(root: Path, *, skip_parts: tuple[str, ...] = ()) -> dict[str, bytes]:
    if not root.exists():
        return {}
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not any(part in skip_parts for part in p.relative_to(root).parts):
            out[p.relative_to(root).as_posix()] = p.read_bytes()
    return out


def digest(root: Path, *subdirs: str, skip_parts: tuple[str, ...] = ()) -> str:
    """One hash of every file under root/<subdir> (names and contents)."""
    h = hashlib.sha256()
    for sub_ in subdirs:
        for name, data in files_under(root / sub_, skip_parts=skip_parts).items():
            h.update(f"{sub_}/{name}\0{len(data)}\0".encode() + data)
    return h.hexdigest()


def fork_refs(fork: Path) -> dict[str, str]:
    """The fork's branches, remote-tracking refs and tags (refname -> object)."""
    refs = git(fork, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/remotes", "refs/tags")
    return dict(line.split(" ", 1) for line in refs.splitlines()) if refs else {}


def fork_state(fork: Path) -> dict[str, Any]:
    """What a porttrack run must leave unchanged or fully updated in the fork checkout
    (porttrack's own refs/porttrack/* and scratch folders under .git/porttrack are not part of it)."""
    index = fork / ".git" / "index"
    return {
        "HEAD": (fork / ".git" / "HEAD").read_text(),
        "head_sha": git(fork, "rev-parse", "HEAD"),
        "refs": fork_refs(fork),
        "index": hashlib.sha256(index.read_bytes()).hexdigest() if index.exists() else None,
        "status": git(fork, "status", "--porcelain=v1", "--untracked-files=all", "--ignored"),
    }


def outside(paths: list[Path]) -> dict[str, list[str]]:
    """Names in the folders around the workspace and the fork (a write that escaped shows here)."""
    return {str(p): sorted(os.listdir(p)) for p in paths if p.is_dir()}


def temp_leftovers(root: Path) -> list[str]:
    return [p.relative_to(root).as_posix() for p in root.rglob("*.tmp") if ".git" not in p.parts]


# -- the rig -------------------------------------------------------------------------------------


A, B, C = numbered("a", 100), numbered("b", 60), numbered("c", 40)
MODELS = {
    "GLM-5.2": {"drafters": ["native-mtp"], "attention": "sparse-mla", "quantization": "fp8",
                "backends": {"sm_121a": "FLASHMLA_SPARSE", "gfx1151": "ROCM_AITER_MLA_SPARSE"}},
}
WORKFLOW = {"file": "porttrack-gate.yml", "ref": "main", "artifact": "porttrack-results"}
SCENARIO = {"cells": {"models": ["GLM-5.2"], "contexts": [1024], "batches": [1], "phases": ["cold", "warm"]},
            "reference_backend": "TRITON_MLA",
            "metrics": {"candidate": {"ttft_ms": 100.0}, "baseline": {"ttft_ms": 100.0}},
            "numerics": {"max_abs_err": 0.002, "max_rel_err": 0.01}, "graph_replays": 12,
            "jit_compiles_after_warmup": 0}


def job_command(scenario: str = "scenario.json") -> str:
    return f"{sys.executable} -m testing.scenario_job --scenario {scenario} --results {{results}} --target {{target}} --ref {{ref}}"


def gate_doc(kind: str = "command", command: str | None = None) -> dict[str, Any]:
    job = {"workflow": WORKFLOW} if kind == "workflow" else {"command": command or job_command()}
    return {
        "job": {**job, "timeout_s": 60},
        "matrix": {"models": "eligible", "contexts": [1024], "batches": [1]},
        "reference_backend": "TRITON_MLA",
        "tolerance": {"abs": 0.01, "rel": 0.05},
        "metrics": [{"name": "ttft_ms", "unit": "ms", "direction": "lower", "allowed_regression_pct": 5.0, "key": True}],
        "phases": ["cold", "warm"],
        "graph_replay": "required",
        "no_jit_after_warmup": "required",
    }


FAST_NET = {"PORTTRACK_HTTP_BACKOFF": "0.01", "PORTTRACK_HTTP_TIMEOUT": "1", "PORTTRACK_HTTP_ATTEMPTS": "3",
            "PORTTRACK_RATE_LIMIT_MAX_WAIT": "3", "PORTTRACK_ACTOR": "tester"}


class Rig:
    """Upstream (git + emulator) with PRs 101 (a.py), 102 (b.py) and 103 (c.py, squash-merged, the
    fork rebased onto it); a fork checkout; a workspace tracking them in tracks alpha (101, gated),
    beta (102, gated) and gamma (103), with the state of one live `status` recorded.

    `gate` is "command" (the example job, run locally) or "workflow" (dispatched to the
    emulator's Actions, whose runner runs the example job in-process)."""

    def __init__(self, tmp_path: Path, world, *, gate: str = "command", status: bool = True,
                 tracks: dict[str, Any] | None = None, extra_env: Mapping[str, str] | None = None):
        self.tmp, self.world, self.fake = tmp_path, world, world.fake
        self.fork = world.fork
        up = world.upstream
        up.commit({"a.py": A, "b.py": B, "c.py": C, "README.md": "upstream project\n"}, "project files")
        git(self.fork, "pull", "-q", "--ff-only", "upstream", "main")
        world.open_pr(101, {"a.py": edit(A, {10: "a_10 = 'ten'", 50: "a_50 = 'fifty'"})}, "Warm the spec-decode kernels")
        world.open_pr(102, {"b.py": edit(B, {30: "b_30 = 'thirty'"})}, "Fuse the AR speculator graph")
        world.open_pr(103, {"c.py": edit(C, {5: "c_5 = 'five'"})}, "Skip the sparse indexer for short prefills")
        self.merge_103 = world.squash_merge(103)
        world.rebase_fork()
        gate_ = gate_doc(gate)
        self.tracks = tracks or {
            "alpha": track([101], "spec-decode warmup", requires={"attention": ["sparse-mla"]}, gate=gate_),
            "beta": track([102], "fused AR graph", requires={"drafter": ["native-mtp"]}, gate=gate_),
            "gamma": track([103], "sparse indexer skip"),
        }
        self.handle = make_workspace(tmp_path / "ws", self.tracks, api_url=self.fake.base_url, fork=self.fork,
                                     token=world.token, models=MODELS)
        self.handle.extra_env.update({**FAST_NET, **(extra_env or {})})
        self.root = self.handle.root
        (self.root / "scenario.json").write_text(json.dumps(SCENARIO), encoding="utf-8")
        if gate == "workflow":
            self.add_workflow()
        self.snapshots = tmp_path / "snapshots"
        if status:
            self.ok("status", "--json")

    # -- running
    def cli(self, *args: str, **env: str | None) -> Result:
        return cli(self.handle, *args, **env)

    def sub(self, *args: str, **env: str | None) -> Result:
        return sub(self.handle, *args, **env)

    def popen(self, *args: str, **env: str | None) -> subprocess.Popen:
        return popen(self.handle, *args, **env)

    def ok(self, *args: str, codes: tuple[int, ...] = (0,), **env: str | None) -> Result:
        out = self.cli(*args, **env)
        assert out.returncode in codes, f"porttrack {' '.join(args)} exited {out.returncode}: {out.stderr[-1500:]}"
        return out

    # -- GitHub Actions
    def add_workflow(self) -> None:
        import yaml

        doc = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "porttrack-gate.yml").read_text())
        trigger = doc.get("on") or doc.get(True)
        self.fake.add_workflow(FORK_REPO, "porttrack-gate.yml", inputs=list(trigger["workflow_dispatch"]["inputs"]),
                               run_name=doc["run-name"])
        scenario = dict(SCENARIO)

        def runner(repo, file, ref, inputs):
            from testing.scenario_job import build

            context = json.loads(inputs["context"])
            env = {f"PORTTRACK_{k.upper()}": (json.dumps(v) if k == "patch_set" else str(v)) for k, v in context.items()}
            return {"artifacts": {"porttrack-results": {"results.json": build(scenario, env).to_json()}}, "polls": (1, 1)}

        self.fake.on_dispatch = runner

    # -- state
    def digest(self, *subdirs: str, skip_parts: tuple[str, ...] = ()) -> str:
        return digest(self.root, *(subdirs or ("state", "patches", "reports")), skip_parts=skip_parts)

    def save(self, name: str) -> None:
        dest = self.snapshots / name
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(self.root, dest / "ws", symlinks=True)
        (dest / "refs.json").write_text(json.dumps(fork_refs(self.fork)))

    def restore(self, name: str) -> None:
        src = self.snapshots / name
        shutil.rmtree(self.root)
        shutil.copytree(src / "ws", self.root, symlinks=True)
        refs = json.loads((src / "refs.json").read_text())
        now = fork_refs(self.fork)  # the refs alone (fork_state also runs rev-parse and status)
        for ref in set(now) - set(refs):
            git(self.fork, "update-ref", "-d", ref)
        for ref, sha in refs.items():
            if now.get(ref) != sha:
                git(self.fork, "update-ref", ref, sha)

    def queue_json(self) -> dict[str, Any]:
        out = self.cli("queue", "--all", "--json")
        assert out.returncode == 0, f"queue --json exited {out.returncode}: {out.stderr[-800:]}"
        return out.json()

    def weekly_issues(self, week: str | None = None) -> list[dict]:
        marker = f"<!-- porttrack:weekly:{week}" if week else "<!-- porttrack:weekly:"
        return [i for i in self.fake.issues(FORK_REPO) if (i["body"] or "").startswith(marker)]

    def around(self) -> list[Path]:
        return [self.root.parent, self.fork.parent, self.fork.parent.parent]


def rng(*salt: object) -> random.Random:
    return random.Random(f"{SEED}:{':'.join(map(str, salt))}")


def check_consistent(rig: Rig, *, fork_before: dict[str, Any] | None = None,
                     branch_may_become: Mapping[str, set[str]] | None = None, allow_stale_series: bool = True) -> None:
    """The invariants every crash and concurrency case ends with.

    - `porttrack queue --json` exits 0; every live patch file exists with the manifest's sha256;
      `series` lists exactly the manifest's live patches — or, after a kill between the manifest
      (the commit point) and `series`, is flagged stale and still names only existing files;
    - state/upstream.json, state/apply/*.json, state/reports.json, state/convergence/*.json and
      every evidence record parse (none listed invalid);
    - the fork's HEAD, index, work tree, tags and remote-tracking refs are unchanged, and every
      branch is unchanged or moved to one of the values it may become.
    """
    from porttrack.prove import evidence
    from porttrack.queue import manifest as queue_mod
    from porttrack.workspace import state as state_mod
    from porttrack.workspace.files import Workspace

    ws = Workspace(rig.root)
    listing = rig.queue_json()
    queue = queue_mod.load(ws)
    for patch in queue.patches:
        assert queue_mod.read_patch(ws, patch)
    series_lines = queue_mod._read_series(ws)
    expected = [p.file for p in queue.patches if p.live]
    if series_lines != expected:
        assert allow_stale_series and listing["series_stale"], f"series {series_lines} != manifest {expected}, not flagged"
        assert all((ws.patches_dir / name).is_file() for name in series_lines), f"series names missing files: {series_lines}"
    state_mod.load(ws.upstream_state_file, UPSTREAM_REPO)
    for path in list((ws.state_dir).rglob("*.json")) if ws.state_dir.is_dir() else []:
        json.loads(path.read_text(encoding="utf-8"))
    log = evidence.load(ws)
    assert not log.invalid, f"invalid evidence: {log.invalid}"
    if fork_before is not None:
        after = fork_state(rig.fork)
        for key in ("HEAD", "head_sha", "index", "status"):
            assert after[key] == fork_before[key], f"fork {key} changed: {fork_before[key]!r} -> {after[key]!r}"
        may = {k: set(v) for k, v in (branch_may_become or {}).items()}
        for ref in set(after["refs"]) | set(fork_before["refs"]):
            old, new = fork_before["refs"].get(ref), after["refs"].get(ref)
            if old != new:
                assert new in may.get(ref, set()), f"fork ref {ref} moved {old} -> {new}; allowed {may.get(ref)}"


def assert_one_line_error(out: Result, code: int, words: str | None = None) -> None:
    assert out.returncode == code, f"exit {out.returncode}, expected {code}: {out.stderr[-1200:]}"
    assert "Traceback" not in out.stderr, out.stderr[-1500:]
    assert len(out.errors) == 1, f"expected one 'porttrack: error:' line: {out.stderr[-1200:]}"
    if words:
        assert words in out.errors[0], f"{words!r} not in {out.errors[0]!r}"


# -- fixtures (imported by the conftest and by tests/test_regressions.py) ------------------------

HERE = Path(__file__).resolve().parent
REGRESSIONS = HERE.parent / "test_regressions.py"


def category(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("reliability")
    return marker.args[0] if marker else None


def ours(item: pytest.Item) -> bool:
    path = Path(str(item.fspath)).resolve()
    return HERE in path.parents or path == REGRESSIONS


@pytest.fixture
def cases(request: pytest.FixtureRequest) -> Cases:
    return Cases(category(request.node) or "other")


@pytest.fixture(autouse=True)
def secret_guard(request: pytest.FixtureRequest, tmp_path: Path):
    """No token anywhere porttrack could have put it, after every reliability case."""
    if not ours(request.node):
        yield
        return
    SEEN.clear()
    yield
    texts = list(SEEN)
    SEEN.clear()
    roots = [tmp_path]
    home = os.environ.get("HOME")
    if home and Path(home).is_dir() and "pytest-" in home:  # the isolated HOME of git_env, never a real one
        roots.append(Path(home))
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file() and "objects" not in path.parts and path.stat().st_size < (32 << 20):
                texts.append(path.read_bytes().decode("utf-8", "replace"))
    fake = request.node.funcargs.get("fake") if hasattr(request.node, "funcargs") else None
    world = request.node.funcargs.get("world") if hasattr(request.node, "funcargs") else None
    fake = fake or getattr(world, "fake", None)
    if fake is not None:
        texts += [json.dumps(r.json) for r in fake.log if r.json is not None]
        texts += [json.dumps(r.query) for r in fake.log]
        texts += [json.dumps(d) for d in fake.dispatches]
        for repo in ("randomvariable/vllm", "vllm-project/vllm"):
            if fake.has_repo(repo):
                for issue in fake.issues(repo):
                    texts.append(json.dumps(issue))
                    texts += [json.dumps(c) for c in fake.comments(repo, issue["number"])]
    found = leaks(texts)
    record("secrets", not found, request.node.nodeid)
    if found:
        pytest.fail("a token leaked:\n" + "\n".join(found[:10]), pytrace=False)


def report_week(now: str) -> str:
    """The ISO week `report weekly --now NOW` reports on (as porttrack names it)."""
    import datetime as dt

    moment = dt.datetime.fromisoformat(now.replace("Z", "+00:00"))
    year, week, _ = moment.isocalendar()
    return f"{year}-W{week:02d}"


# The loops of cases run in two halves: "fast" (in every `pytest` run, .ci/run included) and "full"
# (marked slow: deselected unless PORTTRACK_FULL=1). Together they are the whole catalogue.
SUBSETS = ["fast", pytest.param("full", marks=pytest.mark.slow)]


def half(items, is_fast, subset: str) -> list:
    return [i for i in items if bool(is_fast(i)) == (subset == "fast")]
