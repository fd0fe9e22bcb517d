"""Malformed tracks.yaml through the command line: alias bombs, huge and deep documents, bytes that
are not UTF-8 text, tags that would construct objects, wrong types, unknown and duplicate keys,
values that would steer porttrack outside the workspace.

Every case runs `porttrack status --offline` in a workspace holding only that file and ends in a
clear error — exit 2, one `porttrack: error:` line naming `tracks.yaml:LINE:COL` — or, for a file
that is merely unusual but valid, in success. Each stays within a time and memory bound (an alias
bomb is refused before expansion), prints no traceback and writes nothing, inside the workspace
or next to it. These are distinct from tests/tracks/test_file.py's cases (which check each message's
exact position); here the point is the whole command surviving the file.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass

import pytest
from rel_harness import assert_one_line_error, cli, files_under, outside

from testing import workspace as test_workspace

pytestmark = pytest.mark.reliability("hostile-yaml")

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
models:
  Alpha:
    drafters: [native-mtp]
    attention: sparse-mla
    quantization: fp8
    backends: {sm_121a: FLASHMLA_SPARSE, gfx1151: ROCM_AITER_MLA_SPARSE}
tracks:
  mla-track:
    title: MLA things
    prs: [46514]
    requires:
      attention: [sparse-mla]
    targets: [sm_121a, gfx1151]
    gate:
      job:
        command: run --ref {ref} --results {results}
        timeout_s: 600
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
      drafter: [native-mtp]
    targets: [sm_121a, gfx1151]
report:
  repo: randomvariable/vllm
  labels: [porttrack, weekly-status]
  tracking_issue: 20
"""


def sub(old: str, new: str, text: str = BASE) -> str:
    assert text.count(old) == 1, f"{old!r} must occur once"
    return text.replace(old, new)


def laughs(levels: int = 9, width: int = 9) -> str:
    lines = ['lol0: &l0 "lol"']
    for n in range(1, levels + 1):
        lines.append(f"lol{n}: &l{n} [" + ", ".join(f"*l{n - 1}" for _ in range(width)) + "]")
    return "\n".join(lines) + "\n" + BASE


def nested_flow(depth: int) -> str:
    return sub("    title: Spec things\n", "    title: Spec things\n    extra: " + "[" * depth + "x" + "]" * depth + "\n")


def nested_block(depth: int) -> str:
    body = "".join(f"{' ' * (6 + 2 * i)}k{i}:\n" for i in range(depth)) + f"{' ' * (6 + 2 * depth)}leaf\n"
    return sub("    title: Spec things\n", "    title: Spec things\n    extra:\n" + body)


def wide_aliases(n: int) -> str:
    return sub("    prs: [48804]\n", "    prs: &p [48804]\n") + "".join(f"alias{i}: *p\n" for i in range(n))


def quadratic(items: int, aliases: int) -> str:
    anchor = "anchor: &big [" + ", ".join("x" for _ in range(items)) + "]\n"
    return anchor + "".join(f"copy{i}: *big\n" for i in range(aliases)) + BASE


@dataclass(frozen=True)
class Case:
    id: str
    data: bytes
    code: int = 2  # 2: refused as a configuration error; 0: unusual but valid
    says: str = ""  # words the error line (or its detail lines) must carry


def case(id: str, text: str | bytes, code: int = 2, says: str = "") -> Case:
    return Case(id, text if isinstance(text, bytes) else text.encode("utf-8"), code, says)


CASES = [
    # alias bombs and size: refused before anything is expanded or built
    case("billion-laughs", laughs(), says="alias"),
    case("wide-alias-fanout", wide_aliases(40), says="alias"),
    case("quadratic-blowup", quadratic(2000, 30), says="nodes"),
    case("huge-document-2mib", "# padding\n" * 200_000 + BASE, says="larger than"),
    case("huge-single-scalar", sub("    title: Spec things", "    title: " + "x" * (2 << 20)), says="larger than"),
    case("deep-flow-nesting", nested_flow(5000), says="nested"),
    case("deep-block-nesting", nested_block(60), says="nested"),
    case("many-documents", BASE + "---\n{}\n" * 1000),
    # bytes that are not a UTF-8 YAML text
    case("invalid-utf8", sub("MLA things", "MLA \xff things").encode("utf-8").replace(b"\xc3\xbf", b"\xff"), says="UTF-8"),
    case("utf16-file", BASE.encode("utf-16")),
    case("nul-byte", sub("MLA things", "MLA\x00things")),
    case("random-binary", bytes(range(256)) * 64),
    case("escape-sequence-in-title", sub("MLA things", "MLA\x1b[31mthings")),
    # tags: nothing is constructed from a tag
    case("binary-tag", sub("    title: Spec things", "    title: !!binary aGVsbG8=")),
    case("set-tag", sub("prs: [48804]", "prs: !!set {48804: null}")),
    case("custom-include-tag", sub("    title: Spec things", "    title: !include secrets.yaml")),
    case("python-name-tag", sub("    title: Spec things", "    title: !!python/name:os.system")),
    case("python-module-tag", sub("    title: Spec things", "    title: !!python/module:subprocess")),
    case("timestamp-tag", sub("    title: Spec things", "    title: !!timestamp 2001-12-14t21:59:43.10-05:00")),
    # keys
    case("top-level-duplicate-key", BASE + "upstream:\n  repo: evil/repo\n", says="duplicate"),
    case("duplicate-key-in-flow-mapping", sub("{abs: 0.02, rel: 0.01}", "{abs: 0.02, abs: 5, rel: 0.01}"), says="duplicate"),
    case("duplicate-track-id", BASE.replace("report:\n", "  mla-track:\n    title: again\n    prs: [1]\nreport:\n"), says="duplicate"),
    case("unknown-top-level-key", BASE + "plugins: [evil]\n", says="unknown"),
    case("unknown-gate-key", sub("      graph_replay: required\n", "      graph_replay: required\n      skip_checks: true\n"), says="unknown"),
    case("unknown-target-key", sub("    arch: sm_121a\n", "    arch: sm_121a\n    power: 9000\n"), says="unknown"),
    case("merge-key", sub("  spec-track:\n    title: Spec things\n", "  spec-track:\n    <<: {title: merged}\n    title: Spec things\n"),
         code=0),  # YAML's merge key, overridden by the explicit title: valid
    case("complex-key", sub("tracks:\n", "tracks:\n  ? [a, b]\n  : {title: x, prs: [7]}\n")),
    case("null-key", sub("tracks:\n", "tracks:\n  ~: {title: x, prs: [7]}\n")),
    case("bool-key", BASE + "yes: 1\n"),
    case("very-long-key", sub("tracks:\n", "tracks:\n  " + "k" * 20000 + ":\n    title: x\n    prs: [7]\n")),
    # wrong types and ranges
    case("pr-as-float", sub("prs: [48804]", "prs: [48804.5]")),
    case("pr-negative", sub("prs: [48804]", "prs: [-3]")),
    case("pr-enormous", sub("prs: [48804]", "prs: [100000000000000000000000000000]"), code=0),  # a live poll: GitHub's 404
    case("pr-as-bool", sub("prs: [48804]", "prs: [true]")),
    case("tracks-as-list", sub("tracks:\n  mla-track:", "tracks:\n- mla-track:").replace("\n  spec-track:", "\n- spec-track:")),
    case("models-null", sub("models:\n  Alpha:\n    drafters: [native-mtp]\n    attention: sparse-mla\n    quantization: fp8\n"
                            "    backends: {sm_121a: FLASHMLA_SPARSE, gfx1151: ROCM_AITER_MLA_SPARSE}\n", "models:\n")),
    case("null-document", "~\n"),
    case("scalar-document", "just a sentence\n"),
    case("timeout-negative", sub("timeout_s: 600", "timeout_s: -1")),
    case("timeout-string", sub("timeout_s: 600", "timeout_s: forever")),
    case("contexts-empty", sub("contexts: [4096]", "contexts: []")),
    case("batches-zero", sub("batches: [1, 32]", "batches: [0]")),
    case("tolerance-as-string", sub("{abs: 0.02, rel: 0.01}", '{abs: "0.02", rel: 0.01}')),
    case("tolerance-nan", sub("{abs: 0.02, rel: 0.01}", "{abs: .nan, rel: 0.01}")),
    case("labels-not-a-list", sub("labels: [porttrack, weekly-status]", "labels: porttrack")),
    case("tracking-issue-string", sub("tracking_issue: 20", "tracking_issue: twenty")),
    # values that would reach a path, a git command line or another repository
    case("repo-with-newline", sub("repo: vllm-project/vllm", 'repo: "vllm-project/vllm\\nevil"')),
    case("output-dir-traversal", sub("  tracking_issue: 20\n", "  tracking_issue: 20\n  output_dir: ../../outside\n")),
    case("output-dir-absolute", sub("  tracking_issue: 20\n", "  tracking_issue: 20\n  output_dir: /tmp/porttrack-escape\n")),
    case("workflow-file-traversal", sub("        command: run --ref {ref} --results {results}\n",
                                        "        workflow: {file: ../../evil.yml, ref: main}\n")),
    case("staging-branch-option", sub("  checkout: ../vllm\n", "  checkout: ../vllm\n  staging_branch: --delete\n")),
    case("checkout-with-nul", sub("  checkout: ../vllm\n", '  checkout: "../vl\\0lm"\n'), code=0),  # no such folder, when used
    # unusual but valid: handled
    case("crlf-line-endings", BASE.replace("\n", "\r\n"), code=0),
    case("bom-then-yaml", b"\xef\xbb\xbf" + BASE.encode(), code=0),
    case("bidi-override-in-title", sub("MLA things", "MLA \u202eshtgniht"), code=0),
    case("shared-anchor-within-limits", sub("    targets: [sm_121a, gfx1151]\n    gate:", "    targets: &t [sm_121a, gfx1151]\n    gate:")
         .replace("    targets: [sm_121a, gfx1151]\nreport", "    targets: *t\nreport"), code=0),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_tracks_yaml_ends_in_a_clear_error_or_correct_handling(tmp_path, case: Case):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "tracks.yaml").write_bytes(case.data)
    handle = test_workspace.TestWorkspace(root, token=None)
    around = outside([tmp_path, tmp_path.parent])
    before = files_under(root)
    limit = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    out = cli(handle, "status", "--offline")
    took = time.monotonic() - started
    assert took < 10, f"took {took:.1f}s"
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - limit) / 1024
    assert grown_mib < 300, f"memory grew by {grown_mib:.0f} MiB"
    if case.code == 0:
        assert out.returncode == 0, out.stderr[-1200:]
        assert "Traceback" not in out.stderr
    else:
        assert_one_line_error(out, 2)
        assert "tracks.yaml" in out.errors[0], out.errors[0]
        if case.says:
            assert case.says.lower() in out.stderr.lower(), out.stderr[-800:]
        assert len(out.stderr) < 20_000, "the error does not echo the whole file"
    after = files_under(root)
    if case.code == 0:  # a valid file is remembered as validated (porttrack.tracks.config's cache), and only that
        assert after.pop(".porttrack/validated-config.json", None) is not None
    assert after == before, "nothing written to the workspace"
    assert outside([tmp_path, tmp_path.parent]) == around, "nothing written next to it"
    assert not os.path.exists("/tmp/porttrack-escape")


def test_there_are_at_least_forty_distinct_yaml_cases():
    assert len({c.id for c in CASES}) == len(CASES) >= 40
    assert len({c.data for c in CASES}) == len(CASES), "every case is a different file"
