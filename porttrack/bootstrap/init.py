"""`porttrack init`: a workspace a maintainer can commit, and the fork checkout beside it.

What it writes, relative to the workspace folder (never over anything that exists):

    tracks.yaml              commented: upstream, fork, targets, one example track, for the
                             profile chosen (`--profile`: vllm-gpu, the default, or neutral)
    patches/series           an empty quilt series
    patches/manifest.json    an empty queue (`porttrack/queue/v1`), which `porttrack queue` accepts
    patches/evidence/.gitkeep
    templates/README.md      how to override the packaged weekly template
    .gitignore               `.porttrack/` (machine- and token-local caches)

and, unless `--fork-checkout` names an existing one, the fork checkout: a blobless partial clone
(`git clone --filter=blob:none`, so a vLLM-sized fork is quick: file contents are fetched when
git first needs them) with an `upstream` remote and upstream's default branch fetched into
`upstream/<branch>`, the ref the fork is rebased onto.

Run twice it changes nothing: a file that already holds exactly what init would write is left as
it is, and a run that finds everything in place says so and exits 0. A file that exists with other
content is never overwritten: init refuses before writing anything and lists what exists.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from porttrack.common.errors import InputError, PreconditionError
from porttrack.git import repo as gitrepo
from porttrack.queue.manifest import SCHEMA as QUEUE_SCHEMA
from porttrack.tracks.config import DEFAULT_PROFILE, PROFILES, is_local_path
from porttrack.workspace.files import TRACKS_FILE, atomic_write_bytes, dump_json

_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}")
_BRANCH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,200}")


@dataclass(frozen=True)
class Options:
    upstream: str  # owner/name
    fork: str  # owner/name
    # "" for these: not given (the command line's), filled in from an earlier tracks.yaml, else main
    branch: str = "main"  # the fork's branch
    upstream_branch: str = "main"  # upstream's default branch, which upstream/<it> tracks
    checkout: str = ""  # the fork checkout, relative to the workspace (default ../<fork name>)
    existing_checkout: bool = False  # --fork-checkout: use it, clone nothing
    upstream_url: str = ""  # default https://github.com/<upstream>.git; a local path: relative to the workspace in tracks.yaml
    fork_url: str = ""  # default https://github.com/<fork>.git
    profile: str = DEFAULT_PROFILE  # which tracks.yaml skeleton (porttrack.tracks.config.PROFILES)


@dataclass(frozen=True)
class Step:
    what: str  # "write" | "keep" | "clone" | "finish-clone" | "remote" | "fetch" | "commit-graph"
    target: str
    detail: str = ""


@dataclass(frozen=True)
class Plan:
    root: Path
    files: tuple[tuple[str, bytes], ...]  # (path relative to root, content) to write
    kept: tuple[str, ...]  # already there with exactly that content
    fork_steps: tuple[Step, ...]
    options: Options  # what init runs with: the command line's, else what the existing tracks.yaml says
    edits: tuple[Step, ...] = ()  # files kept as they are but for one line (fork.checkout), in `files` too
    adopted: tuple[str, ...] = ()  # files of an earlier init, edited since: kept as they are (state)

    @property
    def steps(self) -> tuple[Step, ...]:
        edited = {s.target for s in self.edits}
        return (*(Step("write", path) for path, _ in self.files if path not in edited), *self.edits,
                *(Step("keep", path, "already as init writes it") for path in self.kept),
                *(Step("keep", path, "as it is (an earlier init's, edited since)") for path in self.adopted),
                *self.fork_steps)

    @property
    def nothing_to_do(self) -> bool:
        return not self.files and not self.fork_steps


def checked(options: Options) -> Options:
    """Options with defaults filled in; a malformed repository or branch name is a usage error."""
    for flag, value in (("--upstream", options.upstream), ("--fork", options.fork)):
        if not _REPO.fullmatch(value):
            raise InputError(f"{flag} {value!r}: expected OWNER/NAME, as on GitHub")
    for flag, value in (("--branch", options.branch or "main"), ("--upstream-branch", options.upstream_branch or "main")):
        if not _BRANCH.fullmatch(value) or ".." in value:
            raise InputError(f"{flag} {value!r}: not a branch name")
    if options.profile not in PROFILES:
        raise InputError(f"--profile {options.profile!r}: expected one of: {', '.join(PROFILES)}")
    if any(ord(c) < 32 or ord(c) == 127 for c in options.checkout):
        flag = "--fork-checkout" if options.existing_checkout else "--checkout"
        raise InputError(f"{flag} {options.checkout!r}: a folder name with a control character (a newline, a tab) is refused")
    name = options.fork.split("/")[1]
    return Options(
        profile=options.profile,
        upstream=options.upstream, fork=options.fork, branch=options.branch or "main",
        upstream_branch=options.upstream_branch or "main",
        checkout=options.checkout or f"../{name}", existing_checkout=options.existing_checkout,
        upstream_url=options.upstream_url or f"https://github.com/{options.upstream}.git",
        fork_url=options.fork_url or f"https://github.com/{options.fork}.git",
    )


def plan(root: Path, given: Options) -> Plan:
    """What init would do in `root`, with the options as given on the command line (`checked`
    fills in the rest). Raises PreconditionError listing every file that exists with other content
    (nothing is written then) -- except over an earlier init's workspace for the same upstream and
    fork: a re-run repairs it (a fix to tracks.yaml, a switch to --fork-checkout), keeping every
    file as it is; the one line it may change is tracks.yaml's fork.checkout, to what
    --fork-checkout / --checkout names."""
    root = Path(root)
    earlier = _earlier_tracks(root, given)
    if given.upstream_url and is_local_path(given.upstream_url):  # as typed: relative to where init runs
        given = replace(given, upstream_url=os.path.abspath(os.path.expanduser(given.upstream_url)))
    options = checked(_adopted(root, given, earlier) if earlier is not None else given)
    wanted = workspace_files(options, root)
    files, kept, clash, adopted, edits = [], [], [], [], []
    for rel, content in wanted:
        path = root / rel
        if path.is_symlink() or (path.exists() and not path.is_file()):
            clash.append(f"{rel} (not a plain file)")
        elif not path.exists():
            files.append((rel, content))
        elif path.read_bytes() == content:
            kept.append(rel)
        elif earlier is None:
            clash.append(rel)
        elif rel == TRACKS_FILE and earlier.get("checkout") != options.checkout:
            files.append((rel, _with_checkout(path.read_text(encoding="utf-8"), options.checkout).encode()))
            edits.append(Step("edit", rel, f"fork.checkout: {options.checkout} (was {earlier.get('checkout')})"))
        else:
            adopted.append(rel)
    if clash:
        raise PreconditionError(
            f"{root} already holds {', '.join(clash)}: init never overwrites; "
            "move them away or edit them by hand (nothing was written)"
        )
    return Plan(root, tuple(files), tuple(kept), _fork_steps(root, options), options, tuple(edits), tuple(adopted))


def _earlier_tracks(root: Path, given: Options) -> dict[str, str] | None:
    """What an earlier init's tracks.yaml in `root` says (fork.checkout, the branches, upstream.url,
    the profile), when it is a plain file naming the same upstream and fork; else None."""
    import yaml  # loaded only over an existing workspace

    path = root / TRACKS_FILE
    if path.is_symlink() or not path.is_file():
        return None
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError, OSError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("upstream"), dict) or not isinstance(doc.get("fork"), dict):
        return None
    up, fork = doc["upstream"], doc["fork"]
    if up.get("repo") != given.upstream or fork.get("repo") != given.fork:
        return None
    said = {"checkout": fork.get("checkout"), "branch": fork.get("branch"), "upstream_branch": up.get("default_branch"),
            "upstream_url": up.get("url"), "profile": doc.get("profile")}
    return {k: v for k, v in said.items() if isinstance(v, str) and v}


def _adopted(root: Path, given: Options, earlier: dict[str, str]) -> Options:
    """`given`, with what the command line left out taken from the earlier tracks.yaml; a branch
    given that contradicts it is refused (tracks.yaml is the maintainer's: init edits only
    fork.checkout)."""
    for flag, key, value in (("--branch", "branch", given.branch), ("--upstream-branch", "upstream_branch", given.upstream_branch)):
        if value and earlier.get(key, "main") != value:
            raise PreconditionError(f"{flag} {value}, but {TRACKS_FILE} says {earlier.get(key, 'main')}: edit {TRACKS_FILE} "
                                    f"(it is yours; init never rewrites it) or leave {flag} out (nothing was written)")
    url = earlier.get("upstream_url", "")
    if url and is_local_path(url):  # written relative to the workspace (`_upstream_url_line`)
        url = os.path.normpath(os.path.join(os.path.abspath(root), os.path.expanduser(url)))
    return replace(given, branch=given.branch or earlier.get("branch", ""),
                   upstream_branch=given.upstream_branch or earlier.get("upstream_branch", ""),
                   checkout=given.checkout or earlier.get("checkout", ""),
                   upstream_url=given.upstream_url or url,
                   profile=earlier.get("profile", given.profile) if earlier.get("profile") in PROFILES else given.profile)


def _with_checkout(text: str, checkout: str) -> str:
    """tracks.yaml with fork.checkout's value replaced (its comment kept); refused when the line
    is not where init wrote it."""
    pattern = re.compile(r"(?m)^(fork:[^\n]*\n(?:(?:  [^\n]*|#[^\n]*|)\n)*?  checkout: )(\"(?:[^\"\\]|\\.)*\"|[^\s#]+)")
    found = pattern.search(text)
    if found is None:
        raise PreconditionError(f"{TRACKS_FILE}: no `  checkout:` line under fork: to point at {checkout}; set fork.checkout by hand "
                                "(nothing was written)")
    return text[:found.start(2)] + _yaml_text(checkout) + text[found.end(2):]


def run(plan_: Plan, *, say: Callable[[str], None] | None = None) -> None:
    """Write the workspace files, then make the fork checkout ready."""
    options = plan_.options
    edited = {s.target: s for s in plan_.edits}
    for rel, content in plan_.files:
        atomic_write_bytes(plan_.root / rel, content)
        if say:
            say(f"edit: {rel} ({edited[rel].detail})" if rel in edited else f"wrote {rel}")
    checkout = _checkout_path(plan_.root, options)
    for step in plan_.fork_steps:
        if say:
            say(f"{step.what}: {step.target}{' (' + step.detail + ')' if step.detail else ''}")
        if step.what == "clone":
            _clone_into_place(options.fork_url, checkout)
        elif step.what == "finish-clone":
            repo = gitrepo.GitRepo.open(checkout)
            repo.run("fetch", "--quiet", "origin", timeout=gitrepo.network_timeout())
            repo.run("checkout", "--quiet", "-B", options.branch, "--track", f"origin/{options.branch}")
        elif step.what == "remote":
            gitrepo.GitRepo.open(checkout).run("remote", "add", "upstream", options.upstream_url)
        elif step.what == "fetch":
            repo = gitrepo.GitRepo.open(checkout)
            repo.fetch("upstream", [f"+refs/heads/{options.upstream_branch}:refs/remotes/upstream/{options.upstream_branch}"])
        elif step.what == "branch":
            _local_branch(gitrepo.GitRepo.open(checkout), options.branch)
        elif step.what == "commit-graph":
            gitrepo.GitRepo.open(checkout).write_commit_graph()


def _local_branch(repo: gitrepo.GitRepo, branch: str) -> None:
    """A local fork branch tracking origin's, when a fresh clone has it only as `origin/X` (its
    default branch is another): every command then reads `refs/heads/X`. A fork without that
    branch is said, with its branches."""
    found = repo.resolve([f"refs/heads/{branch}", f"refs/remotes/origin/{branch}"])
    if found[f"refs/heads/{branch}"]:
        return
    if not found[f"refs/remotes/origin/{branch}"]:
        names = repo.text("for-each-ref", "--format=%(refname:lstrip=3)", "refs/remotes/origin/").split()
        raise PreconditionError(f"the fork has no branch {branch!r} (origin's branches: {', '.join(n for n in names if n != 'HEAD') or 'none'}): "
                                f"pass --branch with one of them, or push {branch} to the fork")
    repo.run("branch", "--quiet", "--track", branch, f"origin/{branch}")


def _clone_into_place(url: str, checkout: Path) -> None:
    """Clone into a temporary sibling and rename it into place: a clone killed or interrupted
    half-way leaves no checkout without files that a re-run would take as done (issue 33), only
    the temporary folder, which the re-run removes before cloning again."""
    temp = _clone_temp(checkout)
    if temp.exists():
        shutil.rmtree(temp)
    checkout.parent.mkdir(parents=True, exist_ok=True)
    try:
        gitrepo.clone(url, temp, blobless=True)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    os.rename(temp, checkout)


def _clone_temp(checkout: Path) -> Path:
    return checkout.parent / f".{checkout.name}.porttrack-clone"


def _checkout_path(root: Path, options: Options) -> Path:
    path = Path(options.checkout).expanduser()
    return path if path.is_absolute() else (root / path)


def _fork_steps(root: Path, options: Options) -> tuple[Step, ...]:
    """Clone, add the upstream remote, fetch upstream's branch: each only where it is missing."""
    checkout = _checkout_path(root, options)
    if not checkout.exists():
        if options.existing_checkout:
            raise PreconditionError(f"--fork-checkout {options.checkout}: no such folder (leave it out to clone {options.fork_url})")
        return (Step("clone", options.checkout, f"blobless partial clone of {options.fork_url}"),
                Step("remote", "upstream", options.upstream_url),
                Step("fetch", f"upstream/{options.upstream_branch}", f"upstream's {options.upstream_branch}"),
                Step("branch", options.branch, f"the fork's {options.branch}, tracking origin/{options.branch}"),
                _COMMIT_GRAPH)
    if not options.existing_checkout and not _cloned_from(checkout, options.fork_url):
        if (checkout / ".git").is_dir() and not any(p.name != ".git" for p in checkout.iterdir()):
            raise PreconditionError(
                f"{options.checkout} holds an empty git repository with no origin (a clone interrupted early?): "
                f"remove it and run init again to clone {options.fork_url}")
        raise PreconditionError(
            f"{options.checkout} exists and is not a clone of {options.fork_url}: "
            f"pass --fork-checkout {options.checkout} to use it as the fork checkout, or --checkout DIR to clone elsewhere"
        )
    repo = gitrepo.GitRepo.open(checkout)
    steps = []
    if repo.resolve(["HEAD"])["HEAD"] is None:
        # a clone interrupted after git wrote its config (before porttrack cloned into a temporary
        # folder), or a checkout someone emptied: fetch and check out what a clone would have
        steps.append(Step("finish-clone", options.checkout, f"no commit is checked out: fetch origin and check out {options.branch}"))
    remotes = repo.text("remote").split()
    if "upstream" not in remotes:
        steps.append(Step("remote", "upstream", options.upstream_url))
    upstream = f"refs/remotes/upstream/{options.upstream_branch}"
    local, remote = f"refs/heads/{options.branch}", f"refs/remotes/origin/{options.branch}"
    found = repo.resolve(["HEAD", upstream, local, remote])
    tips = {name: found[name] for name in ("HEAD", upstream)}
    if "upstream" not in remotes or tips[upstream] is None:
        steps.append(Step("fetch", f"upstream/{options.upstream_branch}", f"upstream's {options.upstream_branch}"))
    if found[local] is None and (found[remote] or not options.existing_checkout):  # a fresh clone's origin/X only
        steps.append(Step("branch", options.branch, f"the fork's {options.branch}, tracking origin/{options.branch}"))
    if steps or repo.commit_graph(sha for sha in tips.values() if sha).state != "ok":
        steps.append(_COMMIT_GRAPH)
    return tuple(steps)


# git's history walks (ancestry, `log -- PATH` for churn) are several times faster with it; a
# later write adds only what is new. `porttrack doctor` says when it is missing or stale.
_COMMIT_GRAPH = Step("commit-graph", "the fork checkout", "git commit-graph write --reachable --changed-paths")


def _cloned_from(checkout: Path, url: str) -> bool:
    """Is `checkout` a work tree whose `origin` is `url` (what an earlier init cloned)?"""
    if not checkout.is_dir() or not (checkout / ".git").exists():
        return False
    return gitrepo.GitRepo(checkout).remote_url("origin") == url  # a git failure is raised, never "not a clone"


# --------------------------------------------------------------------------------------------
# The files


def workspace_files(options: Options, root: Path = Path(".")) -> tuple[tuple[str, bytes], ...]:
    return (
        (TRACKS_FILE, tracks_skeleton(options, root).encode()),
        ("patches/series", b""),
        ("patches/manifest.json", dump_json({"schema": QUEUE_SCHEMA, "patches": []}).encode()),
        ("patches/evidence/.gitkeep", b""),
        ("templates/README.md", TEMPLATES_README.encode()),
        (".gitignore", b".porttrack/\n"),
    )


def _yaml_text(value: str) -> str:
    """`value` as a YAML scalar that reads back as exactly that string: plain when it is made of
    path characters only, else double-quoted (JSON's escapes are YAML's), so a quote, a `#` or a
    `: ` in a folder name cannot end the value or start a key."""
    if re.fullmatch(r"[A-Za-z0-9_./~][A-Za-z0-9_./~+-]*", value) and not re.fullmatch(r"[0-9._+-]+|~|(?i:y|n|yes|no|on|off|true|false|null)", value):
        return value
    return json.dumps(value)


def _upstream_url_line(options: Options, root: Path) -> str:
    """`url:` when --upstream-url named a mirror (doctor then accepts the remote it set up); a
    local path relative to the workspace, as fork.checkout is: the file is committed, and this
    machine's absolute path means nothing on another (`Config.upstream_url` reads it back)."""
    url = options.upstream_url
    if not url or url == f"https://github.com/{options.upstream}.git":
        return ""
    if is_local_path(url) and os.path.isabs(url):
        url = os.path.relpath(url, os.path.abspath(root))
    return f"  url: {json.dumps(url)}   # the upstream remote's URL (init --upstream-url)\n"


def tracks_skeleton(options: Options, root: Path = Path(".")) -> str:
    return SKELETONS[options.profile](options, root)


def _vllm_skeleton(options: Options, root: Path) -> str:
    return f"""\
# tracks.yaml: what this fork wants from upstream, and what must be proven before it is enabled.
# Human-owned: porttrack reads this file and never writes it. Machine state lives in state/ and
# patches/. `porttrack doctor` checks every precondition; `porttrack status` polls the tracks.
#
# Conventions
# - Quote SHAs ("a9b1ee711"): YAML 1.1 reads an unquoted 0777777 as the number 262143.
# - Job commands may use {{ref}} {{results}} {{workdir}} {{target}}.
# - Editors: porttrack ships a JSON Schema of this file (porttrack/schemas/tracks.vllm-gpu.schema.json);
#   a first line `# yaml-language-server: $schema=PATH-TO-IT` lets the YAML language server check it.

profile: vllm-gpu   # GPU targets (vendor, arch), models by attributes, model × context × batch gates

upstream:
  repo: {options.upstream}
{_upstream_url_line(options, root)}  remote: upstream                  # the remote in the fork checkout that points at upstream
  default_branch: {options.upstream_branch}

fork:
  repo: {options.fork}
  checkout: {_yaml_text(options.checkout)}      # relative to this file; --fork / PORTTRACK_FORK override it
  branch: {options.branch}
  upstream_base: upstream/{options.upstream_branch}     # the ref the fork is rebased onto
  staging_branch: porttrack/staging  # every queued patch: what gates run on
  default_build_branch: porttrack/default  # only promoted patches

# The machines patches must prove themselves on. runner_labels: the GitHub Actions labels of a
# self-hosted runner for gate jobs run as workflows.
targets:
  main-gpu:
    name: the fork's main machine
    vendor: nvidia
    arch: sm_90
    runner_labels: [self-hosted]

# Models, by attributes; tracks select them with `requires`. None yet.
models: {{}}

# One capability the fork wants, tied to upstream PRs. Replace the example PR number.
# It has no gate yet: a PR imported now is queued "ungated" and can never be promoted. Give the
# track a `gate:` before importing (README, "Adding a gate"; `porttrack gate check` says what is
# missing). A patch imported without one is taken again after: drop it, then import it.
tracks:
  example:
    title: an upstream change this fork wants
    prs: [1]
    requires: {{}}
    targets: [main-gpu]

report:
  repo: {options.fork}
  labels: [porttrack, weekly-status]
"""


def _neutral_skeleton(options: Options, root: Path) -> str:
    return f"""\
# tracks.yaml: what this fork wants from upstream, and what must be proven before it is enabled.
# Human-owned: porttrack reads this file and never writes it. Machine state lives in state/ and
# patches/. `porttrack doctor` checks every precondition; `porttrack status` polls the tracks.
#
# Conventions
# - Quote SHAs ("a9b1ee711") and versions ("3.12"): YAML reads 0777777 and 3.12 as numbers.
# - Job commands may use {{ref}} {{results}} {{workdir}} {{target}}.
# - Editors: porttrack ships a JSON Schema of this file (porttrack/schemas/tracks.neutral.schema.json);
#   a first line `# yaml-language-server: $schema=PATH-TO-IT` lets the YAML language server check it.

profile: neutral    # any fork: named targets, gates over named axes; no models, no GPU vocabulary

upstream:
  repo: {options.upstream}
{_upstream_url_line(options, root)}  default_branch: {options.upstream_branch}

fork:
  repo: {options.fork}
  checkout: {_yaml_text(options.checkout)}      # relative to this file; --fork / PORTTRACK_FORK override it
  branch: {options.branch}
  upstream_base: upstream/{options.upstream_branch}     # the ref the fork is rebased onto

# The machines patches must prove themselves on. Attributes are free-form: anything a job needs.
# `arch`, when given, must be what a job's results report (platform.machine()).
targets:
  linux:
    name: Linux, CPython 3.12
    attributes: {{os: linux, python: "3.12"}}
    runner_labels: [ubuntu-latest]  # for gate jobs run as GitHub Actions workflows

# One capability the fork wants, tied to upstream PRs. Replace the example PR number. A track
# applies on all its targets (this profile has no models to select).
tracks:
  example:
    title: an upstream change this fork wants
    prs: [1]
    targets: [linux]
    gate:
      # The job runs on the ref under test and writes porttrack/results/v2 to {{results}}:
      # `python -m porttrack.jobs.timed` times a command (here the test suite) and writes it. It
      # puts the worktree (and its src/, for a src layout) first on PYTHONPATH and refuses a run that
      # imported the project's packages from elsewhere (an installed copy): --package NAME names them.
      job:
        command: python -m porttrack.jobs.timed --cwd {{workdir}} --metric test_time --axis python=3.12 -- python -m pytest -q
        timeout_s: 1800
      matrix:
        axes: {{python: ["3.12"]}}   # named axes of any name; cells = their product × targets
      metrics:
        - name: test_time
          unit: s
          direction: lower
          allowed_regression_pct: 25  # against a baseline measured on the same machine
          key: true

# Optional: every key has a default (repo: the fork).
report:
  labels: [porttrack, weekly-status]
"""


SKELETONS = {"vllm-gpu": _vllm_skeleton, "neutral": _neutral_skeleton}


TEMPLATES_README = """\
# templates/

The weekly status issue is rendered from the template packaged with porttrack
(`porttrack/templates/weekly_status.md.j2`). To change it for this workspace, copy that file here
under the same name and edit the copy: porttrack uses `templates/weekly_status.md.j2` when it
exists. Templates are Jinja2 with undefined names as errors, so a typo fails loudly; `porttrack
report weekly --dry-run` renders without posting.
"""
