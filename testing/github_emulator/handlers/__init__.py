"""The emulator's HTTP handlers, one module per area of the REST API, each a mixin of
FakeGitHub with a `ROUTES` table of (method, path pattern, handler method name).

Only the requests porttrack sends (porttrack/github/client.py) are routed; anything else is an
unrouted request, which `FakeGitHub.problems()` reports.
"""
