"""Pull request routes: one pull request, and the list filtered by state, head and base."""

from __future__ import annotations

from testing.github_emulator.state import Item, Repo
from testing.github_emulator.transport import REPO, Ctx, Reply, not_found

ROUTES = [
    ("GET", REPO + r"/pulls", "_h_pulls"),
    ("GET", REPO + r"/pulls/(?P<n>\d+)", "_h_pull"),
]


class PullsHandlers:
    def _h_pulls(self, ctx: Ctx, owner: str, name: str) -> Reply:
        r = self._repo_for(owner, name)
        state = ctx.args.get("state", "open")
        head, base = ctx.args.get("head"), ctx.args.get("base")
        items = [i for i in r.items.values() if i.pull is not None
                 and (state == "all" or i.state == state)
                 and (head is None or i.pull.head_label == head or (":" not in head and i.pull.head_ref == head))
                 and (base is None or i.pull.base_ref == base)]
        sort = ctx.args.get("sort", "created")
        key = {"updated": lambda i: (i.updated_at, i.number)}.get(sort, lambda i: (i.created_at, i.number))
        items.sort(key=key, reverse=ctx.args.get("direction", "desc") != "asc")
        page, headers = self._paginate(ctx, items)
        return Reply(payload=[self._pull_json(r, i, ctx.token, listing=True) for i in page], headers=headers)

    def _pull_item(self, owner: str, name: str, n: str) -> tuple[Repo, Item]:
        r = self._repo_for(owner, name)
        item = self._item(r, n)
        if item.pull is None:
            raise not_found()
        return r, item

    def _h_pull(self, ctx: Ctx, owner: str, name: str, n: str) -> Reply:
        r, item = self._pull_item(owner, name, n)
        return Reply(payload=self._pull_json(r, item, ctx.token), last_modified=item.updated_at)

