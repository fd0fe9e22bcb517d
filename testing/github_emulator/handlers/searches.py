"""Routes the searches read (porttrack.observe.successors, porttrack.observe.collisions): an issue's timeline,
a pull request's files, and the issue search.

The timeline is derived as GitHub derives it: an item whose body or comments mention `#N` puts a
`cross-referenced` event on #N's timeline (plus `closed` / `merged` events for the item itself).
`hidden_cross_references` (a set of (repo, target, source)) drops chosen events, as real GitHub
sometimes does (PyGithub #2978). The search understands the qualifiers porttrack sends:
`repo:`, `is:pr`, `is:issue`, `author:`, `state:`, `in:body`, and plain words (all must appear in
the title or body).
"""

from __future__ import annotations

import re

from testing.github_emulator.state import Item, iso
from testing.github_emulator.transport import REPO, Ctx, HTTPError, Reply

ROUTES = [
    ("GET", REPO + r"/issues/(?P<n>\d+)/timeline", "_h_timeline"),
    ("GET", REPO + r"/pulls/(?P<n>\d+)/files", "_h_pull_files"),
    ("GET", r"/search/issues", "_h_search_issues"),
]


def mentions(item: Item, number: int) -> bool:
    pattern = re.compile(rf"(?<![\w/#])#{number}(?!\d)")
    texts = [item.title or "", item.body or ""] + [c.body for c in item.comments]
    return any(pattern.search(t) for t in texts)


class SearchesHandlers:
    hidden_cross_references: set[tuple[str, int, int]]

    def _h_timeline(self, ctx: Ctx, owner: str, name: str, n: str) -> Reply:
        r = self._repo_for(owner, name)
        target = self._item(r, n)
        events = []
        for other in sorted(r.items.values(), key=lambda i: (i.created_at, i.number)):
            if other.number == target.number or not mentions(other, target.number):
                continue
            if (r.full_name, target.number, other.number) in self.hidden_cross_references:
                continue
            events.append({"event": "cross-referenced", "created_at": iso(other.created_at),
                           "updated_at": iso(other.updated_at), "actor": self._user(other.user),
                           "source": {"type": "issue", "issue": {**self._issue_json(r, other),
                                                                 "repository": self._repo_json(r, ctx.token)}}})
        if target.closed_at is not None:
            merged = target.pull is not None and target.pull.merged
            events.append({"event": "merged" if merged else "closed", "created_at": iso(target.closed_at),
                           "actor": self._user(target.closed_by or target.user), "commit_id": None})
        page, headers = self._paginate(ctx, events)
        return Reply(payload=page, headers=headers)

    def _h_pull_files(self, ctx: Ctx, owner: str, name: str, n: str) -> Reply:
        r, item = self._pull_item(owner, name, n)
        assert item.pull is not None
        files = [self._file_json(r, f, item.pull.head_sha) for f in self._pr_files(r, item.pull)]
        page, headers = self._paginate(ctx, files)
        return Reply(payload=page, headers=headers)

    def _h_search_issues(self, ctx: Ctx) -> Reply:
        query = ctx.args.get("q", "")
        if not query.strip():
            raise HTTPError(422, "Validation Failed", errors=[{"resource": "Search", "field": "q", "code": "missing"}])
        quals, words = {}, []
        for token in query.split():
            key, sep, value = token.partition(":")
            if sep and key in ("repo", "is", "author", "state", "in"):
                quals.setdefault(key, []).append(value)
            else:
                words.append(token.strip('"').lower())
        found = []
        for r in self._repos.values():
            if "repo" in quals and r.full_name.lower() not in [q.lower() for q in quals["repo"]]:
                continue
            found += [(r, i) for i in r.items.values() if self._search_match(i, quals, words)]
        found.sort(key=lambda ri: (ri[1].created_at, ri[1].number), reverse=True)
        page, headers = self._paginate(ctx, found)
        items = [{**self._issue_json(r, i), "score": 1.0} for r, i in page]
        return Reply(payload={"total_count": len(found), "incomplete_results": False, "items": items}, headers=headers)

    @staticmethod
    def _search_match(item: Item, quals: dict, words: list) -> bool:
        kinds = quals.get("is", [])
        if "pr" in kinds and item.pull is None or "issue" in kinds and item.pull is not None:
            return False
        if "author" in quals and item.user not in quals["author"]:
            return False
        if "state" in quals and item.state not in quals["state"]:
            return False
        text = ((item.body or "") if quals.get("in") == ["body"] else f"{item.title}\n{item.body or ''}").lower()
        return all(w in text for w in words)


__all__ = ["SearchesHandlers", "mentions", "ROUTES"]
