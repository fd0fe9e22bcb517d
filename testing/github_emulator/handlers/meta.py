"""Routes outside any repository: `/rate_limit`, the budget the token (or, without one, the
client address) has left (asking is free, and is answered even when the budget is spent, as on
GitHub: transport.py exempts it)."""

from __future__ import annotations

from testing.github_emulator.state import Token
from testing.github_emulator.transport import Ctx, Reply

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
               "graphql": self._graphql_resource(ctx.token)}
        return Reply(payload={"resources": res, "rate": core})

    def _graphql_resource(self, token: Token | None) -> dict:
        """The token's GraphQL points (handlers/graphql.py); none without a token, as on GitHub."""
        g = self._refill(self._graphql_budget(token)) if token else Token("", False, False, 0, 0, 0)  # type: ignore[attr-defined]
        return {"limit": g.limit, "remaining": g.remaining, "reset": g.reset, "used": g.limit - g.remaining, "resource": "graphql"}
