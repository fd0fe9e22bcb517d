"""The one door to git.

Policy lives here and nowhere else: commands run with `cwd=` (never chdir), no pager, no prompts,
C locale, bytes in and bytes out (patches are bytes: a trailing newline or a Latin-1 byte matters),
and a failing command raises `GitError` carrying the command, its exit status and stderr.

Everything goes through the git binary with `subprocess`: GitPython strips trailing newlines of
output unless told otherwise, cannot stream stdin from memory (library notes §2), and opening a
repository with it cost ~0.15 s per command (measured in benchmarks/converge_bench.py), which is a
third of the convergence check's budget.

porttrack keeps its own refs under `refs/porttrack/` in the fork checkout:
  refs/porttrack/pull/<N>/head          the PR head as last fetched
  refs/porttrack/pull/<N>/seen/<sha>    every head ever seen (keeps old revisions reachable, so
                                        "stable across revisions" and "appended vs force-pushed"
                                        can be decided locally after a force-push)
  refs/porttrack/upstream/<branch>      upstream's default branch as last fetched
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence, cast

from porttrack.common import trace
from porttrack.common.errors import ConfigError, GitError, PreconditionError
from porttrack.git import config as gitconfig
from porttrack.git.commitgraph import CommitGraph, read_commit_graph
from porttrack.workspace.files import sweep_dead_scratch

REF_NS = "refs/porttrack"
_SHA = re.compile(r"^[0-9a-f]{7,64}$")
_FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        **os.environ,
        "LC_ALL": "C",
        "LANG": "C",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_PAGER": "cat",
        "PAGER": "cat",
        "GIT_OPTIONAL_LOCKS": "0",
        # an HTTP remote that trickles (under 1 kB/s for a minute) is given up on
        "GIT_HTTP_LOW_SPEED_LIMIT": os.environ.get("GIT_HTTP_LOW_SPEED_LIMIT", "1000"),
        "GIT_HTTP_LOW_SPEED_TIME": os.environ.get("GIT_HTTP_LOW_SPEED_TIME", "60"),
    }
    for name in gitconfig.UNSET:
        env.pop(name, None)
    if extra:
        env.update(extra)
    return env


def network_timeout() -> float:
    """Seconds a git command that talks to a remote may take (PORTTRACK_GIT_TIMEOUT, default 600):
    a remote that accepts and never answers must not hang a cron job for ever."""
    try:
        return max(1.0, float(os.environ.get("PORTTRACK_GIT_TIMEOUT") or 600))
    except ValueError:
        raise ConfigError(f"PORTTRACK_GIT_TIMEOUT={os.environ['PORTTRACK_GIT_TIMEOUT']!r}: expected seconds") from None


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


_CAUSE_LINE = re.compile(r"^(?:fatal|error): ")
_MISSING_REF = re.compile(r"^fatal: couldn't find remote ref (\S+)$", re.MULTILINE)


def _missing_source(stderr: str, refspecs: list[str]) -> tuple[str, str] | None:
    """(refspec, git's line) when git failed because the remote lacks that refspec's source ref."""
    match = _MISSING_REF.search(stderr.replace("\r", ""))
    if match is None:
        return None
    for spec in refspecs:
        if spec.lstrip("+").split(":", 1)[0] == match.group(1):
            return spec, match.group(0)
    return None


def pull_ref(number: int) -> str:
    return f"{REF_NS}/pull/{number}/head"


def seen_ref(number: int, sha: str) -> str:
    return f"{REF_NS}/pull/{number}/seen/{sha}"


def upstream_ref(branch: str) -> str:
    return f"{REF_NS}/upstream/{branch}"


FORK_REMOTE = "origin"  # the fork's own remote in its checkout (what `porttrack init` clones from)


def qualify_branch(repo: "GitRepo", branch: str) -> str | None:
    """The one reading of the fork branch `branch` (`fork.branch`) every command shares, fully
    qualified so git never picks another object of that name (git's own order takes a tag `X`
    over the branch `X`): `refs/heads/B`; else `refs/remotes/B` (B given as `origin/X`); else
    `refs/remotes/origin/B` (a fresh clone of a fork whose branch is not its default has X only
    as `origin/X`); else None. A tag of that name is never the branch. One batch of the reader."""
    return branch_commit(repo, branch)[0]


def branch_commit(repo: "GitRepo", branch: str) -> tuple[str | None, str | None]:
    """(`qualify_branch`'s ref, the commit it names), or (None, None); in the same one batch."""
    if branch.startswith("-"):
        return None, None
    names = [branch] if branch.startswith("refs/") else [
        f"refs/heads/{branch}", f"refs/remotes/{branch}", f"refs/remotes/{FORK_REMOTE}/{branch}"]
    found = repo.resolve(names)
    return next(((name, found[name]) for name in names if found[name]), (None, None))


def fork_branch_ref(repo: "GitRepo", branch: str) -> str:
    """`qualify_branch`, or a PreconditionError that names what was looked for and the fix."""
    ref = qualify_branch(repo, branch)
    if ref is None:
        raise PreconditionError(missing_branch(repo, branch))
    return ref


def missing_branch(repo: "GitRepo", branch: str) -> str:
    return (f"fork.branch {branch!r} is not a branch of the fork checkout {repo.path}: neither refs/heads/{branch}, "
            f"refs/remotes/{branch} nor refs/remotes/{FORK_REMOTE}/{branch} exists (a tag of that name is not the branch); "
            f"`git -C {repo.path} fetch {FORK_REMOTE} {branch}:refs/remotes/{FORK_REMOTE}/{branch}`, "
            f"or set fork.branch in tracks.yaml to the fork's branch")


def branch_words(ref: str, branch: str) -> str:
    """How a command says which ref `fork.branch` resolved to, e.g. `refs/remotes/origin/X`
    (no local branch X: the remote-tracking branch, as last fetched)."""
    if ref != f"refs/remotes/{FORK_REMOTE}/{branch}":
        return ref
    return f"{ref} (no local branch {branch}: the remote-tracking branch, as last fetched)"


@dataclass(frozen=True)
class HeadChange:
    """How a PR head moved between two observations."""
    kind: str  # "unchanged" | "appended" | "force-pushed" | "unknown"
    commits: int | None = None  # appended: how many new commits; force-pushed: commits in the new head not in the old
    method: str = "git"  # "git" (local ancestry) or "compare" (GitHub's compare endpoint)


NO_FORK_CHECKOUT = (
    "no fork checkout: set fork.checkout in tracks.yaml, pass --fork or set PORTTRACK_FORK "
    "(to make one: `porttrack init --fork-checkout DIR` for an existing clone, or `porttrack init` to clone it; "
    "by hand: git clone --filter=blob:none <fork URL> DIR && git -C DIR remote add upstream <upstream URL>)"
)
NO_FORK_CHECKOUT_BRIEF = "no fork checkout (set fork.checkout, --fork or PORTTRACK_FORK)"  # in one line of a listing


def clone(url: str, dest: Path, *, blobless: bool = True) -> "GitRepo":
    """Clone `url` into `dest` (a new folder), blobless: every commit and tree, file contents when first
    needed, so a vLLM-sized fork is quick. `url` after `--`: a leading `-` is no option."""
    dest = Path(dest)
    args = ["clone", "--quiet", "--no-tags", *(["--filter=blob:none"] if blobless else []), "--", url, str(dest)]
    GitRepo(dest.parent).run(*args, timeout=network_timeout(), cwd=dest.parent if dest.parent.is_dir() else Path.cwd())
    return GitRepo.open(dest)


def open_fork(path: Path | None) -> "GitRepo":
    """The fork checkout at `path` (from `Config.fork_checkout()`), with the one message for none."""
    if path is None:
        raise ConfigError(NO_FORK_CHECKOUT)
    return GitRepo.open(path)


def _plain_work_tree(path: Path) -> tuple[Path, Path, Path] | None:
    """(top level, common git dir, git dir) of the work tree whose top level is `path`, read from the
    file system as `git rev-parse` would find them -- only in the plain case: `path/.git` is the
    repository's folder, or a linked worktree's `gitdir:` file; the folders are the user's own
    (git's safe.directory check has nothing to say); the repository's config names no
    `core.worktree`, no `core.bare` and no extension. Anything else: None, and git is asked."""
    dot = path / ".git"
    try:
        uid = os.geteuid()
        if path.stat().st_uid != uid or dot.lstat().st_uid != uid:
            return None
        if dot.is_dir() and not dot.is_symlink():
            git_dir = dot
        elif dot.is_file():
            text = dot.read_text("utf-8").strip()
            if not text.startswith("gitdir: ") or "\n" in text:
                return None
            git_dir = (path / text[len("gitdir: "):]).resolve()
        else:
            return None
        common = git_dir
        if (git_dir / "commondir").is_file():
            common = (git_dir / (git_dir / "commondir").read_text("utf-8").strip()).resolve()
        if not (git_dir / "HEAD").is_file() or not (common / "objects").is_dir() or common.stat().st_uid != uid:
            return None
        config = (common / "config").read_bytes()
    except (OSError, UnicodeDecodeError):
        return None
    if _UNUSUAL_CONFIG.search(config):
        return None
    return Path(os.path.realpath(path)), Path(os.path.realpath(common)), Path(os.path.realpath(git_dir))


# what makes a repository's layout or reading differ from the plain case (`_plain_work_tree`)
_UNUSUAL_CONFIG = re.compile(rb"(?im)worktree|^[ \t]*bare[ \t]*=(?![ \t]*false[ \t]*$)|^[ \t]*\[[ \t]*(extensions|include)")


class GitRepo:
    """A work tree (the fork checkout, or a temporary worktree of it)."""

    def __init__(self, path: Path, common_dir: Path | None = None, git_dir: Path | None = None):
        self.path = Path(path)
        self._common_dir, self._git_dir = common_dir, git_dir  # learnt by `open` with the top level
        self.offline = False  # True: no git process may reach a remote (gitconfig.OFFLINE)
        self._reader: _Reader | None = None

    @property
    def git_dir(self) -> Path:
        """This work tree's own git directory (a linked worktree's differs from the common one)."""
        if self._git_dir is None:
            self._git_dir = Path(self.text("rev-parse", "--absolute-git-dir"))
        return self._git_dir

    @property
    def common_dir(self) -> Path:
        """The repository's common git directory (shared by its worktrees), absolute."""
        if self._common_dir is None:
            self._common_dir = Path(self.text("rev-parse", "--path-format=absolute", "--git-common-dir"))
        return self._common_dir

    @classmethod
    def open(cls, path: Path) -> "GitRepo":
        """The work tree at `path`, with a clear error for a missing folder, a non-repository or a
        bare repository. One `git rev-parse` (GitPython's Repo costs ~0.15 s more per command) --
        none for the plain case (`_plain_work_tree`)."""
        path = Path(path)
        if not path.is_dir():
            raise ConfigError(f"fork checkout {path}: no such folder; {NO_FORK_CHECKOUT}")
        found = _plain_work_tree(path)
        if found is not None:
            return cls(*found)
        proc = cls(path).run("rev-parse", "--is-bare-repository", "--absolute-git-dir", "--path-format=absolute",
                             "--git-common-dir", "--show-toplevel", check=False)
        lines = proc.stdout.decode("utf-8", "surrogateescape").splitlines()
        if proc.returncode != 0 and b"dubious ownership" in proc.stderr:
            # git's safe.directory check (CVE-2022-24765): the folder is a repository, owned by
            # another user; git refuses to read it rather than run that user's hooks and config
            raise ConfigError(f"fork checkout {path}: git refuses to use it: it is owned by another user (git's "
                              f"safe.directory check). If you trust it: git config --global --add safe.directory {path}")
        if proc.returncode != 0 or not lines:
            raise ConfigError(f"fork checkout {path}: not a git repository")
        if lines[0] == "true" or len(lines) < 4:
            raise ConfigError(f"fork checkout {path}: a bare repository; porttrack needs a work tree")
        return cls(Path(lines[3]), common_dir=Path(lines[2]), git_dir=Path(lines[1]))

    # -- the runner ---------------------------------------------------------------------------
    def run(
        self,
        *args: str,
        input: bytes | None = None,
        check: bool = True,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        argv = ["git", *gitconfig.ARGS, *(gitconfig.OFFLINE if self.offline else ()), *args]
        since = trace.started()
        try:
            # A session of its own, so a timeout can kill git and its helpers (git-remote-http
            # holds our pipes open; killing git alone would leave us waiting on them).
            child = subprocess.Popen(
                argv, cwd=cwd or self.path, env=git_env({**gitconfig.OFFLINE_ENV, **(env or {})} if self.offline else env),
                start_new_session=timeout is not None,
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )
        except FileNotFoundError:
            raise ConfigError("git is not installed or not on PATH") from None
        try:
            out, err = child.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(child)
            trace.git(args, f"timed out after {timeout:g}s", since)
            raise GitError(list(args), -1, f"timed out after {timeout:g}s") from None
        except BaseException:
            _kill_group(child) if timeout is not None else child.kill()
            child.wait()
            raise
        proc = subprocess.CompletedProcess(argv, child.returncode, out, err)
        trace.git(args, child.returncode, since)
        if check and proc.returncode != 0:
            raise GitError(list(args), proc.returncode, proc.stderr.decode("utf-8", "replace"))
        return proc

    def text(self, *args: str, **kw: Any) -> str:
        """Output as text with the final newline removed (for SHAs, names; never for patches)."""
        return self.run(*args, **kw).stdout.decode("utf-8", "surrogateescape").rstrip("\n")

    # -- questions ----------------------------------------------------------------------------
    def rev_parse(self, rev: str) -> str | None:
        """The commit `rev` names, or None (asked of the reader: see `objects`)."""
        return self.resolve([rev])[rev]

    def has_commit(self, sha: str) -> bool:
        return bool(_SHA.match(sha or "")) and self.rev_parse(sha) is not None

    def commits_present(self, shas: Iterable[str]) -> set[str]:
        """The SHAs among `shas` that name a commit here (one batch for all of them)."""
        asked = sorted({sha for sha in shas if _SHA.match(sha or "")})
        found = self.resolve(asked)
        return {sha for sha in asked if found[sha]}

    def resolve(self, names: Iterable[str]) -> dict[str, str | None]:
        """{name: the commit it names, or None} for many names in one batch of the reader (what
        `git rev-parse --verify NAME^{commit}` answers for one). A name git cannot take on a line
        of its own (empty, or holding a newline) is None without asking."""
        asked = list(dict.fromkeys(names))
        objects = self.objects(f"{name}^{{commit}}" for name in asked)
        out: dict[str, str | None] = {}
        for name in asked:
            obj = objects[f"{name}^{{commit}}"]
            out[name] = obj[0] if obj is not None and obj[1] == "commit" else None
        return out

    def read_objects(self, specs: Iterable[str]) -> dict[str, tuple[str, bytes] | None]:
        """{spec: (type, content), or None when missing} for many objects (`rev:path`, SHAs,
        `ref^{commit}`) in one batch of the reader (bytes-exact: blobs are returned as stored)."""
        return {spec: None if obj is None else (obj[1], obj[2]) for spec, obj in self.objects(specs).items()}

    def objects(self, specs: Iterable[str]) -> dict[str, tuple[str, str, bytes] | None]:
        """{spec: (SHA, type, content), or None when missing} from this repository's one reader, a
        `git cat-file --batch` started at the first ask and kept open for the next (it ends with the
        command): a command that resolves names, then reads trees and blobs, starts one process."""
        asked = list(dict.fromkeys(specs))
        out: dict[str, tuple[str, str, bytes] | None] = {spec: None for spec in asked}
        sendable = [spec for spec in asked if spec and "\n" not in spec and "\r" not in spec and spec.strip() == spec]
        if sendable:
            if self._reader is None or self._reader.proc.poll() is not None:  # none yet, or gone with an error
                self._reader = _Reader(self)
            out.update(zip(sendable, self._reader.read(sendable)))
        return out

    def tree_entries(self, rev: str, paths: Iterable[str]) -> dict[str, tuple[str, str]]:
        """path -> (mode, SHA) of the paths that exist at `rev` (files, folders, submodules), as
        `git ls-tree -z --full-tree REV -- PATHS` lists them: read from the trees of their folders in
        one batch of the repository's reader, no process of its own."""
        folders = {path: path.rpartition("/")[0] for path in sorted(set(paths))}
        spec = {d: f"{rev}:{d}" if d else f"{rev}^{{tree}}" for d in set(folders.values())}
        trees = self.objects(sorted(spec.values()))
        listed: dict[str, dict[str, tuple[str, str]]] = {}
        out = {}
        for path, folder in folders.items():
            tree = trees[spec[folder]]
            if tree is None or tree[1] != "tree":
                continue
            if folder not in listed:
                listed[folder] = _tree_entries(tree[2], len(tree[0]) // 2)
            entry = listed[folder].get(path.rpartition("/")[2])
            if entry is not None:
                out[path] = entry
        return out

    def commits(self, names: Iterable[str]) -> dict[str, "CommitInfo | None"]:
        """{name: its commit's SHA, tree and committer time, or None} in one `git cat-file --batch`
        (in place of a `rev-parse` and a `show -s --format=%T %ct` per name)."""
        asked = list(dict.fromkeys(names))
        objects = self.read_objects(f"{name}^{{commit}}" for name in asked)
        out: dict[str, CommitInfo | None] = {}
        for name in asked:
            obj = objects.get(f"{name}^{{commit}}")
            out[name] = _commit_info(obj[1]) if obj is not None and obj[0] == "commit" else None
        return out

    def commit_graph(self, tips: Iterable[str] = ()) -> "CommitGraph":
        """Whether the repository has a commit-graph, with changed-path Bloom filters, holding
        every commit of `tips` (SHAs): read from the files themselves, no git process (git's walks —
        ancestry, `log -- PATH` — are several times faster with one)."""
        return read_commit_graph(self.common_dir / "objects", tips)

    def write_commit_graph(self) -> None:  # ~1.3 s on vLLM's 20k commits, once; later writes add what is new
        self.run("commit-graph", "write", "--reachable", "--changed-paths", "--no-progress")

    @property
    def shallow(self) -> bool:
        """A shallow clone (`clone --depth`): history below the cut is absent, so a walk finding no path
        between two commits proves nothing. Read from git's `shallow` file."""
        return (self.common_dir / "shallow").is_file()

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        proc = self.run("merge-base", "--is-ancestor", ancestor, descendant, check=False)
        if proc.returncode in (0, 1):
            return proc.returncode == 0
        raise GitError(["merge-base", "--is-ancestor", ancestor, descendant], proc.returncode, proc.stderr.decode("utf-8", "replace"))

    def merge_base(self, a: str, b: str) -> str | None:
        """The best common ancestor, None when there is none (git's exit 1). Any other failure (128:
        an object the store cannot give, a partial clone that cannot fetch) is raised: taken for
        "no common ancestor" it made a merge look absent from the fork, without a word."""
        proc = self.run("merge-base", a, b, check=False)
        if proc.returncode == 0:
            return proc.stdout.decode().strip() or None
        if proc.returncode == 1 and not proc.stderr.strip():
            return None
        raise GitError(["merge-base", a, b], proc.returncode, proc.stderr.decode("utf-8", "replace"))

    def count(self, rev_range: str) -> int:
        return int(self.text("rev-list", "--count", rev_range) or 0)

    def is_clean(self) -> bool:
        """No staged, unstaged or untracked (non-ignored) changes."""
        return not self.run("status", "--porcelain=v1", "--untracked-files=normal").stdout.strip()

    def current_branch(self) -> str | None:
        proc = self.run("symbolic-ref", "--quiet", "--short", "HEAD", check=False)
        return proc.stdout.decode().strip() or None

    def remote_url(self, remote: str) -> str | None:
        """The remote's URL, None when there is no such remote (git's exit 2); any other failure
        (128: not a repository, a checkout git refuses as another user's) is raised, not taken for
        "no remote"."""
        proc = self.run("remote", "get-url", remote, check=False)
        if proc.returncode == 0:
            return proc.stdout.decode().strip() or None
        if proc.returncode == 2:
            return None
        raise GitError(["remote", "get-url", remote], proc.returncode, proc.stderr.decode("utf-8", "replace"))

    def diff(self, base: str, head: str, paths: Sequence[str] = ()) -> bytes:
        """The full-fidelity diff a patch is made from: renames, binary payloads, full index lines."""
        args = ["diff", "--no-ext-diff", "--no-textconv", "--binary", "--full-index", "-M", f"{base}", f"{head}"]
        if paths:
            args += ["--", *paths]
        return self.run(*args).stdout

    def diffs(self, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], bytes]:
        """{(base, head): what `diff(base, head)` gives} for many pairs of commits (full SHAs) in one
        `git diff-tree --stdin -p`: each line `HEAD BASE` diffs BASE -> HEAD, the diff after an echo of
        HEAD on a line of its own (`--always`: also for an empty diff), in the order asked. A diff line
        never is a bare SHA (text lines start with a marker, a binary line's length letter is followed
        by a multiple of 5 characters), so the output splits at the next pair's echo."""
        asked = [pair for pair in dict.fromkeys(pairs) if all(_FULL_SHA.fullmatch(sha) for sha in pair)]
        out = {pair: self.diff(*pair) for pair in dict.fromkeys(pairs) if pair not in asked}  # names: one at a time
        if not asked:
            return out
        data = self.run("diff-tree", "--stdin", "-r", "-p", "--always", "--no-ext-diff", "--no-textconv", "--binary",
                        "--full-index", "-M", input="".join(f"{head} {base}\n" for base, head in asked).encode()).stdout
        at = 0
        for i, (base, head) in enumerate(asked):
            echo = f"{head}\n".encode()
            if not data.startswith(echo, at):
                raise GitError(["diff-tree", "--stdin"], 0, f"no diff for {base}..{head} where it was expected")
            start = at + len(echo)
            end = data.find(b"\n" + f"{asked[i + 1][1]}\n".encode(), start - 1) + 1 if i + 1 < len(asked) else len(data)
            if end <= 0:
                raise GitError(["diff-tree", "--stdin"], 0, f"no diff for {asked[i + 1][0]}..{asked[i + 1][1]} where it was expected")
            out[(base, head)] = data[start:end]
            at = end
        return out

    def diff_zero(self, base: str, head: str, paths: Sequence[str] = ()) -> bytes:
        """Changed lines only (`-U0`), text files, no renames: enough to carry line numbers across."""
        args = ["diff", "--no-ext-diff", "--no-textconv", "--no-renames", "-U0", base, head]
        return self.run(*args, *(["--", *paths] if paths else [])).stdout

    def blobs(self, specs: Sequence[str], env: dict[str, str] | None = None) -> list[bytes | None]:
        """The contents of each `rev:path` (or `:path`, from the index `env` names), None where
        there is none: one `git cat-file --batch` for all of them."""
        if not specs:
            return []
        if any("\n" in s for s in specs):
            return [self.run("cat-file", "blob", s, env=env, check=False).stdout or None for s in specs]
        if env is None and all(s.strip() == s and "\r" not in s and not s.startswith(":") for s in specs):
            got = self.objects(specs)  # commits' files: the reader (an index is read once by it, so not those)
            return [obj[2] if obj is not None and obj[1] == "blob" else None for obj in (got[s] for s in specs)]
        out = self.run("cat-file", "--batch", input=("\n".join(specs) + "\n").encode("utf-8", "surrogateescape"), env=env).stdout
        found: list[bytes | None] = []
        at = 0
        for _spec in specs:
            end = out.index(b"\n", at)
            header = out[at:end].split()
            at = end + 1
            if len(header) == 3 and header[1] == b"blob":
                size = int(header[2])
                found.append(out[at:at + size])
                at += size + 1
            elif len(header) == 3:  # a tree or commit: no file here
                at += int(header[2]) + 1
                found.append(None)
            else:  # "<spec> missing" / "ambiguous"
                found.append(None)
        return found

    def show_file(self, rev: str, path: str) -> bytes | None:
        proc = self.run("cat-file", "blob", f"{rev}:{path}", check=False)
        return proc.stdout if proc.returncode == 0 else None

    def scratch_dir(self, purpose: str) -> Path:
        """A fresh `<pid>-…` folder under .git/porttrack/<purpose>/ for scratch indexes; folders of
        runs that died (SIGKILL) are swept first. The caller removes its own folder."""
        parent = self.common_dir / "porttrack" / purpose
        parent.mkdir(parents=True, exist_ok=True)
        sweep_dead_scratch(parent)
        return Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=parent))

    def scratch_index(self, purpose: str) -> "ScratchIndex":
        """A scratch index folder for `purpose` (use with `with`): see `ScratchIndex`."""
        return ScratchIndex(self, purpose)

    @contextlib.contextmanager
    def temporary_worktree(self, sha: str, path: Path | None = None) -> Iterator["GitRepo"]:
        """A detached work tree of `sha` at `path` (default: a fresh temporary folder), removed on
        leaving, whatever happened; the checkout itself is never touched. The registration of one
        whose folder a killed run left behind (and a sweep removed) is pruned on the next leave."""
        made = path is None
        where = Path(tempfile.mkdtemp(prefix="porttrack-worktree-")) / "tree" if path is None else path
        try:
            self.run("worktree", "add", "--detach", "--quiet", str(where), sha)
            yield GitRepo(where)
        finally:
            self.run("worktree", "remove", "--force", str(where), check=False)
            self.run("worktree", "prune", check=False)
            if made:
                shutil.rmtree(where.parent, ignore_errors=True)

    # -- movement -----------------------------------------------------------------------------
    def fetch(self, remote: str, refspecs: Iterable[str], progress: Callable[[str], None] | None = None,
              blobless: bool = False) -> None:
        """One fetch for many refspecs (one round trip). Progress lines go to `progress` when given.
        `blobless`: commits and trees only (for a partial clone: contents come when read)."""
        refspecs = list(refspecs)
        if not refspecs:
            return
        # --refmap= : move only the refs named here; without it git also "opportunistically"
        # updates the user's remote-tracking refs (e.g. upstream/main), which is not ours to move.
        # fetch.writeCommitGraph: git adds what it fetched to the commit-graph (a split layer, with the
        # changed-path Bloom filters `init` wrote), so history walks stay as fast after every fetch.
        args = ["-c", "fetch.writeCommitGraph=true", "fetch", "--no-tags", "--no-write-fetch-head", "--refmap=",
                *(["--filter=blob:none"] if blobless else []),
                "--quiet" if progress is None else "--progress", remote, *refspecs]
        timeout = network_timeout()
        if progress is None:
            self.run(*args, timeout=timeout)
            return
        since = trace.started()
        proc = subprocess.Popen(
            ["git", *gitconfig.ARGS, *(gitconfig.OFFLINE if self.offline else ()), *args], cwd=self.path,
            env=git_env(gitconfig.OFFLINE_ENV if self.offline else None), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True,
        )
        timed_out = threading.Event()

        def expire() -> None:
            timed_out.set()
            _kill_group(proc)

        watchdog = threading.Timer(timeout, expire)
        watchdog.daemon = True
        watchdog.start()
        tail: list[str] = []
        causes: list[str] = []  # git's fatal:/error: lines, kept apart: progress lines follow them
        assert proc.stderr is not None
        stderr = cast(io.BufferedReader, proc.stderr)  # a pipe with default buffering: read1 returns what is there
        buf = b""
        try:
            while chunk := stderr.read1(4096):
                buf += chunk
                *lines, buf = re.split(rb"[\r\n]", buf)
                for line in lines:
                    text = line.decode("utf-8", "replace").strip()
                    if text:
                        tail = [*tail[-4:], text]
                        if _CAUSE_LINE.match(text) and len(causes) < 5:
                            causes.append(text)
                        progress(text)
            rc = proc.wait()
            trace.git(args, "timed out" if timed_out.is_set() else rc, since)
        except BaseException:
            _kill_group(proc)
            proc.wait()
            raise
        finally:
            watchdog.cancel()
        if timed_out.is_set():
            raise GitError(args, -1, f"timed out after {timeout:g}s")
        if rc != 0:
            raise GitError(args, rc, "\n".join([*causes, *(line for line in tail if line not in causes)]))

    def fetch_available(self, remote: str, refspecs: Iterable[str], progress: Callable[[str], None] | None = None) -> dict[str, str]:
        """Fetch `refspecs` like `fetch`, except that a source ref the remote does not have leaves
        out that refspec only. Returns {refspec: git's line} for those left out.

        One process when every source ref exists. git stops at the first missing ref and names
        it ("fatal: couldn't find remote ref refs/pull/7/head"), so k missing refs cost k + 1
        fetches. Any other failure (remote unreachable, timed out, refused) is the whole remote's
        and raises GitError: retrying ref by ref would only repeat it, one timeout per ref."""
        pending = list(dict.fromkeys(refspecs))
        left_out: dict[str, str] = {}
        while pending:
            try:
                self.fetch(remote, pending, progress)
                break
            except GitError as exc:
                gone = _missing_source(exc.stderr, pending)
                if gone is None:
                    raise
                left_out[gone[0]] = gone[1]
                pending.remove(gone[0])
        return left_out

    @property
    def partial_clone(self) -> bool:
        """A partial clone (`clone --filter`): a fetch may leave file contents for later too."""
        proc = self.run("config", "--get", "extensions.partialClone", check=False)
        return proc.returncode == 0 and bool(proc.stdout.strip())

    def walk_boundary(self, tips: Iterable[str], exclude: Iterable[str]) -> tuple[dict[str, tuple[str, ...]], set[str]]:
        """One `rev-list --parents --boundary` walk: {commit reachable from `tips` and from none of
        `exclude`: its parents}, and the boundary (excluded commits those have as parents)."""
        lines = [*sorted(set(tips)), *(f"^{sha}" for sha in sorted(set(exclude)))]
        out = self.run("rev-list", "--parents", "--boundary", "--stdin", input=("\n".join(lines) + "\n").encode()).stdout
        graph: dict[str, tuple[str, ...]] = {}
        boundary: set[str] = set()
        for line in out.decode("ascii", "replace").splitlines():
            if line.startswith("-"):
                boundary.add(line[1:].split()[0])
            elif line:
                sha, *parents = line.split()
                graph[sha] = tuple(parents)
        return graph, boundary

    def changed_files_many(self, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], list[tuple[str, str]]]:
        """{(old, new): [(path, A|D|M|T), ...]} for many commit pairs, one `diff-tree --stdin` per
        batch of distinct `new`s: trees only (no contents read, no rename detection)."""
        out: dict[tuple[str, str], list[tuple[str, str]]] = {}
        todo = list(dict.fromkeys(pairs))
        while todo:
            batch: dict[str, str] = {}
            rest = []
            for old, new in todo:
                (rest.append((old, new)) if new in batch else batch.__setitem__(new, old))
            todo = rest
            data = self.run("diff-tree", "--stdin", "-r", "--no-renames", "--raw", "-z", "--always", "--no-abbrev",
                            input="".join(f"{new} {old}\n" for new, old in batch.items()).encode()).stdout
            current: list[tuple[str, str]] | None = None
            fields = data.split(b"\0")
            i = 0
            while i < len(fields):
                field = fields[i]
                if field.startswith(b":"):
                    status = field.split()[-1].decode()[:1]
                    path = fields[i + 1].decode("utf-8", "surrogateescape")
                    if current is not None:
                        current.append((path, status))
                    i += 2
                    continue
                if field:
                    sha = field.decode().strip()
                    current = out.setdefault((batch[sha], sha), []) if sha in batch else None
                i += 1
        return out

    def diff_lines_renamed(self, base: str, head: str, paths: Sequence[str]) -> bytes:
        """Changed lines only (`-U0`) of `paths`, renames among them detected (git's own `-M`)."""
        if not paths:
            return b""
        return self.run("diff", "--no-ext-diff", "--no-textconv", "-M", "-U0", base, head, "--",
                        *(f":(literal){p}" for p in paths)).stdout

    def update_ref(self, ref: str, sha: str) -> None:
        self.run("update-ref", ref, sha)

    def update_refs(self, refs: dict[str, str]) -> None:
        """Set every ref in `refs` to its SHA in one `git update-ref --stdin` (one transaction)."""
        if refs:
            self.run("update-ref", "--stdin", input="".join(f"update {ref} {sha}\n" for ref, sha in refs.items()).encode())

    def classify_head_change(self, old: str, new: str) -> HeadChange:
        """Appended (old head is an ancestor of the new) or force-pushed (history rewritten)."""
        if old == new:
            return HeadChange("unchanged", 0)
        if not (self.has_commit(old) and self.has_commit(new)):
            return HeadChange("unknown")
        if self.is_ancestor(old, new):
            return HeadChange("appended", self.count(f"{old}..{new}"))
        return HeadChange("force-pushed", self.count(f"{old}..{new}"))

    def rev_list(self, rev_range: str, limit: int = 1000) -> tuple[str, ...]:
        """Commits of `rev_range`, newest first (at most `limit`)."""
        return tuple(self.text("rev-list", f"--max-count={limit}", rev_range, "--").split())

    def log_patches(self, rev_range: str, limit: int = 500) -> tuple[tuple[str, str, bytes], ...]:
        """(sha, message, patch) of each non-merge commit of `rev_range`, newest first, in one
        `git log -p`. NUL separates the parts: git prints no NUL in a text diff (a file holding one
        is binary, shown as "Binary files differ"), and a commit message cannot carry one."""
        out = self.run("log", "--no-merges", f"--max-count={limit}", "--no-color", "--no-ext-diff", "--no-textconv", "--full-index",
                       "--format=%x00%H%x00%B%x00", "-p", rev_range, "--").stdout
        parts = out.split(b"\0")[1:]
        return tuple((parts[i].decode().strip(), parts[i + 1].decode("utf-8", "replace"), parts[i + 2].lstrip(b"\n"))
                     for i in range(0, len(parts) - 2, 3))


def _tree_entries(data: bytes, hash_len: int) -> dict[str, tuple[str, str]]:
    """name -> (mode as `git ls-tree` prints it, SHA) from a raw tree object."""
    out = {}
    at = 0
    while at < len(data):
        space = data.index(b" ", at)
        nul = data.index(b"\0", space)
        mode = int(data[at:space], 8)
        kind = mode & 0o170000
        canon = (0o100755 if mode & 0o100 else 0o100644) if kind == 0o100000 else kind if kind in (0o120000, 0o040000) else 0o160000
        out[data[space + 1:nul].decode("utf-8", "surrogateescape")] = (f"{canon:06o}", data[nul + 1:nul + 1 + hash_len].hex())
        at = nul + 1 + hash_len
    return out


_PIPE_SAFE = 4096  # POSIX's smallest pipe capacity (PIPE_BUF): a write this size never waits on the reader


class _Reader:
    """One `git cat-file --batch` for the life of a GitRepo: names in, objects out, one batch at a
    time (a batch larger than the pipe is written from a thread, so it cannot deadlock). Closed, and
    waited for, when the GitRepo goes or the interpreter exits."""

    def __init__(self, repo: GitRepo) -> None:
        argv = ["git", *gitconfig.ARGS, *(gitconfig.OFFLINE if repo.offline else ()), "cat-file", "--batch"]
        trace.git(argv[-2:], "started, kept open for this command's objects", trace.started())
        try:
            self.proc = subprocess.Popen(argv, cwd=repo.path, env=git_env(gitconfig.OFFLINE_ENV if repo.offline else None), stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except FileNotFoundError:
            raise ConfigError("git is not installed or not on PATH") from None
        weakref.finalize(repo, _Reader.close, self.proc)

    def read(self, specs: list[str]) -> list[tuple[str, str, bytes] | None]:
        since = trace.started()
        try:
            return self._read(specs)
        finally:  # -v: the reader is one process kept open; each batch is a line of its own
            trace.git(["cat-file", "--batch"], f"a batch of {len(specs)} names on the open reader", since)

    def _read(self, specs: list[str]) -> list[tuple[str, str, bytes] | None]:
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None
        data = "".join(f"{s}\n" for s in specs).encode("utf-8", "surrogateescape")
        writer: threading.Thread | None = None
        if len(data) > _PIPE_SAFE:
            writer = threading.Thread(target=_Reader._send, args=(proc, data), daemon=True)
            writer.start()
        out: list[tuple[str, str, bytes] | None] = []
        try:
            if writer is None:  # fits the pipe whatever git is doing: written here, no thread (a thread's start
                _Reader._send(proc, data)  # and join cost more than most batches, of one or a few names)
            for _ in specs:
                header = proc.stdout.readline()
                if not header.endswith(b"\n"):
                    raise GitError(["cat-file", "--batch"], proc.poll() or -1, "the object reader ended early (in a partial "
                                   "clone: contents it could not fetch, or may not offline, from the promisor remote)")
                parts = header[:-1].decode("utf-8", "surrogateescape").rsplit(" ", 2)
                if len(parts) != 3 or not parts[2].isdigit() or not _SHA.match(parts[0]):
                    out.append(None)  # "<spec> missing" / "ambiguous": no content follows
                    continue
                body = proc.stdout.read(int(parts[2]) + 1)  # the content, then a newline
                out.append((parts[0], parts[1], body[:-1]))
        except BaseException:
            # Mid-batch (Ctrl-C, a reader that died): nobody reads the rest, so the writer could
            # wait on a full pipe for ever, and the interpreter on it; the reader goes with it
            # (waited for, so the next read sees it gone and starts another).
            proc.kill()
            proc.wait()
            raise
        finally:
            if writer is not None:
                writer.join()
        return out

    @staticmethod
    def _send(proc: subprocess.Popen[bytes], data: bytes) -> None:
        assert proc.stdin is not None  # opened with stdin=PIPE
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(data)
            proc.stdin.flush()

    @staticmethod
    def close(proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None  # opened with both as pipes
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        with contextlib.suppress(OSError):
            proc.stdout.close()


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    tree: str
    committer_time: int  # seconds since the epoch
    parents: tuple[str, ...] = ()


def _commit_info(raw: bytes) -> CommitInfo | None:
    """SHA, tree and committer time from a raw commit object (as `cat-file --batch` prints it)."""
    import hashlib

    tree, when, parents = None, None, []
    for line in raw.split(b"\n\n", 1)[0].split(b"\n"):
        if line.startswith(b"tree "):
            tree = line[5:].decode()
        elif line.startswith(b"parent "):
            parents.append(line[7:].decode())
        elif line.startswith(b"committer "):
            when = int(line.rsplit(b" ", 2)[1])
    if tree is None or when is None:
        return None
    algo = "sha256" if len(tree) == 64 else "sha1"
    sha = hashlib.new(algo, b"commit %d\0" % len(raw) + raw).hexdigest()
    return CommitInfo(sha, tree, when, tuple(parents))


@dataclass(frozen=True)
class ThreeWay:
    """What a real `git apply --cached --3way` into a copy of a scratch index did."""

    rc: int
    stderr: str
    unmerged: tuple[str, ...]  # paths it left unmerged, sorted

    @property
    def clean(self) -> bool:
        """Merged without conflict: exit 0 AND no unmerged entry (`apply --check --3way` exits 0 on
        conflicts, library notes §2.4, so only a real apply into a copy can tell)."""
        return self.rc == 0 and not self.unmerged


class ScratchIndex:
    """Index files (`GIT_INDEX_FILE`) in a `<pid>-…` folder under `.git/porttrack/<purpose>/`: a
    worktree without files. `git apply --cached`, `write-tree` and `commit-tree` work there on blobs
    as `git am` would, so the fork's work tree, index, HEAD and branches are never touched. The
    folder is removed on leaving; one left by a SIGKILL is swept by the next run (`scratch_dir`).
    Several index files may live side by side, named by the caller (default "index")."""

    def __init__(self, repo: GitRepo, purpose: str):
        self.repo, self.purpose = repo, purpose
        self.dir: Path | None = None

    def __enter__(self) -> "ScratchIndex":
        self.dir = self.repo.scratch_dir(self.purpose)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, name: str) -> Path:
        assert self.dir is not None, "use ScratchIndex inside `with`"
        return self.dir / name

    def env(self, index: str = "index") -> dict[str, str]:
        return {"GIT_INDEX_FILE": str(self.path(index))}

    def copy(self, source: str, into: str) -> None:
        """Index file `into` becomes a copy of `source` (e.g. to keep a probe's merge)."""
        shutil.copyfile(self.path(source), self.path(into))

    def read_tree(self, tree: str, index: str = "index") -> None:
        self.repo.run("read-tree", tree, env=self.env(index))

    def apply(self, patch: bytes | Path, *flags: str, index: str = "index") -> subprocess.CompletedProcess[bytes]:
        """`git apply --cached --whitespace=nowarn FLAGS` of `patch` (bytes, or a file) to `index`;
        never raises on a patch that does not apply (a failed `git apply` changes nothing)."""
        args = ["apply", "--cached", "--whitespace=nowarn", *flags]
        env, cwd = self.env(index), None
        if "--3way" in flags:
            # git (2.39 at least) writes the merged file of a new-file entry whose path the index
            # already holds into the current directory, --cached or not: the fork's work tree got
            # untracked files, and the next `apply` refused it as dirty. Run from an empty folder of
            # our own, the repository named by GIT_DIR, so a stray write lands there.
            cwd = self.path("cwd")
            shutil.rmtree(cwd, ignore_errors=True)
            cwd.mkdir()
            env = {**env, "GIT_DIR": str(self.repo.git_dir)}
        if isinstance(patch, Path):
            return self.repo.run(*args, str(patch.resolve()), env=env, check=False, cwd=cwd)
        return self.repo.run(*args, input=patch, env=env, check=False, cwd=cwd)

    def read(self, paths: Sequence[str], index: str = "index") -> list[bytes | None]:
        """The blobs staged at `paths` in `index` (stage 0), None where there is none."""
        return self.repo.blobs([f":{p}" for p in paths], env=self.env(index))

    def unmerged(self, index: str = "index") -> tuple[str, ...]:
        out = self.repo.run("ls-files", "-u", "-z", env=self.env(index)).stdout
        paths = {entry.split(b"\t", 1)[1] for entry in out.split(b"\0") if b"\t" in entry}
        return tuple(sorted(p.decode("utf-8", "surrogateescape") for p in paths))

    def threeway(self, patch: bytes, *flags: str, source: str = "index", into: str = "index3") -> ThreeWay:
        """The one three-way probe: `index` `source` copied to `into`, then a real 3-way apply
        there (`source` is left as it was; `into` keeps the merge for a caller that wants it)."""
        self.copy(source, into)
        proc = self.apply(patch, "--3way", *flags, index=into)
        return ThreeWay(proc.returncode, proc.stderr.decode("utf-8", "surrogateescape"), self.unmerged(into))


# -- index files written and read without a process (porttrack.take.separability) --------------------


def read_index_file(data: bytes, hash_len: int) -> dict[str, tuple[int, str]] | None:
    """path -> (mode, object id) of each stage-0 entry of a git index file (versions 2 and 3, not
    split); None for anything else."""
    import struct

    if len(data) < 12 or data[:4] != b"DIRC":
        return None
    version, count = struct.unpack(">II", data[4:12])
    if version not in (2, 3):
        return None
    out: dict[str, tuple[int, str]] = {}
    at = 12
    try:
        for _ in range(count):
            mode = struct.unpack(">I", data[at + 24:at + 28])[0]
            sha = data[at + 40:at + 40 + hash_len].hex()
            flags = struct.unpack(">H", data[at + 40 + hash_len:at + 42 + hash_len])[0]
            start = at + 42 + hash_len + (2 if flags & 0x4000 else 0)
            end = data.index(b"\0", start)
            if (flags >> 12) & 3 == 0:
                out[data[start:end].decode("utf-8", "surrogateescape")] = (mode, sha)
            at += (end - at + 1 + 7) // 8 * 8
    except (struct.error, ValueError):
        return None
    if data[at:at + 4] == b"link":  # a split index: the entries are elsewhere
        return None
    return out


def write_index_file(path: Path, entries: dict[str, tuple[int, str]], hash_len: int) -> None:
    """A version-2 index file of `entries` (path -> (mode, object id)), stat data zero: enough for
    `git apply --cached`, which reads the blobs by id."""
    import hashlib
    import struct

    out = [b"DIRC", struct.pack(">II", 2, len(entries))]
    for name in sorted(entries, key=lambda p: p.encode("utf-8", "surrogateescape")):
        mode, sha = entries[name]
        raw = name.encode("utf-8", "surrogateescape")
        entry = struct.pack(">10I", 0, 0, 0, 0, 0, 0, mode, 0, 0, 0) + bytes.fromhex(sha) + struct.pack(">H", min(len(raw), 0xFFF)) + raw
        out.append(entry + b"\0" * (8 - len(entry) % 8))
    data = b"".join(out)
    digest = hashlib.sha1(data) if hash_len == 20 else hashlib.sha256(data)
    path.write_bytes(data + digest.digest())
