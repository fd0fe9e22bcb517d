"""A bound on how many requests the searches (successors, collisions) may send in one run, and
the tally `status` prints: requests sent, and how many of them were answered 304 from the ETag
cache (those cost no rate limit)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, TypeVar

if TYPE_CHECKING:
    from porttrack.github.client import GitHubClient

T = TypeVar("T")
DEFAULT_LIMIT = 80


class BudgetSpent(Exception):
    """The searches used their requests: what was found so far stands, the rest waits a run."""


@dataclass(frozen=True)
class Cost:
    requests: int
    not_modified: int  # of `requests`, answered 304 from the ETag cache
    limit: int
    exhausted: bool

    @property
    def text(self) -> str:
        spent = f", request limit {self.limit} reached: the rest waits for the next run" if self.exhausted else ""
        return f"searches cost {self.requests} request{'s' if self.requests != 1 else ''} ({self.not_modified} answered 304 from cache){spent}"

    def to_json(self) -> dict[str, Any]:
        return {"requests": self.requests, "not_modified": self.not_modified, "limit": self.limit, "exhausted": self.exhausted}


class Budget:
    """Counts the client's requests from its creation; `call` refuses once `limit` are spent. Safe
    to call from several threads (the searches run concurrently): the check may let a few calls
    in flight finish past the limit, never start one after it."""

    def __init__(self, client: "GitHubClient", limit: int = DEFAULT_LIMIT):
        self.client, self.limit = client, limit
        self._start = client.requests_sent
        self._start_304 = getattr(client, "answered_304", 0)
        self._exhausted = False

    @property
    def spent(self) -> int:
        return self.client.requests_sent - self._start

    @property
    def left(self) -> int:
        return max(0, self.limit - self.spent)

    def call(self, fn: Callable[..., tuple[T, bool]], *args: Any) -> T:
        """`fn(*args)` -> (result, answered from cache); its requests are tallied."""
        if self.spent >= self.limit:
            self._exhausted = True
            raise BudgetSpent()
        result, _cached = fn(*args)
        return result

    def cost(self) -> Cost:
        # 304s as the client counted them: calls run concurrently, so no per-call difference is exact
        return Cost(self.spent, getattr(self.client, "answered_304", 0) - self._start_304, self.limit, self._exhausted)


__all__ = ["Budget", "BudgetSpent", "Cost", "DEFAULT_LIMIT"]
