"""Issue routes: list (filtered, newest first), create, edit (title, body, labels, state),
and an issue's comments (list, create, edit). Writes need a token with push access."""

from __future__ import annotations

from collections.abc import Iterator

from testing.github_emulator.state import Comment, Item, parse_time
from testing.github_emulator.transport import REPO, Ctx, HTTPError, Reply, validation

ROUTES = [
    ("GET", REPO + r"/issues", "_h_issues"),
    ("POST", REPO + r"/issues", "_h_create_issue"),
    ("GET", REPO + r"/issues/(?P<n>\d+)", "_h_issue"),
    ("PATCH", REPO + r"/issues/(?P<n>\d+)", "_h_edit_issue"),
    ("GET", REPO + r"/issues/(?P<n>\d+)/comments", "_h_comments"),
    ("POST", REPO + r"/issues/(?P<n>\d+)/comments", "_h_create_comment"),
    ("PATCH", REPO + r"/issues/comments/(?P<cid>\d+)", "_h_edit_comment"),
]


class IssuesHandlers:
    _ids: Iterator[int]

    def _h_issues(self, ctx: Ctx, owner: str, name: str) -> Reply:
        r = self._repo_for(owner, name)
        state = ctx.args.get("state", "open")
        labels = [x.strip() for x in ctx.args.get("labels", "").split(",") if x.strip()]
        creator = ctx.args.get("creator")
        since = parse_time(ctx.args["since"]) if "since" in ctx.args else None
        items = [i for i in r.items.values()
                 if (state == "all" or i.state == state) and all(x in i.labels for x in labels)
                 and (creator is None or i.user == creator) and (since is None or i.updated_at >= since)]
        sort = ctx.args.get("sort", "created")
        key = {"updated": lambda i: (i.updated_at, i.number),
               "comments": lambda i: (len(i.comments), i.number)}.get(sort, lambda i: (i.created_at, i.number))
        items.sort(key=key, reverse=ctx.args.get("direction", "desc") != "asc")
        page, headers = self._paginate(ctx, items)
        return Reply(payload=[self._issue_json(r, i) for i in page], headers=headers)

    def _h_create_issue(self, ctx: Ctx, owner: str, name: str) -> Reply:
        r = self._repo_for(owner, name)
        self._require_push(ctx)
        body = ctx.body if isinstance(ctx.body, dict) else {}
        if not isinstance(body.get("title"), (str, int)) or str(body.get("title")).strip() == "":
            raise validation("Issue", "title")
        now = self.now()
        item = Item(next(self._ids), self._next_number(r), str(body["title"]), body.get("body"),
                    ctx.login or "", now, now, labels=self._ensure_labels(r, body.get("labels") or []))
        r.items[item.number] = item
        d = self._issue_json(r, item, full=True)
        return Reply(201, d, headers={"Location": d["url"]})

    def _h_issue(self, ctx: Ctx, owner: str, name: str, n: str) -> Reply:
        """One issue, or a PR seen as an issue (it then carries `pull_request`), as on GitHub."""
        r = self._repo_for(owner, name)
        return Reply(payload=self._issue_json(r, self._item(r, n), full=True))

    def _h_edit_issue(self, ctx: Ctx, owner: str, name: str, n: str) -> Reply:
        r = self._repo_for(owner, name)
        item = self._item(r, n)
        self._require_push(ctx)
        body = ctx.body if isinstance(ctx.body, dict) else {}
        if "title" in body:
            if not body["title"]:
                raise validation("Issue", "title")
            item.title = str(body["title"])
        if "body" in body:
            item.body = body["body"]
        if "labels" in body:
            item.labels = self._ensure_labels(r, body["labels"] or [])
        reason = body.get("state_reason")
        if reason is not None and reason not in ("completed", "not_planned", "reopened", "duplicate"):
            raise validation("Issue", "state_reason", "invalid")
        if "state" in body:
            if body["state"] not in ("open", "closed"):
                raise validation("Issue", "state", "invalid")
            if body["state"] == "closed" and item.state != "closed":
                item.state, item.closed_at, item.closed_by = "closed", self.now(), ctx.login
                item.state_reason = reason or "completed"
            elif body["state"] == "open" and item.state != "open":
                if item.pull is not None and item.pull.merged:
                    raise HTTPError(422, "Validation Failed", errors=[
                        {"resource": "Issue", "code": "custom", "message": "merged pull requests cannot be reopened"}])
                item.state, item.closed_at, item.closed_by = "open", None, None
                item.state_reason = "reopened"
            elif reason is not None:
                item.state_reason = reason
        item.updated_at = self._bump(item.updated_at)
        return Reply(payload=self._issue_json(r, item, full=True))

    def _h_comments(self, ctx: Ctx, owner: str, name: str, n: str) -> Reply:
        r = self._repo_for(owner, name)
        item = self._item(r, n)
        since = parse_time(ctx.args["since"]) if "since" in ctx.args else None
        comments = [c for c in item.comments if since is None or c.updated_at >= since]
        page, headers = self._paginate(ctx, comments)
        return Reply(payload=[self._comment_json(r, item, c) for c in page], headers=headers)

    def _h_create_comment(self, ctx: Ctx, owner: str, name: str, n: str) -> Reply:
        r = self._repo_for(owner, name)
        item = self._item(r, n)
        self._require_push(ctx)
        body = ctx.body if isinstance(ctx.body, dict) else {}
        if not isinstance(body.get("body"), str) or not body["body"]:
            raise validation("IssueComment", "body")
        now = self.now()
        c = Comment(next(self._ids), body["body"], ctx.login or "", now, now)
        item.comments.append(c)
        item.updated_at = self._bump(item.updated_at)
        d = self._comment_json(r, item, c)
        return Reply(201, d, headers={"Location": d["url"]})

    def _h_edit_comment(self, ctx: Ctx, owner: str, name: str, cid: str) -> Reply:
        r = self._repo_for(owner, name)
        self._require_push(ctx)
        found = [(item, c) for item in r.items.values() for c in item.comments if c.id == int(cid)]
        if not found:
            raise HTTPError(404, "Not Found")
        body = ctx.body if isinstance(ctx.body, dict) else {}
        if not isinstance(body.get("body"), str) or not body["body"]:
            raise validation("IssueComment", "body")
        item, c = found[0]
        c.body = body["body"]
        c.updated_at = self.now()
        return Reply(payload=self._comment_json(r, item, c))

