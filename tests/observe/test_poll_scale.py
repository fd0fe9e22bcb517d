"""Status at scale: a hundred tracked PRs polled through GraphQL (100 to a query), REST for what
GraphQL does not answer. Real HTTP against the emulator; requests and rate-limit points are the
emulator's own accounting (its REST core budget and its GraphQL points budget)."""

from __future__ import annotations

import json

import pytest

from porttrack.github.client import GitHubClient
from porttrack.github.graphql import graphql_url, pulls_query
from testing.github_emulator import DEFAULT_TOKEN, FakeGitHub
from testing.workspace import make_workspace, track

UP = "vllm-project/vllm"
PRS = range(1001, 1101)   # a hundred tracked PRs


def _seed(fake: FakeGitHub, numbers=PRS) -> None:
    fake.add_repo(UP, default_branch="main")
    for n in numbers:
        fake.put_pull(UP, n, title=f"PR {n}", body=f"body of {n}", head_sha=f"{n:040x}")


def _varied(fake: FakeGitHub) -> list[int]:
    """Every kind of PR a record distinguishes, for comparing GraphQL's records with REST's."""
    _seed(fake, range(1, 13))
    fake.put_pull(UP, 2, merged=True, merge_commit_sha="ab" * 20, merged_at="2026-11-02T10:00:00Z")
    fake.put_pull(UP, 3, state="closed", merge_commit_sha="cd" * 20)   # closed unmerged: no merge commit
    fake.put_pull(UP, 4, draft=True)
    fake.put_pull(UP, 5, user="dependabot[bot]")                       # REST "x[bot]", GraphQL "x" + Bot
    fake.put_pull(UP, 6, head_repo="someone/vllm", head_ref="feature/x", base_ref="release", base_sha="ef" * 20)
    fake.put_pull(UP, 7, body=None, title="naïve — ünïcode \"quoted\" \\ title")
    fake.put_pull(UP, 8, html_url="https://github.example/vllm-project/vllm/pull/8")
    return list(range(1, 13))


class Spent:
    """Requests and points between construction and `take()`, from the emulator's accounting."""

    def __init__(self, fake: FakeGitHub) -> None:
        self.fake = fake
        fake.clear_log()
        self.core = fake.rate_limit(DEFAULT_TOKEN)["remaining"]
        self.graphql = fake.graphql_rate_limit(DEFAULT_TOKEN)["remaining"]

    def take(self) -> dict[str, int]:
        log = self.fake.log
        return {"requests": len(log),
                "graphql_requests": sum(1 for r in log if r.path == "/graphql"),
                "core_points": self.core - self.fake.rate_limit(DEFAULT_TOKEN)["remaining"],
                "graphql_points": self.graphql - self.fake.graphql_rate_limit(DEFAULT_TOKEN)["remaining"]}


def _client(fake: FakeGitHub, cache=None, token: str | None = DEFAULT_TOKEN) -> GitHubClient:
    kwargs = {"cache": cache} if cache is not None else {}
    return GitHubClient(UP, token, fake.base_url, backoff_s=0.0, **kwargs)


def test_a_hundred_prs_cost_one_query_and_one_point_cold_and_warm(fake: FakeGitHub) -> None:
    _seed(fake)
    client = _client(fake)
    spent = Spent(fake)
    cold, _ = client.get_pulls_present(PRS)
    assert spent.take() == {"requests": 1, "graphql_requests": 1, "core_points": 0, "graphql_points": 1}
    assert sorted(cold) == list(PRS) and not any(unchanged for _, unchanged in cold.values())
    assert cold[1042][0].title == "PR 1042" and cold[1042][0].head_sha == f"{1042:040x}"

    spent = Spent(fake)
    warm, _ = client.get_pulls_present(PRS)
    assert spent.take() == {"requests": 1, "graphql_requests": 1, "core_points": 0, "graphql_points": 1}
    assert all(unchanged for _, unchanged in warm.values()), "an equal answer is an unchanged PR"
    assert {n: pr for n, (pr, _) in warm.items()} == {n: pr for n, (pr, _) in cold.items()}

    fake.put_pull(UP, 1050, head_sha="f" * 40)
    changed, _ = client.get_pulls_present(PRS)
    assert [n for n, (_, unchanged) in changed.items() if not unchanged] == [1050]
    assert changed[1050][0].head_sha == "f" * 40


def test_five_hundred_prs_are_five_queries_sent_together(fake: FakeGitHub) -> None:
    numbers = range(1, 501)
    _seed(fake, numbers)
    fake.latency_s = 0.3   # each answer takes at least this long: concurrent ones overlap
    spent = Spent(fake)
    got, _ = _client(fake).get_pulls_present(numbers)
    assert len(got) == 500
    assert spent.take() == {"requests": 5, "graphql_requests": 5, "core_points": 0, "graphql_points": 5}
    posts = fake.requests("POST", "/graphql")
    assert max(p.time for p in posts) < min(p.time + p.duration for p in posts), "all five in flight at once"


def test_graphql_records_are_the_rest_records(fake: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    numbers = _varied(fake)
    via_graphql, _ = _client(fake).get_pulls_present(numbers)
    assert len(fake.requests("POST", "/graphql")) == 1 and not fake.requests("GET")
    monkeypatch.setenv("PORTTRACK_GRAPHQL", "never")
    fake.clear_log()
    via_rest, _ = _client(fake).get_pulls_present(numbers)
    assert not fake.requests("POST") and len(fake.requests("GET")) == len(numbers)
    assert {n: pr for n, (pr, _) in via_graphql.items()} == {n: pr for n, (pr, _) in via_rest.items()}
    assert via_graphql[5][0].author == "dependabot[bot]" and via_graphql[2][0].state == "merged"
    assert via_graphql[3][0].merge_commit_sha is None and via_graphql[6][0].head_repo == "someone/vllm"


@pytest.mark.parametrize("fault", [
    {"kind": "status", "status": 502},
    {"kind": "reset"},
    {"kind": "malformed"},
    {"kind": "status", "status": 200, "json": {"errors": [{"message": "Something went wrong while executing your query."}]}},
], ids=["502", "reset", "malformed", "errors-no-data"])
def test_a_failed_query_falls_back_to_rest(fake: FakeGitHub, fault: dict) -> None:
    _seed(fake)
    fake.inject(path=r"^/graphql$", method="POST", **fault)
    spent = Spent(fake)
    got, _ = _client(fake).get_pulls_present(PRS)
    assert sorted(got) == list(PRS) and got[1001][0].title == "PR 1001"
    took = spent.take()
    assert took["graphql_requests"] == 1, "not retried: REST is the retry"
    assert took["core_points"] == len(PRS) == len(fake.requests("GET", r"/pulls/\d+$"))


def test_a_spent_graphql_budget_falls_back_to_rest(fake: FakeGitHub) -> None:
    _seed(fake)
    fake.set_graphql_rate_limit(DEFAULT_TOKEN, remaining=0)
    spent = Spent(fake)
    got, _ = _client(fake).get_pulls_present(PRS)
    assert len(got) == len(PRS)
    assert spent.take() == {"requests": 101, "graphql_requests": 1, "core_points": 100, "graphql_points": 0}
    answer = fake.requests("POST", "/graphql")[0]
    assert answer.status == 200   # GitHub answers a spent GraphQL budget 200 with a RATE_LIMITED error


def test_a_missing_pr_in_a_batch_is_reported_as_rests_404(fake: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    _seed(fake)
    fake.put_issue(UP, 1200, title="an issue, not a pull request")
    numbers = [*PRS, 1200, 4242]
    found, via_graphql = _client(fake).get_pulls_present(numbers)
    assert len(fake.requests("POST", "/graphql")) == 2   # 102 PRs: 100 and 2
    assert {r.path for r in fake.requests("GET")} <= {f"/repos/{UP}/pulls/1200", f"/repos/{UP}/pulls/4242",
                                                       f"/repos/{UP}/issues/1200", f"/repos/{UP}/issues/4242"}, \
        "only what GraphQL did not answer goes to REST"
    assert sorted(found) == sorted(PRS)
    monkeypatch.setenv("PORTTRACK_GRAPHQL", "never")
    _, via_rest = _client(fake).get_pulls_present(numbers)
    assert via_graphql == via_rest == {1200: "#1200 is an issue, not a PR", 4242: via_rest[4242]}


def test_a_missing_pr_keeps_the_others_data(fake: FakeGitHub) -> None:
    """The emulator answers as GitHub does: null and a NOT_FOUND error for the missing alias,
    the other aliases' data beside it (PyGithub's graphql_query would throw that data away)."""
    _seed(fake, [1, 2])
    import requests

    answer = requests.post(graphql_url(fake.base_url), json={"query": pulls_query(UP, [1, 3, 2])},
                           headers={"Authorization": f"bearer {DEFAULT_TOKEN}"}, timeout=10)
    body = answer.json()
    assert answer.status_code == 200 and answer.headers["X-RateLimit-Resource"] == "graphql"
    repository = body["data"]["repository"]
    assert repository["pr3"] is None and repository["pr1"]["number"] == 1 and repository["pr2"]["number"] == 2
    assert [(e["type"], e["path"]) for e in body["errors"]] == [("NOT_FOUND", ["repository", "pr3"])]


def test_few_prs_and_no_token_stay_on_rest(fake: FakeGitHub) -> None:
    _seed(fake)
    _client(fake).get_pulls_present(list(PRS)[:8])   # one wave of REST: 1 round trip, and 304s warm
    _client(fake, token=None).get_pulls_present(list(PRS)[:20])   # GraphQL needs a token (60 requests an hour)
    assert fake.requests("POST") == [] and len(fake.requests("GET")) == 28


def test_an_unknown_mode_is_a_config_error(fake: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    from porttrack.common.errors import ConfigError

    _seed(fake)
    monkeypatch.setenv("PORTTRACK_GRAPHQL", "sometimes")
    with pytest.raises(ConfigError, match="PORTTRACK_GRAPHQL='sometimes': expected one of auto, always, never"):
        _client(fake).get_pulls_present(PRS)


def test_a_token_in_an_answer_is_masked_as_in_rest(fake: FakeGitHub) -> None:
    _seed(fake)
    fake.put_pull(UP, 1007, title=f"leaked {DEFAULT_TOKEN} here")
    got, _ = _client(fake).get_pulls_present(PRS)
    assert DEFAULT_TOKEN not in repr(got) and got[1007][0].title == "leaked *** here"


def test_status_of_a_hundred_prs_records_the_same_state_either_way(tmp_path, fake: FakeGitHub) -> None:
    """The CLI end to end: GraphQL (auto) and REST (never) give the same report and the same
    recorded PRs, cold and warm, and the warm GraphQL poll is one request."""
    _seed(fake)
    tracks = {f"t{n}": track([n], f"track {n}") for n in PRS}
    reports, states = {}, {}
    for mode in ("auto", "never"):
        ws = make_workspace(tmp_path / mode, tracks, api_url=fake.base_url, token=DEFAULT_TOKEN)
        ws.extra_env["PORTTRACK_GRAPHQL"] = mode
        for poll in ("cold", "warm"):
            spent = Spent(fake)
            result = ws.run_in_process("status", "--json")
            assert result.returncode == 0, result.stderr
            took = spent.take()
            reports[mode, poll] = _without_times(json.loads(result.stdout))
            states[mode, poll] = _recorded_prs(ws.root)
            if mode == "auto":
                assert took == {"requests": 1, "graphql_requests": 1, "core_points": 0, "graphql_points": 1}, poll
    for poll in ("cold", "warm"):
        # what differs is what it cost: one query against a hundred GETs, and so no core budget
        # seen (GraphQL spends its own); the report's rate_limit is the core one, unknown here
        assert reports["auto", poll].pop("requests") == 1 and reports["never", poll].pop("requests") == 100
        assert reports["auto", poll].pop("rate_limit") is None and reports["never", poll].pop("rate_limit")
    assert reports["auto", "cold"] == reports["never", "cold"] and reports["auto", "warm"] == reports["never", "warm"]
    assert states["auto", "cold"] == states["never", "cold"] and states["auto", "warm"] == states["never", "warm"]


def _recorded_prs(root) -> dict:
    found = [p for p in (root / "state").rglob("*.json")] if (root / "state").is_dir() else []
    assert found, f"no recorded state under {root}"
    return {p.name: _without_times(json.loads(p.read_text())) for p in found}


def _without_times(value):
    """The document minus when it was observed (the two modes run seconds apart)."""
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items()
                if k not in ("observed_at", "generated_at", "first_seen", "last_seen", "age", "now", "at")}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value



def test_the_open_listing_is_kept_as_read_and_a_304_gives_the_same_records(fake, tmp_path):
    """The ETag cache keeps of a listing page only what `PullRequest.from_json` reads (issue 32:
    400 open PRs were 2.7 MB of etags.json parsed and walked on every `status`); a fresh answer, a
    304 from the cache and GitHub's whole objects give the same records."""
    from porttrack.github.policy import EtagCache
    from porttrack.github.records import PullRequest

    _varied(fake)
    path = tmp_path / "etags.json"
    (fresh, _), from_cache = _client(fake, EtagCache(path)).open_pulls()
    client = _client(fake, EtagCache.load(path))
    assert not from_cache and {pr.number for pr in fresh} == {1, 4, 5, 6, 7, 8, 9, 10, 11, 12}
    params = {"state": "open", "sort": "updated", "direction": "desc", "per_page": 100, "page": 1}
    whole = client.get(f"/repos/{UP}/pulls", params, conditional=False).data
    assert fresh == tuple(PullRequest.from_json(item) for item in whole)

    cache = EtagCache(path)
    _client(fake, cache).open_pulls()
    cache.save()
    kept = [entry["body"] for key, entry in json.loads(path.read_text())["entries"].items() if "/pulls?" in key]
    assert len(kept) == 1 and len(kept[0]) == len(whole)
    assert all("_links" not in item and "repo" in item["base"] and set(item["base"]["repo"]) == {"default_branch"}
               for item in kept[0]), kept[0][0]
    assert len(json.dumps(kept[0])) * 4 < len(json.dumps(whole))

    (again, _), from_cache = _client(fake, EtagCache.load(path)).open_pulls()
    assert from_cache and again == fresh
