"""Routes outside any repository: `/rate_limit`, the budget the token (or, without one, the
client address) has left (asking is free, and is answered even when the budget is spent, as on
GitHub: transport.py exempts it)."""

from __future__ import annotations

from ..transport import Ctx, Reply

ROUTES = [
    ("GET", r"/rate_limit", "_h_rate_limit"),
]


class MetaHandlers:
    def _h_rate_limit(self, ctx: Ctx) -> Reply:
        t = ctx.token or ctx.budget   # without a token: the client address's budget
        assert t is not None
        core = {"limit": t.limit, "remaining": t.remaining, "reset": t.reset,
                "used": t.limit - t.remaining, "resource": "core"}
        res = {"core": core,
               "search": {"limit": 30, "remaining": 30, "reset": t.reset, "used": 0, "resource": "search"},
               "graphql": {"limit": 5000, "remaining": 5000, "reset": t.reset, "used": 0, "resource": "graphql"}}
        return Reply(payload={"resources": res, "rate": core})
