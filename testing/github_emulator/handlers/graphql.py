"""`POST /graphql`: the subset of GitHub's GraphQL API porttrack sends (porttrack/github/graphql.py):
`repository(owner:, name:)` with `nameWithOwner`, `defaultBranchRef { name }` and aliased
`pullRequest(number:)` fields, named fragments, inline values or `$variables`.

As on GitHub: a number with no pull request gives `null` under its alias plus an error of type
NOT_FOUND next to the other aliases' data; a field the schema lacks fails the whole query
(`errors`, no `data`), answered 200. The budget is a separate one per token, 5,000 points an hour,
reported in `X-RateLimit-*` with `X-RateLimit-Resource: graphql`; a query costs 1 point per 100
nodes of the connections it opens and at least 1, and this subset opens none, so 1 (the transport
takes it). A spent budget is a 200 with an error of type RATE_LIMITED, as GitHub answers.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable

from testing.github_emulator.state import Item, Repo, Token, iso, user_id
from testing.github_emulator.transport import Ctx, HTTPError, Reply

GRAPHQL_PATH = "/graphql"
ROUTES = [
    ("POST", GRAPHQL_PATH, "_h_graphql"),
]
POINTS_PER_HOUR = 5000


@dataclass
class GraphQLBudget(Token):
    """A token's GraphQL points: a Token-shaped budget, so the transport refills, spends and
    reports it as it does the core one."""

    resource: str = "graphql"


class QueryError(Exception):
    """The query cannot run (syntax, unknown field or type): `errors` and no `data`."""


# ------------------------------------------------------------------------------------- parsing

_TOKEN = re.compile(r'\s+|,|#[^\n]*|(?P<p>\.\.\.|[{}():!$=\[\]@])|(?P<s>"(?:[^"\\]|\\.)*")|'
                    r"(?P<n>-?\d+(?:\.\d+)?)|(?P<w>[_A-Za-z][_0-9A-Za-z]*)")


@dataclass(frozen=True)
class Field:
    alias: str
    name: str
    args: dict[str, Any]
    selections: tuple[Any, ...]   # Field or Spread


@dataclass(frozen=True)
class Spread:
    fragment: str


class _Parser:
    def __init__(self, text: str, variables: dict[str, Any]) -> None:
        self.tokens = self._lex(text)
        self.i = 0
        self.variables = variables

    @staticmethod
    def _lex(text: str) -> list[tuple[str, Any]]:
        tokens, pos = [], 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m:
                raise QueryError(f"Parse error on {text[pos:pos + 10]!r}")
            pos = m.end()
            if m["p"]:
                tokens.append(("p", m["p"]))
            elif m["s"]:
                tokens.append(("v", json.loads(m["s"])))
            elif m["n"]:
                tokens.append(("v", float(m["n"]) if "." in m["n"] else int(m["n"])))
            elif m["w"]:
                tokens.append(("w", m["w"]))
        return tokens

    def peek(self) -> tuple[str, Any] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, kind: str | None = None, value: Any = None) -> Any:
        tok = self.peek()
        if tok is None or (kind and tok[0] != kind) or (value is not None and tok[1] != value):
            raise QueryError(f"Parse error: expected {value or kind}, got {tok[1] if tok else 'end of query'!r}")
        self.i += 1
        return tok[1]

    def at(self, value: str) -> bool:
        return self.peek() == ("p", value)

    def document(self) -> tuple[tuple[Any, ...], dict[str, tuple[Any, ...]]]:
        operation, fragments = None, {}
        while self.peek() is not None:
            if self.peek() == ("w", "fragment"):
                self.take()
                name = self.take("w")
                self.take("w", "on")
                self.take("w")
                fragments[name] = self.selection_set()
                continue
            if self.peek() == ("w", "query"):
                self.take()
                if self.peek() and self.peek()[0] == "w":
                    self.take()
                if self.at("("):
                    self.skip_variable_definitions()
            if operation is not None:
                raise QueryError("This emulator answers one operation per document")
            operation = self.selection_set()
        if operation is None:
            raise QueryError("No operation in the document")
        return operation, fragments

    def skip_variable_definitions(self) -> None:
        depth = 0
        while True:
            tok = self.take()
            depth += {"(": 1, ")": -1}.get(tok, 0) if isinstance(tok, str) else 0
            if depth == 0:
                return

    def selection_set(self) -> tuple[Any, ...]:
        self.take("p", "{")
        selections: list[Any] = []
        while not self.at("}"):
            if self.at("..."):
                self.take()
                selections.append(Spread(self.take("w")))
                continue
            name = self.take("w")
            alias = name
            if self.at(":"):
                self.take()
                name = self.take("w")
            args = self.arguments() if self.at("(") else {}
            subs = self.selection_set() if self.at("{") else ()
            selections.append(Field(alias, name, args, subs))
        self.take("p", "}")
        return tuple(selections)

    def arguments(self) -> dict[str, Any]:
        self.take("p", "(")
        args = {}
        while not self.at(")"):
            key = self.take("w")
            self.take("p", ":")
            args[key] = self.value()
        self.take("p", ")")
        return args

    def value(self) -> Any:
        if self.at("$"):
            self.take()
            name = self.take("w")
            if name not in self.variables:
                raise QueryError(f"Variable ${name} is used but not provided")
            return self.variables[name]
        kind, value = self.peek() or ("", None)
        self.take()
        if kind == "w":
            return {"true": True, "false": False, "null": None}.get(value, value)
        return value


# ------------------------------------------------------------------------------------- answering

class GraphQLHandlers:
    _graphql_budgets: dict[int, GraphQLBudget]

    def _graphql_budget(self, token: Token) -> GraphQLBudget:
        """The token's GraphQL points (kept apart from its core REST budget, as on GitHub)."""
        budget = self._graphql_budgets.get(id(token))
        if budget is None:
            budget = GraphQLBudget(token.login, token.push, token.admin, POINTS_PER_HOUR, POINTS_PER_HOUR, token.reset)
            self._graphql_budgets[id(token)] = budget
        return budget

    def graphql_rate_limit(self, token: str) -> dict[str, int]:
        """What the token has left of its GraphQL points (5,000 an hour)."""
        with self._lock:  # type: ignore[attr-defined]
            t = self._refill(self._graphql_budget(self._tokens[token]))  # type: ignore[attr-defined]
            return {"limit": t.limit, "remaining": t.remaining, "used": t.limit - t.remaining, "reset": t.reset}

    def set_graphql_rate_limit(self, token: str, *, remaining: int) -> None:
        with self._lock:  # type: ignore[attr-defined]
            self._graphql_budget(self._tokens[token]).remaining = remaining  # type: ignore[attr-defined]

    @staticmethod
    def _graphql_rate_limited(budget: Token) -> Reply:
        """GitHub's answer once the points are spent: 200, an error, no data."""
        message = f"API rate limit already exceeded for user ID {user_id(budget.login)}."
        return Reply(200, {"errors": [{"type": "RATE_LIMITED", "message": message}]})

    def _h_graphql(self, ctx: Ctx) -> Reply:
        if ctx.token is None:
            raise HTTPError(401, "This endpoint requires you to be authenticated.")
        body = ctx.body if isinstance(ctx.body, dict) else {}
        if not isinstance(body.get("query"), str):
            raise HTTPError(400, "A query attribute must be specified and must be a string.")
        errors: list[dict] = []
        try:
            operation, fragments = _Parser(body["query"], dict(body.get("variables") or {})).document()
            _validate("Query", operation, fragments)   # as GitHub does, before anything runs
            data = self._gql_select("Query", None, operation, fragments, errors, [])
        except QueryError as exc:
            return Reply(200, {"errors": [{"message": str(exc)}]})
        return Reply(200, {"data": data, **({"errors": errors} if errors else {})})

    def _gql_select(self, type_name: str, obj: Any, selections: tuple[Any, ...], fragments: dict,
                    errors: list[dict], path: list[Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for sel in selections:
            if isinstance(sel, Spread):
                out.update(self._gql_select(type_name, obj, fragments[sel.fragment], fragments, errors, path))
                continue
            if sel.name == "__typename":   # an interface (Actor) names its object's own type
                out[sel.alias] = obj.get("__typename", type_name) if isinstance(obj, dict) else type_name
                continue
            child_type, resolve = _SCHEMA[type_name][sel.name]
            value = resolve(self, obj, sel.args, errors, path + [sel.alias])
            if child_type is None or value is None:
                out[sel.alias] = value
            else:
                out[sel.alias] = self._gql_select(child_type, value, sel.selections, fragments, errors, path + [sel.alias])
        return out

    def _gql_repository(self, _: Any, args: dict, errors: list[dict], path: list[Any]) -> Repo | None:
        repo = self._repos.get(f"{args.get('owner')}/{args.get('name')}".lower())  # type: ignore[attr-defined]
        if repo is None:
            errors.append({"type": "NOT_FOUND", "path": path, "message":
                           f"Could not resolve to a Repository with the name '{args.get('owner')}/{args.get('name')}'."})
        return repo

    def _gql_pull_request(self, r: Repo, args: dict, errors: list[dict], path: list[Any]) -> tuple[Repo, Item] | None:
        item = r.items.get(args.get("number")) if isinstance(args.get("number"), int) else None
        if item is None or item.pull is None:
            errors.append({"type": "NOT_FOUND", "path": path, "message":
                           f"Could not resolve to a PullRequest with the number of {args.get('number')}."})
            return None
        return r, item

    def _gql_head_repo(self, item: Item) -> Repo | str | None:
        assert item.pull is not None
        name = item.pull.head_repo
        return self._repos.get(name.lower(), name) if name else None  # type: ignore[attr-defined]

    def _gql_pr_url(self, r: Repo, item: Item) -> str:
        assert item.pull is not None
        return item.pull.html_url or f"{self.html_base}/{r.full_name}/pull/{item.number}"  # type: ignore[attr-defined]


def _validate(type_name: str, selections: tuple[Any, ...], fragments: dict) -> None:
    for sel in selections:
        if isinstance(sel, Spread):
            if sel.fragment not in fragments:
                raise QueryError(f"Fragment {sel.fragment} was used, but not defined")
            _validate(type_name, fragments[sel.fragment], fragments)
        elif sel.name != "__typename":
            if sel.name not in _SCHEMA[type_name]:
                raise QueryError(f"Field '{sel.name}' doesn't exist on type '{type_name}'")
            child_type = _SCHEMA[type_name][sel.name][0]
            if child_type is not None and not sel.selections:
                raise QueryError(f"Field must have selections (field '{sel.name}' returns {child_type} but has no selections.)")
            if child_type is not None:
                _validate(child_type, sel.selections, fragments)


Resolver = Callable[..., Any]   # (handlers, parent object, arguments, errors, path) -> value


def _scalar(get: Callable[[Any], Any]) -> tuple[None, Resolver]:
    return None, lambda self, obj, args, errors, path: get(obj)


def _object(type_name: str, get: Callable[[Any], Any]) -> tuple[str, Resolver]:
    return type_name, lambda self, obj, args, errors, path: get(obj)


def _pr_state(item: Item) -> str:
    assert item.pull is not None
    return "MERGED" if item.pull.merged else item.state.upper()


def _author(login: str | None) -> dict | None:
    if not login:
        return None
    if login.endswith("[bot]"):   # GraphQL names an app without REST's suffix
        return {"login": login[: -len("[bot]")], "__typename": "Bot"}
    return {"login": login, "__typename": "User"}


# type -> field -> (the type of its object, None for a scalar; how to get it)
_SCHEMA: dict[str, dict[str, tuple[str | None, Resolver]]] = {
    "Query": {"repository": ("Repository", GraphQLHandlers._gql_repository)},
    "Repository": {
        # a head repository the emulator does not hold is only its name
        "nameWithOwner": _scalar(lambda r: r if isinstance(r, str) else r.full_name),
        "defaultBranchRef": _object("Ref", lambda r: {"name": r.default_branch}),
        "pullRequest": ("PullRequest", GraphQLHandlers._gql_pull_request),
    },
    "Ref": {"name": _scalar(lambda ref: ref["name"])},
    "Commit": {"oid": _scalar(lambda c: c["oid"])},
    "Actor": {"login": _scalar(lambda a: a["login"])},
    "PullRequest": {
        "number": _scalar(lambda ri: ri[1].number),
        "title": _scalar(lambda ri: ri[1].title),
        "body": _scalar(lambda ri: ri[1].body or ""),
        "state": _scalar(lambda ri: _pr_state(ri[1])),
        "merged": _scalar(lambda ri: ri[1].pull.merged),
        "url": (None, lambda self, ri, args, errors, path: self._gql_pr_url(*ri)),
        "isDraft": _scalar(lambda ri: ri[1].pull.draft),
        "createdAt": _scalar(lambda ri: iso(ri[1].created_at)),
        "updatedAt": _scalar(lambda ri: iso(ri[1].updated_at)),
        "mergedAt": _scalar(lambda ri: iso(ri[1].pull.merged_at)),
        "closedAt": _scalar(lambda ri: iso(ri[1].closed_at)),
        "mergeCommit": _object("Commit", lambda ri: {"oid": ri[1].pull.merge_commit_sha}
                               if ri[1].pull.merged and ri[1].pull.merge_commit_sha else None),
        "headRefOid": _scalar(lambda ri: ri[1].pull.head_sha),
        "headRefName": _scalar(lambda ri: ri[1].pull.head_ref),
        "headRepository": ("Repository", lambda self, ri, args, errors, path: self._gql_head_repo(ri[1])),
        "baseRefName": _scalar(lambda ri: ri[1].pull.base_ref),
        "baseRefOid": _scalar(lambda ri: ri[1].pull.base_sha),
        "author": _object("Actor", lambda ri: _author(ri[1].user)),
    },
}
