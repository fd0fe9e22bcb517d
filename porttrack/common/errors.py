"""One error hierarchy and one published table of exit codes.

Core code raises `PorttrackError` subclasses; only `porttrack.cli` turns them into a one-line
message and an exit code. The table below is the one docs/exit-codes.md publishes: keep them in step.
"""

from __future__ import annotations

import re
from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    CHECK_FAILED = 1  # a check ran and said no: not converged, gate failed, promotion refused
    USAGE = 2  # bad arguments, malformed tracks.yaml or input file, broken environment (git)
    AUTH = 3  # GitHub refused the token, or no token where one is required
    CONFLICT = 4  # a patch conflicts: a human must resolve it
    UNREACHABLE = 5  # GitHub could not be reached or kept failing (after bounded retries)
    PRECONDITION = 6  # the object is not in a state this command accepts (PR not merged, unsafe diff)
    CANNOT_EVALUATE = 7  # a check could not be evaluated (missing evidence, baseline, results)
    BUSY = 8  # another porttrack process holds the workspace lock
    INTERNAL = 70  # a bug: the message says where the full log is
    INTERRUPTED = 130  # SIGINT; nothing half-written is left behind


EXIT_CODE_MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "success",
    ExitCode.CHECK_FAILED: "a check ran and failed (not converged, gate failed, promotion refused)",
    ExitCode.USAGE: "usage, configuration or environment error (bad flag, malformed tracks.yaml, git failure)",
    ExitCode.AUTH: "GitHub authentication or permission problem",
    ExitCode.CONFLICT: "a patch conflicts with the fork: a human must resolve it",
    ExitCode.UNREACHABLE: "GitHub unreachable or failing after bounded retries (incl. rate limit)",
    ExitCode.PRECONDITION: "not in a state this command accepts (e.g. PR not merged, unsafe diff)",
    ExitCode.CANNOT_EVALUATE: "a check could not be evaluated (missing evidence or baseline)",
    ExitCode.BUSY: "another porttrack process is working on this workspace",
    ExitCode.INTERNAL: "internal error (a bug); the message says where the full log is",
    ExitCode.INTERRUPTED: "interrupted; the workspace was left as it was",
}


class PorttrackError(Exception):
    """Base of every error porttrack reports to a user. `str()` is the one-line message, redacted:
    a message may quote what a user or a server wrote (a tracks.yaml value, an environment
    variable, git's stderr, GitHub's answer), and the token must not leave the process in it."""

    exit_code: ExitCode = ExitCode.USAGE

    def __str__(self) -> str:
        from porttrack.common.secrets import redact

        return redact(super().__str__())


class ConfigError(PorttrackError):
    """tracks.yaml or another human-owned input is malformed. Message: `file:line:col: path: what`."""

    exit_code = ExitCode.USAGE


class InputError(PorttrackError):
    """A machine-readable input (results file, recorded state, patch) is malformed."""

    exit_code = ExitCode.USAGE


# git's own statement of a failure. The last stderr line is often advice that follows it
# ("Please make sure you have the correct access rights / and the repository exists.").
_GIT_CAUSE = re.compile(r"^(?:fatal|error): ")
# scheme://user:password@host : a remote URL may carry a credential, and git repeats URLs
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]{0,30}://)[^/\s@]{1,2000}@")
_CAUSE_LINES = 3
_CAUSE_CHARS = 300


def git_cause(stderr: str) -> str:
    """What to say about a git failure: git's fatal:/error: lines (at most 3, each cut to 300
    characters), or its last line when it wrote none; userinfo removed from any URL."""
    lines = [line.strip() for line in stderr.replace("\r", "\n").splitlines() if line.strip()]
    causes = list(dict.fromkeys(line for line in lines if _GIT_CAUSE.match(line)))[:_CAUSE_LINES] or lines[-1:]
    cut = [line if len(line) <= _CAUSE_CHARS else line[: _CAUSE_CHARS - 1] + "…" for line in causes]
    return without_userinfo("; ".join(cut)) or "(no stderr)"


def without_userinfo(text: str) -> str:
    return _URL_USERINFO.sub(r"\1***@", text)


class GitError(PorttrackError):
    """A git command failed. Carries the command, its exit status and stderr (whole, for callers
    that look at it); the message keeps the lines that state the cause, one line, bounded."""

    exit_code = ExitCode.USAGE

    def __init__(self, args: list[str], returncode: int, stderr: str):
        self.args_ = list(args)
        self.returncode = returncode
        self.stderr = stderr
        command = without_userinfo(f"git {' '.join(args[:3])}{' …' if len(args) > 3 else ''}")
        super().__init__(f"{command} exited {returncode}: {git_cause(stderr)}")


class GitHubAuthError(PorttrackError):
    exit_code = ExitCode.AUTH


class UpstreamUnreachable(PorttrackError):
    exit_code = ExitCode.UNREACHABLE


class RateLimited(UpstreamUnreachable):
    """GitHub said to wait longer than we are willing to. `retry_at` is when to try again."""

    def __init__(self, message: str, retry_at: str | None = None):
        super().__init__(message)
        self.retry_at = retry_at


class NotFound(PorttrackError):
    exit_code = ExitCode.USAGE
    status = 404  # the HTTP status GitHub answered with, where it was GitHub (porttrack.github.client sets it)


class NotTracked(PorttrackError):
    """A PR number no track names (nor stacked under one): a typo, usually. Said before any request."""

    exit_code = ExitCode.USAGE


class ConflictError(PorttrackError):
    exit_code = ExitCode.CONFLICT


class PreconditionError(PorttrackError):
    exit_code = ExitCode.PRECONDITION


class UnsafeInput(PreconditionError):
    """Untrusted input (a diff path, a PR field) tried to escape the fork's work tree or similar."""


class CheckFailed(PorttrackError):
    exit_code = ExitCode.CHECK_FAILED


class CannotEvaluate(PorttrackError):
    exit_code = ExitCode.CANNOT_EVALUATE


class WorkspaceBusy(PorttrackError):
    exit_code = ExitCode.BUSY
