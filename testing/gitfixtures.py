"""Real git repositories in temporary folders, isolated from the developer's own git setup.

An `Upstream` is a bare repository (what GitHub serves) plus an authoring clone where the
fixture makes its commits. Pull requests live on branches `pr/N` and, like on GitHub, under
`refs/pull/N/head` in the bare repository. A fork is a plain clone whose remote is `upstream`.

Commit dates come from a deterministic clock (`reset_clock()`; the pytest `git_env` fixture
resets it per test), so the same test builds the same SHAs on every run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "ENV_TO_CLEAR",
    "GIT_EPOCH",
    "Executable",
    "GitError",
    "Symlink",
    "Upstream",
    "clone_fork",
    "fork_commit",
    "generate_history",
    "git",
    "git_bytes",
    "is_ancestor",
    "isolated_environ",
    "isolated_git_env",
    "reset_clock",
    "write_files",
]

GIT_EPOCH = 1767225600  # 2026-01-01T00:00:00Z: every fixture commit date counts up from here
AUTHOR_NAME = "Porttrack Test"
AUTHOR_EMAIL = "test@porttrack.invalid"

# Variables that would make a test talk to the wrong repository, the developer's config, or a
# real GitHub. The `git_env` fixture removes them; `isolated_environ()` does the same.
ENV_TO_CLEAR = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_PREFIX",
    "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG_SYSTEM",
    "GIT_SSH", "GIT_SSH_COMMAND", "GIT_ASKPASS", "SSH_ASKPASS", "GIT_PROXY_COMMAND",
    "GIT_QUARANTINE_PATH", "GIT_REFLOG_ACTION", "GIT_SEQUENCE_EDITOR", "GIT_EXTERNAL_DIFF",
    "GIT_TRACE", "GIT_TRACE2", "GIT_TRACE2_EVENT", "GIT_TRACE2_PERF",
    "GITHUB_TOKEN", "GH_TOKEN", "GITHUB_API_URL", "GH_HOST", "GH_ENTERPRISE_TOKEN",
    "GITHUB_ENTERPRISE_TOKEN", "PORTTRACK_API_URL", "PORTTRACK_TOKEN",
)

_GITCONFIG = f"""\
[user]
\tname = {AUTHOR_NAME}
\temail = {AUTHOR_EMAIL}
[init]
\tdefaultBranch = main
[core]
\tautocrlf = false
\tfsmonitor = false
[commit]
\tgpgsign = false
[tag]
\tgpgsign = false
[advice]
\tdetachedHead = false
[gc]
\tauto = 0
[maintenance]
\tauto = false
[pull]
\trebase = false
[color]
\tui = false
[protocol "file"]
\tallow = always
"""


def isolated_git_env(home: Path) -> dict[str, str]:
    """Environment overrides that cut git (and gh) off from the user's configuration.

    Writes `home/.gitconfig` and returns the variables to set; variables to *remove* are in
    `ENV_TO_CLEAR`. Author/committer dates are fixed at `GIT_EPOCH`; the fixture helpers below
    override them per commit from the advancing clock.
    """
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    (home / ".config").mkdir(exist_ok=True)
    gitconfig = home / ".gitconfig"
    gitconfig.write_text(_GITCONFIG)
    date = f"{GIT_EPOCH} +0000"
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "GH_CONFIG_DIR": str(home / ".config" / "gh"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": str(gitconfig),
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": AUTHOR_NAME,
        "GIT_AUTHOR_EMAIL": AUTHOR_EMAIL,
        "GIT_COMMITTER_NAME": AUTHOR_NAME,
        "GIT_COMMITTER_EMAIL": AUTHOR_EMAIL,
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_DATE": date,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_EDITOR": "true",
        "GIT_MERGE_AUTOEDIT": "no",
        "GIT_PAGER": "cat",
        "PAGER": "cat",
        "LC_ALL": "C",
        "LANG": "C",
        "TZ": "UTC",
    }


@contextlib.contextmanager
def isolated_environ(home: Path) -> Iterator[dict[str, str]]:
    """`isolated_git_env` applied to `os.environ` for the duration (benchmarks, scripts)."""
    saved = dict(os.environ)
    for name in ENV_TO_CLEAR:
        os.environ.pop(name, None)
    env = isolated_git_env(home)
    os.environ.update(env)
    reset_clock()
    try:
        yield env
    finally:
        os.environ.clear()
        os.environ.update(saved)


class _Clock:
    """Commit dates that advance one minute per commit, from GIT_EPOCH."""

    def __init__(self, start: int = GIT_EPOCH, step: int = 60) -> None:
        self.start, self.step, self.n = start, step, 0

    def tick(self) -> str:
        self.n += 1
        return f"{self.start + self.n * self.step} +0000"


_clock = _Clock()


def reset_clock() -> None:
    """Restart the commit-date clock (the `git_env` fixture does this before each test)."""
    global _clock
    _clock = _Clock()


def _dated_env() -> dict[str, str]:
    date = _clock.tick()
    return {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}


# --------------------------------------------------------------------------------------- git


class GitError(RuntimeError):
    def __init__(self, args: tuple[str, ...], returncode: int, stderr: str) -> None:
        self.args_ = args
        self.returncode = returncode
        self.stderr = stderr
        super().__init__(f"git {' '.join(args)} exited {returncode}: {stderr.strip()}")


def git_bytes(repo: Path, *args: str, input: bytes | None = None,
              env: Mapping[str, str] | None = None, check: bool = True) -> bytes:
    """Run git in `repo`; bytes in, bytes out (no newline stripping: patches stay intact)."""
    full_env = {**os.environ, "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0", **(env or {})}
    p = subprocess.run(["git", "-C", str(repo), *args], input=input, capture_output=True,
                       env=full_env, timeout=300)
    if check and p.returncode:
        raise GitError(args, p.returncode, p.stderr.decode("utf-8", "replace"))
    return p.stdout


def git(repo: Path, *args: str, input: bytes | None = None,
        env: Mapping[str, str] | None = None, check: bool = True) -> str:
    """Run git in `repo` and return stdout as text without the trailing newline."""
    return git_bytes(repo, *args, input=input, env=env, check=check).decode("utf-8", "replace").rstrip("\n")


def is_ancestor(repo: Path, ancestor: str, descendant: str) -> bool:
    p = subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", ancestor, descendant],
                       capture_output=True, env={**os.environ, "LC_ALL": "C"})
    if p.returncode not in (0, 1):
        raise GitError(("merge-base", "--is-ancestor", ancestor, descendant), p.returncode,
                       p.stderr.decode("utf-8", "replace"))
    return p.returncode == 0


# ------------------------------------------------------------------------------- file edits


@dataclass(frozen=True)
class Executable:
    """File content committed with mode 100755."""
    content: bytes | str


@dataclass(frozen=True)
class Symlink:
    """A symbolic link (mode 120000) pointing at `target`."""
    target: str


@dataclass(frozen=True)
class Gitlink:
    """A submodule entry (mode 160000) at commit `sha`; the commit need not exist anywhere. The
    work tree gets an empty folder there, so `git add -A` keeps the entry (an unpopulated submodule)."""
    sha: str


FileValue = bytes | str | Executable | Symlink | Gitlink | None


def _safe_path(root: Path, name: str) -> Path:
    rel = Path(name)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts or rel.parts[0] == ".git":
        raise ValueError(f"unsafe path in fixture files: {name!r}")
    return root / rel


def write_files(root: Path, files: Mapping[str, FileValue]) -> None:
    """Apply `files` to a work tree: bytes/str write a regular file, None deletes."""
    for name, value in files.items():
        path = _safe_path(root, name)
        if path.is_dir() and not path.is_symlink():  # an unpopulated submodule's folder
            path.rmdir()
            if value is None:
                git(root, "rm", "-q", "--cached", "--ignore-unmatch", "--", name)
        if path.is_symlink() or path.exists():
            if value is None or isinstance(value, (Symlink, Gitlink)) or path.is_symlink():
                path.unlink()
        if value is None:
            continue
        if isinstance(value, Gitlink):
            path.mkdir(parents=True)
            git(root, "update-index", "--add", "--cacheinfo", f"160000,{value.sha},{name}")
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(value, Symlink):
            os.symlink(value.target, path)
            continue
        content = value.content if isinstance(value, Executable) else value
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        path.chmod(0o755 if isinstance(value, Executable) else 0o644)


def _commit_all(work: Path, message: str) -> str:
    git(work, "add", "-A")
    git(work, "commit", "-q", "--allow-empty", "--no-verify", "-m", message, env=_dated_env())
    return git(work, "rev-parse", "HEAD")


def _import_commit(repo: Path, ref: str, files: Mapping[str, FileValue], message: str) -> None:
    """Write one root commit onto `ref` with fast-import (one process, no work tree needed)."""
    date = _clock.tick()
    who = f"{AUTHOR_NAME} <{AUTHOR_EMAIL}> {date}".encode()
    msg = message.encode() + b"\n"
    out = [b"commit %s\nauthor %s\ncommitter %s\ndata %d\n%s" % (ref.encode(), who, who, len(msg), msg)]
    for name, value in sorted(files.items()):
        _safe_path(Path("."), name)
        if value is None:
            continue
        if isinstance(value, Gitlink):
            out.append(b"M 160000 %s %s\n" % (value.sha.encode(), name.encode()))
            continue
        if isinstance(value, Symlink):
            mode, data = b"120000", value.target.encode()
        else:
            content = value.content if isinstance(value, Executable) else value
            mode = b"100755" if isinstance(value, Executable) else b"100644"
            data = content.encode() if isinstance(content, str) else content
        out.append(b"M %s inline %s\ndata %d\n%s\n" % (mode, name.encode(), len(data), data))
    out.append(b"\ndone\n")
    git(repo, "fast-import", "--quiet", "--done", input=b"".join(out))


# --------------------------------------------------------------------------------- upstream


@dataclass
class PRRecord:
    number: int
    base: str          # the git branch the PR was cut from (for stacks: another PR's branch)
    title: str
    heads: list[str] = field(default_factory=list)   # every head it had, oldest first
    state: str = "open"                              # open | merged | closed
    merge_commit: str | None = None

    @property
    def branch(self) -> str:
        return f"pr/{self.number}"

    @property
    def head(self) -> str:
        return self.heads[-1]


class Upstream:
    """A bare upstream repository (`path`) plus the clone the fixture authors commits in (`work`).

    `work` is an ordinary clone (remote `origin` = the bare repo, branches checked out as usual)
    except that its `.git/objects` is a symlink to the bare repository's object store, as git's
    contrib `git-new-workdir` does. A commit made there is already in the bare repository, so
    publishing it is one `update-ref` instead of a push (~80 ms each). Never run `git gc` in
    `work` (gc.auto is off in the isolated config). Its `origin/*` tracking refs are not kept up
    to date; `git push origin <branch>` from it still works.
    """

    def __init__(self, root: Path, *, default_branch: str = "main",
                 initial_files: Mapping[str, FileValue] | None = None) -> None:
        self.root = Path(root).absolute()
        self.path = self.root / "upstream.git"
        self.work = self.root / "author"
        self.default_branch = default_branch
        self.prs: dict[int, PRRecord] = {}
        self.root.mkdir(parents=True, exist_ok=True)
        git(self.root, "init", "-q", "--bare", f"--initial-branch={default_branch}", str(self.path))
        _import_commit(self.path, f"refs/heads/{default_branch}",
                       initial_files or {"README.md": "upstream project\n"}, "Initial commit")
        git(self.root, "init", "-q", f"--initial-branch={default_branch}", str(self.work))
        objects = self.work / ".git" / "objects"
        shutil.rmtree(objects)
        objects.symlink_to(self.path / "objects", target_is_directory=True)
        git(self.work, "remote", "add", "origin", str(self.path))
        self._checkout(default_branch)

    # -- plumbing
    def _checkout(self, branch: str, start: str | None = None) -> None:
        """Check out `branch` in the authoring clone at the bare repo's tip of it (or at `start`;
        a new branch starts at the default branch), so the clone is never stale."""
        if start is None:
            start = git(self.path, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False) \
                or self.tip()
        git(self.work, "checkout", "-q", "-B", branch, start)

    def _publish(self, branch: str, sha: str, pull: int | None = None) -> str:
        lines = f"update refs/heads/{branch} {sha}\n"
        if pull is not None:
            lines += f"update refs/pull/{pull}/head {sha}\n"
        git(self.path, "update-ref", "--stdin", input=lines.encode())
        return sha

    def rev(self, ref: str) -> str:
        """Resolve a ref or SHA in the bare repository."""
        return git(self.path, "rev-parse", "--verify", f"{ref}^{{commit}}")

    def tip(self, branch: str | None = None) -> str:
        return self.rev(f"refs/heads/{branch or self.default_branch}")

    def pr(self, number: int) -> PRRecord:
        try:
            return self.prs[number]
        except KeyError:
            raise KeyError(f"no PR #{number} in this upstream") from None

    # -- authoring
    def commit(self, files: Mapping[str, FileValue], message: str, branch: str = "main") -> str:
        """Commit `files` on `branch` (created from the default branch if new); returns the SHA."""
        self._checkout(branch)
        write_files(self.work, files)
        return self._publish(branch, _commit_all(self.work, message))

    def open_pr(self, number: int, files: Mapping[str, FileValue], title: str | None = None,
                base: str = "main", message: str | None = None, *, start: str | None = None) -> str:
        """Branch `pr/N` off `base` (or off `start`, e.g. another PR's head for a stack), commit,
        and set `refs/pull/N/head` as GitHub does. Returns the head SHA. Merges go into `base`."""
        if number in self.prs:
            raise ValueError(f"PR #{number} already exists")
        title = title or f"PR {number}"
        self._checkout(f"pr/{number}", start=start or self.tip(base))
        write_files(self.work, files)
        sha = self._publish(f"pr/{number}", _commit_all(self.work, message or title), pull=number)
        self.prs[number] = PRRecord(number, base, title, [sha])
        return sha

    def append(self, number: int, files: Mapping[str, FileValue], message: str | None = None) -> str:
        """A new commit on top of the PR (an ordinary push); the old head stays an ancestor."""
        pr = self._open(number)
        self._checkout(pr.branch)
        write_files(self.work, files)
        sha = _commit_all(self.work, message or f"{pr.title} (update {len(pr.heads)})")
        pr.heads.append(self._publish(pr.branch, sha, pull=number))
        return sha

    def force_push(self, number: int, files: Mapping[str, FileValue], message: str | None = None,
                   *, rebase: bool = False, keep: bool = True) -> str:
        """Rewrite the PR as one new commit; the old head is no longer an ancestor.

        keep=True carries the PR's previous changes (then applies `files`), like an amend;
        keep=False makes the PR exactly `files`. rebase=True starts from the base branch's current
        tip instead of the PR's old fork point.
        """
        pr = self._open(number)
        old = pr.head
        base_tip = self.tip(pr.base)
        start = base_tip if rebase else git(self.path, "merge-base", base_tip, old)
        self._checkout(pr.branch, start=start)
        if keep:
            git(self.work, "merge", "--squash", "-q", old)
        write_files(self.work, files)
        sha = _commit_all(self.work, message or pr.title)
        pr.heads.append(self._publish(pr.branch, sha, pull=number))
        return sha

    def squash_merge(self, number: int, message: str | None = None) -> str:
        """One commit on the base branch holding the PR's whole diff."""
        pr = self._open(number)
        self._checkout(pr.base)
        git(self.work, "merge", "--squash", "-q", pr.head)
        sha = self._publish(pr.base, _commit_all(self.work, message or f"{pr.title} (#{number})"))
        pr.state, pr.merge_commit = "merged", sha
        return sha

    def merge(self, number: int, message: str | None = None) -> str:
        """A true merge commit (--no-ff) of the PR into its base."""
        pr = self._open(number)
        self._checkout(pr.base)
        git(self.work, "merge", "-q", "--no-ff", "--no-verify", "-m",
            message or f"Merge pull request #{number} from {pr.branch}\n\n{pr.title}",
            pr.head, env=_dated_env())
        sha = self._publish(pr.base, git(self.work, "rev-parse", "HEAD"))
        pr.state, pr.merge_commit = "merged", sha
        return sha

    def rebase_merge(self, number: int) -> str:
        """GitHub's "Rebase and merge": each PR commit replayed onto the base, author and message
        kept, a new committer date; `merge_commit_sha` is the last of them (the base's new tip)."""
        pr = self._open(number)
        self._checkout(pr.base)
        base = git(self.work, "merge-base", pr.base, pr.head)
        for sha in git(self.work, "rev-list", "--reverse", "--no-merges", f"{base}..{pr.head}").split():
            git(self.work, "cherry-pick", "--allow-empty", sha, env={"GIT_COMMITTER_DATE": _clock.tick()})
        sha = self._publish(pr.base, git(self.work, "rev-parse", "HEAD"))
        pr.state, pr.merge_commit = "merged", sha
        return sha

    def close(self, number: int) -> None:
        """Close without merging: no git change (GitHub keeps refs/pull/N/head)."""
        self._open(number).state = "closed"

    def head(self, number: int) -> str:
        """The PR head as the bare repository advertises it (`refs/pull/N/head`)."""
        return self.rev(f"refs/pull/{number}/head")

    def _open(self, number: int) -> PRRecord:
        pr = self.pr(number)
        if pr.state != "open":
            raise ValueError(f"PR #{number} is {pr.state}")
        return pr


# -------------------------------------------------------------------------------------- fork


def clone_fork(upstream: Upstream | Path, dest: Path) -> Path:
    """A working clone whose remote `upstream` is the bare repository, on branch `main`."""
    src = upstream.path if isinstance(upstream, Upstream) else Path(upstream)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    git(dest.parent, "clone", "-q", "--origin", "upstream", str(src), str(dest))
    git(dest, "checkout", "-q", "-B", "main", "upstream/main")
    return dest


def fork_commit(fork: Path, files: Mapping[str, FileValue], message: str) -> str:
    """Commit `files` on the fork's current branch; returns the new SHA."""
    write_files(Path(fork), files)
    return _commit_all(Path(fork), message)


# ----------------------------------------------------------------------------- big histories


def _content(index: int, rev: int) -> bytes:
    # 12 lines; the line that changes rotates so consecutive revisions touch different hunks
    lines = [f"# module {index}\n"]
    changed = rev % 11
    for j in range(11):
        lines.append(f"value_{j} = {rev if j == changed else j * index}  # rev {rev if j == changed else 0}\n")
    return "".join(lines).encode()


def generate_history(repo: Path, commits: int = 20000, files: int = 5000, *, branch: str = "main",
                     files_per_commit: int = 3, checkout: bool = True) -> str:
    """Create (or extend) `repo` with `commits` commits over `files` files via `git fast-import`.

    The first commit adds every file (`src/pNN/mNN/mod_NNNNN.py`); each later commit rewrites
    `files_per_commit` of them, chosen deterministically. Returns the new tip of `branch`.
    A missing `repo` is created non-bare; `checkout=True` fills its work tree afterwards.
    """
    repo = Path(repo)
    if not repo.exists():
        git(repo.parent, "init", "-q", f"--initial-branch={branch}", str(repo))
    parent = git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False)
    # three directory levels keep each rewritten tree small: fast-import hashes and deflates
    # every tree on the path of a changed file, and flat 100-entry trees doubled the run time
    names = [f"src/p{i // 500:02d}/m{(i // 25) % 20:02d}/mod_{i:05d}.py".encode() for i in range(files)]
    revs = [0] * files
    author = f"{AUTHOR_NAME} <{AUTHOR_EMAIL}>".encode()
    proc = subprocess.Popen(["git", "-C", str(repo), "fast-import", "--quiet", "--done"],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "LC_ALL": "C"})
    assert proc.stdin is not None
    out: list[bytes] = []

    def flush() -> None:
        proc.stdin.write(b"".join(out))
        out.clear()

    start = int(git(repo, "log", "-1", "--format=%ct", parent)) + 60 if parent else GIT_EPOCH
    for c in range(commits):
        when = start + c * 60
        msg = b"Initial import\n" if c == 0 and not parent else b"Change %d\n" % c
        out.append(b"commit refs/heads/%s\nmark :%d\ncommitter %s %d +0000\ndata %d\n%s"
                   % (branch.encode(), c + 1, author, when, len(msg), msg))
        if c > 0:
            out.append(b"from :%d\n" % c)
        elif parent:
            out.append(b"from %s\n" % parent.encode())
        if c == 0 and not parent:
            touched = range(files)
        else:
            touched = sorted({(c * 7919 + k * 104729) % files for k in range(files_per_commit)})
        for i in touched:
            revs[i] += 1
            data = _content(i, revs[i])
            out.append(b"M 100644 inline %s\ndata %d\n%s\n" % (names[i], len(data), data))
        out.append(b"\n")
        if len(out) > 4000:
            flush()
    out.append(b"done\n")
    flush()
    proc.stdin.close()
    err = proc.stderr.read() if proc.stderr else b""
    if proc.wait():
        raise GitError(("fast-import",), proc.returncode, err.decode("utf-8", "replace"))
    tip = git(repo, "rev-parse", f"refs/heads/{branch}")
    if checkout and git(repo, "rev-parse", "--is-bare-repository") == "false":
        git(repo, "checkout", "-q", "-f", branch)
    return tip


def timed_generate_history(repo: Path, **kwargs) -> tuple[str, float]:
    """`generate_history` plus its wall time in seconds (for benchmarks and the fixture test)."""
    t0 = time.perf_counter()
    tip = generate_history(repo, **kwargs)
    return tip, time.perf_counter() - t0

