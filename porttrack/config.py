"""tracks.yaml: the human-owned statement of intent, parsed into frozen, typed records.

The file is read, never written, by porttrack (machine state lives elsewhere), so this module only
has to be strict and to say precisely what is wrong. Every problem becomes one line

    tracks.yaml:LINE:COL: dotted.key.path: what was expected

pointing at the offending value (or at the key itself for an unknown or duplicated key). Problems
that belong to no key use a parenthesised pseudo-path: `(encoding)` for bytes that are not UTF-8,
`(yaml)` for syntax and for documents refused before expansion, `(document)` for an empty file,
an oversized file or a top level that is not a mapping.

How a file is read, and why in this order:
1. bytes: at most `MAX_BYTES`, UTF-8 (a BOM is tolerated), no tab in indentation;
2. YAML events are scanned before anything is built, so a document with more than `MAX_ALIASES`
   aliases or deeper than `MAX_DEPTH` is refused before expansion (alias bombs, stack exhaustion);
3. the node tree (`yaml.compose`) is checked: its expanded size (aliases counted every time they
   are used, cycles refused), duplicate keys (PyYAML silently keeps the last), unquoted SHAs;
4. pydantic validates types, enums, required and unknown keys; its error `loc` is mapped back onto
   the node tree for line and column (`_node_at`);
5. cross-references (a track's target, a gate's model, a conditional's proof...) are checked on the
   typed result, again pointing at the offending value.

pydantic and PyYAML are imported only here, and this module is imported lazily by the CLI.
"""

from __future__ import annotations

import difflib
import os
import re
import string
import types
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from porttrack.errors import ConfigError

MAX_BYTES = 1 << 20  # tracks.yaml is a short human-written file; refuse anything bigger
MAX_ALIASES = 32  # enough to share a job or a metric list; an alias bomb needs many more
MAX_DEPTH = 24  # the schema nests 8 levels deep; the rest is headroom
MAX_NODES = 50_000  # nodes after expanding aliases (the real file has well under 2,000)
MAX_REPORTED = 50  # problems listed before "... and N more"
_TOO_BIG = f"file is larger than {MAX_BYTES >> 20} MiB; tracks.yaml is meant to be short"
_EMPTY = "the file is empty; expected a mapping with upstream, fork, targets, models, tracks, report"

Drafter = Literal["eagle", "dflash", "dspark", "native-mtp"]
Attention = Literal["sparse-mla", "compressed-mla", "mla", "mha", "gqa", "hybrid"]
Vendor = Literal["nvidia", "amd"]
Phase = Literal["cold", "warm"]
Assertion = Literal["required", "not-applicable"]
Direction = Literal["lower", "higher"]

DRAFTERS: tuple[str, ...] = get_args(Drafter)
ATTENTIONS: tuple[str, ...] = get_args(Attention)
PHASES: tuple[str, ...] = get_args(Phase)

JOB_PLACEHOLDERS = ("ref", "results", "workdir", "target")
TITLE_PLACEHOLDERS = ("week",)


# --------------------------------------------------------------------------- field types


def _invalid(message: str) -> PydanticCustomError:
    # The message travels as context: a literal template would treat `{ref}` as a placeholder.
    return PydanticCustomError("porttrack", "{message}", {"message": message})


_REPO = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")
# Refs end up on git command lines: no leading '-', no whitespace, nothing git would reject.
_REF = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._/-]*$")
_SHA = re.compile(r"^[0-9a-f]{7,40}$")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_METRIC = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
_WORKFLOW_FILE = re.compile(r"^[A-Za-z0-9._-]+\.ya?ml$")


def _check_repo(value: str) -> str:
    name = value.partition("/")[2]
    if not _REPO.match(value) or name in (".", ".."):
        raise _invalid(f'expected a GitHub repository "owner/name", got "{value}"')
    return value


def _check_ref(value: str) -> str:
    if not _REF.match(value) or ".." in value or value.endswith(("/", ".lock", ".")) or "//" in value:
        raise _invalid(f'expected a git ref or remote name (letters, digits, . _ / -), got "{value}"')
    return value


def _check_sha(value: Any) -> Any:
    # Runs before the str check so the message can say why: YAML 1.1 reads 0777777 as an integer.
    if not isinstance(value, str):
        raise PydanticCustomError("sha_type", "expected a quoted SHA string; quote SHAs")
    lowered = value.lower()
    if not _SHA.match(lowered):
        raise _invalid(f'expected a commit SHA of 7-40 hex digits (quote SHAs), got "{value}"')
    return lowered


def _check_relative(value: str) -> str:
    parts = value.replace("\\", "/").split("/")
    if value.startswith(("/", "~")) or ".." in parts:
        raise _invalid(f'expected a path relative to the workspace, without "..", got "{value}"')
    return value


def _check_glob(value: str) -> str:
    if value.startswith("/") or ".." in value.split("/"):
        raise _invalid(f'expected a glob relative to the repository root, without "..", got "{value}"')
    return value


def _placeholder_check(allowed: Sequence[str]):
    """A validator accepting only the `{name}` placeholders in `allowed` (as str.format reads them)."""
    known = " ".join("{" + name + "}" for name in allowed)
    brace_hint = "write {{{{ and }}}} for a literal brace"

    def check(value: str) -> str:
        try:
            fields = list(string.Formatter().parse(value))
        except ValueError as exc:  # a lone { or }
            raise _invalid(f"malformed placeholder ({exc}); {brace_hint}") from None
        for _literal, name, spec, conversion in fields:
            if name is not None and (name not in allowed or spec or conversion):
                shown = "{" + name + ("!" + conversion if conversion else "") + (":" + spec if spec else "") + "}"
                raise _invalid(f"unknown placeholder {shown} (known: {known}; {brace_hint})")
        return value

    return check


NonEmptyStr = Annotated[str, Field(min_length=1)]
Id = str  # checked against _ID (and as a reference) in the cross-reference pass, pointing at the key
Repo = Annotated[str, AfterValidator(_check_repo)]
GitRef = Annotated[str, AfterValidator(_check_ref)]
Sha = Annotated[str, BeforeValidator(_check_sha)]
RelPath = Annotated[str, Field(min_length=1), AfterValidator(_check_relative)]
Glob = Annotated[str, Field(min_length=1), AfterValidator(_check_glob)]
PositiveInt = Annotated[int, Field(gt=0)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Command = Annotated[str, Field(min_length=1), AfterValidator(_placeholder_check(JOB_PLACEHOLDERS))]
JobInput = Annotated[str, AfterValidator(_placeholder_check(JOB_PLACEHOLDERS))]
MetricName = Annotated[
    str, AfterValidator(lambda v: _check_pattern(v, _METRIC, "a metric name (a letter, then letters, digits, _ . -)"))
]


def _check_pattern(value: str, pattern: re.Pattern[str], what: str) -> str:
    if not pattern.match(value):
        raise _invalid(f'expected {what}, got "{value}"')
    return value


# --------------------------------------------------------------------------- records


class _Record(BaseModel):
    # strict: YAML already typed every value, so "5" for an integer is a mistake, not a conversion.
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)


class UpstreamConfig(_Record):
    repo: Repo
    remote: GitRef = "upstream"
    default_branch: GitRef = "main"


class ForkConfig(_Record):
    repo: Repo
    checkout: NonEmptyStr | None = None  # relative to tracks.yaml's folder; --fork overrides it
    branch: GitRef = "main"
    upstream_base: GitRef = "upstream/main"  # the ref in the checkout that the fork is based on
    staging_branch: GitRef = "porttrack/staging"  # every queued patch: what gates run on
    default_build_branch: GitRef = "porttrack/default"  # only promoted patches
    # Where the staging and default builds start: by default the fork's own branch (its upstream
    # base plus the fork's own commits), the same tip `import` probes separability against, so
    # the queue is applied over the fork. Set it to `upstream/main` for a pure quilt-style fork.
    build_base: GitRef | None = None

    def build_from(self) -> str:
        return self.build_base or self.branch


class Target(_Record):
    name: NonEmptyStr
    vendor: Vendor
    arch: NonEmptyStr
    attention_path: NonEmptyStr | None = None
    runner_labels: list[NonEmptyStr] = []


class Conditional(_Record):
    """The model joins `tracks` only once the proof has passed (until then: verdict conditional)."""

    proof: Id
    tracks: list[Id] = Field(min_length=1)
    reason: NonEmptyStr


class Model(_Record):
    drafters: list[Drafter] = []  # empty: the model has no drafter
    attention: Attention
    quantization: NonEmptyStr
    backends: dict[Id, NonEmptyStr]  # target id -> the attention backend selected there
    conditional: list[Conditional] = []
    notes: str = ""


class Requirements(_Record):
    """What a model must have to join a track. None means "no requirement"; a list means "one of"."""

    drafter: list[Drafter] | None = Field(default=None, min_length=1)
    attention: list[Attention] | None = Field(default=None, min_length=1)
    quantization: list[NonEmptyStr] | None = Field(default=None, min_length=1)
    backend: dict[Id, Annotated[list[NonEmptyStr], Field(min_length=1)]] | None = None


class PathRules(_Record):
    """Which files of a PR's diff a track takes: included by a glob and not excluded by one."""

    include: list[Glob] = Field(default_factory=lambda: ["**"], min_length=1)
    exclude: list[Glob] = []


class WorkflowJob(_Record):
    file: str  # a workflow file name in the fork's .github/workflows
    ref: GitRef = "main"
    inputs: dict[NonEmptyStr, JobInput] = {}
    artifact: NonEmptyStr = "porttrack-results"

    @field_validator("file")
    @classmethod
    def _file_name(cls, value: str) -> str:
        if not _WORKFLOW_FILE.match(value):
            raise _invalid(f'expected a workflow file name such as "porttrack-gate.yml", got "{value}"')
        return value


class Job(_Record):
    """Exactly one of a local command (placeholders {ref} {results} {workdir} {target}) or a
    GitHub Actions workflow dispatched on the fork."""

    command: Command | None = None
    workflow: WorkflowJob | None = None
    timeout_s: int = Field(default=3600, gt=0, le=7 * 24 * 3600)

    @model_validator(mode="after")
    def _exactly_one(self) -> "Job":
        if (self.command is None) == (self.workflow is None):
            raise _invalid("expected exactly one of command or workflow")
        return self


class Matrix(_Record):
    # "eligible": every model eligible for the track (for a proof: every model waiting on it).
    models: Union[list[Id], Literal["eligible"]] = "eligible"
    contexts: list[PositiveInt] = Field(min_length=1)
    batches: list[PositiveInt] = Field(min_length=1)
    targets: list[Id] | None = Field(default=None, min_length=1)  # None: the track's targets

    @field_validator("models", mode="wrap")
    @classmethod
    def _models(cls, value: Any, handler: Any) -> Any:
        # A union's own errors name both branches; one sentence is clearer.
        if isinstance(value, list) and not value:
            raise _invalid('expected at least one model id, or "eligible"')
        try:
            return handler(value)
        except ValidationError:
            raise _invalid('expected "eligible" or a list of model ids') from None


class Tolerance(_Record):
    """Numerical tolerance against the gate's reference backend: |a-b| <= abs + rel*|b|."""

    abs: NonNegative
    rel: NonNegative


class Metric(_Record):
    name: MetricName
    unit: NonEmptyStr
    direction: Direction  # which way is better
    # How much worse than a baseline measured on the same environment is still a pass, in percent
    # of the baseline and/or in `unit`; when both are given, both must hold.
    allowed_regression_pct: NonNegative | None = None
    allowed_regression_abs: NonNegative | None = None
    key: bool = False  # the one charted in the weekly report


class Gate(_Record):
    job: Job
    matrix: Matrix
    reference_backend: NonEmptyStr | None = None
    tolerance: Tolerance | None = None
    metrics: list[Metric] = []
    phases: list[Phase] = Field(default_factory=lambda: ["cold", "warm"], min_length=1)
    graph_replay: Assertion | None = None
    no_jit_after_warmup: Assertion | None = None
    promote: bool = True

    @model_validator(mode="after")
    def _defined_before_default_enablement(self) -> "Gate":
        missing = self.missing_for_promotion()
        if self.promote and missing:
            raise _invalid(
                "promote is true, so before default enablement this gate must define "
                + ", ".join(missing)
                + " (or set promote: false to run it as a measurement only)"
            )
        return self

    def missing_for_promotion(self) -> list[str]:
        """What the request's acceptance criteria ask for that this gate leaves undefined."""
        missing = []
        if self.reference_backend is None:
            missing.append("reference_backend")
        if self.tolerance is None:
            missing.append("tolerance")
        if self.graph_replay is None:
            missing.append("graph_replay (required or not-applicable)")
        if self.no_jit_after_warmup is None:
            missing.append("no_jit_after_warmup (required or not-applicable)")
        if not self.metrics:
            missing.append("metrics (at least one, each with an allowed regression)")
        for metric in self.metrics:
            if metric.allowed_regression_pct is None and metric.allowed_regression_abs is None:
                missing.append(f"allowed_regression_pct or allowed_regression_abs for metric {metric.name}")
        if not set(PHASES) <= set(self.phases):
            missing.append("phases [cold, warm] (measured and reported separately)")
        return missing

    @property
    def key_metric(self) -> Metric | None:
        return next((m for m in self.metrics if m.key), None)


class Proof(_Record):
    """A fact that a job must establish before conditional models join their tracks.

    A proof's gate never promotes anything (write `promote: false`); `matrix.models: eligible`
    means the models whose conditionals wait on this proof, and no `targets` means all targets.
    """

    description: NonEmptyStr
    gate: Gate | None = None


class Track(_Record):
    title: NonEmptyStr
    prs: list[PositiveInt] = Field(min_length=1)  # only the PRs to take; stacking is found from PR text
    fork_commits: list[Sha] = []  # commits the fork already carries for this track
    requires: Requirements
    targets: list[Id] = Field(min_length=1)
    paths: PathRules = PathRules()
    gate: Gate | None = None
    regression: Job | None = None  # run by verify-converged --run-regression
    notes: str = ""


class ReportConfig(_Record):
    repo: Repo
    labels: list[NonEmptyStr] = Field(default_factory=lambda: ["porttrack"])
    title: Annotated[str, Field(min_length=1), AfterValidator(_placeholder_check(TITLE_PLACEHOLDERS))] = (
        "porttrack weekly status {week}"
    )
    tracking_issue: PositiveInt | None = None
    output_dir: RelPath = "reports"


class Config(_Record):
    path: Path  # the tracks.yaml this was read from (not a key of the file)
    upstream: UpstreamConfig
    fork: ForkConfig
    targets: dict[Id, Target] = Field(min_length=1)
    models: dict[Id, Model]
    proofs: dict[Id, Proof] = {}
    tracks: dict[Id, Track]  # in file order
    report: ReportConfig

    _fork_override: Path | None = PrivateAttr(default=None)

    def fork_checkout(self) -> Path | None:
        """The fork's local checkout: --fork if given, else fork.checkout relative to this file."""
        if self._fork_override is not None:
            return self._fork_override
        if self.fork.checkout is None:
            return None
        checkout = Path(self.fork.checkout).expanduser()
        if not checkout.is_absolute():
            checkout = self.path.parent / checkout
        return Path(os.path.normpath(checkout.absolute()))

    def track_for_pr(self, number: int) -> str | None:
        """The track that lists PR `number` (a PR belongs to at most one track), else None."""
        return next((tid for tid, track in self.tracks.items() if number in track.prs), None)

    def models_waiting_on(self, proof_id: str) -> list[str]:
        """Models with a conditional on `proof_id` (what a proof gate's `models: eligible` means)."""
        return [mid for mid, model in self.models.items() if any(c.proof == proof_id for c in model.conditional)]

    def gate_targets(self, track_id: str) -> list[str]:
        """The targets a track's gate must pass on: its matrix's targets, else the track's."""
        track = self.tracks[track_id]
        if track.gate is not None and track.gate.matrix.targets is not None:
            return list(track.gate.matrix.targets)
        return list(track.targets)


# --------------------------------------------------------------------------- entry points


class TracksFileError(ConfigError):
    """A malformed tracks.yaml. `problems` holds (filename, line, column, path, message) tuples."""

    def __init__(self, problems: Sequence[tuple[str, int, int, str, str]]):
        self.problems = tuple((f, line, col, _one_line(path), _one_line(msg)) for f, line, col, path, msg in problems)
        lines = [f"{f}:{line}:{col}: {path}: {msg}" for f, line, col, path, msg in self.problems[:MAX_REPORTED]]
        if len(self.problems) > MAX_REPORTED:
            lines.append(f"{self.problems[0][0]}: ... and {len(self.problems) - MAX_REPORTED} more problems")
        super().__init__("\n".join(lines))


def _one_line(text: str) -> str:
    """Keep the one-line-per-problem promise whatever the file held (multi-line values, CRs)."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def _shorten(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def load_config(path: Path, fork_override: str | None = None) -> Config:
    """Read and validate tracks.yaml. Raises ConfigError (one line per problem) on anything wrong."""
    path = Path(path)
    shown = _display_name(path)
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"{shown}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{shown}: cannot read: {exc.strerror or exc}") from None
    config = _parse(_decode(data, shown), shown, path)
    if fork_override:
        override = Path(os.path.normpath(Path(fork_override).expanduser().absolute()))
        config._fork_override = override  # a private attribute: allowed on a frozen model
    return config


def parse_config(text: str, filename: str) -> Config:
    """Validate tracks.yaml given as text; `filename` is used in messages and as Config.path."""
    if text.startswith("\ufeff"):
        text = text[1:]
    return _parse(text, filename, Path(filename))


def _display_name(path: Path) -> str:
    """The path as given when relative; relative to the working folder when it lies below it."""
    if not path.is_absolute():
        return str(path)
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _decode(data: bytes, shown: str) -> str:
    if len(data) > MAX_BYTES:
        _fail(shown, 1, 1, "(document)", _TOO_BIG)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        line = data.count(b"\n", 0, exc.start) + 1
        col = len(data[line_start : exc.start].decode("utf-8", "replace")) + 1
        _fail(shown, line, col, "(encoding)", f"byte 0x{data[exc.start]:02x} is not UTF-8; save tracks.yaml as UTF-8")
    raise AssertionError("unreachable")


def _fail(filename: str, line: int, col: int, path: str, message: str):
    raise TracksFileError([(filename, line, col, path, message)])


class _Refused(Exception):
    def __init__(self, mark: Any, path: str, message: str):
        super().__init__(message)
        self.mark, self.path, self.message = mark, path, message


_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[misc, valid-type]
    """SafeLoader (libyaml when present). Duplicate keys are found on the composed node tree
    (`_duplicate_keys`), before construction, where PyYAML would silently keep the last one."""


def _parse(text: str, filename: str, path: Path) -> Config:
    if len(text) > MAX_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        _fail(filename, 1, 1, "(document)", _TOO_BIG)
    _refuse_unprintable(text, filename)
    _refuse_tabs(text, filename)
    root, data = _load_yaml(text, filename)
    if root is None:
        _fail(filename, 1, 1, "(document)", _EMPTY)
    if not isinstance(root, yaml.MappingNode):
        line, col = _position(root)
        _fail(filename, line, col, "(document)", f"expected a mapping at the top level, got {_kind(root)}")

    problems: list[tuple[tuple[Any, ...], str, bool]] = []  # (loc, message, point at key)
    problems += _unquoted_shas(root)
    if "path" in data:
        problems.append((("path",), "unknown key (path is where the file is, not a setting)", True))
    config = None
    try:
        config = Config.model_validate({**data, "path": path})
    except ValidationError as exc:
        problems += [_pydantic_problem(err, root) for err in exc.errors()]
    if config is not None:
        problems += _CrossCheck(config).run()
    if problems:
        raise TracksFileError(_locate_all(problems, root, filename))
    assert config is not None
    return config


def _refuse_unprintable(text: str, filename: str) -> None:
    # PyYAML refuses these too, but libyaml reports a byte offset; find the character ourselves.
    match = yaml.reader.Reader.NON_PRINTABLE.search(text)
    if match:
        index = match.start()
        line = text.count("\n", 0, index) + 1
        col = index - (text.rfind("\n", 0, index) + 1) + 1
        _fail(filename, line, col, "(yaml)", f"character U+{ord(match.group()):04X} is not allowed in YAML (not printable)")


def _refuse_tabs(text: str, filename: str) -> None:
    found = []
    for number, line in enumerate(text.split("\n"), start=1):
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        if "\t" in indent:
            col = indent.index("\t") + 1
            found.append((filename, number, col, "(yaml)", "tab in indentation; YAML indents with spaces"))
    if found:
        raise TracksFileError(found)


def _load_yaml(text: str, filename: str) -> tuple[Any, Any]:
    """Compose and construct, refusing before expansion what would be costly to expand."""
    try:
        _scan_events(text)
        loader = _Loader(text)
        try:
            root = loader.get_single_node()
            if root is None:
                return None, None
            _expanded_size(root)
            duplicates = list(_duplicate_keys(root))
            if duplicates:
                raise TracksFileError([(filename, *_position(k), p, m) for k, p, m in duplicates])
            data = loader.construct_document(root)
        finally:
            loader.dispose()
    except _Refused as exc:
        line, col = _position(exc.mark)
        _fail(filename, line, col, exc.path, exc.message)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        _fail(filename, line, col, "(yaml)", _syntax_message(exc, text))
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        col = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        char = exc.character if isinstance(exc.character, int) else ord(exc.character)
        _fail(filename, line, col, "(yaml)", f"character U+{char:04X} is not allowed in YAML ({exc.reason})")
    except yaml.YAMLError as exc:  # anything else PyYAML raises: still a ConfigError, never a traceback
        _fail(filename, 1, 1, "(yaml)", str(exc).splitlines()[0])
    except RecursionError:
        _fail(filename, 1, 1, "(yaml)", "the document is nested too deeply")
    return root, data


def _scan_events(text: str) -> None:
    """Count aliases and nesting from the event stream, before any node is built."""
    aliases = 0
    open_anchors: list[str | None] = []  # one per collection being read: aliasing one is a loop
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            open_anchors.append(event.anchor)
            if len(open_anchors) > MAX_DEPTH:
                raise _Refused(event.start_mark, "(yaml)", f"nested more than {MAX_DEPTH} levels deep")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            open_anchors.pop()
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor in open_anchors:
                raise _Refused(event.start_mark, "(yaml)", f"recursive alias: *{event.anchor} is inside &{event.anchor}")
            aliases += 1
            if aliases > MAX_ALIASES:
                raise _Refused(
                    event.start_mark, "(yaml)",
                    f"more than {MAX_ALIASES} aliases (*name); refused before expansion (alias bomb?)",
                )


_TOO_DEEP_EXPANDED = f"nested more than {MAX_DEPTH} levels deep once aliases are expanded"


def _expanded_size(root: yaml.Node) -> None:
    """Refuse a tree whose aliases expand beyond MAX_NODES nodes or MAX_DEPTH levels, or loop."""
    sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (nodes, height), memoised: O(distinct nodes)
    active: set[int] = set()

    def visit(node: yaml.Node, depth: int) -> tuple[int, int]:
        key = id(node)
        if key in active:
            raise _Refused(node.start_mark, "(yaml)", "recursive alias: a node contains itself")
        if key not in sizes:
            if depth > MAX_DEPTH:
                raise _Refused(node.start_mark, "(yaml)", _TOO_DEEP_EXPANDED)
            active.add(key)
            count, height = 1, 1
            for child in _children(node):
                child_count, child_height = visit(child, depth + 1)
                count, height = count + child_count, max(height, child_height + 1)
                if count > MAX_NODES:  # point at the child that tipped it over: usually an alias
                    raise _Refused(child.start_mark, "(yaml)", f"expands to more than {MAX_NODES} nodes (alias bomb?)")
            active.discard(key)
            sizes[key] = (count, height)
        count, height = sizes[key]
        if depth + height - 1 > MAX_DEPTH:
            raise _Refused(node.start_mark, "(yaml)", _TOO_DEEP_EXPANDED)
        return count, height

    visit(root, 1)


def _children(node: yaml.Node) -> Iterator[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield key
            yield value
    elif isinstance(node, yaml.SequenceNode):
        yield from node.value


def _duplicate_keys(root: yaml.Node) -> Iterator[tuple[yaml.Node, str, str]]:
    seen_nodes: set[int] = set()

    def walk(node: yaml.Node, path: tuple[str, ...]) -> Iterator[tuple[yaml.Node, str, str]]:
        if id(node) in seen_nodes:  # an alias: already walked where it was defined
            return
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[str, yaml.Node] = {}
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                    if key.value in first:
                        earlier = first[key.value].start_mark.line + 1
                        message = f"duplicate key (first at line {earlier}); YAML would silently keep only the last"
                        yield key, _dotted((*path, key.value)), message
                    else:
                        first[key.value] = key
                yield from walk(value, (*path, str(getattr(key, "value", "?"))))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                yield from walk(item, (*path, str(index)))

    yield from walk(root, ())


def _unquoted_shas(root: yaml.MappingNode) -> list[tuple[tuple[Any, ...], str, bool]]:
    """fork_commits entries must be quoted: an unquoted all-digit SHA is a YAML number."""
    problems = []
    tracks = _mapping_get(root, "tracks")
    for track_key, track in (tracks.value if isinstance(tracks, yaml.MappingNode) else []):
        commits = _mapping_get(track, "fork_commits")
        if not isinstance(commits, yaml.SequenceNode):
            continue
        for index, item in enumerate(commits.value):
            if isinstance(item, yaml.ScalarNode) and item.style not in ("'", '"'):
                problems.append(((("tracks", track_key.value, "fork_commits", index)), _sha_message(item), False))
    return problems


def _sha_message(node: yaml.ScalarNode) -> str:
    reads = _yaml_reads(node)
    why = f"unquoted, YAML reads it as {reads}" if reads else "unquoted, a SHA of digits only would be read as a number"
    return f'quote SHAs: write "{node.value}" ({why})'


def _mapping_get(node: Any, key: str) -> Any:
    if not isinstance(node, yaml.MappingNode):
        return None
    found = None
    for k, v in node.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            found = v  # the last one wins, as in the constructed dict (merge keys come first)
    return found


def _syntax_message(exc: yaml.MarkedYAMLError, text: str) -> str:
    mark = exc.problem_mark
    if mark is not None and 0 <= mark.index < len(text) and text[mark.index] == "\t":
        return "tab character where YAML expects a token; use spaces"
    problem = (exc.problem or "invalid YAML").replace("\n", " ")
    if "maximum nesting depth" in problem:  # PyYAML >= 6.0.4 stops deep documents in its scanner
        return f"nested more than {MAX_DEPTH} levels deep (refused by the YAML parser)"
    if exc.context and problem.startswith("but "):  # "expected a single document ..., but found another"
        return f"{exc.context}, {problem}"
    if exc.context:
        where = f" at line {exc.context_mark.line + 1}" if exc.context_mark else ""
        return f"{problem} ({exc.context}{where})"
    return problem


# --------------------------------------------------------------------------- locating problems


def _node_at(root: yaml.Node, loc: Sequence[Any], key: bool = False) -> yaml.Node:
    """The node a pydantic `loc` names; where the path stops matching (a missing key), its parent.

    With key=True, the key node of the last part instead of its value (unknown keys).
    """
    node = root
    for index, part in enumerate(loc):
        if isinstance(node, yaml.MappingNode):
            match = None
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == str(part):
                    match = (k, v)  # last wins, like the constructed dict
            if match is None:
                return node
            if key and index == len(loc) - 1:
                return match[0]
            node = match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
        else:
            return node
    return node


def _position(node_or_mark: Any) -> tuple[int, int]:
    mark = getattr(node_or_mark, "start_mark", node_or_mark)
    return mark.line + 1, mark.column + 1


def _dotted(loc: Iterable[Any]) -> str:
    parts = [str(p) for p in loc if p != "[key]"]
    return ".".join(parts) if parts else "(top level)"


def _locate_all(problems, root, filename) -> list[tuple[str, int, int, str, str]]:
    located = {}
    for loc, message, key in problems:
        line, col = _position(_node_at(root, loc, key))
        # One message per value: a node-level finding (quote SHAs) comes first and replaces
        # pydantic's plainer type error for the same value.
        located.setdefault((line, col, _dotted(loc)), message)
    rows = [(filename, line, col, path, msg) for (line, col, path), msg in located.items()]
    rows.sort(key=lambda row: (row[1], row[2], row[3]))
    return rows


_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def _pydantic_problem(err: dict[str, Any], root: yaml.Node) -> tuple[tuple[Any, ...], str, bool]:
    loc = tuple(err["loc"])
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "extra_forbidden":
        return loc, _unknown_key_message(loc), True
    if loc and loc[-1] == "[key]":  # a mapping key of the wrong type, e.g. an unquoted number
        loc = loc[:-1]
        return loc, f"expected a string key, got {_got(_node_at(root, loc, key=True), expected_string=True)}", True
    node = _node_at(root, loc)
    if kind == "missing":
        return loc, "required key is missing", False
    if kind == "sha_type":
        if isinstance(node, yaml.ScalarNode):
            return loc, _sha_message(node), False
        return loc, f"expected a quoted SHA string, got {_got(node)}", False
    if kind == "porttrack":
        return loc, ctx["message"], False
    if kind in _EXPECTED:
        return loc, f"expected {_EXPECTED[kind]}, got {_got(node, expected_string=kind == 'string_type')}", False
    if kind == "literal_error":
        return loc, f"expected {ctx['expected']}, got {_got(node)}", False
    if kind == "string_too_short":
        return loc, "expected a non-empty string", False
    if kind == "too_short":
        return loc, f"expected at least {ctx['min_length']} item(s)", False
    bounds = {"greater_than": "greater than {gt}", "greater_than_equal": "at least {ge}", "less_than_equal": "at most {le}"}
    if kind in bounds:
        return loc, f"expected a number {bounds[kind].format(**ctx)}, got {_got(node)}", False
    if kind == "finite_number":
        return loc, f"expected a finite number, got {_got(node)}", False
    return loc, f"{err['msg']}, got {_got(node)}", False


def _unknown_key_message(loc: tuple[Any, ...]) -> str:
    allowed = _allowed_keys(loc[:-1])
    name = str(loc[-1])
    if not allowed:
        return f"unknown key {name}"
    close = difflib.get_close_matches(name, allowed, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return f"unknown key {name} ({hint}expected one of: {', '.join(allowed)})"


def _allowed_keys(loc: Sequence[Any]) -> list[str]:
    """The keys the schema allows at `loc`, found by walking the record types."""
    annotation: Any = Config
    for part in loc:
        annotation = _unwrap(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(str(part))
            if field is None:
                return []
            annotation = field.annotation
        elif get_origin(annotation) in (list, dict):
            annotation = get_args(annotation)[-1]
        else:
            return []
    annotation = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [name for name in annotation.model_fields if not (annotation is Config and name == "path")]
    return []


def _unwrap(annotation: Any) -> Any:
    """Strip Annotated and Optional (and a union with a Literal) down to the one structural type."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin is Union or isinstance(annotation, types.UnionType):
            options = [a for a in get_args(annotation) if a is not type(None) and get_origin(a) is not Literal]
            if len(options) != 1:
                return annotation
            annotation = options[0]
        else:
            return annotation


def _kind(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return _got(node)


def _yaml_reads(node: yaml.ScalarNode) -> str | None:
    """What YAML 1.1 made of an unquoted scalar that is not a string: "the number 262143"."""
    if node.style in ("'", '"'):
        return None
    what = {
        "tag:yaml.org,2002:bool": "the boolean",
        "tag:yaml.org,2002:int": "the number",
        "tag:yaml.org,2002:float": "the number",
        "tag:yaml.org,2002:timestamp": "the date",
        "tag:yaml.org,2002:null": "null",
    }.get(node.tag)
    if what is None or what == "null":
        return what
    try:
        value = yaml.SafeLoader("").construct_object(node)
    except (yaml.YAMLError, ValueError, OverflowError):
        return what.replace("the ", "a ")
    if isinstance(value, bool):
        value = "true" if value else "false"
    return f"{what} {value}"


def _got(node: Any, expected_string: bool = False) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if not isinstance(node, yaml.ScalarNode):
        return "something else"
    if node.style in ("'", '"'):
        return f'the string "{_shorten(node.value)}"'
    reads = _yaml_reads(node)
    if reads is None:
        return _shorten(node.value)
    if reads == "null":
        return "nothing (null)"
    if expected_string:
        return f'{node.value}, which YAML reads as {reads}; quote it: "{node.value}"'
    if reads.endswith(" " + node.value):  # "0", the number 0: nothing surprising to explain
        return node.value
    return f"{node.value} (YAML reads {reads})"


# --------------------------------------------------------------------------- cross-references


class _CrossCheck:
    """Checks that need the whole typed config: references between sections, uniqueness, ids."""

    def __init__(self, config: Config):
        self.config = config
        self.problems: list[tuple[tuple[Any, ...], str, bool]] = []

    def add(self, loc: tuple[Any, ...], message: str, key: bool = False) -> None:
        self.problems.append((loc, message, key))

    def run(self) -> list[tuple[tuple[Any, ...], str, bool]]:
        c = self.config
        for section in ("targets", "models", "proofs", "tracks"):
            for ident in getattr(c, section):
                if not _ID.match(ident):
                    message = f'expected an id (letters, digits, . _ -; at most 64), got "{ident}"'
                    self.add((section, ident), message, key=True)
        for tid, target in c.targets.items():
            self.unique(("targets", tid, "runner_labels"), target.runner_labels, "runner label")
        for mid, model in c.models.items():
            self.model(mid, model)
        for pid, proof in c.proofs.items():
            if proof.gate is not None:
                self.proof_gate(pid, proof.gate)
        owner: dict[int, str] = {}
        for tid, track in c.tracks.items():
            self.track(tid, track, owner)
        self.unique(("report", "labels"), c.report.labels, "label")
        return self.problems

    def unique(self, loc: tuple[Any, ...], values: Sequence[Any], what: str) -> None:
        seen: dict[Any, int] = {}
        for index, value in enumerate(values):
            if value in seen:
                self.add((*loc, index), f"duplicate {what} {value} (also item {seen[value]})")
            else:
                seen[value] = index

    def target_ref(self, loc: tuple[Any, ...], target: str, key: bool = False) -> bool:
        if target not in self.config.targets:
            self.add(loc, f"unknown target {target} (targets: {', '.join(self.config.targets)})", key)
            return False
        return True

    def model(self, mid: str, model: Model) -> None:
        c = self.config
        self.unique(("models", mid, "drafters"), model.drafters, "drafter")
        for target in model.backends:
            self.target_ref(("models", mid, "backends", target), target, key=True)
        for index, cond in enumerate(model.conditional):
            loc = ("models", mid, "conditional", index)
            if cond.proof not in c.proofs:
                known = ", ".join(c.proofs) or "none defined"
                self.add((*loc, "proof"), f"unknown proof {cond.proof} (proofs: {known})")
            for j, tid in enumerate(cond.tracks):
                if tid not in c.tracks:
                    self.add((*loc, "tracks", j), f"unknown track {tid} (tracks: {', '.join(c.tracks)})")
            self.unique((*loc, "tracks"), cond.tracks, "track")

    def track(self, tid: str, track: Track, owner: dict[int, str]) -> None:
        c = self.config
        loc = ("tracks", tid)
        for index, number in enumerate(track.prs):
            if number in owner and owner[number] != tid:
                message = f"PR #{number} is already tracked by track {owner[number]}; a PR belongs to one track"
                self.add((*loc, "prs", index), message)
            owner.setdefault(number, tid)
        self.unique((*loc, "prs"), track.prs, "PR")
        self.unique((*loc, "fork_commits"), track.fork_commits, "commit")
        for index, target in enumerate(track.targets):
            self.target_ref((*loc, "targets", index), target)
        self.unique((*loc, "targets"), track.targets, "target")
        req = track.requires
        for name in ("drafter", "attention", "quantization"):
            self.unique((*loc, "requires", name), getattr(req, name) or [], name)
        for target, backends in (req.backend or {}).items():
            bloc = (*loc, "requires", "backend", target)
            if self.target_ref(bloc, target, key=True) and target not in track.targets:
                self.add(bloc, f"target {target} is not one of this track's targets ({', '.join(track.targets)})", key=True)
            self.unique(bloc, backends, "backend")
        if track.gate is not None:
            self.gate((*loc, "gate"), track.gate)
            self.track_gate(tid, track)

    def gate(self, loc: tuple[Any, ...], gate: Gate) -> None:
        self.unique((*loc, "phases"), gate.phases, "phase")
        self.unique((*loc, "matrix", "contexts"), gate.matrix.contexts, "context")
        self.unique((*loc, "matrix", "batches"), gate.matrix.batches, "batch")
        self.unique((*loc, "metrics"), [m.name for m in gate.metrics], "metric")
        keys = [i for i, m in enumerate(gate.metrics) if m.key]
        for index in keys[1:]:
            message = f"only one metric may be the key metric (already: {gate.metrics[keys[0]].name})"
            self.add((*loc, "metrics", index, "key"), message)
        if isinstance(gate.matrix.models, list):
            for index, mid in enumerate(gate.matrix.models):
                if mid not in self.config.models:
                    known = ", ".join(self.config.models)
                    self.add((*loc, "matrix", "models", index), f"unknown model {mid} (models: {known})")
            self.unique((*loc, "matrix", "models"), gate.matrix.models, "model")
        for index, target in enumerate(gate.matrix.targets or []):
            self.target_ref((*loc, "matrix", "targets", index), target)
        self.unique((*loc, "matrix", "targets"), gate.matrix.targets or [], "target")

    def track_gate(self, tid: str, track: Track) -> None:
        from porttrack.eligibility import requirement_failures  # shares the one definition of a match

        gate = track.gate
        assert gate is not None
        loc = ("tracks", tid, "gate", "matrix")
        for index, target in enumerate(gate.matrix.targets or []):
            if target in self.config.targets and target not in track.targets:
                ours = ", ".join(track.targets)
                self.add((*loc, "targets", index), f"target {target} is not one of this track's targets ({ours})")
        if gate.promote and gate.matrix.targets is not None:
            missing = [t for t in track.targets if t not in gate.matrix.targets]
            if missing:
                message = f"a promoting gate must cover every target of the track; missing {', '.join(missing)}"
                self.add((*loc, "targets"), message)
        if isinstance(gate.matrix.models, list):
            for index, mid in enumerate(gate.matrix.models):
                model = self.config.models.get(mid)
                failures = requirement_failures(model, track) if model is not None else []
                if failures:
                    self.add((*loc, "models", index), f"model {mid} is not eligible for this track: {'; '.join(failures)}")

    def proof_gate(self, pid: str, gate: Gate) -> None:
        loc = ("proofs", pid, "gate")
        self.gate(loc, gate)
        if gate.promote:
            self.add((*loc, "promote"), "a proof's gate promotes nothing; set promote: false")
