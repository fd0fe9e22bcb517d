"""Validating tracks.yaml: bytes, YAML, types, cross-references, each problem located.

Imported only when a file must be checked (`porttrack.tracks.file.load_config` finds no validated copy
of it): this is where PyYAML and pydantic are imported, which costs more than the rest of most
commands. Every problem becomes one line

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
4. pydantic validates the records of `porttrack.tracks.config` (plain dataclasses) against their
   annotations: types, enums, required and unknown keys; its error `loc` is mapped back onto the
   node tree for line and column (`_node_at`);
5. cross-references (a track's target, a gate's model, a conditional's proof...) are checked on the
   typed result, again pointing at the offending value.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import TypeAdapter, ValidationError

from porttrack.tracks.config import (
    DEFAULT_PROFILE,
    ID_PATTERN,
    MAX_ALIASES,
    MAX_BYTES,
    MAX_DEPTH,
    MAX_NODES,
    PROFILES,
    TOO_BIG,
    AnyConfig,
    Gate,
    Model,
    NeutralGate,
    NeutralTrack,
    Track,
    TracksFileError,
    fail,
)
from porttrack.tracks.examples import EXAMPLES

_EMPTY = "the file is empty; expected a mapping with profile, upstream, fork, targets, tracks (`porttrack init --profile neutral` writes one)"
_ADAPTERS: dict[str, TypeAdapter] = {}  # profile -> the validator built from its records' annotations


def _adapter(profile: str) -> TypeAdapter:
    if profile not in _ADAPTERS:
        _ADAPTERS[profile] = TypeAdapter(PROFILES[profile].record)
    return _ADAPTERS[profile]




def _shorten(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Refused(Exception):
    def __init__(self, mark: Any, path: str, message: str):
        super().__init__(message)
        self.mark, self.path, self.message = mark, path, message


_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[misc, valid-type]
    """SafeLoader (libyaml when present). Duplicate keys are found on the composed node tree
    (`_duplicate_keys`), before construction, where PyYAML would silently keep the last one."""


def validate(text: str, filename: str, path: Path) -> AnyConfig:
    """The typed records of tracks.yaml given as `text`, or TracksFileError listing every problem."""
    if len(text) > MAX_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        fail(filename, 1, 1, "(document)", TOO_BIG)
    _refuse_unprintable(text, filename)
    _refuse_tabs(text, filename)
    root, data = _load_yaml(text, filename)
    if root is None:
        fail(filename, 1, 1, "(document)", _EMPTY)
    if not isinstance(root, yaml.MappingNode):
        line, col = _position(root)
        fail(filename, line, col, "(document)", f"expected a mapping at the top level, got {_kind(root)}")

    problems: list[tuple[tuple[Any, ...], str, bool]] = []  # (loc, message, point at key)
    problems += _unquoted_shas(root)
    if "path" in data:
        problems.append((("path",), "unknown key (path is where the file is, not a setting)", True))
    profile = _profile(data, root, filename)
    config = None
    try:
        config = _adapter(profile).validate_python({**data, "path": path})
    except ValidationError as exc:
        problems += [_pydantic_problem(err, root, profile, "profile" in data) for err in exc.errors()]
    if config is not None:
        problems += _CrossCheck(config).run()
    if problems:
        raise TracksFileError(_locate_all(problems, root, filename))
    assert config is not None
    return config


def _profile(data: dict[str, Any], root: yaml.MappingNode, filename: str) -> str:
    """The profile the file declares (absent: DEFAULT_PROFILE); an unknown one stops here, since
    every later message depends on which rules apply."""
    name = data.get("profile", DEFAULT_PROFILE)
    if not isinstance(name, str) or name not in PROFILES:
        line, col = _position(_node_at(root, ("profile",)))
        known = ", ".join(PROFILES)
        fail(filename, line, col, "profile", f"expected one of: {known}; got {_got(_node_at(root, ('profile',)))}")
    return name


def _refuse_unprintable(text: str, filename: str) -> None:
    # PyYAML refuses these too, but libyaml reports a byte offset; find the character ourselves.
    match = yaml.reader.Reader.NON_PRINTABLE.search(text)
    if match:
        index = match.start()
        line = text.count("\n", 0, index) + 1
        col = index - (text.rfind("\n", 0, index) + 1) + 1
        fail(filename, line, col, "(yaml)", f"character U+{ord(match.group()):04X} is not allowed in YAML (not printable)")


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
        fail(filename, line, col, exc.path, exc.message)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        fail(filename, line, col, "(yaml)", _syntax_message(exc, text))
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        col = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        char = exc.character if isinstance(exc.character, int) else ord(exc.character)
        fail(filename, line, col, "(yaml)", f"character U+{char:04X} is not allowed in YAML ({exc.reason})")
    except yaml.YAMLError as exc:  # anything else PyYAML raises: still a ConfigError, never a traceback
        fail(filename, 1, 1, "(yaml)", str(exc).splitlines()[0])
    except RecursionError:
        fail(filename, 1, 1, "(yaml)", "the document is nested too deeply")
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
    located: dict[tuple[int, int, str], str] = {}
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
    "dataclass_type": "a mapping",  # a record (porttrack.tracks.config) where the file has something else
}


def _pydantic_problem(err: Mapping[str, Any], root: yaml.Node, profile: str = DEFAULT_PROFILE,
                      declared: bool = True) -> tuple[tuple[Any, ...], str, bool]:
    loc = tuple(err["loc"])
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind in ("unexpected_keyword_argument", "extra_forbidden"):  # records are dataclasses: the first
        return loc, _unknown_key_message(loc, profile), True
    if loc and loc[-1] == "[key]":  # a mapping key of the wrong type, e.g. an unquoted number
        loc = loc[:-1]
        return loc, f"expected a string key, got {_got(_node_at(root, loc, key=True), expected_string=True)}", True
    node = _node_at(root, loc)
    if kind in ("missing_argument", "missing"):
        return loc, _missing_message(loc, profile, declared), False
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


def _missing_message(loc: tuple[Any, ...], profile: str, declared: bool) -> str:
    record = _record_at(loc[:-1], profile)
    example = EXAMPLES.get(f"{getattr(record, '__name__', '?')}.{loc[-1]}") or f"{loc[-1]}: ..."
    message = f"required key is missing; for example: {example}"
    if not declared and loc == ("models",):  # a file with no models is rarely a vLLM GPU fork
        message += f" (no profile is declared, so the rules of {DEFAULT_PROFILE} apply; a fork that is not a vLLM GPU fork writes profile: neutral)"
    return message


def _unknown_key_message(loc: tuple[Any, ...], profile: str = DEFAULT_PROFILE) -> str:
    allowed = _allowed_keys(loc[:-1], profile)
    name = str(loc[-1])
    foreign = getattr(_record_at(loc[:-1], profile), "FOREIGN_KEYS", {}).get(name)
    if foreign:  # another profile's key: say which, and why it has no meaning here
        return f"unknown key {name}: {foreign}"
    if not allowed:
        return f"unknown key {name}"
    close = difflib.get_close_matches(name, allowed, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return f"unknown key {name} ({hint}expected one of: {', '.join(allowed)})"


def _allowed_keys(loc: Sequence[Any], profile: str = DEFAULT_PROFILE) -> list[str]:
    """The keys the schema allows at `loc`, found by walking the record types."""
    record = _record_at(loc, profile)
    return list(_keys(record)) if record is not None else []


def _record_at(loc: Sequence[Any], profile: str) -> type | None:
    """The record type a file holds at `loc` under `profile`, else None."""
    annotation: Any = PROFILES[profile].record
    for part in loc:
        annotation = _unwrap(annotation)
        if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
            annotation = _keys(annotation).get(str(part))
            if annotation is None:
                return None
        elif get_origin(annotation) in (list, dict):
            annotation = get_args(annotation)[-1]
        else:
            return None
    annotation = _unwrap(annotation)
    return annotation if isinstance(annotation, type) and dataclasses.is_dataclass(annotation) else None


def _keys(record: type) -> dict[str, Any]:
    """A record's keys in tracks.yaml, in order, with their annotations (resolved)."""
    hints = typing.get_type_hints(record, include_extras=True)
    is_config = any(record is p.record for p in PROFILES.values())
    return {f.name: hints[f.name] for f in dataclasses.fields(record) if f.init and not (is_config and f.name == "path")}


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

    def __init__(self, config: AnyConfig):
        self.config = config
        self.problems: list[tuple[tuple[Any, ...], str, bool]] = []

    def add(self, loc: tuple[Any, ...], message: str, key: bool = False) -> None:
        self.problems.append((loc, message, key))

    def run(self) -> list[tuple[tuple[Any, ...], str, bool]]:
        c = self.config
        for section in ("targets", "models", "proofs", "tracks"):
            for ident in getattr(c, section):
                if not ID_PATTERN.match(ident):
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

    def track(self, tid: str, track: Track | NeutralTrack, owner: dict[int, str]) -> None:
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

    def gate(self, loc: tuple[Any, ...], gate: Gate | NeutralGate) -> None:
        self.unique((*loc, "phases"), gate.phases or [], "phase")
        for where, values, what in gate.matrix.axis_lists():
            self.unique((*loc, "matrix", *where), values, what)
        self.unique((*loc, "metrics"), [m.name for m in gate.metrics], "metric")
        keys = [i for i, m in enumerate(gate.metrics) if m.key]
        for index in keys[1:]:
            message = f"only one metric may be the key metric (already: {gate.metrics[keys[0]].name})"
            self.add((*loc, "metrics", index, "key"), message)
        models = getattr(gate.matrix, "models", None)  # vllm-gpu's matrix only
        if isinstance(models, list):
            for index, mid in enumerate(models):
                if mid not in self.config.models:
                    known = ", ".join(self.config.models)
                    self.add((*loc, "matrix", "models", index), f"unknown model {mid} (models: {known})")
            self.unique((*loc, "matrix", "models"), models, "model")
        for index, target in enumerate(gate.matrix.targets or []):
            self.target_ref((*loc, "matrix", "targets", index), target)
        self.unique((*loc, "matrix", "targets"), gate.matrix.targets or [], "target")

    def track_gate(self, tid: str, track: Track | NeutralTrack) -> None:
        from porttrack.tracks.eligibility import requirement_failures  # shares the one definition of a match

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
        if isinstance(track, Track) and track.gate is not None and isinstance(track.gate.matrix.models, list):  # vllm-gpu's
            for index, mid in enumerate(track.gate.matrix.models):
                model = self.config.models.get(mid)
                failures = requirement_failures(model, track) if model is not None else []
                if failures:
                    self.add((*loc, "models", index), f"model {mid} is not eligible for this track: {'; '.join(failures)}")

    def proof_gate(self, pid: str, gate: Gate | NeutralGate) -> None:
        loc = ("proofs", pid, "gate")
        self.gate(loc, gate)
        if gate.promote:
            self.add((*loc, "promote"), "a proof's gate promotes nothing; set promote: false")
