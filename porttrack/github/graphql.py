"""Many pull requests in one GitHub GraphQL query: the query text and the reading of its answer.

Why: a REST poll costs one request per PR, so 100 tracked PRs take ~13 round trips even with 8
in flight, and a cold poll spends 100 points of the core budget. One GraphQL query asks for up to
100 PRs by number (each an alias of `repository.pullRequest(number:)`) and costs 1 point of the
separate GraphQL budget: GitHub charges a query by the connections it opens, at least 1 point,
and this one opens none. GraphQL has no ETag: a warm poll costs that 1 point too.

Each PR's answer is reshaped into the REST JSON fields `PullRequest.from_json` reads, so a record
is the same whichever way it was fetched. `porttrack.github.client` sends the query (it alone talks to
GitHub) and falls back to REST for whatever this module cannot read. No HTTP library here.
"""

from __future__ import annotations

import hashlib
import json
import os
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from porttrack.common.errors import ConfigError
from porttrack.github.records import MalformedResponse, PullRequest

BATCH = 100  # PRs per query: GitHub's node ceiling for one point
MODES = ("auto", "always", "never")
MODE_ENV = "PORTTRACK_GRAPHQL"

# The fields of `PullRequest.from_json`, by their GraphQL names; `author.__typename` tells a bot,
# whose REST login carries a "[bot]" suffix that its GraphQL login lacks.
PR_FIELDS = (
    "number title body state url isDraft createdAt updatedAt mergedAt closedAt mergeCommit { oid } "
    "headRefOid headRefName headRepository { nameWithOwner } baseRefName baseRefOid author { login __typename }"
)


@dataclass(frozen=True)
class BatchAnswer:
    """What one query gave: REST-shaped PR JSON by number, and the numbers it did not give
    (GitHub answered NOT_FOUND, or the node could not be read): those go to REST."""

    found: dict[int, dict[str, Any]]
    unanswered: tuple[int, ...]


def mode_from_env(environ: Mapping[str, str] | None = None) -> str:
    """`PORTTRACK_GRAPHQL`: auto (GraphQL for more PRs than one wave of REST requests), always,
    or never (REST only, as before GraphQL was used)."""
    value = (environ if environ is not None else os.environ).get(MODE_ENV, "auto").strip().lower() or "auto"
    if value not in MODES:
        raise ConfigError(f"{MODE_ENV}={value!r}: expected one of {', '.join(MODES)}")
    return value


def pays(authenticated: bool, count: int, wave: int) -> bool:
    """GraphQL needs a token. Up to one wave of concurrent REST requests costs a round trip and,
    warm, nothing (304s); past it REST needs more round trips and GraphQL fewer points."""
    mode = mode_from_env()
    return authenticated and mode != "never" and (mode == "always" or count > wave)


def fetch_pulls(send: Callable[..., tuple[int, Any, str]], transient: type[Exception], api_url: str, repo: str,
                numbers: Sequence[int], cache: Any, max_workers: int) -> dict[int, tuple[PullRequest, bool]]:
    """What GraphQL answers, 100 PRs to a query, the queries concurrent, through the GitHub door's
    own `send` (its deadlines, redaction and accounting). A query that fails (`transient`) answers
    nothing: its PRs go to REST, which retries."""
    url = graphql_url(api_url)

    def batch(part: Sequence[int]) -> dict[int, tuple[PullRequest, bool]]:
        try:
            status, _, text = send("POST", url, None, None, {"query": pulls_query(repo, part)})
        except transient:
            return {}
        return read_pulls(status, text, part, cache, f"{url}#{repo}")

    parts = batches(numbers)
    with ThreadPoolExecutor(max_workers=min(max_workers, len(parts)), thread_name_prefix="gql") as pool:
        return {n: got for answer in pool.map(batch, parts) for n, got in answer.items()}


def graphql_url(api_url: str) -> str:
    """GitHub's GraphQL endpoint for a REST API base: api.github.com/graphql, and on GitHub
    Enterprise Server `https://HOST/api/graphql` for `https://HOST/api/v3` (as PyGithub does)."""
    parts = urllib.parse.urlsplit(api_url.rstrip("/"))
    path = parts.path[: -len("/v3")] if parts.path.endswith("/v3") else parts.path
    return urllib.parse.urlunsplit(parts._replace(path=path + "/graphql"))


def batches(numbers: Sequence[int], size: int = BATCH) -> list[tuple[int, ...]]:
    return [tuple(numbers[i : i + size]) for i in range(0, len(numbers), size)]


def pulls_query(repo: str, numbers: Sequence[int]) -> str:
    """One query for `numbers` of `repo`. Values are written inline, not as variables: PyGithub
    2.3 wraps variables differently from 2.10, and these are a repository name and integers."""
    owner, _, name = repo.partition("/")
    aliases = " ".join(f"pr{int(n)}: pullRequest(number: {int(n)}) {{ ...PR }}" for n in numbers)
    return (
        f"query {{ repository(owner: {json.dumps(owner)}, name: {json.dumps(name)}) {{ "
        f"defaultBranchRef {{ name }} {aliases} }} }} fragment PR on PullRequest {{ {PR_FIELDS} }}"
    )


def read_pulls(status: int, text: str, numbers: Sequence[int], cache: Any, key: str) -> dict[int, tuple[PullRequest, bool]]:
    """The records one answer gave, each with whether it equals the answer kept from the last
    poll (no 304 in GraphQL: a fingerprint kept in the ETag cache plays the ETag). {} when the
    answer is unusable: its PRs then go to REST, which retries and reports as it always did."""
    try:
        answer = read_answer(json.loads(text or "null"), numbers) if status == 200 else None
    except (ValueError, RecursionError):
        return {}
    pulls: dict[int, tuple[PullRequest, bool]] = {}
    for number, shaped in (answer.found.items() if answer else ()):
        try:
            pr = PullRequest.from_json(shaped)
        except MalformedResponse:
            continue   # REST reads it
        kept, digest = cache.get(f"{key}/pulls/{number}"), fingerprint(shaped)
        unchanged = bool(kept) and kept.get("etag") == digest
        if not unchanged:
            cache.put(f"{key}/pulls/{number}", digest, None, None)
        pulls[number] = (pr, unchanged)
    return pulls


def read_answer(payload: Any, numbers: Sequence[int]) -> BatchAnswer | None:
    """The PRs in a GraphQL answer, or None when the answer as a whole is unusable (no data:
    a refused query, a rate limit, an unknown repository): then the caller uses REST."""
    data = payload.get("data") if isinstance(payload, Mapping) else None
    repository = data.get("repository") if isinstance(data, Mapping) else None
    if not isinstance(repository, Mapping):
        return None
    default_branch = (repository.get("defaultBranchRef") or {}).get("name") if isinstance(
        repository.get("defaultBranchRef"), Mapping) else None
    found: dict[int, dict[str, Any]] = {}
    unanswered: list[int] = []
    for n in numbers:
        shaped = rest_shape(repository.get(f"pr{int(n)}"), default_branch)
        if shaped is None or shaped.get("number") != int(n):
            unanswered.append(int(n))   # NOT_FOUND (null) or unreadable: REST says what it is
        else:
            found[int(n)] = shaped
    return BatchAnswer(found, tuple(unanswered))


def rest_shape(node: Any, default_branch: str | None) -> dict[str, Any] | None:
    """A GraphQL PullRequest node as the REST fields `PullRequest.from_json` reads; None when it
    is not an object carrying the state."""
    if not isinstance(node, Mapping) or node.get("state") not in ("OPEN", "CLOSED", "MERGED"):
        return None
    merged = node["state"] == "MERGED"
    head_repo = node.get("headRepository")
    merge_commit = node.get("mergeCommit")
    return {
        "number": node.get("number"),
        "title": node.get("title"),
        "body": node.get("body"),
        "state": "open" if node["state"] == "OPEN" else "closed",
        "merged": merged,
        "user": {"login": _rest_login(node.get("author"))},
        "html_url": node.get("url"),
        "draft": node.get("isDraft"),
        "created_at": node.get("createdAt"),
        "updated_at": node.get("updatedAt"),
        "merged_at": node.get("mergedAt"),
        "closed_at": node.get("closedAt"),
        "merge_commit_sha": merge_commit.get("oid") if isinstance(merge_commit, Mapping) else None,
        "head": {
            "sha": node.get("headRefOid"),
            "ref": node.get("headRefName"),
            "repo": {"full_name": head_repo.get("nameWithOwner")} if isinstance(head_repo, Mapping) else None,
        },
        "base": {"ref": node.get("baseRefName"), "sha": node.get("baseRefOid"),
                 "repo": {"default_branch": default_branch}},
    }


def _rest_login(author: Any) -> str:
    """REST names an app `name[bot]`, GraphQL `name` with `__typename: Bot`; a deleted account is
    `ghost` in REST and a null author in GraphQL."""
    if not isinstance(author, Mapping) or not author.get("login"):
        return "ghost"
    login = str(author["login"])
    return f"{login}[bot]" if author.get("__typename") == "Bot" and not login.endswith("[bot]") else login


def fingerprint(shaped: Mapping[str, Any]) -> str:
    """A stable digest of a PR's answer, kept like an ETag: an equal answer next time means
    the PR is unchanged (GraphQL has no 304)."""
    return hashlib.sha1(json.dumps(shaped, sort_keys=True).encode()).hexdigest()
