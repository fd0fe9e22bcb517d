"""tracks.yaml validation: the real file loads, and every malformed file gives one precise line.

Each malformed case names the text the error must point at (`at=`): the expected
`file:line:col: path:` prefix is computed from where that text sits in the document, so the
assertion is exact without hand-counted line numbers.
"""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from porttrack.common.errors import ConfigError
from porttrack.tracks.config import MAX_ALIASES, Config
from porttrack.tracks.file import load_config, parse_config

REPO_ROOT = Path(__file__).resolve().parents[2]
REAL = REPO_ROOT / "tracks.yaml"

BASE = """\
upstream:
  repo: vllm-project/vllm
fork:
  repo: randomvariable/vllm
  checkout: ../vllm
targets:
  sm_121a:
    name: NVIDIA GB10
    vendor: nvidia
    arch: sm_121a
  gfx1151:
    name: AMD Strix Halo
    vendor: amd
    arch: gfx1151
    attention_path: AITER sparse attention
models:
  Alpha:
    drafters: [native-mtp]
    attention: sparse-mla
    quantization: fp8
    backends: {sm_121a: FLASHMLA_SPARSE, gfx1151: ROCM_AITER_MLA_SPARSE}
  Beta:
    attention: mla
    quantization: fp8
    backends: {sm_121a: FLASHMLA, gfx1151: ROCM_AITER_MLA}
    conditional:
      - proof: low-rank
        tracks: [mla-track]
        reason: must accept low-rank attention
proofs:
  low-rank:
    description: accepts low-rank attention
tracks:
  mla-track:
    title: MLA things
    prs: [46514]
    fork_commits: ["a9b1ee711"]
    requires:
      attention: [sparse-mla, mla]
    targets: [sm_121a, gfx1151]
    gate:
      job:
        command: run --ref {ref} --results {results}
      matrix:
        models: eligible
        contexts: [4096]
        batches: [1, 32]
      reference_backend: TRITON_MLA
      tolerance: {abs: 0.02, rel: 0.01}
      graph_replay: required
      no_jit_after_warmup: required
      metrics:
        - name: decode_throughput
          unit: tok/s
          direction: higher
          allowed_regression_pct: 3
          key: true
  spec-track:
    title: Spec things
    prs: [48804]
    requires:
      drafter: [eagle, native-mtp]
    targets: [sm_121a, gfx1151]
report:
  repo: randomvariable/vllm
"""


def mutate(old: str, new: str, text: str = BASE) -> str:
    assert text.count(old) == 1, f"{old!r} must occur exactly once in the base document"
    return text.replace(old, new)


def position(text: str, needle: str) -> str:
    """`line:col` (1-based) of the only occurrence of `needle` in `text`."""
    assert text.count(needle) == 1, f"{needle!r} must occur exactly once in the case's document"
    index = text.index(needle)
    line = text.count("\n", 0, index) + 1
    col = index - (text.rfind("\n", 0, index) + 1) + 1
    return f"{line}:{col}"


def problems(text: str, filename: str = "tracks.yaml") -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, filename)
    return str(caught.value).splitlines()


@dataclasses.dataclass
class Case:
    id: str
    text: str
    at: str | None  # the text the error points at; None: line 1, column 1
    path: str
    says: str  # a fragment the message must contain
    shift: int = 0  # columns right of `at` (an empty value sits after its key)


CASES = [
    Case("yaml-syntax", mutate("batches: [1, 32]", "batches: [1, 32"), ": TRITON_MLA", "(yaml)", "expected ',' or ']'"),
    Case("empty-file", "# only a comment\n", None, "(document)", "empty"),
    Case("top-level-list", "- upstream\n- fork\n", None, "(document)", "expected a mapping at the top level, got a list"),
    Case("duplicate-key", mutate("    title: Spec things\n", "    title: Spec things\n    title: Other\n"),
         "title: Other", "tracks.spec-track.title", "duplicate key (first at line"),
    Case("unknown-key", mutate("    title: Spec things", "    titel: Spec things"),
         "titel", "tracks.spec-track.titel", "did you mean title?"),
    Case("wrong-type-list", mutate("prs: [48804]", "prs: 48804"), "48804", "tracks.spec-track.prs", "expected a list, got 48804"),
    Case("wrong-type-quoted-int", mutate("prs: [48804]", 'prs: ["48804"]'), '"48804"', "tracks.spec-track.prs.0",
         'expected an integer, got the string "48804"'),
    Case("missing-required", mutate("    quantization: fp8\n    backends: {sm_121a: FLASHMLA,", "    backends: {sm_121a: FLASHMLA,"),
         "attention: mla", "models.Beta.quantization", "required key is missing"),
    Case("bad-enum", mutate("vendor: amd", "vendor: intel"), "intel", "targets.gfx1151.vendor", "expected 'nvidia' or 'amd', got intel"),
    Case("sha-octal", mutate('["a9b1ee711"]', "[0777777]"), "0777777", "tracks.mla-track.fork_commits.0",
         'quote SHAs: write "0777777" (unquoted, YAML reads it as the number 262143)'),
    Case("sha-unquoted", mutate('["a9b1ee711"]', "[a9b1ee711]"), "a9b1ee711", "tracks.mla-track.fork_commits.0", "quote SHAs"),
    Case("sha-too-short", mutate('["a9b1ee711"]', '["a9b1e"]'), '"a9b1e"', "tracks.mla-track.fork_commits.0", "7-40 hex digits"),
    Case("sha-not-hex", mutate('["a9b1ee711"]', '["main"]'), '"main"', "tracks.mla-track.fork_commits.0", "7-40 hex digits"),
    Case("no-as-string", mutate("name: AMD Strix Halo", "name: no"), "no\n", "targets.gfx1151.name",
         'which YAML reads as the boolean false; quote it: "no"'),
    Case("unknown-track-target", mutate("    targets: [sm_121a, gfx1151]\nreport", "    targets: [sm_121a, gfx1150]\nreport"),
         "gfx1150", "tracks.spec-track.targets.1", "unknown target gfx1150"),
    Case("unknown-gate-model", mutate("models: eligible", "models: [Alpha, Gamma]"), "Gamma", "tracks.mla-track.gate.matrix.models.1",
         "unknown model Gamma"),
    Case("unknown-proof", mutate("- proof: low-rank", "- proof: low-rnak"), "low-rnak", "models.Beta.conditional.0.proof",
         "unknown proof low-rnak"),
    Case("unknown-conditional-track", mutate("tracks: [mla-track]", "tracks: [mla-trak]"), "mla-trak",
         "models.Beta.conditional.0.tracks.0", "unknown track mla-trak"),
    Case("unknown-backend-target", mutate("{sm_121a: FLASHMLA, gfx1151:", "{sm_121a: FLASHMLA, gfx1152:"), "gfx1152",
         "models.Beta.backends.gfx1152", "unknown target gfx1152"),
    Case("tab-indentation", mutate("    name: AMD Strix Halo", "\tname: AMD Strix Halo"), "\tname", "(yaml)", "tab"),
    Case("promote-without-tolerance", mutate("      tolerance: {abs: 0.02, rel: 0.01}\n", ""), "job:\n        command",
         "tracks.mla-track.gate", "must define tolerance"),
    Case("promote-without-regression", mutate("          allowed_regression_pct: 3\n", ""), "job:\n        command",
         "tracks.mla-track.gate", "allowed_regression_pct or allowed_regression_abs for metric decode_throughput"),
    Case("job-two-kinds", mutate("        command: run --ref {ref} --results {results}\n",
                                 "        command: run\n        workflow: {file: gate.yml}\n"),
         "command: run", "tracks.mla-track.gate.job", "exactly one of command or workflow"),
    Case("unknown-placeholder", mutate("--results {results}", "--results {result}"), "run --ref", "tracks.mla-track.gate.job.command",
         "unknown placeholder {result}"),
    Case("pr-in-two-tracks", mutate("prs: [48804]", "prs: [48804, 46514]"), "46514]\n    requires:\n      drafter",
         "tracks.spec-track.prs.1", "already tracked by track mla-track"),
    Case("bad-repo", mutate("repo: vllm-project/vllm", "repo: vllm-project"), "vllm-project\n", "upstream.repo", '"owner/name"'),
    Case("negative-tolerance", mutate("{abs: 0.02, rel: 0.01}", "{abs: -0.02, rel: 0.01}"), "-0.02", "tracks.mla-track.gate.tolerance.abs",
         "at least 0"),
    Case("infinite-tolerance", mutate("{abs: 0.02, rel: 0.01}", "{abs: 0.02, rel: .inf}"), ".inf", "tracks.mla-track.gate.tolerance.rel",
         "finite"),
    Case("number-as-key", mutate("  low-rank:\n", "  7:\n"), "7:", "proofs.7", 'quote it: "7"'),
    Case("path-is-not-a-key", BASE + "path: elsewhere.yaml\n", "path: else", "path", "unknown key"),
    Case("two-documents", BASE + "---\nupstream: {}\n", "---", "(yaml)", "expected a single document"),
    Case("recursive-alias", mutate("report:\n  repo: randomvariable/vllm\n", "report: &r\n  repo: randomvariable/vllm\n  x: *r\n"),
         "*r", "(yaml)", "recursive alias"),
    Case("control-character", mutate("name: NVIDIA GB10", "name: NVIDIA\x07GB10"), "\x07", "(yaml)", "U+0007"),
    Case("python-tag", mutate("name: NVIDIA GB10", "name: !!python/object/apply:os.system [ls]"), "!!python", "(yaml)",
         "could not determine a constructor"),
    Case("two-key-metrics", mutate("          key: true\n", "          key: true\n        - {name: itl, unit: ms, direction: lower,"
                                   " allowed_regression_pct: 1, key: true}\n"),
         "true}", "tracks.mla-track.gate.metrics.1.key", "only one metric may be the key metric"),
    Case("gate-lists-ineligible-model", mutate("requires:\n      attention: [sparse-mla, mla]", "requires:\n      attention: [sparse-mla]",
                                               mutate("models: eligible", "models: [Alpha, Beta]")),
         "Beta]", "tracks.mla-track.gate.matrix.models.1", "attention mla not in [sparse-mla]"),
    Case("backend-requirement-off-track", mutate("      drafter: [eagle, native-mtp]\n",
                                                 "      drafter: [eagle, native-mtp]\n      backend: {gfx1151: [X]}\n",
                                                 mutate("    targets: [sm_121a, gfx1151]\nreport", "    targets: [sm_121a]\nreport")),
         "gfx1151: [X]", "tracks.spec-track.requires.backend.gfx1151", "not one of this track's targets"),
    Case("promoting-gate-skips-a-target", mutate("        batches: [1, 32]\n", "        batches: [1, 32]\n        targets: [sm_121a]\n"),
         "[sm_121a]\n      reference", "tracks.mla-track.gate.matrix.targets", "missing gfx1151"),
    Case("ref-option-injection", mutate("  checkout: ../vllm\n", "  checkout: ../vllm\n  branch: --upload-pack=x\n"),
         "--upload-pack", "fork.branch", "expected a git ref"),
    Case("proof-gate-promotes", mutate("    description: accepts low-rank attention\n",
                                       "    description: accepts low-rank attention\n    gate:\n      promote: true\n"
                                       "      job: {command: check}\n      matrix: {contexts: [1], batches: [1]}\n"),
         "promote: true", "proofs.low-rank.gate", "must define"),
    Case("null-where-string", mutate("    title: Spec things", "    title:"), "title:\n", "tracks.spec-track.title", "got nothing (null)",
         shift=len("title:")),
    Case("date-where-string", mutate("    title: Spec things", "    title: 2026-07-28"), "2026-07-28", "tracks.spec-track.title",
         "reads as the date 2026-07-28"),
    Case("bad-matrix-models", mutate("models: eligible", "models: all"), "all\n", "tracks.mla-track.gate.matrix.models",
         'expected "eligible" or a list of model ids'),
    Case("zero-pr", mutate("prs: [48804]", "prs: [0]"), "0]", "tracks.spec-track.prs.0", "greater than 0"),
    Case("bad-id", mutate("  Alpha:\n", "  Al pha:\n"), "Al pha", "models.Al pha", "expected an id"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_malformed_file_names_the_exact_place(case: Case) -> None:
    lines = problems(case.text)
    where = position(case.text, case.at) if case.at is not None else "1:1"
    if case.shift:
        line, col = where.split(":")
        where = f"{line}:{int(col) + case.shift}"
    prefix = f"tracks.yaml:{where}: {case.path}: "
    matching = [line for line in lines if line.startswith(prefix)]
    assert matching, f"no line starts with {prefix!r}:\n" + "\n".join(lines)
    assert any(case.says in line for line in matching), "\n".join(lines)


def test_there_are_at_least_twenty_distinct_cases() -> None:
    assert len({c.id for c in CASES}) >= 20


def test_the_real_tracks_yaml_loads() -> None:
    config = load_config(REAL)
    assert isinstance(config, Config)
    assert config.upstream.repo == "vllm-project/vllm"
    assert config.fork.repo == "randomvariable/vllm"
    assert set(config.targets) == {"sm_121a", "gfx1151"}
    assert config.targets["gfx1151"].attention_path
    assert list(config.tracks) == ["spec-kernel-warmup", "fused-ar-graph", "fp8-ds-mla-sparse-mtp", "sparse-indexer-skip"]
    assert config.tracks["spec-kernel-warmup"].fork_commits == ["a9b1ee711", "2a6c161ff"]
    # stacking is found from PR text: only the PR we want is listed
    assert config.tracks["fp8-ds-mla-sparse-mtp"].prs == [46514]
    assert config.report.tracking_issue == 20
    assert config.report.labels == ["porttrack", "weekly-status"]
    for track_id, track in config.tracks.items():
        assert set(track.targets) == {"sm_121a", "gfx1151"}, track_id
        assert track.gate is not None and track.gate.promote, track_id
        assert track.gate.missing_for_promotion() == [], track_id
        assert track.gate.key_metric is not None, track_id
    assert config.tracks["sparse-indexer-skip"].regression is not None
    assert "test_mla_short_prefill_indexer.py" in config.tracks["sparse-indexer-skip"].regression.command
    assert "mla-low-rank-accepted" in config.proofs


def test_real_file_pr_lookup_and_checkout() -> None:
    config = load_config(REAL)
    assert config.track_for_pr(48407) == "sparse-indexer-skip"
    assert config.track_for_pr(46076) is None  # the stacked-on PR is not tracked by itself
    assert config.fork_checkout() == REPO_ROOT.parent / "vllm"  # checkout: ../vllm, beside this repository
    assert config.gate_targets("fused-ar-graph") == ["sm_121a", "gfx1151"]


def test_fork_override_wins(tmp_path: Path) -> None:
    config = load_config(REAL, fork_override=str(tmp_path / "elsewhere"))
    assert config.fork_checkout() == tmp_path / "elsewhere"


def test_checkout_is_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "tracks.yaml").write_text(BASE)
    config = load_config(tmp_path / "ws" / "tracks.yaml")
    assert config.fork_checkout() == tmp_path / "vllm"
    no_checkout = parse_config(mutate("  checkout: ../vllm\n", ""), "tracks.yaml")
    assert no_checkout.fork_checkout() is None


def test_config_is_frozen() -> None:
    config = parse_config(BASE, "tracks.yaml")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.report = config.report  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.tracks["spec-track"].title = "x"  # type: ignore[misc]


def test_defaults() -> None:
    config = parse_config(BASE, "tracks.yaml")
    assert config.upstream.remote == "upstream" and config.upstream.default_branch == "main"
    assert config.fork.upstream_base == "upstream/main"
    assert config.fork.staging_branch == "porttrack/staging"
    assert config.fork.default_build_branch == "porttrack/default"
    track = config.tracks["spec-track"]
    assert track.paths.include == ["**"] and track.paths.exclude == []
    assert track.gate is None and track.regression is None and track.fork_commits == []
    gate = config.tracks["mla-track"].gate
    assert gate is not None and gate.phases == ["cold", "warm"] and gate.job.timeout_s == 3600
    assert gate.matrix.targets is None and config.gate_targets("mla-track") == ["sm_121a", "gfx1151"]
    assert config.report.title == "porttrack weekly status {week}" and config.report.output_dir == "reports"


def test_sha_message_says_quote_shas() -> None:
    text = mutate('["a9b1ee711"]', "[0777777]")
    (line,) = problems(text)
    assert "quote SHAs" in line and '"0777777"' in line and "262143" in line


def test_duplicate_keys_are_found_at_every_level() -> None:
    text = mutate("report:\n", "upstream: {repo: a/b}\nreport:\n")
    (line,) = problems(text)
    assert line.startswith(f"tracks.yaml:{position(text, 'upstream: {repo')}: upstream: duplicate key (first at line 1)")


def test_alias_bomb_is_refused_fast() -> None:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, 10):
        lines.append(f"a{level}: &a{level} [" + ",".join([f"*a{level - 1}"] * 9) + "]")
    text = "\n".join(lines) + "\n"
    started = time.monotonic()
    (line,) = problems(text)
    assert time.monotonic() - started < 1.0
    assert f"more than {MAX_ALIASES} aliases" in line and "(yaml)" in line


def test_expansion_bomb_with_few_aliases_is_refused_fast() -> None:
    lines = ["a0: &a0 [" + ",".join(["x"] * 1000) + "]"]
    for level in range(1, 16):  # 30 aliases, under the alias limit; 2**15 * 1000 nodes expanded
        lines.append(f"a{level}: &a{level} [*a{level - 1}, *a{level - 1}]")
    started = time.monotonic()
    (line,) = problems("\n".join(lines) + "\n")
    assert time.monotonic() - started < 1.0
    assert "expands to more than" in line


def test_deep_nesting_is_refused() -> None:
    (line,) = problems("a: " + "[" * 5000 + "]" * 5000 + "\n")
    assert line.startswith("tracks.yaml:1:") and "nested more than" in line


def test_small_aliases_and_merge_keys_still_work() -> None:
    text = mutate("  Beta:\n    attention: mla\n    quantization: fp8\n",
                  "  Beta:\n    <<: &mla {attention: mla, quantization: fp8}\n")
    config = parse_config(text, "tracks.yaml")
    assert config.models["Beta"].attention == "mla"


def test_several_problems_one_line_each_in_file_order() -> None:
    text = mutate("vendor: amd", "vendor: intel", mutate("prs: [48804]", "prs: [x]"))
    lines = problems(text)
    assert len(lines) == 2
    assert lines[0].startswith(f"tracks.yaml:{position(text, 'intel')}: targets.gfx1151.vendor: ")
    assert lines[1].startswith(f"tracks.yaml:{position(text, 'x]')}: tracks.spec-track.prs.0: ")


def test_filename_is_shown_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tracks.yaml").write_text("- not a mapping\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"^tracks\.yaml:1:1: \(document\): "):
        load_config(Path("tracks.yaml"))
    with pytest.raises(ConfigError, match=r"^tracks\.yaml:1:1: "):
        load_config(tmp_path / "tracks.yaml")  # below the working folder: shown relative


def test_non_utf8_bytes(tmp_path: Path) -> None:
    path = tmp_path / "tracks.yaml"
    path.write_bytes(BASE.replace("NVIDIA GB10", "NVIDIA \xe9GB10").encode("latin-1"))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    where = position(BASE.replace("NVIDIA GB10", "NVIDIA \xe9GB10"), "\xe9")
    assert str(caught.value).endswith(f"tracks.yaml:{where}: (encoding): byte 0xe9 is not UTF-8; save tracks.yaml as UTF-8")


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "tracks.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + BASE.encode())
    assert load_config(path).fork.repo == "randomvariable/vllm"


def test_huge_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tracks.yaml"
    path.write_bytes(b"# padding\n" * 120_000)
    with pytest.raises(ConfigError, match=r"tracks\.yaml:1:1: \(document\): file is larger than 1 MiB"):
        load_config(path)


def test_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "tracks.yaml")
    with pytest.raises(ConfigError, match="is a folder, not a file"):
        load_config(tmp_path)


def test_damaged_real_file_only_ever_raises_config_error() -> None:
    """Cut the real file at many places: every outcome is a Config or a ConfigError, never a crash."""
    text = REAL.read_text()
    rng = random.Random(20)
    for _ in range(150):
        start = rng.randrange(len(text))
        damaged = text[:start] + text[start + rng.randrange(1, 40):]
        try:
            parse_config(damaged, "tracks.yaml")
        except ConfigError as exc:
            for line in str(exc).splitlines():
                assert line.startswith("tracks.yaml:"), line


# --------------------------------------------------------------------------- the validated-config cache

WITH_INPUTS = mutate(
    "        command: run --ref {ref} --results {results}\n",
    # keys a user may write that the cache itself uses: they must come back as plain keys
    "        workflow: {file: gate.yml, inputs: {record: Gate, mapping: x, fields: '{ref}'}}\n",
)


def cached_pair(tmp_path: Path, text: str) -> tuple[Config, Config]:
    """The same file loaded twice with a cache: validated, then read back from the cache."""
    (tmp_path / "tracks.yaml").write_text(text)
    cache = tmp_path / ".porttrack"
    first = load_config(tmp_path / "tracks.yaml", cache_dir=cache)
    assert (cache / "validated-config.json").is_file()
    return first, load_config(tmp_path / "tracks.yaml", cache_dir=cache)


@pytest.mark.parametrize("text", [BASE, WITH_INPUTS, REAL.read_text()], ids=["base", "user-keys-like-the-cache's", "real"])
def test_cached_config_is_the_validated_config(tmp_path: Path, text: str) -> None:
    validated, cached = cached_pair(tmp_path, text)
    # repr shows every field and every mapping's order (file order matters: tracks are listed so)
    assert repr(cached) == repr(validated) == repr(load_config(tmp_path / "tracks.yaml"))
    assert cached == validated and cached.path == tmp_path / "tracks.yaml"
    assert cached.fork_checkout() == validated.fork_checkout() == tmp_path.parent / "vllm"


def test_user_keys_named_like_the_cache_format_stay_plain_keys(tmp_path: Path) -> None:
    _, cached = cached_pair(tmp_path, WITH_INPUTS)
    gate = cached.tracks["mla-track"].gate
    assert gate is not None and gate.job.workflow is not None
    assert gate.job.workflow.inputs == {"record": "Gate", "mapping": "x", "fields": "{ref}"}


def test_an_unchanged_file_is_read_back_without_pydantic_or_yaml(tmp_path: Path) -> None:
    (tmp_path / "tracks.yaml").write_text(BASE)
    program = (
        "import sys; from pathlib import Path; from porttrack.tracks.file import load_config\n"
        f"config = load_config(Path({str(tmp_path / 'tracks.yaml')!r}), cache_dir=Path({str(tmp_path / '.porttrack')!r}))\n"
        "print(sorted(config.tracks), 'pydantic' in sys.modules, 'yaml' in sys.modules)\n"
    )
    run = lambda: subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True, cwd=REPO_ROOT).stdout
    assert run() == "['mla-track', 'spec-track'] True True\n"  # validated, and remembered
    assert run() == "['mla-track', 'spec-track'] False False\n"  # read back
    (tmp_path / "tracks.yaml").write_text(BASE.replace("Spec things", "Spec work"))
    assert run() == "['mla-track', 'spec-track'] True True\n"  # a changed file is validated again


def test_a_file_that_breaks_after_being_cached_is_refused(tmp_path: Path) -> None:
    cached_pair(tmp_path, BASE)
    (tmp_path / "tracks.yaml").write_text(mutate("prs: [48804]", "prs: 48804"))
    with pytest.raises(ConfigError, match="tracks.spec-track.prs: expected a list"):
        load_config(tmp_path / "tracks.yaml", cache_dir=tmp_path / ".porttrack")


@pytest.mark.parametrize("damage", [
    b"", b"{", b"[]", b'{"schema": "porttrack/validated-config/v1"}', b"\xff\xfe",
    b'{"schema": "porttrack/validated-config/v1", "key": "KEY", "config": {"record": "Nope", "fields": {}}}',
    b'{"schema": "porttrack/validated-config/v1", "key": "KEY", "config": {"record": "Track", "fields": {}}}',
    b'{"schema": "porttrack/validated-config/v1", "key": "KEY", "config": [1, 2]}',
    b'{"schema": "porttrack/validated-config/v1", "key": "not the key", "config": null}',
])
def test_a_damaged_or_foreign_cache_is_ignored_and_replaced(tmp_path: Path, damage: bytes) -> None:
    validated, _ = cached_pair(tmp_path, BASE)
    cache = tmp_path / ".porttrack" / "validated-config.json"
    key = json.loads(cache.read_text())["key"]
    cache.write_bytes(damage.replace(b"KEY", key.encode()))
    again = load_config(tmp_path / "tracks.yaml", cache_dir=tmp_path / ".porttrack")
    assert repr(again) == repr(validated)
    assert json.loads(cache.read_text())["key"] == key  # rewritten whole


def test_a_cache_that_cannot_be_written_costs_nothing_but_time(tmp_path: Path) -> None:
    (tmp_path / "tracks.yaml").write_text(BASE)
    (tmp_path / ".porttrack").write_text("a file where the cache folder would be")
    config = load_config(tmp_path / "tracks.yaml", cache_dir=tmp_path / ".porttrack")
    assert sorted(config.tracks) == ["mla-track", "spec-track"]


def test_fork_override_applies_to_a_cached_config(tmp_path: Path) -> None:
    cached_pair(tmp_path, BASE)
    config = load_config(tmp_path / "tracks.yaml", fork_override=str(tmp_path / "elsewhere"), cache_dir=tmp_path / ".porttrack")
    assert config.fork_checkout() == tmp_path / "elsewhere"
    plain = load_config(tmp_path / "tracks.yaml", cache_dir=tmp_path / ".porttrack")
    assert plain.fork_checkout() == tmp_path.parent / "vllm"  # the override is not remembered
