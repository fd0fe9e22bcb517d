"""tracks.yaml: the human-owned statement of intent, as frozen, typed records (reading the file and
caching the validated records: `porttrack.tracks.file`).

Profiles (`PROFILES`, the file's `profile:` key): `vllm-gpu` — the records `Config`, `Target`,
`Model`, `Gate`... below, and the default when the key is absent, so a file written before
profiles existed keeps its meaning — and `neutral` — `NeutralConfig` and its records: named
targets with free-form attributes, gates over named axes, no models. A `Profile` holds each one's
rules as data (which records, whether models and eligibility apply, the report's sections); the
core asks `config.rules`, never which profile it is.

The file is read, never written, by porttrack (machine state lives elsewhere). The records here are
plain frozen dataclasses; what they may hold is stated in their annotations, which pydantic reads
when `porttrack.tracks.validation` checks a file, and which nothing else evaluates. This module
imports neither pydantic nor PyYAML: every command that reads tracks.yaml imports it.
"""

from __future__ import annotations

import os
import re
import string
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, ClassVar, Literal, TypeVar, Union, get_args

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # pydantic's dependency, so always installed beside it
    from typing_extensions import dataclass_transform

from porttrack.common.errors import ConfigError

MAX_BYTES = 1 << 20  # tracks.yaml is a short human-written file; refuse anything bigger
MAX_ALIASES = 32  # enough to share a job or a metric list; an alias bomb needs many more
MAX_DEPTH = 24  # the schema nests 8 levels deep; the rest is headroom
MAX_NODES = 50_000  # nodes after expanding aliases (the real file has well under 2,000)
MAX_REPORTED = 50  # problems listed before "... and N more"
TOO_BIG = f"file is larger than {MAX_BYTES >> 20} MiB; tracks.yaml is meant to be short"

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


class _Rule:
    """What a field may hold, beyond its type: pydantic core-schema constraints (`min_length=1`,
    `gt=0`...) and a check run `before` or `after` pydantic's own type check, or around it (`wrap`).

    Read only through pydantic's documented `__get_pydantic_core_schema__` hook, while a file is
    validated; until then it is an inert annotation, so this module never imports pydantic.
    """

    def __init__(self, *, before: Any = None, after: Any = None, wrap: Any = None, **constraints: Any):
        self.before, self.after, self.wrap, self.constraints = before, after, wrap, constraints

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        schema: Any = {**handler(source), **self.constraints}  # a pydantic-core schema (not imported until validation)
        if self.before is not None:
            schema = core_schema.no_info_before_validator_function(self.before, schema)
        if self.after is not None:
            schema = core_schema.no_info_after_validator_function(self.after, schema)
        if self.wrap is not None:
            schema = core_schema.no_info_wrap_validator_function(self.wrap, schema)
        return schema


def _invalid(message: str, kind: str = "porttrack") -> Exception:
    """The error a check raises; `porttrack.tracks.validation` turns it into a located problem."""
    from pydantic_core import PydanticCustomError  # only ever raised while pydantic validates

    # The message travels as context: a literal template would treat `{ref}` as a placeholder.
    return PydanticCustomError(kind, "{message}", {"message": message})


_REPO = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")
# Refs end up on git command lines: no leading '-', no whitespace, nothing git would reject.
_REF = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._/-]*$")
_SHA = re.compile(r"^[0-9a-f]{7,40}$")
ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
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
        raise _invalid("expected a quoted SHA string; quote SHAs", kind="sha_type")
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


def _check_workflow_file(value: str) -> str:
    if not _WORKFLOW_FILE.match(value):
        raise _invalid(f'expected a workflow file name such as "porttrack-gate.yml", got "{value}"')
    return value


def _check_metric(value: str) -> str:
    if not _METRIC.match(value):
        raise _invalid(f'expected a metric name (a letter, then letters, digits, _ . -), got "{value}"')
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


def _models_or_eligible(value: Any, handler: Any) -> Any:
    # A union's own errors name both branches; one sentence is clearer.
    from pydantic_core import ValidationError

    if isinstance(value, list) and not value:
        raise _invalid('expected at least one model id, or "eligible"')
    try:
        return handler(value)
    except ValidationError:
        raise _invalid('expected "eligible" or a list of model ids') from None


NonEmpty = _Rule(min_length=1)  # a string with a character, a list or mapping with an entry
NonEmptyStr = Annotated[str, NonEmpty]
Id = str  # checked against ID_PATTERN (and as a reference) in the cross-reference pass, pointing at the key
Repo = Annotated[str, _Rule(after=_check_repo)]
GitRef = Annotated[str, _Rule(after=_check_ref)]
Sha = Annotated[str, _Rule(before=_check_sha)]
RelPath = Annotated[str, _Rule(min_length=1, after=_check_relative)]
Glob = Annotated[str, _Rule(min_length=1, after=_check_glob)]
PositiveInt = Annotated[int, _Rule(gt=0)]
NonNegative = Annotated[float, _Rule(ge=0)]  # NaN and infinities: refused by allow_inf_nan below
Command = Annotated[str, _Rule(min_length=1, after=_placeholder_check(JOB_PLACEHOLDERS))]
JobInput = Annotated[str, _Rule(after=_placeholder_check(JOB_PLACEHOLDERS))]
MetricName = Annotated[str, _Rule(after=_check_metric)]
WorkflowFile = Annotated[str, _Rule(after=_check_workflow_file)]
Title = Annotated[str, _Rule(min_length=1, after=_placeholder_check(TITLE_PLACEHOLDERS))]


# --------------------------------------------------------------------------- records


class _Record:
    """Base of every record: frozen, no unknown keys, and strict types when validated.

    strict: YAML already typed every value, so "5" for an integer is a mistake, not a conversion;
    allow_inf_nan: .inf and .nan are no tolerance. pydantic reads `__pydantic_config__` from plain
    dataclasses. Strictness would also demand an instance of the record where tracks.yaml has a
    mapping, so the record's own schema alone is relaxed; its fields stay strict.
    """

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid", "strict": True, "allow_inf_nan": False}
    kinds: ClassVar[dict[str, type[_Record]]] = {}  # class name -> class, for the validated-config cache

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _Record.kinds[cls.__name__] = cls

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        schema = handler(source)
        if schema.get("type") == "dataclass":
            schema["strict"] = False
        return schema


_R = TypeVar("_R")


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(field,))
def record(cls: type[_R]) -> type[_R]:
    """A record's class as a frozen, keyword-only dataclass (keyword-only: fields keep the file's
    order). A function rather than `dataclass(...)` bound to a name, so type checkers see one."""
    return dataclass(frozen=True, kw_only=True)(cls)


def is_local_path(url: str) -> bool:
    """A clone URL that is a path on this machine: no scheme (`https://`, `file://`) and not git's
    scp-like `host:path` form."""
    return "://" not in url and not re.match(r"[^/]*:", url)


@record
class UpstreamConfig(_Record):
    repo: Repo
    remote: GitRef = "upstream"
    default_branch: GitRef = "main"
    # where the fork checkout's upstream remote fetches from, when not GitHub (a mirror):
    # `init --upstream-url` writes it, `doctor` accepts it and offers it as the fix
    url: NonEmptyStr | None = None


@record
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


@record
class Target(_Record):
    name: NonEmptyStr
    vendor: Vendor
    arch: NonEmptyStr
    attention_path: NonEmptyStr | None = None
    runner_labels: list[NonEmptyStr] = field(default_factory=list)


@record
class Conditional(_Record):
    """The model joins `tracks` only once the proof has passed (until then: verdict conditional)."""

    proof: Id
    tracks: Annotated[list[Id], NonEmpty]
    reason: NonEmptyStr


@record
class Model(_Record):
    drafters: list[Drafter] = field(default_factory=list)  # empty: the model has no drafter
    attention: Attention
    quantization: NonEmptyStr
    backends: dict[Id, NonEmptyStr]  # target id -> the attention backend selected there
    conditional: list[Conditional] = field(default_factory=list)
    notes: str = ""


@record
class Requirements(_Record):
    """What a model must have to join a track. None means "no requirement"; a list means "one of"."""

    drafter: Annotated[list[Drafter], NonEmpty] | None = None
    attention: Annotated[list[Attention], NonEmpty] | None = None
    quantization: Annotated[list[NonEmptyStr], NonEmpty] | None = None
    backend: dict[Id, Annotated[list[NonEmptyStr], NonEmpty]] | None = None


@record
class PathRules(_Record):
    """Which files of a PR's diff a track takes: included by a glob and not excluded by one."""

    include: Annotated[list[Glob], NonEmpty] = field(default_factory=lambda: ["**"])
    exclude: list[Glob] = field(default_factory=list)


@record
class WorkflowJob(_Record):
    file: WorkflowFile  # a workflow file name in the fork's .github/workflows
    ref: GitRef = "main"
    inputs: dict[NonEmptyStr, JobInput] = field(default_factory=dict)
    artifact: NonEmptyStr = "porttrack-results"


@record
class Job(_Record):
    """Exactly one of a local command (placeholders {ref} {results} {workdir} {target}) or a
    GitHub Actions workflow dispatched on the fork."""

    command: Command | None = None
    workflow: WorkflowJob | None = None
    timeout_s: Annotated[int, _Rule(gt=0, le=7 * 24 * 3600)] = 3600

    def __post_init__(self) -> None:  # pydantic runs it after the fields validated
        if (self.command is None) == (self.workflow is None):
            raise _invalid("expected exactly one of command or workflow")


@record
class Matrix(_Record):
    # "eligible": every model eligible for the track (for a proof: every model waiting on it).
    models: Annotated[Union[list[Id], Literal["eligible"]], _Rule(wrap=_models_or_eligible)] = "eligible"
    contexts: Annotated[list[PositiveInt], NonEmpty]
    batches: Annotated[list[PositiveInt], NonEmpty]
    targets: Annotated[list[Id], NonEmpty] | None = None  # None: the track's targets

    def axis_lists(self) -> list[tuple[tuple[str, ...], list[Any], str]]:
        """The axes besides models and targets: (where in the matrix, values, what one value is)."""
        return [(("contexts",), list(self.contexts), "context"), (("batches",), list(self.batches), "batch")]

    def required_axes(self, models: Sequence[str]) -> tuple[tuple[str, tuple[Any, ...]], ...]:
        """The named axes of the required matrix, models (as eligibility decided) first."""
        return (("model", tuple(models)), ("context", tuple(self.contexts)), ("batch", tuple(self.batches)))


@record
class Tolerance(_Record):
    """Numerical tolerance: the candidate's numbers against the reference's, |a-b| <= abs + rel*|b|."""

    abs: NonNegative
    rel: NonNegative


@record
class Metric(_Record):
    name: MetricName
    unit: NonEmptyStr
    direction: Direction  # which way is better
    # How much worse than a baseline measured on the same environment is still a pass, in percent
    # of the baseline and/or in `unit`; when both are given, both must hold.
    allowed_regression_pct: NonNegative | None = None
    allowed_regression_abs: NonNegative | None = None
    key: bool = False  # the one charted in the weekly report


@record
class Gate(_Record):
    job: Job
    matrix: Matrix
    reference_backend: NonEmptyStr | None = None
    tolerance: Tolerance | None = None
    metrics: list[Metric] = field(default_factory=list)
    phases: Annotated[list[Phase], NonEmpty] = field(default_factory=lambda: ["cold", "warm"])
    graph_replay: Assertion | None = None
    no_jit_after_warmup: Assertion | None = None
    promote: bool = True

    def __post_init__(self) -> None:  # pydantic runs it after the fields validated
        missing = self.missing_for_promotion()
        if self.promote and missing:
            raise _invalid(
                "promote is true, so before default enablement this gate must define "
                + ", ".join(missing)
                + " (or set promote: false to run it as a measurement only)"
            )

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


@record
class Proof(_Record):
    """A fact that a job must establish before conditional models join their tracks.

    A proof's gate never promotes anything (write `promote: false`); `matrix.models: eligible`
    means the models whose conditionals wait on this proof, and no `targets` means all targets.
    """

    description: NonEmptyStr
    gate: Gate | None = None


@record
class Track(_Record):
    title: NonEmptyStr
    prs: Annotated[list[PositiveInt], NonEmpty]  # only the PRs to take; stacking is found from PR text
    fork_commits: list[Sha] = field(default_factory=list)  # commits the fork already carries for this track
    requires: Requirements
    targets: Annotated[list[Id], NonEmpty]
    paths: PathRules = field(default_factory=PathRules)
    gate: Gate | None = None
    regression: Job | None = None  # run by verify-converged --run-regression
    notes: str = ""


@record
class ReportConfig(_Record):
    repo: Repo
    labels: list[NonEmptyStr] = field(default_factory=lambda: ["porttrack"])
    title: Title = "porttrack weekly status {week}"
    tracking_issue: PositiveInt | None = None
    output_dir: RelPath = "reports"


class _ConfigMethods:
    """What every profile's Config answers the same way (the core reads these, never the profile)."""

    path: Path
    upstream: UpstreamConfig
    fork: ForkConfig
    tracks: dict[str, Any]
    targets: dict[str, Any]

    def fork_checkout(self) -> Path | None:
        """The fork's local checkout: fork.checkout, relative to this file (`load_config` puts
        --fork there, as an absolute path, when one is given)."""
        if self.fork.checkout is None:
            return None
        checkout = Path(self.fork.checkout).expanduser()
        if not checkout.is_absolute():
            checkout = self.path.parent / checkout
        return Path(os.path.normpath(checkout.absolute()))

    def upstream_url(self) -> str | None:
        """upstream.url, a local path in it read relative to this file (as fork.checkout is): init
        writes a local mirror's path relative, so the committed tracks.yaml holds no machine's
        absolute path."""
        url = self.upstream.url
        if url is None or not is_local_path(url) or Path(url).expanduser().is_absolute():
            return url
        return os.path.normpath(self.path.parent / url)

    def track_for_pr(self, number: int) -> str | None:
        """The track that lists PR `number` (a PR belongs to at most one track), else None."""
        return next((tid for tid, track in self.tracks.items() if number in track.prs), None)

    def models_waiting_on(self, proof_id: str) -> list[str]:
        """Models with a conditional on `proof_id` (what a proof gate's `models: eligible` means)."""
        # every profile has models (a field of vllm-gpu's, neutral's an empty class constant, which
        # a field of this base could not be both of)
        models: Mapping[str, Model] = self.models  # type: ignore[attr-defined]
        return [mid for mid, model in models.items() if any(c.proof == proof_id for c in model.conditional)]

    def gate_targets(self, track_id: str) -> list[str]:
        """The targets a track's gate must pass on: its matrix's targets, else the track's."""
        track = self.tracks[track_id]
        if track.gate is not None and track.gate.matrix.targets is not None:
            return list(track.gate.matrix.targets)
        return list(track.targets)

    @property
    def rules(self) -> "Profile":
        return PROFILES[self.profile]  # type: ignore[attr-defined]


@record
class Config(_ConfigMethods, _Record):
    """Profile vllm-gpu: GPU targets, models selected by attributes, LLM-serving gate axes."""

    path: Path  # the tracks.yaml this was read from (not a key of the file)
    # Absent: vllm-gpu, so that a file written before profiles existed keeps its meaning.
    profile: Literal["vllm-gpu"] = "vllm-gpu"
    upstream: UpstreamConfig
    fork: ForkConfig
    targets: Annotated[dict[Id, Target], NonEmpty]
    models: dict[Id, Model]
    proofs: dict[Id, Proof] = field(default_factory=dict)
    tracks: dict[Id, Track]  # in file order
    report: ReportConfig


# --------------------------------------------------------------------------- profile neutral
#
# A fork of anything: targets are named machines with free-form attributes, gates measure a job's
# metrics over named axes of any name, and there are no models (so no eligibility): a track
# applies everywhere. Phases and a numeric tolerance are optional.


def _check_axis_value(value: Any) -> Any:
    # Runs before the type check: one sentence instead of a union's two, and the reason for 3.12.
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        shown = "true/false" if isinstance(value, bool) else repr(value)
        raise _invalid(f'expected a string or an integer, got {shown}; quote a value such as "3.12"')
    if isinstance(value, str) and not value:
        raise _invalid("expected a non-empty string")
    return value


AxisValue = Annotated[Union[str, int], _Rule(before=_check_axis_value)]


@record
class NeutralTarget(_Record):
    """A machine a gate runs on; `attributes` hold anything a job needs (os, python, runner...)."""

    name: NonEmptyStr | None = None
    arch: NonEmptyStr | None = None  # when given, results must report this machine arch (e.g. x86_64)
    runner_labels: list[NonEmptyStr] = field(default_factory=list)
    attributes: dict[Id, str] = field(default_factory=dict)


@record
class AxisMatrix(_Record):
    """Named axes of any name; the required cells are their product × targets × phases."""

    axes: dict[Id, Annotated[list[AxisValue], NonEmpty]] = field(default_factory=dict)
    targets: Annotated[list[Id], NonEmpty] | None = None  # None: the track's targets

    def axis_lists(self) -> list[tuple[tuple[str, ...], list[Any], str]]:
        return [(("axes", name), list(values), f"{name} value") for name, values in self.axes.items()]

    def required_axes(self, models: Sequence[str] = ()) -> tuple[tuple[str, tuple[Any, ...]], ...]:
        return tuple((name, tuple(values)) for name, values in self.axes.items())


@record
class NeutralGate(_Record):
    job: Job
    matrix: AxisMatrix = field(default_factory=AxisMatrix)
    metrics: Annotated[list[Metric], NonEmpty]
    phases: Annotated[list[Phase], NonEmpty] | None = None  # None: one measurement per cell
    tolerance: Tolerance | None = None
    promote: bool = True
    # Not part of this profile: the judge reads them and finds nothing to assert.
    graph_replay: ClassVar[None] = None
    no_jit_after_warmup: ClassVar[None] = None
    # A neutral gate compares a candidate with a baseline measured the same way; there is no
    # backend to hold numerics against. Named in the schema's refusal, so the file says why.
    reference_backend: ClassVar[None] = None
    FOREIGN_KEYS: ClassVar[Mapping[str, str]] = MappingProxyType({
        "reference_backend": "a key of profile vllm-gpu: a neutral gate compares the candidate against a baseline, "
                             "not against a backend (remove it, or write profile: vllm-gpu)",
    })

    def __post_init__(self) -> None:
        missing = self.missing_for_promotion()
        if self.promote and missing:
            raise _invalid(
                "promote is true, so this gate must define " + ", ".join(missing)
                + " (or set promote: false to run it as a measurement only)"
            )

    def missing_for_promotion(self) -> list[str]:
        return [f"allowed_regression_pct or allowed_regression_abs for metric {m.name}"
                for m in self.metrics if m.allowed_regression_pct is None and m.allowed_regression_abs is None]

    @property
    def key_metric(self) -> Metric | None:
        return next((m for m in self.metrics if m.key), None)


@record
class NeutralProof(_Record):
    description: NonEmptyStr
    gate: NeutralGate | None = None


@record
class NeutralTrack(_Record):
    title: NonEmptyStr
    prs: Annotated[list[PositiveInt], NonEmpty]
    fork_commits: list[Sha] = field(default_factory=list)
    targets: Annotated[list[Id], NonEmpty]
    paths: PathRules = field(default_factory=PathRules)
    gate: NeutralGate | None = None
    regression: Job | None = None
    notes: str = ""
    requires: ClassVar[Requirements] = Requirements()  # no models: every track applies everywhere


@record
class NeutralReport(_Record):
    """Every key has a default; `repo` defaults to the fork's."""

    repo: Repo | None = None
    labels: list[NonEmptyStr] = field(default_factory=lambda: ["porttrack"])
    title: Title = "porttrack weekly status {week}"
    tracking_issue: PositiveInt | None = None
    output_dir: RelPath = "reports"


@record
class NeutralConfig(_ConfigMethods, _Record):
    path: Path
    profile: Literal["neutral"]
    upstream: UpstreamConfig
    fork: ForkConfig
    targets: Annotated[dict[Id, NeutralTarget], NonEmpty]
    proofs: dict[Id, NeutralProof] = field(default_factory=dict)
    tracks: dict[Id, NeutralTrack]
    report: Union[ReportConfig, NeutralReport] = field(default_factory=NeutralReport)
    models: ClassVar[Mapping[str, Model]] = MappingProxyType({})  # no models in this profile

    def __post_init__(self) -> None:
        # The core reads one report record: fill the defaults here, once (also when thawed).
        if isinstance(self.report, NeutralReport):
            r = self.report
            filled = ReportConfig(repo=r.repo or self.fork.repo, labels=r.labels, title=r.title,
                                  tracking_issue=r.tracking_issue, output_dir=r.output_dir)
            object.__setattr__(self, "report", filled)


# --------------------------------------------------------------------------- profiles


@dataclass(frozen=True)
class Profile:
    """One profile's rules, as data: the core asks these, never `if profile == ...`."""

    name: str
    record: type  # the Config record a file of this profile validates as
    summary: str
    uses_models: bool  # models, track `requires`, eligibility, the model axis of every gate
    gpu_attributes: bool  # targets carry vendor/arch; results carry the GPU fingerprint
    # The weekly report's sections that apply, in order: shown "always", or only "when-filled".
    report_sections: tuple[tuple[str, str], ...]
    schema_file: str  # in porttrack/schemas/, for editors and for the schema tests
    example_axis: str  # the matrix line a missing-axis message suggests


PROFILES: dict[str, Profile] = {
    "vllm-gpu": Profile(
        name="vllm-gpu", record=Config,
        summary="a vLLM fork on GPUs: vendors and arch, models by attributes, model × context × batch gates with numerics, graph and JIT checks",
        uses_models=True, gpu_attributes=True,
        report_sections=(("summary", "always"), ("upstream", "always"), ("queue", "always"), ("gates", "always"),
                         ("eligibility", "always"), ("trends", "always"), ("problems", "always")),
        schema_file="tracks.vllm-gpu.schema.json", example_axis="contexts: [4096]",
    ),
    "neutral": Profile(
        name="neutral", record=NeutralConfig,
        summary="any fork: named targets, gates over named axes with a job and its metrics",
        uses_models=False, gpu_attributes=False,
        # No models, so no eligibility; gates and trends only once there is something to show.
        report_sections=(("summary", "always"), ("upstream", "always"), ("queue", "always"), ("gates", "when-filled"),
                         ("trends", "when-filled"), ("problems", "always")),
        schema_file="tracks.neutral.schema.json", example_axis='axes: {python: ["3.12"]}',
    ),
}
DEFAULT_PROFILE = "vllm-gpu"  # a file without `profile:` was written for the vLLM fork: it keeps its meaning
AnyConfig = Union[Config, NeutralConfig]

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


def fail(filename: str, line: int, col: int, path: str, message: str):
    raise TracksFileError([(filename, line, col, path, message)])
