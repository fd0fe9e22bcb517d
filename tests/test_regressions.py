"""One test per defect the reliability suite (tests/reliability/) found, named after the defect.

Each failed before its fix. They are kept small and fast (they run in every `pytest`); the
reliability suite has the systematic versions. The secrets check of the reliability suite applies
here too (the `secret_guard` fixture, imported below).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "reliability"))

import rel_harness as H  # noqa: E402
from rel_harness import Rig, cases, secret_guard  # noqa: E402,F401 - fixtures used by this module

from porttrack.common import errors, secrets, text
from porttrack.github.client import GitHubClient, WriteUncertain  # noqa: E402
from porttrack.github.records import MalformedResponse  # noqa: E402
from porttrack.queue import manifest as queue_mod
from porttrack.runner import results  # noqa: E402
from porttrack.workspace.files import Workspace, atomic_write_text, dump_json  # noqa: E402
from testing.github_emulator import DEFAULT_TOKEN  # noqa: E402
from testing.workspace import TOKEN  # noqa: E402

REPO = "vllm-project/vllm"


@pytest.fixture
def client(fake):
    fake.add_repo(REPO)
    fake.put_pull(REPO, 7, title="seven", head_sha="a" * 40, base_sha="b" * 40)
    return GitHubClient(REPO, DEFAULT_TOKEN, fake.base_url, backoff_s=0.01, max_attempts=3)


# -- GitHub answers ------------------------------------------------------------------------------

def test_wrong_shape_pull_request_answer_is_retried_then_exit_5_not_a_usage_error(client, fake):
    fake.inject("status", path=r"/pulls/7$", status=200, json={"message": "ok"}, times=1)
    assert client.get_pull(7)[0].title == "seven"  # retried like a 5xx
    fake.inject("status", path=r"/pulls/7$", status=200, json={"message": "ok"}, times=10)
    with pytest.raises(errors.UpstreamUnreachable, match="pull request payload is missing") as refused:
        client.get_pull(7)
    assert refused.value.exit_code == errors.ExitCode.UNREACHABLE  # was 2 (usage), as if tracks.yaml were wrong
    assert issubclass(MalformedResponse, errors.UpstreamUnreachable)


def test_null_json_answer_is_malformed_not_an_internal_error(client, fake):
    fake.inject("status", path=r"/pulls/7$", status=200, body="null", content_type="application/json", times=1)
    assert client.get_pull(7)[0].number == 7  # was AttributeError: exit 70


def test_deeply_nested_json_answer_is_malformed_not_an_internal_error(client, fake):
    deep = "[" * 60000 + "]" * 60000
    fake.inject("status", path=r"/pulls/7$", status=200, body=deep, content_type="application/json", times=1)
    assert client.get_pull(7)[0].number == 7  # was RecursionError: exit 70


def test_unreadable_answer_to_a_create_is_uncertain_so_porttrack_looks_before_retrying(client, fake):
    fake.inject("status", path=r"/issues$", method="POST", status=201, json={"unexpected": True})
    with pytest.raises(WriteUncertain):  # was MalformedResponse (exit 2) and no look for the issue
        client.create_issue("t", "b", ["x"])


def test_token_reflected_in_a_github_answer_is_masked_at_the_door(client, fake, tmp_path):
    from porttrack.github.client import EtagCache

    fake.put_pull(REPO, 7, title=f"leak {DEFAULT_TOKEN}", body=f"Authorization: token {DEFAULT_TOKEN}")
    client.cache = EtagCache(tmp_path / "etags.json")
    pr, _ = client.get_pull(7)
    client.save_cache()
    assert DEFAULT_TOKEN not in pr.title + pr.body and "***" in pr.title
    assert DEFAULT_TOKEN not in (tmp_path / "etags.json").read_text()


# -- messages ------------------------------------------------------------------------------------

def test_error_messages_never_quote_a_token():
    secrets.register(DEFAULT_TOKEN)
    for exc in (errors.ConfigError(f'tracks.yaml:6:9: fork.repo: expected "owner/name", got "{TOKEN}"'),
                errors.ConfigError(f"PORTTRACK_HTTP_TIMEOUT='{DEFAULT_TOKEN}': expected a number"),
                errors.GitError(["fetch"], 128, f"fatal: https://x:{DEFAULT_TOKEN}@host/r.git: not found")):
        assert TOKEN not in str(exc) and DEFAULT_TOKEN not in str(exc), str(exc)


def test_gate_job_gets_no_token_and_its_log_keeps_none(tmp_path, world):
    command = f"{sys.executable} -c \"import os, sys; print(dict(os.environ)); print('ghp_' + 'x' * 36); sys.exit(3)\" {{results}}"
    tracks = {"alpha": H.track([101], "t", requires={"attention": ["sparse-mla"]}, gate=H.gate_doc(command=command))}
    rig = Rig(tmp_path, world, tracks=tracks)
    rig.ok("import", "101")
    out = rig.cli("gate", "run", "101", "--target", "sm_121a")
    assert out.returncode == 7 and "exited 3" in out.stderr
    log = next((rig.root / ".porttrack" / "logs").glob("gate-*.log")).read_text()
    assert "GITHUB_TOKEN" not in log and DEFAULT_TOKEN not in log  # the job's environment held it
    assert "ghp_" + "x" * 36 not in log + out.stderr  # a token it printed anyway is masked


# -- results files -------------------------------------------------------------------------------

def _valid_document() -> dict:
    from testing.scenario_job import build

    env = {"PORTTRACK_TRACK": "t", "PORTTRACK_SUBJECT": "s", "PORTTRACK_ROLE": "candidate", "PORTTRACK_TARGET": "sm_121a",
           "PORTTRACK_REF": "a" * 40, "PORTTRACK_UPSTREAM_BASE": "b" * 40, "PORTTRACK_FORK_COMMIT": "c" * 40,
           "PORTTRACK_PATCH_SET": "[]"}
    return build(H.SCENARIO, env).document


def test_results_with_a_float_overflow_are_refused_not_an_internal_error():
    text_ = json.dumps(_valid_document()).replace('"ttft_ms": 100.0', '"ttft_ms": 1e400', 1)
    with pytest.raises(errors.InputError, match="finite"):  # was inf, then ValueError when recorded: exit 70
        results.parse(text_.encode(), "r")


def test_results_nested_too_deeply_are_refused_not_an_internal_error():
    with pytest.raises(errors.InputError, match="nested too deeply"):  # was RecursionError: exit 70
        results.parse(b"[" * 100_000 + b"]" * 100_000, "r")


def test_results_with_a_lone_surrogate_are_refused_not_an_internal_error():
    doc = _valid_document()
    doc["environment"]["gpu"] = "X"
    data = json.dumps(doc).replace('"gpu": "X"', '"gpu": "\\ud800"').encode()
    with pytest.raises(errors.InputError, match="surrogate"):  # was UnicodeEncodeError when recorded: exit 70
        results.parse(data, "r")


def test_results_with_too_many_cells_give_a_short_error():
    doc = _valid_document()
    doc["cells"] = [dict(doc["cells"][0], context=1 + i) for i in range(20000)]
    with pytest.raises(errors.InputError) as refused:
        results.parse(json.dumps(doc).encode(), "r")
    assert "20000 items; expected at most 10000" in str(refused.value)
    assert len(str(refused.value)) < 1000  # was the whole cell list, megabytes on one line


# -- paths ---------------------------------------------------------------------------------------

def test_non_utf8_file_name_can_be_recorded_in_the_queue_not_an_internal_error(tmp_path):
    ws = Workspace(tmp_path)
    patch = queue_mod.Patch(name="0001-pr1-x", file="0001-pr1-x.0.patch", sha256="0" * 64, track="t", pr=1, upstream=REPO,
                            title="x", revision=queue_mod.Revision("a" * 40, "b" * 40),
                            hunks_taken=(queue_mod.HunkRef("abc", "caf\udce9.txt"),), hunks_left_out=(), depends_on=(),
                            state="queued", gate=None)
    (tmp_path / "patches").mkdir()
    atomic_write_text(queue_mod.manifest_path(ws), dump_json({"schema": queue_mod.SCHEMA, "patches": [patch.to_json()]}))
    assert queue_mod.load(ws).patches[0].hunks_taken[0].path == "caf\udce9.txt"  # was UnicodeEncodeError
    assert text.for_terminal("caf\udce9.txt") == "caf\ufffd.txt"  # printable on a strict UTF-8 stdout


def test_queued_patch_with_an_escaping_symlink_is_refused_by_apply():
    from porttrack.queue.series import _parse

    data = (b"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] x\n\n---\n"
            b"diff --git a/link b/link\nnew file mode 120000\n--- /dev/null\n+++ b/link\n@@ -0,0 +1 @@\n+../../../../tmp\n"
            b"\\ No newline at end of file\n")
    with pytest.raises(errors.UnsafeInput, match="outside the work tree"):  # was built into the staging branch
        _parse(SimpleNamespace(file="0001-x.patch"), data)


# -- crashes -------------------------------------------------------------------------------------

def _killed_at(args: list[str], point: str, cwd: Path, env: dict | None = None) -> None:
    proc = subprocess.Popen(args, cwd=cwd, env={**os.environ, **(env or {}), "PORTTRACK_TEST_PAUSE_AT": point},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    H.wait_for_pause(proc, point)
    H.kill(proc)


def test_killed_write_leaves_no_temp_file_once_the_file_is_written_again(tmp_path):
    target = tmp_path / "state" / "upstream.json"
    code = ("from pathlib import Path; from porttrack.cli import testhooks; from porttrack.workspace import files; "
            f"files.install_pause(testhooks.checkpoint); files.atomic_write_text(Path({str(target)!r}), 'new')")
    _killed_at([sys.executable, "-c", code], "write:upstream.json", tmp_path, {"PYTHONPATH": str(H.REPO_ROOT)})
    assert H.temp_leftovers(tmp_path), "the killed write left its temp file"
    atomic_write_text(target, "again")
    assert H.temp_leftovers(tmp_path) == []  # was left forever, in a committed folder


def test_series_left_stale_by_a_kill_is_repaired_by_a_rerun_that_is_refused(tmp_path, world):
    rig = Rig(tmp_path, world)
    proc = rig.popen("import", "101", PORTTRACK_TEST_PAUSE_AT="write:series")
    H.wait_for_pause(proc, "write:series")
    H.kill(proc)
    assert rig.queue_json()["series_stale"]
    out = rig.cli("import", "101")
    assert out.returncode == 6 and "already queued" in out.stderr
    assert not rig.queue_json()["series_stale"]  # was stale until some unrelated queue write


def test_status_and_import_at_once_do_not_lose_each_others_observations(tmp_path, world):
    rig = Rig(tmp_path, world)
    world.append(102, {"b.py": H.edit(H.B, {30: "b_30 = 'thirty'", 40: "b_40 = 'forty'"})})
    holder = rig.popen("import", "101", PORTTRACK_TEST_PAUSE_AT="planned", PORTTRACK_TEST_PAUSE_S="2")
    H.wait_for_pause(holder, "planned")
    assert rig.cli("status").returncode == 0
    assert H.finish(holder).returncode == 0
    prs = json.loads((rig.root / "state" / "upstream.json").read_text())["prs"]
    assert prs["102"]["head_sha"] == world.head(102)  # was the import's older picture of #102


def test_concurrent_weekly_posts_create_one_issue(tmp_path, world):
    rig = Rig(tmp_path, world)
    now = "2027-02-01T08:00:00Z"
    a = rig.popen("report", "weekly", "--post", "--offline", "--now", now)
    b = rig.popen("report", "weekly", "--post", "--offline", "--now", now)
    assert (H.finish(a).returncode, H.finish(b).returncode) == (0, 0)
    assert len(rig.weekly_issues(H.report_week(now))) == 1  # was two issues for the week


def test_issue_listing_that_shifts_mid_walk_does_not_duplicate_the_weekly_issue(tmp_path, world):
    rig = Rig(tmp_path, world)
    now = "2027-03-01T08:00:00Z"
    rig.ok("report", "weekly", "--post", "--offline", "--now", now)
    newer = [rig.fake.put_issue(H.FORK_REPO, title=f"other {i}", labels=H.LABELS, body="x")["number"] for i in range(100)]

    def unlabel_page_one(method, path, query):
        if path.endswith("/issues") and query.get("page") == "2" and newer:
            for number in newer[-20:]:
                rig.fake.put_issue(H.FORK_REPO, number, labels=["other"])
            newer.clear()

    rig.fake.on_request = unlabel_page_one
    out = rig.cli("report", "weekly", "--post", "--offline", "--now", now, "--since", "2026-06-01")
    rig.fake.on_request = None
    assert out.returncode == 0, out.stderr
    assert len(rig.weekly_issues(H.report_week(now))) == 1  # was a second issue: the first slid onto page 1


def test_killed_gate_run_leaves_nothing_outside_the_workspace_and_no_job_behind(tmp_path, world):
    marker = tmp_path / "job-started"
    job = (f"import os, pathlib, sys, time; m = pathlib.Path({str(marker)!r}); m.exists() and sys.exit(0); "
           "m.write_text(str(os.getpid())); time.sleep(60)")
    command = f"{sys.executable} -c \"{job}\" {{results}}"
    tracks = {"alpha": H.track([101], "t", requires={"attention": ["sparse-mla"]}, gate=H.gate_doc(command=command))}
    rig = Rig(tmp_path, world, tracks=tracks)
    rig.ok("import", "101")
    before = set(os.listdir("/tmp"))
    proc = rig.popen("gate", "run", "101", "--target", "sm_121a")
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    job = int(marker.read_text())
    H.kill(proc)
    for _ in range(60):
        try:
            os.kill(job, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(job, signal.SIGKILL)
        pytest.fail("the gate job outlived the porttrack that ran it")
    assert not [n for n in set(os.listdir("/tmp")) - before if n.startswith("porttrack-gate-")]
    assert list((rig.root / ".porttrack" / "gate").iterdir()), "its scratch folder is in the workspace"
    assert rig.cli("gate", "run", "101", "--target", "gfx1151").returncode == 7  # the next run sweeps it
    assert [p.name for p in (rig.root / ".porttrack" / "gate").iterdir()] == []


def test_artifact_download_that_is_not_a_whole_zip_is_retried_not_refused_as_results(fake):
    import io
    import zipfile

    fake.add_repo(H.FORK_REPO)
    fake.add_workflow(H.FORK_REPO, "gate.yml")
    fake.on_dispatch = lambda *_: {"artifacts": {"porttrack-results": {"results.json": "{}"}}}
    client = GitHubClient(H.FORK_REPO, DEFAULT_TOKEN, fake.base_url, backoff_s=0.01, max_attempts=3)
    run_id = client.dispatch_workflow("gate.yml", "main", {})
    fake.complete_run(run_id)
    fake.inject("status", path=r"/runs/\d+/artifacts$", status=200, json={"message": "ok"}, times=1)
    [artifact] = client.list_run_artifacts(run_id)  # was: no artifact at all ("concluded without artifact")
    fake.inject("malformed", path=r"/_blobs/artifacts/", times=1)
    data = client.download_artifact(artifact.id)  # was: an HTML page returned, then "not a zip archive": exit 2
    assert zipfile.ZipFile(io.BytesIO(data)).read("results.json") == b"{}"


def test_git_fetch_from_a_silent_remote_is_bounded_by_a_timeout(tmp_path, world):
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept_and_say_nothing() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    threading.Thread(target=accept_and_say_nothing, daemon=True).start()
    rig = Rig(tmp_path, world)
    git_url = f"http://127.0.0.1:{server.getsockname()[1]}/vllm-project/vllm.git"
    H.git(rig.fork, "remote", "set-url", "upstream", git_url)
    world.append(101, {"a.py": H.edit(H.A, {10: "a_10 = 'ten'", 50: "a_50 = 'fifty'", 77: "a_77 = 'x'"})})
    proc = subprocess.Popen([sys.executable, "-m", "porttrack", "status"], cwd=rig.root, start_new_session=True,
                            env=rig.handle.env(PORTTRACK_GIT_TIMEOUT="2"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=8)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # porttrack and the git it is waiting for
        proc.communicate()
        pytest.fail("porttrack status hung on a git fetch from a remote that never answers")
    finally:
        stop.set()
        for conn in held:
            conn.close()
        server.close()
        H.git(rig.fork, "remote", "set-url", "upstream", str(world.upstream.path))
    H.SEEN.extend([out, err])
    assert proc.returncode == 0 and "git fetch from upstream failed" in out + err


def test_usage_error_never_quotes_a_token(tmp_path):
    from testing import workspace as test_workspace

    (tmp_path / "tracks.yaml").write_text("x: 1\n")
    handle = test_workspace.TestWorkspace(tmp_path)
    out = H.cli(handle, "import", DEFAULT_TOKEN)
    H.SEEN.clear()  # judged here, so the guard does not fail the expected failure twice
    assert out.returncode == 2 and "not a pull request number" in out.stderr
    assert DEFAULT_TOKEN not in out.stderr, out.stderr


# -- issue 11: fetching PR heads, the first observation, git's cause -----------------------------

def test_one_missing_pull_head_no_longer_leaves_every_pr_unfetched(tmp_path, world):
    rig = Rig(tmp_path, world)
    world.append(101, {"a.py": H.edit(H.A, {10: "a_10 = 'again'"})})
    world.append(102, {"b.py": H.edit(H.B, {30: "b_30 = 'again'"})})
    H.git(world.upstream.path, "update-ref", "-d", "refs/pull/102/head")  # #102's head is gone upstream
    out = rig.ok("status", "--json")
    report = json.loads(out.stdout)
    assert H.git(rig.fork, "rev-parse", "refs/porttrack/pull/101/head") == world.head(101)  # was: no head fetched
    assert [n for n in report["notes"] if n.startswith("#102: ")] == report["notes"] and len(report["notes"]) == 1
    assert {p["number"]: p["head_change"] for t in report["tracks"] for p in t["prs"]}[101] == "appended"


def test_first_observation_is_not_reported_as_unchanged(tmp_path, world):
    rig = Rig(tmp_path, world, status=False)
    report = json.loads(rig.ok("status", "--json").stdout)
    assert {p["head_change"] for t in report["tracks"] for p in t["prs"]} == {None}  # was "unchanged"


def test_git_error_keeps_the_fatal_line_not_only_the_last_line_of_advice(tmp_path):
    from porttrack.git.repo import GitRepo

    H.git(tmp_path, "init", "-q")
    with pytest.raises(errors.GitError) as failed:
        GitRepo(tmp_path).fetch("upstream", ["+refs/heads/main:refs/porttrack/upstream/main"])
    # was: "… exited 128: and the repository exists."
    assert "fatal: 'upstream' does not appear to be a git repository" in str(failed.value)


def test_git_error_never_prints_the_userinfo_of_a_remote_url(tmp_path):
    from porttrack.git.repo import GitRepo

    H.git(tmp_path, "init", "-q")
    with pytest.raises(errors.GitError) as failed:
        GitRepo(tmp_path).run("ls-remote", "http://porttrack:s3cret-password@127.0.0.1:9/o/r.git")
    assert "s3cret-password" not in str(failed.value), str(failed.value)  # was: the command line, URL and all


# -- issue 17: upstream text and answers are data, GitHub's failure modes are bounded -------------

ESCAPES = ("\x1b", "\x9b", "\x9d", "\u202e", "\u2066", "\u200b", "\ufeff", "\x07")


def _ws17(tmp_path, world, tracks, **env):
    from testing.workspace import make_workspace

    handle = make_workspace(tmp_path / "ws", tracks, api_url=world.fake.base_url, fork=None, token=world.token)
    handle.extra_env.update({**H.FAST_NET, **env})
    return handle


def _no_escapes(*texts: str) -> None:
    for text_ in texts:
        assert not [c for c in ESCAPES if c in text_], repr(text_[:2000])


def test_requires_an_issue_number_or_a_404_pr_is_a_note_and_the_table_goes_on(tmp_path, world):
    from testing.workspace import track

    world.open_pr(101, {"a.py": "a = 1\n"}, "Needs the issue", body="requires #1")
    world.fake.put_issue(world.upstream_repo, 1, title="an issue, not a PR")
    handle = _ws17(tmp_path, world, {"one": track([101], "one"), "gone": track([105], "never a PR")})
    out = H.cli(handle, "status")
    assert out.returncode == 0, out.stderr  # was exit 2 with no table at all
    assert "#101" in out.stdout and "#1 is an issue, not a PR" in out.stdout
    assert "#105 answered 404" in out.stdout
    data = H.cli(handle, "status", "--json").json()
    pr101 = data["tracks"][0]["prs"][0]
    assert pr101["stacked_on"] == [] and any("#1 is an issue" in n for n in pr101["notes"])
    weekly = H.cli(handle, "report", "weekly", "--now", "2027-02-01T08:00:00Z")
    assert weekly.returncode == 0, weekly.stderr  # was failing every week until the PR was edited
    assert "is an issue, not a PR" in weekly.stdout


def test_stacking_cycle_is_named_not_followed(tmp_path, world):
    from testing.workspace import track

    world.open_pr(201, {"a.py": "a = 1\n"}, "A", body="depends on #202")
    world.open_pr(202, {"b.py": "b = 1\n"}, "B", body="stacked on #201")
    handle = _ws17(tmp_path, world, {"cycle": track([201], "a cycle")})
    out = H.cli(handle, "status")
    assert out.returncode == 0, out.stderr
    assert "stacking cycle #201 → #202 → #201" in out.stdout


def test_lone_surrogate_title_does_not_make_every_weekly_report_an_internal_error(tmp_path, world):
    from porttrack.common import markdown
    from porttrack.report import render as render_mod
    from testing.workspace import track

    assert markdown.clean("a\ud800b\udcff") == "a\ufffdb\ufffd"
    assert render_mod.body_size("x\ud800") == 2  # was UnicodeEncodeError (utf-16)
    world.open_pr(101, {"a.py": "a = 1\n"}, "lone \ud800 surrogate \udcff here", message="a commit")
    handle = _ws17(tmp_path, world, {"one": track([101], "one")})
    assert H.cli(handle, "status").returncode == 0
    for args in (("report", "weekly", "--offline"), ("report", "weekly")):
        out = H.cli(handle, *args, "--now", "2027-02-01T08:00:00Z")
        assert out.returncode == 0, out.stderr  # was exit 70, --offline too
        assert "lone" in out.stdout


def test_renamed_and_force_pushed_pr_grows_the_state_file_no_more(world):
    from porttrack.observe.poll import poll
    from porttrack.workspace import state as state_mod

    world.open_pr(7, {"a.py": "a = 0\n"}, "title")
    client = GitHubClient(world.upstream_repo, world.token, world.fake.base_url, backoff_s=0.01, max_attempts=2)
    recorded = state_mod.UpstreamState(world.upstream_repo, None, "nothing")
    sizes = {}
    polls = state_mod.MAX_EVENTS + 10  # two events a poll: a rename and a force-push
    for index in range(polls):
        world.force_push(7, {"a.py": f"a = {index}\n"})
        world.fake.put_pull(world.upstream_repo, 7, title=f"title {index} " + "x" * 150)
        recorded = poll(recorded, [7], client, now=f"2027-01-01T00:{index // 60:02d}:{index % 60:02d}Z").state
        sizes[index] = len(json.dumps(recorded.to_json()))
    pr = recorded.prs[7]
    assert len(pr.events) <= state_mod.MAX_EVENTS and len(pr.heads) <= state_mod.MAX_HEADS
    compacted = [e for e in pr.events if e.kind == "compacted"]
    assert len(compacted) == 1 and pr.events[0] == compacted[0]
    dropped = state_mod._count(compacted[0], "events")
    assert dropped + len(pr.events) - 1 == 1 + 2 * (polls - 1)  # every event kept or counted ("observed", then 2 a poll)
    assert state_mod._count(compacted[0], "heads") == polls - len(pr.heads)
    assert pr.heads[0].change == "initial" and pr.heads[-1].sha == world.head(7)
    assert sizes[polls - 1] <= sizes[polls - 10] * 1.02  # was ~640 bytes more per poll, without end


def test_cut_weekly_issue_keeps_summary_queue_and_gates_and_cuts_history_first():
    from porttrack.report import render as render_mod

    history = "".join(f"  - retitled: name number {i} {'y' * 60}\n" for i in range(1500))
    body = ("<!-- porttrack:weekly:2027-W05 -->\n# weekly\n\n## Summary\n\n| a | b |\n|---|---|\n| SUMMARY-ROW | x |\n\n"
            "## Upstream, per track\n\n### one\n\n- #7 title\n  open\n\n" + history + "\n**Next:** NEXT-ONE\n\n"
            "## Patch queue\n\nQUEUE-ROW\n\n## Gates\n\nGATE-ROW\n\n## Eligibility\n\nELIGIBILITY-ROW\n\n"
            "## Problems\n\nPROBLEM-ROW\n")
    cut, was_cut = render_mod.fit_body(body, 65536, "pointer")
    assert was_cut and render_mod.body_size(cut) <= 65536
    for kept in ("SUMMARY-ROW", "QUEUE-ROW", "GATE-ROW", "ELIGIBILITY-ROW", "PROBLEM-ROW", "NEXT-ONE", "#7 title"):
        assert kept in cut, kept  # the old cut dropped everything after the long history
    assert "left out to fit" in cut and "name number 1499" in cut  # the latest history is what stays


def test_server_controlled_text_reaches_the_terminal_clean(tmp_path, world):
    from testing.workspace import track

    hostile = "\x1b]8;;http://evil.invalid\x07click\x1b]8;;\x07\x1b[2J\u202egnp\u200b\ufeff\x9b31m"
    world.open_pr(101, {"a.py": "a = 1\n"}, "title " + hostile)
    handle = _ws17(tmp_path, world, {"one": track([101], "one")})
    import requests

    payload = requests.get(f"{world.fake.base_url}/repos/{world.upstream_repo}/pulls/101",
                           headers={"Authorization": f"token {world.token}"}, timeout=10).json()
    payload["base"]["ref"] = "main" + hostile
    payload["head"]["sha"] = payload["head"]["sha"][:20] + hostile
    payload["updated_at"] = "2027-01-01" + hostile
    world.fake.inject("status", path=r"/pulls/101$", status=200, json=payload, times=1)
    out = H.cli(handle, "status", "--no-fetch")
    assert out.returncode == 0, out.stderr
    _no_escapes(out.stdout, out.stderr)  # the base branch, the date went out raw
    world.fake.inject("status", path=r"/pulls/101$", status=422, json={"message": "bad \x1b[2J\x1b]0;owned\x07 thing\u202e"}, times=5)
    failed = H.cli(handle, "status")
    assert failed.returncode != 70 and "bad" in failed.stderr
    _no_escapes(failed.stdout, failed.stderr)  # GitHub's error `message` went out raw
    from porttrack.common.text import for_terminal
    assert for_terminal("a\u200bb\ufeffc\u2060d\u202ae\U000e0041") == "abcde"  # zero-width and BOM survived


def test_trickling_server_is_bounded_by_the_total_timeout_not_per_read(client, fake):
    fake.inject("trickle", path=r"/pulls/7$", seconds_per_byte=0.2, times=10)
    slow = GitHubClient(REPO, DEFAULT_TOKEN, fake.base_url, backoff_s=0.01, max_attempts=2, timeout_s=1.0)
    started = time.monotonic()
    with pytest.raises(errors.UpstreamUnreachable, match="timed out"):
        slow.get_pull(7)
    assert time.monotonic() - started < 4  # was 25 s per attempt at a 2 s timeout (one byte per read)


def test_202_forever_is_asked_a_bounded_number_of_times(client, fake):
    fake.inject("accepted", path=r"/pulls/7$", times=1000)
    sleeps: list[float] = []
    bounded = GitHubClient(REPO, DEFAULT_TOKEN, fake.base_url, backoff_s=0.01, max_attempts=4, sleep=sleeps.append)
    with pytest.raises(errors.UpstreamUnreachable, match="202"):
        bounded.get_pull(7)
    assert len(fake.requests("GET", r"/pulls/7$")) == 4  # was re-sent every 2 s for ever
    fake.clear_log()
    fake.inject("accepted", path=r"/pulls/7$", times=1)
    fake._faults.clear()
    fake.inject("accepted", path=r"/pulls/7$", times=2)
    assert bounded.get_pull(7)[0].title == "seven"  # a 202 that resolves is waited for


def test_secondary_rate_limit_is_not_slept_after_the_last_attempt(client, fake):
    message = {"message": "You have exceeded a secondary rate limit. Please wait a few minutes."}
    fake.inject("status", path=r"/pulls/7$", status=403, json=message, times=10)
    sleeps: list[float] = []
    limited = GitHubClient(REPO, DEFAULT_TOKEN, fake.base_url, backoff_s=0.01, max_attempts=4, sleep=sleeps.append)
    with pytest.raises(errors.UpstreamUnreachable, match="no attempt left"):
        limited.get_pull(7)
    assert sleeps == [60.0, 60.0, 60.0]  # was 4 x 60 s: the last wait came after the last attempt
    assert len(fake.requests("GET", r"/pulls/7$")) == 4


def test_command_deadline_stops_waiting_before_it_is_passed(client, fake):
    fake.inject("status", path=r"/pulls/7$", status=429, json={"message": "slow down"}, headers={"Retry-After": "30"}, times=10)
    sleeps: list[float] = []
    bounded = GitHubClient(REPO, DEFAULT_TOKEN, fake.base_url, max_attempts=4, deadline_s=5, sleep=sleeps.append)
    with pytest.raises(errors.UpstreamUnreachable, match="deadline of 5s"):
        bounded.get_pull(7)
    assert sleeps == []  # a 30 s wait would pass the 5 s deadline: given up at once


def test_redirect_to_another_host_is_a_clear_error_not_exit_70(client, fake, tmp_path, world):
    fake.inject("redirect", path=r"/pulls/7$", location="http://other.invalid:9/repos/x/y/pulls/7", times=5)
    with pytest.raises(errors.UpstreamUnreachable, match="another host"):
        client.get_pull(7)
    assert [r.status for r in fake.requests("GET", r"/pulls/7$")] == [301]  # refused, never retried nor followed


@pytest.mark.parametrize("name, value", [("PORTTRACK_HTTP_TIMEOUT", "inf"), ("PORTTRACK_HTTP_TIMEOUT", "nan"),
                                         ("PORTTRACK_HTTP_BACKOFF", "-1"), ("PORTTRACK_HTTP_ATTEMPTS", "0"),
                                         ("PORTTRACK_DEADLINE", "1e400")])
def test_knob_values_inf_nan_negative_are_usage_errors_not_exit_70(tmp_path, world, name, value):
    from testing.workspace import track

    handle = _ws17(tmp_path, world, {"one": track([101], "one")}, **{name: value})
    out = H.cli(handle, "status")
    assert out.returncode == 2 and f"{name}=" in out.stderr and "expected" in out.stderr, out.stderr


def test_password_in_the_api_url_is_never_printed_or_stored(tmp_path, world):
    from testing.workspace import track

    world.open_pr(101, {"a.py": "a = 1\n"}, "one")
    handle = _ws17(tmp_path, world, {"one": track([101], "one")})
    handle.api_url = world.fake.base_url.replace("http://", "http://user:s3cretpw@")
    outs = [H.cli(handle, "status"), H.cli(handle, "status", "--json")]
    world.fake.inject("status", path=r"/pulls/101$", status=502, times=20)
    outs.append(H.cli(handle, "status"))
    assert outs[0].returncode == 0 and outs[2].returncode == 5, outs[2].stderr
    written = [p.read_text(errors="replace") for p in handle.root.rglob("*") if p.is_file()]
    for text_ in [o.stdout + o.stderr for o in outs] + written:
        assert "s3cretpw" not in text_ and "user:" not in text_  # was in state/upstream.json's "source" and the ETag cache
    H.SEEN.clear()


def test_token_of_no_known_shape_in_an_argument_is_masked_in_the_usage_error(tmp_path):
    from testing import workspace as test_workspace

    (tmp_path / "tracks.yaml").write_text("x: 1\n")
    handle = test_workspace.TestWorkspace(tmp_path)
    odd = "plain-looking-value-42"
    out = H.cli(handle, odd, GITHUB_TOKEN=odd)
    H.SEEN.clear()
    assert out.returncode == 2 and "No such command" in out.stderr
    assert odd not in out.stderr, out.stderr  # was echoed: only token-shaped values were masked


def test_overlapping_status_runs_keep_the_newer_head(tmp_path, world):
    from testing.workspace import track

    world.open_pr(102, {"b.py": "b = 1\n"}, "moves")
    handle = _ws17(tmp_path, world, {"one": track([102], "one")}, PORTTRACK_HTTP_TIMEOUT="10")
    assert H.cli(handle, "status").returncode == 0
    world.fake.inject("late", path=r"/pulls/102$", seconds=3.0)
    slow = H.popen(handle, "status")  # its answer is the older head, delivered last
    deadline = time.monotonic() + 60
    while world.fake.pending_faults() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not world.fake.pending_faults()
    world.force_push(102, {"b.py": "b = 2\n"})
    newer = world.head(102)
    assert H.cli(handle, "status").returncode == 0
    assert H.finish(slow).returncode == 0
    prs = json.loads((handle.root / "state" / "upstream.json").read_text())["prs"]
    assert prs["102"]["head_sha"] == newer  # was the slower run's older head: the record went backwards
    assert any(e["kind"] == "force-pushed" for e in prs["102"]["events"])
