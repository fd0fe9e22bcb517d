"""`porttrack report weekly`: golden files for a realistic week, a real GFM renderer, and posting
against the GitHub emulator (create, update, 5xx on create, closed by a person, no permission).

The week is built through the real modules (recorded state, queue, evidence), with fixed times,
so the rendered issue is byte-stable. Regenerate the golden files after an intended change with
`PORTTRACK_UPDATE_GOLDEN=1 python -m pytest tests/report/test_render.py`, and read the diff.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from porttrack.common import clock
from porttrack.prove import evidence
from porttrack.queue import manifest as queue_mod
from porttrack.report import history as history_mod
from porttrack.report import render as rep_render
from porttrack.workspace import state as state_mod
from porttrack.workspace.files import Workspace, write_json
from porttrack.workspace.state import Event, HeadSeen, RecordedPR, StackLink, UpstreamState
from testing import workspace as test_workspace
from testing.gfm import cmark
from testing.github_emulator import DEFAULT_TOKEN, READONLY_TOKEN
from testing.workspace import make_workspace, track

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
NOW = "2026-11-30T08:00:00Z"  # Monday of 2026-W49
PREVIOUS = "2026-11-23T08:00:00Z"  # the 2026-W48 report
WEEK = "2026-W49"
FORK = "randomvariable/vllm"
UPSTREAM = "vllm-project/vllm"
LABELS = ["porttrack", "weekly-status"]
SHA = {name: hashlib.sha1(name.encode()).hexdigest() for name in (
    "46076-head", "46514-head", "46849-old", "46849-new", "48407-head", "48407-merge", "48804-head",
    "46076-merge", "fork", "base",
)}

MODELS = {
    "GLM-5.2": {
        "drafters": ["native-mtp"], "attention": "sparse-mla", "quantization": "fp8",
        "backends": {"sm_121a": "FLASHMLA_SPARSE", "gfx1151": "ROCM_AITER_MLA_SPARSE"},
    },
    "Qwen3.6": {
        "drafters": ["native-mtp", "eagle"], "attention": "hybrid", "quantization": "fp8",
        "backends": {"sm_121a": "FLASH_ATTN", "gfx1151": "TRITON_ATTN"},
    },
    "Mistral-Small-4": {
        "drafters": [], "attention": "mla", "quantization": "fp8",
        "backends": {"sm_121a": "FLASHMLA", "gfx1151": "ROCM_AITER_MLA"},
        "conditional": [{"proof": "mla-low-rank-accepted", "tracks": ["fp8-ds-mla-sparse-mtp"],
                         "reason": "the MLA path must accept the low-rank attention representation"}],
    },
}
PROOFS = {
    "mla-low-rank-accepted": {
        "description": "vLLM's MLA path accepts Mistral Small 4's low-rank attention",
        "gate": {
            "promote": False, "job": {"command": "true {results}"},
            "matrix": {"models": ["Mistral-Small-4"], "contexts": [4096], "batches": [1]},
            "reference_backend": "TRITON_MLA", "tolerance": {"abs": 0.02, "rel": 0.01}, "phases": ["warm"],
        },
    }
}


def _gate(metric: str, unit: str, direction: str, pct: float, graph_replay: str, reference: str) -> dict[str, Any]:
    return {
        "job": {"command": "true {results}"},
        "matrix": {"models": "eligible", "contexts": [1024], "batches": [1]},
        "reference_backend": reference, "tolerance": {"abs": 0.02, "rel": 0.01},
        "phases": ["cold", "warm"], "graph_replay": graph_replay, "no_jit_after_warmup": "required",
        "metrics": [{"name": metric, "unit": unit, "direction": direction, "allowed_regression_pct": pct, "key": True}],
    }


TRACKS = {
    "spec-kernel-warmup": track(
        [48804], "Speculative-decoding kernel warmup", requires={"drafter": ["eagle", "dflash", "dspark", "native-mtp"]},
        fork_commits=["a9b1ee711", "2a6c161ff"],
        gate=_gate("first_request_latency", "ms", "lower", 2, "not-applicable", "TRITON_ATTN")),
    "fused-ar-graph": track(
        [46849], "Fused autoregressive-speculator CUDA graph replay", requires={"drafter": ["eagle", "native-mtp"]},
        gate=_gate("median_itl", "ms", "lower", 3, "required", "TRITON_ATTN")),
    "fp8-ds-mla-sparse-mtp": track(
        [46514], "fp8_ds_mla sparse mixed-batch path and MTP", requires={"attention": ["sparse-mla", "compressed-mla", "mla"]},
        gate=_gate("decode_throughput", "tok/s", "higher", 3, "required", "TRITON_MLA")),
    "sparse-indexer-skip": track(
        [48407], "Skip sparse-indexer scoring for dense short prefills", requires={"attention": ["sparse-mla", "compressed-mla"]},
        gate=_gate("request_throughput", "req/s", "higher", 2, "not-applicable", "TRITON_MLA")),
}


# --------------------------------------------------------------------------- the week


def _pr(number: int, title: str, author: str, state: str, events: list[Event], **kw: Any) -> RecordedPR:
    head = kw.pop("head_sha", SHA.get(f"{number}-head"))
    fields = dict(
        number=number, title=title, author=author, state=state, html_url=f"https://github.com/{UPSTREAM}/pull/{number}",
        created_at="2026-07-01T00:00:00Z", updated_at=events[-1].at if events else None, merged_at=None, closed_at=None,
        merge_commit_sha=None, head_sha=head, head_ref=f"pr-{number}", base_ref="main", base_sha=SHA["base"],
        default_branch="main", observed_at=NOW, heads=(HeadSeen(head, "2026-11-02T08:00:00Z", "initial"),) if head else (),
        events=tuple(events),
    )
    fields.update(kw)
    return RecordedPR(**fields)


def upstream_state(titles: dict[int, str] | None = None) -> UpstreamState:
    titles = titles or {}
    first = Event("2026-11-02T08:00:00Z", "observed", "first observed: open")
    prs = {
        46076: _pr(46076, "[Attention][DSA] support dcp for FLASHINFER_MLA_SPARSE", "ZJY0516", "merged",
                   [Event("2026-11-02T08:00:00Z", "observed", "first observed: merged")],
                   merged_at="2026-07-01T04:32:00Z", closed_at="2026-07-01T04:32:00Z", merge_commit_sha=SHA["46076-merge"]),
        46514: _pr(46514, titles.get(46514, "[Attention][MLA] FlashMLA sparse: DCP on the fp8_ds_mla mixed-batch path + MTP"),
                   "drakosha", "open", [first], stacked_on=(StackLink(46076, "text"),)),
        46849: _pr(46849, "[MRV2][Spec] Fuse AR speculator multi-step decodes back into one CUDA graph", "yiz-liu", "open",
                   [first, Event("2026-11-25T06:00:00Z", "force-pushed",
                                 f"{SHA['46849-old'][:12]} -> {SHA['46849-new'][:12]}, 3 new commits (by git)")],
                   head_sha=SHA["46849-new"]),
        48407: _pr(48407, "[Attention] Skip sparse indexer scoring for dense short prefills", "qianlihuang", "merged",
                   [first, Event("2026-11-26T16:17:22Z", "merged", f"merge commit {SHA['48407-merge']}")],
                   merged_at="2026-11-26T16:17:22Z", closed_at="2026-11-26T16:17:22Z", merge_commit_sha=SHA["48407-merge"]),
        48804: _pr(48804, "[Spec Decode][V1] Warm Eagle and DFlash/DSpark spec-decode Triton kernels at startup",
                   "leihuang-sketch", "closed",
                   [first, Event("2026-11-20T09:00:00Z", "appended", "1 new commit (before the previous report: not shown)"),
                    Event("2026-11-27T11:00:00Z", "closed", "closed without merging")],
                   closed_at="2026-11-27T11:00:00Z"),
    }
    return UpstreamState(upstream=UPSTREAM, observed_at="2026-11-29T22:00:00Z", source="live poll of https://api.github.com", prs=prs)


def _patch(name: str, pr: int, title: str, track_id: str, taken: int, left_out: list[tuple[str, str]],
           history: list[tuple[str, str, str]]) -> tuple[queue_mod.Patch, bytes]:
    content = f"From {SHA['fork']} Mon Sep 17 00:00:00 2001\nSubject: [PATCH] {title}\n\n".encode()
    patch = queue_mod.Patch(
        name=name, file=queue_mod.patch_file_name(name, content), sha256=hashlib.sha256(content).hexdigest(),
        track=track_id, pr=pr, upstream=UPSTREAM, title=title,
        revision=queue_mod.Revision(head=SHA.get(f"{pr}-head") or SHA["46849-new"], base=SHA["base"]),
        hunks_taken=tuple(queue_mod.HunkRef(f"{pr:x}{i:06x}", f"vllm/file{i}.py") for i in range(taken)),
        hunks_left_out=tuple(queue_mod.HunkRef(f"{pr:x}ff{i:04x}", path, reason=why) for i, (path, why) in enumerate(left_out)),
        depends_on=(), state="queued", gate=track_id,
    )
    for at, to, why in history:
        patch = patch.transition(to, why, by="maintainer", at=at)
    return patch, content


def build_queue(ws: Workspace) -> dict[str, queue_mod.Patch]:
    skip, skip_bytes = _patch(
        "0001-pr48407-skip-sparse-indexer-scoring", 48407, "[Attention] Skip sparse indexer scoring for dense short prefills",
        "sparse-indexer-skip", 6,
        [("vllm/models/deepseek_v32/nvidia/attention.py", "the fork does not carry the DeepSeek-V3.2 NVIDIA model file")],
        [("2026-11-02T09:00:00Z", "queued", "imported 6 of 7 hunks"),
         ("2026-11-19T12:00:00Z", "gated-pass", "gate check passed"),
         ("2026-11-24T10:00:00Z", "default-enabled", "promoted: every cell passes on sm_121a and gfx1151")],
    )
    fused, fused_bytes = _patch(
        "0002-pr46849-fuse-ar-speculator-multi-step", 46849, "[MRV2][Spec] Fuse AR speculator multi-step decodes",
        "fused-ar-graph", 9, [("docs/design/model_runner_v2.md", "excluded by the track's paths (docs/**)")],
        [("2026-11-03T09:00:00Z", "queued", "imported 9 of 10 hunks"),
         ("2026-11-26T18:00:00Z", "gated-fail", "gate check failed: graph replay not observed on gfx1151")],
    )
    mla, mla_bytes = _patch(
        "0003-pr46514-flashmla-sparse-dcp", 46514, "[Attention][MLA] FlashMLA sparse: DCP on the fp8_ds_mla mixed-batch path",
        "fp8-ds-mla-sparse-mtp", 3, [], [("2026-11-10T09:00:00Z", "queued", "imported 3 of 3 hunks")],
    )
    queue = queue_mod.Queue((skip, fused, mla))
    queue_mod.save(ws, queue, {skip.file: skip_bytes, fused.file: fused_bytes, mla.file: mla_bytes})
    return {p.track: p for p in (skip, fused, mla)}


ENV = {"gpu": "NVIDIA GB10", "arch": "sm_121a", "driver": "580.95", "cuda": "13.0", "rocm": None, "torch": "2.9.0", "triton": "3.5.0"}
ENV_AMD = {"gpu": "AMD Radeon 8060S", "arch": "gfx1151", "driver": "6.14", "cuda": None, "rocm": "7.0.2", "torch": "2.9.0", "triton": "3.5.0"}


def _cell(model: str, phase: str, metric: str, value: float, *, replays: int = 12, jit: int = 0, reference: str = "TRITON_MLA",
          abs_err: float = 0.004) -> dict[str, Any]:
    return {"model": model, "context": 1024, "batch": 1, "phase": phase, "metrics": {metric: value},
            "numerics": {"reference_backend": reference, "max_abs_err": abs_err, "max_rel_err": 0.003},
            "graph_replays": replays, "jit_compiles_after_warmup": jit}


def _record(ws: Workspace, patch: queue_mod.Patch, role: str, target: str, cells: list[dict[str, Any]], at: str,
            patch_set: list[queue_mod.Patch]) -> evidence.Record:
    env = dict(ENV if target == "sm_121a" else ENV_AMD)
    pset = tuple((p.name, p.sha256) for p in patch_set)
    document = {
        "schema": "porttrack/results/v1", "track": patch.track, "subject": patch.name, "role": role, "target": target,
        "commits": {"ref_under_test": SHA["fork"], "upstream_base": SHA["base"]},
        "environment": {**env, "fork_commit": SHA["fork"], "patch_set": [{"name": n, "sha256": s} for n, s in pset]},
        "cells": cells,
    }
    expected = evidence.Expected(patch.track, evidence.Subject("patch", patch.name, patch.sha256), role, target,
                                 SHA["fork"], SHA["base"], SHA["fork"], pset)
    return evidence.record_results(ws, document, expected, job={"kind": "command", "exit_code": 0}, results_sha256="0" * 64, now=at)


def build_evidence(ws: Workspace, patches: dict[str, queue_mod.Patch]) -> None:
    skip, fused = patches["sparse-indexer-skip"], patches["fused-ar-graph"]
    metric = "request_throughput"
    # The promoted patch: baselines, then a candidate a week on both machines; one record of
    # 2026-W47 was corrected (superseded) and measured again the next day.
    for target, base in (("sm_121a", 5.90), ("gfx1151", 3.10)):
        _record(ws, skip, "baseline", target, [_cell("GLM-5.2", p, metric, base * (0.9 if p == "cold" else 1.0)) for p in ("cold", "warm")],
                "2026-11-03T10:00:00Z", [])
    weekly = {"2026-11-04T12:00:00Z": (5.98, 3.12), "2026-11-11T12:00:00Z": (6.01, 3.16), "2026-11-18T12:00:00Z": (6.31, 3.18),
              "2026-11-19T12:00:00Z": (6.05, None), "2026-11-25T12:00:00Z": (6.12, 3.21)}
    records: dict[tuple[str, str], evidence.Record] = {}
    for at, values in weekly.items():
        for target, value in zip(("sm_121a", "gfx1151"), values):
            if value is not None:
                cold = {"2026-11-04": 0.90, "2026-11-11": 0.88, "2026-11-18": 0.90, "2026-11-19": 0.91, "2026-11-25": 0.93}[at[:10]]
                cells = [_cell("GLM-5.2", p, metric, round(value * (cold if p == "cold" else 1.0), 3)) for p in ("cold", "warm")]
                records[at, target] = _record(ws, skip, "candidate", target, cells, at, [skip])
    evidence.supersede(ws, records["2026-11-18T12:00:00Z", "sm_121a"].id,
                       "measured with the profiler's sampling disabled: throughput overclaimed",
                       replaced_by=records["2026-11-19T12:00:00Z", "sm_121a"].id, now="2026-11-19T13:00:00Z")
    # The failing gate: graph replay not observed on gfx1151, and no baseline there yet.
    itl = "median_itl"
    for target in ("sm_121a", "gfx1151"):
        if target == "sm_121a":
            _record(ws, fused, "baseline", target,
                    [_cell(m, p, itl, 9.0, reference="TRITON_ATTN") for m in ("GLM-5.2", "Qwen3.6") for p in ("cold", "warm")],
                    "2026-11-26T09:00:00Z", [skip])
        cells = [_cell(m, p, itl, 9.05 if target == "sm_121a" else 11.2, reference="TRITON_ATTN",
                       replays=0 if (target, m, p) == ("gfx1151", "GLM-5.2", "warm") else 40)
                 for m in ("GLM-5.2", "Qwen3.6") for p in ("cold", "warm")]
        _record(ws, fused, "candidate", target, cells, "2026-11-26T15:00:00Z", [skip, fused])
    # A problem: a record edited by hand no longer matches its id and does not count.
    edited = ws.evidence_dir / "20261128T000000Z-000000000000.json"
    edited.write_text(json.dumps({"schema": evidence.SCHEMA, "id": edited.stem, "kind": "results"}) + "\n")


def realistic_week(root: Path, *, titles: dict[int, str] | None = None) -> test_workspace.TestWorkspace:
    tw = make_workspace(root, TRACKS, models=MODELS, proofs=PROOFS, token=None)
    text = tw.tracks_file.read_text()  # tracks.yaml wants SHAs quoted; yaml.safe_dump leaves them bare
    tw.tracks_file.write_text(re.sub(r"^(\s*- )([0-9a-f]{9})$", r'\1"\2"', text, flags=re.M))
    ws = Workspace(root)
    state_mod.save(ws.upstream_state_file, upstream_state(titles))
    patches = build_queue(ws)
    build_evidence(ws, patches)
    write_json(history_mod.records_path(ws), {"schema": history_mod.RECORD_SCHEMA, "reports": [
        {"week": "2026-W48", "generated_at": PREVIOUS, "since": "2026-11-16T08:00:00Z", "mode": "live",
         "observed_at": PREVIOUS, "file": "reports/weekly-2026-W48.md", "body_sha256": "0" * 64,
         "issue": {"repo": FORK, "number": 7, "url": f"https://github.com/{FORK}/issues/7", "action": "created"}},
    ]})
    return tw


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("PORTTRACK_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"no golden file {path}; run with PORTTRACK_UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from the golden file (PORTTRACK_UPDATE_GOLDEN=1 to accept)"


@pytest.fixture
def week(tmp_path: Path) -> test_workspace.TestWorkspace:
    return realistic_week(tmp_path / "ws")


def weekly(tw: test_workspace.TestWorkspace, *args: str, env: dict[str, str] | None = None):
    return tw.run_in_process("report", "weekly", "--now", NOW, *args, env=env)


# --------------------------------------------------------------------------- golden


def test_realistic_week_renders_the_golden_issue(week):
    out = weekly(week, "--offline", "--dry-run")
    assert out.returncode == 0, out.stderr
    _golden("weekly-realistic.md", out.stdout)


def test_realistic_week_as_json_is_the_same_content(week):
    out = weekly(week, "--offline", "--dry-run", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["schema"] == "porttrack/weekly/v1" and data["week"] == WEEK and data["post"] is None
    _golden("weekly-realistic.json", out.stdout)


def test_reports_rendered_one_after_another_in_one_process_each_carry_their_own_values(week):
    """The compiled template is kept per process (report/render.py `_COMPILED`); what a report binds
    (its filters and globals: the week's marker, links to its repositories) is not kept with it."""
    import importlib

    render_mod = importlib.import_module("porttrack.report.render")  # the module: the package exports a `render` function
    later_now, later_week = "2026-12-07T08:00:00Z", "2026-W50"
    render_mod._COMPILED.clear()
    first = weekly(week, "--offline", "--dry-run")
    later = week.run_in_process("report", "weekly", "--now", later_now, "--offline", "--dry-run")
    assert first.returncode == 0 and later.returncode == 0, (first.stderr, later.stderr)
    assert len(render_mod._COMPILED) == 1, "the second report was not rendered from the kept compile"
    assert f"porttrack:weekly:{WEEK}" in first.stdout and f"porttrack:weekly:{later_week}" in later.stdout
    assert f"porttrack:weekly:{WEEK}" not in later.stdout
    render_mod._COMPILED.clear()
    compiled_afresh = week.run_in_process("report", "weekly", "--now", later_now, "--offline", "--dry-run")
    assert later.stdout == compiled_afresh.stdout


def test_the_week_says_what_happened(week):
    text = weekly(week, "--offline", "--dry-run").stdout
    track = {t: _section(text, f"### {t}:") for t in TRACKS}
    assert "**force-pushed** (2026-11-25)" in track["fused-ar-graph"]
    assert "**merged** (2026-11-26)" in track["sparse-indexer-skip"]
    assert "**closed without merging** (2026-11-27)" in track["spec-kernel-warmup"]
    assert "new commits" not in track["spec-kernel-warmup"]  # before the previous report
    assert "no change since the previous report" in track["fp8-ds-mla-sparse-mtp"]
    assert "Changes since the 2026-W48 report of 2026-11-23 (recorded in state/reports.json)." in text
    gates = _section(text, "## Gates")
    assert "❌ fail" in _section(gates, "### 0002-pr46849")
    assert "🚫 **superseded:**" in gates and "throughput overclaimed" in gates
    assert "⚪ no evidence" in _section(gates, "### 0003-pr46514")
    assert "🚀 default-enabled 🆕" in text
    problems = _section(text, "## Problems")
    assert "does not count" in problems and "offline" in problems
    assert "```mermaid" in _section(text, "## Trends")


def test_merged_prs_say_how_long_they_have_waited_for_a_verdict(week):
    """#46076 merged 2026-07-01 and no convergence verdict holds for the fork branch: 152 days at
    NOW (2026-11-30); #48407 merged 2026-11-26: 3 days. An open PR is not waiting."""
    text = weekly(week, "--offline", "--dry-run").stdout
    summary = _section(text, "## Summary")
    assert "[#46076](https://redirect.github.com/vllm-project/vllm/pull/46076): merged 2026-07-01, waiting 152 days for verify-converged" in summary
    assert "merged 2026-11-26, waiting 3 days for verify-converged" in summary
    assert "46849" not in summary.split("waiting for a convergence verdict")[1]
    data = json.loads(weekly(week, "--offline", "--dry-run", "--json").stdout)
    waiting = {p["number"]: p["waiting_days"] for t in data["tracks"] for p in t["prs"]}
    assert waiting == {48804: None, 46849: None, 46514: None, 46076: 152, 48407: 3}


def test_this_week_comes_from_real_deltas_and_stale_state_is_said_plainly(week):
    """The state was recorded 2026-11-29. A period that began after it cannot know what changed
    upstream: the issue says so above the table and in each "this week" cell, instead of "—"."""
    fresh = weekly(week, "--offline", "--dry-run").stdout
    assert "older than this report's period" not in fresh
    row = {line.split("|")[1].strip(" *"): line.split("|")[3].strip() for line in _section(fresh, "## Summary").splitlines()
           if line.startswith("| **")}
    assert row == {"spec-kernel-warmup": "closed without merging", "fused-ar-graph": "force-pushed, patch → ❌ gated: fail",
                   "fp8-ds-mla-sparse-mtp": "no change", "sparse-indexer-skip": "merged, patch → 🚀 default-enabled"}
    stale = weekly(week, "--offline", "--dry-run", "--since", "2026-11-29T23:00:00Z").stdout
    assert ("> **The recorded upstream state is older than this report's period:** it was recorded on 2026-11-29, "
            "and the period began 2026-11-29") in stale
    cells = [line.split("|")[3].strip() for line in _section(stale, "## Summary").splitlines() if line.startswith("| **")]
    assert cells == ["upstream not observed since 2026-11-29"] * 4, cells
    data = json.loads(weekly(week, "--offline", "--dry-run", "--json", "--since", "2026-11-29T23:00:00Z").stdout)
    assert data["upstream"]["recorded_before_period"] is True


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    level = heading.split(" ")[0]
    rest = text[start + len(heading):]
    end = re.search(rf"^{level} ", rest, re.M)
    return heading + (rest[: end.start()] if end else rest)


def test_previous_report_comes_from_the_repository_not_a_cache(week, tmp_path):
    # A fresh checkout: copy the workspace without the git-ignored cache; same answer.
    fresh = tmp_path / "fresh"
    shutil.copytree(week.root, fresh, ignore=shutil.ignore_patterns(".porttrack"))
    since = history_mod.previous_report(Workspace(fresh), WEEK, clock.parse_moment(NOW))
    assert (since.at, since.source, since.week) == (PREVIOUS, "record", "2026-W48")


def test_since_flag_and_default_window(week):
    ws = Workspace(week.root)
    assert history_mod.previous_report(ws, WEEK, clock.parse_moment(NOW), since_arg="2026-11-01").at == "2026-11-01T00:00:00Z"
    history_mod.records_path(ws).unlink()
    since = history_mod.previous_report(ws, WEEK, clock.parse_moment(NOW))
    assert (since.at, since.source) == ("2026-11-23T08:00:00Z", "default")


def test_a_run_is_recorded_and_the_full_report_written(week):
    out = weekly(week, "--offline")
    assert out.returncode == 0, out.stderr
    written = (week.root / "reports" / f"weekly-{WEEK}.md").read_text()
    assert written == out.stdout
    records = history_mod.load_records(Workspace(week.root))
    assert [r["week"] for r in records] == ["2026-W48", WEEK]
    # A second run in the same week replaces its entry, and still counts from 2026-W48.
    again = weekly(week, "--offline")
    assert again.stdout == out.stdout
    assert [r["week"] for r in history_mod.load_records(Workspace(week.root))] == ["2026-W48", WEEK]


def test_a_workspace_template_overrides_the_packaged_one(week):
    (week.root / "templates").mkdir()
    (week.root / "templates" / rep_render.TEMPLATE_NAME).write_text("{{ marker() }}\n{{ r.tracks[1].prs[0].title }}\n")
    out = weekly(week, "--offline", "--dry-run")
    assert out.stdout == f"<!-- porttrack:weekly:{WEEK} -->\n\\[MRV2\\]\\[Spec\\] Fuse AR speculator multi-step decodes back into one CUDA graph\n"


def test_a_template_naming_an_unknown_value_fails_clearly(week):
    (week.root / "templates").mkdir()
    (week.root / "templates" / rep_render.TEMPLATE_NAME).write_text("{{ marker() }}\n{{ r.no_such_thing }}\n")
    out = weekly(week, "--offline", "--dry-run")
    assert out.returncode == 2
    assert "weekly_status.md.j2" in out.stderr and "no_such_thing" in out.stderr


# A template is data anyone with a commit can edit, rendered by a job holding a write token.
SECRET = "ghp" + "_SANDBOXsentinel0123456789abcdefABCDEF"  # a sentinel, split so no scanner takes it for a token
SECRET_CORE = SECRET[4:]  # what is left of it after markdown escaping (`ghp\\_...`) or redaction
REACHING = (
    "{{ cycler.__init__.__globals__.os.system('touch PWNED') }}",
    "{{ cycler.__init__.__globals__.os.environ.GITHUB_TOKEN }}",
    "{{ lipsum.__globals__['os'].environ['GITHUB_TOKEN'] }}",
    "{{ joiner.__init__.__globals__.__builtins__['__import__']('os').popen('touch PWNED').read() }}",
    "{{ namespace.__init__.__globals__ }}",
    "{{ upstream_pr.__globals__ }}",
    "{{ marker.__closure__[0].cell_contents }}",
    "{% for c in ().__class__.__base__.__subclasses__() %}{{ c }}{% endfor %}",
    "{{ r.__class__.__mro__ }}",
    "{{ self._TemplateReference__context }}",
    "{{ (r|attr('__class__')) }}",
    "{{ '{0.__class__.__init__.__globals__}'.format(cycler) }}",
    "{{ r.tracks.append(1) }}",
    "{{ config }}{{ environ }}{{ os }}",
    "{{ range.__self__ }}",
)


@pytest.mark.parametrize("source", REACHING)
def test_a_template_reaching_for_code_or_the_environment_renders_nothing_and_fails_clearly(week, source, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where a `touch PWNED` that ran would leave its file
    (week.root / "templates").mkdir()
    (week.root / "templates" / rep_render.TEMPLATE_NAME).write_text("{{ marker() }}\n" + source + "\n")
    out = weekly(week, "--offline", "--dry-run", env={**week.env(), "GITHUB_TOKEN": SECRET})
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert out.stdout == ""  # nothing rendered, not even the first line
    assert "weekly_status.md.j2:2" in out.stderr
    assert SECRET_CORE not in out.stderr and not list(tmp_path.rglob("PWNED"))


def test_a_template_reaching_for_code_posts_nothing(posting, fake):
    (posting.root / "templates").mkdir()
    (posting.root / "templates" / rep_render.TEMPLATE_NAME).write_text(REACHING[1] + "\n")
    out = weekly(posting, "--offline", "--post")
    assert out.returncode == 2 and "may not use" in out.stderr
    assert posting.token[4:] not in out.stderr + out.stdout
    assert _weekly_issues(fake) == [] and fake.requests("POST", r"/issues$") == []


def test_seeded_hostile_templates_never_render_the_token_nor_crash(week, tmp_path, monkeypatch):
    """300 random chains of attribute, item and filter steps from every name the template sees:
    each renders (harmlessly) or is refused with rc 2; the token appears nowhere, never rc 70."""
    import random

    rng = random.Random(33)
    roots = ["cycler", "joiner", "namespace", "lipsum", "range", "dict", "self", "r", "r.tracks", "upstream_pr",
             "fork_issue", "marker", "chart", "legend", "plural", "waited", "loop", "caller", "varargs"]
    steps = ["__globals__", "__init__", "__class__", "__mro__", "__base__", "__subclasses__()", "__builtins__",
             "__dict__", "__closure__", "__code__", "__func__", "__self__", "os", "environ", "GITHUB_TOKEN",
             "func_globals", "gi_frame", "f_globals", "mro()", "items()", "keys()", "values()", "format",
             "environment", "globals", "_TemplateReference__context", "parent", "vars", "modules", "sys"]
    (week.root / "templates").mkdir()
    template = week.root / "templates" / rep_render.TEMPLATE_NAME
    env = {**week.env(), "GITHUB_TOKEN": SECRET}
    monkeypatch.chdir(tmp_path)
    # known ways out of an unsandboxed jinja2, so a good share of the chains would reach os there
    escapes = ["cycler.__init__.__globals__.os", "lipsum.__globals__['os']", "joiner.__init__.__globals__.os",
               "namespace.__init__.__globals__['os']", "(cycler|attr('__init__')|attr('__globals__'))['os']"]
    codes = []
    for _ in range(300):
        chain = rng.choice(roots) if rng.random() < 0.5 else rng.choice(escapes)
        for _ in range(rng.randint(0, 4)):
            step = rng.choice(steps)
            form = rng.random()
            if form < 0.5 or step.endswith("()"):
                chain += "." + step
            elif form < 0.8:
                chain += f"[{step!r}]"
            else:
                chain = f"({chain}|attr({step!r}))"
        if rng.random() < 0.5:
            chain += rng.choice([".environ.GITHUB_TOKEN", ".environ['GITHUB_TOKEN']", "|attr('environ')", ".environ"])
        template.write_text("{{ " + chain + " }}\n")
        out = weekly(week, "--offline", "--dry-run", env=env)
        assert out.returncode in (0, 2), (chain, out.returncode, out.stderr)
        assert SECRET_CORE not in out.stdout + out.stderr, chain
        codes.append(out.returncode)
    assert codes.count(2) > 200  # the generator does reach for things


# --------------------------------------------------------------------------- untrusted text, GFM


HOSTILE = ("@octocat please look <script>alert(1)</script> | broken | ![x](https://evil.example/x.png) "
           "[click](https://evil.example) www.evil.example #123 \u202eevil\u202c")


def test_rendered_issue_is_valid_gfm_and_untrusted_text_is_neutralised(tmp_path):
    tw = realistic_week(tmp_path / "ws", titles={46514: HOSTILE})
    source = weekly(tw, "--offline", "--dry-run").stdout
    # The source itself: no raw HTML but our marker, no mention, no foreign link.
    assert re.findall(r"<[A-Za-z!/]", source) == ["<!"]
    assert source.startswith(f"<!-- porttrack:weekly:{WEEK} -->\n")
    assert "@octocat" not in source and "@&#8203;octocat" in source
    assert "\u202e" not in source
    links = re.findall(r"(?<!\\)\]\(([^)]*)\)", source)  # an escaped "\](" is text, not a link
    assert links and all(re.match(r"https://(redirect\.)?github\.com/", url) for url in links)
    for html in (cmark(source), cmark(source, "--unsafe")):
        assert "<script" not in html and "<img" not in html
        assert "evil.example" not in "".join(re.findall(r'href="([^"]*)"', html))
        assert not re.search(r"@octocat", html)  # a zero-width space sits after the @
        assert "&lt;script&gt;" in html
    html = cmark(source)
    tables = re.findall(r"<table>(.*?)</table>", html, re.S)
    assert len(tables) >= 5  # summary, queue, gates, eligibility, trends
    for table in tables:  # every row has as many cells as the header: nothing broke a table
        header = len(re.findall(r"<th[ >]", table))
        assert all(len(re.findall(r"<td[ >]", row)) == header for row in re.findall(r"<tbody>(.*)</tbody>", table, re.S)[0].split("</tr>")[:-1])
    assert "#123" not in html.replace("#\u200b123", "")  # no reference to the fork's issue 123


def test_untrusted_text_in_a_table_cell_cannot_break_the_table(tmp_path):
    tw = realistic_week(tmp_path / "ws", titles={46514: HOSTILE})
    (tw.root / "templates").mkdir()
    (tw.root / "templates" / rep_render.TEMPLATE_NAME).write_text(
        "{{ marker() }}\n\n| PR | title | author |\n|---|---|---|\n"
        "{% for t in r.tracks %}{% for p in t.prs %}| {{ upstream_pr(p.number) }} | {{ p.title }} | {{ p.author }} |\n{% endfor %}{% endfor %}"
    )
    source = weekly(tw, "--offline", "--dry-run").stdout
    html = cmark(source)
    rows = re.findall(r"<tr>(.*?)</tr>", html, re.S)
    assert len(rows) == 1 + 5 and all(len(re.findall(r"<t[dh][ >]", row)) == 3 for row in rows)
    hostile_row = next(row for row in rows if "octocat" in row)
    assert "&lt;script&gt;" in hostile_row and "| broken |" in hostile_row and "<img" not in hostile_row


# --------------------------------------------------------------------------- size


def test_a_report_over_the_limit_is_cut_at_a_section_with_a_pointer():
    sections = [f"## Section {i}\n\n" + "| a | b |\n|---|---|\n" + "| x | y |\n" * 400 for i in range(40)]
    body = "<!-- porttrack:weekly:2026-W49 -->\n# title\n\n" + "\n".join(sections)
    cut, was_cut = rep_render.fit_body(body, 65536, "See `reports/weekly-2026-W49.md`.")
    assert was_cut and rep_render.body_size(cut) <= 65536
    assert cut.startswith("<!-- porttrack:weekly:2026-W49 -->")
    kept = cut.split("\n---\n")[0]
    assert kept.rstrip("\n").endswith("| x | y |") and kept.count("## Section") >= 1
    assert re.search(r"\n\n## Section \d+\n\n\| a \| b \|", kept)
    assert "See `reports/weekly-2026-W49.md`." in cut
    assert cmark(cut).count("<table>") == kept.count("## Section")


def test_one_huge_section_is_cut_at_a_line_and_an_open_code_block_is_closed():
    body = "<!-- m -->\n# t\n\n## Trends\n\n```mermaid\n" + "line [1, 2, 3]\n" * 10000 + "```\n"
    cut, was_cut = rep_render.fit_body(body, 65536, "pointer")
    assert was_cut and rep_render.body_size(cut) <= 65536
    assert cut.split("\n---\n")[0].rstrip().endswith("```")
    assert cut.count("```") % 2 == 0


def test_short_body_is_untouched():
    assert rep_render.fit_body("x\n", 65536, "p") == ("x\n", False)


# --------------------------------------------------------------------------- posting


@pytest.fixture
def posting(tmp_path: Path, fake):
    fake.add_repo(FORK)
    fake.add_repo(UPSTREAM)
    tw = realistic_week(tmp_path / "ws")
    tw.api_url, tw.token = fake.base_url, DEFAULT_TOKEN
    return tw


def _weekly_issues(fake) -> list[dict]:
    return [i for i in fake.issues(FORK) if i["body"] and i["body"].startswith("<!-- porttrack:weekly:")]


def test_post_creates_then_updates_the_same_issue(posting, fake):
    first = weekly(posting, "--offline", "--post")
    assert first.returncode == 0, first.stderr
    assert "created issue" in first.stderr
    [issue] = _weekly_issues(fake)
    assert issue["title"] == f"porttrack weekly status {WEEK}"
    assert sorted(label["name"] for label in issue["labels"]) == sorted(LABELS)
    assert issue["body"] == first.stdout

    unchanged = weekly(posting, "--offline", "--post")
    assert "already up to date" in unchanged.stderr
    assert len(fake.requests("PATCH", r"/issues/\d+$")) == 0

    # Something moved: the second run of the week edits the one issue, never makes another.
    evidence.supersede(Workspace(posting.root), evidence.load(Workspace(posting.root)).current()[-1].id,
                       "the gfx1151 runner had a thermal throttle", now="2026-11-30T07:00:00Z")
    second = weekly(posting, "--offline", "--post")
    assert second.returncode == 0, second.stderr
    assert "updated issue" in second.stderr
    [issue] = _weekly_issues(fake)
    assert issue["body"] == second.stdout and "thermal throttle" in issue["body"]
    assert len(fake.requests("POST", r"/issues$")) == 1
    assert history_mod.load_records(Workspace(posting.root))[-1]["issue"]["number"] == issue["number"]


def test_a_5xx_on_create_that_was_not_applied_is_not_retried(posting, fake):
    fake.inject("status", path=r"/issues$", method="POST", status=502)
    out = weekly(posting, "--offline", "--post")
    assert out.returncode == 5
    assert "no duplicate" in out.stderr
    assert len(fake.requests("POST", r"/issues$")) == 1 and _weekly_issues(fake) == []
    again = weekly(posting, "--offline", "--post")  # the next run looks, finds nothing, creates one
    assert again.returncode == 0, again.stderr
    assert len(_weekly_issues(fake)) == 1


def test_a_5xx_on_a_create_that_was_applied_does_not_duplicate(posting, fake):
    # GitHub created the issue but the answer was lost: the emulator applies the POST, then fails.
    def create_then_fail(method: str, path: str, query: dict) -> None:
        if method == "POST" and path.endswith(f"/{FORK}/issues"):
            fake.put_issue(FORK, title=f"porttrack weekly status {WEEK}", labels=LABELS,
                           body=f"<!-- porttrack:weekly:{WEEK} -->\n(partial)\n", user="porttrack-bot")
    fake.on_request = create_then_fail
    fake.inject("status", path=r"/issues$", method="POST", status=502)
    out = weekly(posting, "--offline", "--post")
    fake.on_request = None
    assert out.returncode == 0, out.stderr
    [issue] = _weekly_issues(fake)
    assert issue["body"] == out.stdout  # found by its marker, then brought up to date
    assert len(fake.requests("POST", r"/issues$")) == 1


def test_an_issue_closed_by_a_person_is_not_reopened_or_edited(posting, fake):
    number = fake.put_issue(FORK, title="mine", labels=LABELS, state="closed", closed_by="maintainer",
                            body=f"<!-- porttrack:weekly:{WEEK} -->\nold\n")["number"]
    out = weekly(posting, "--offline", "--post")
    assert out.returncode == 0, out.stderr
    assert "closed by a person" in out.stderr
    assert fake.issue(FORK, number)["state"] == "closed"
    assert fake.requests("PATCH") == [] and fake.requests("POST", r"/issues$") == []


def test_missing_permission_is_reported_before_any_work(posting, fake):
    out = weekly(posting, "--offline", "--post", env=posting.env(GITHUB_TOKEN=READONLY_TOKEN))
    assert out.returncode == 3
    assert "may not create or edit issues" in out.stderr
    assert fake.requests("POST") == [] and not (posting.root / "reports").exists()


def test_post_without_a_token_is_an_auth_error(posting):
    out = weekly(posting, "--offline", "--post", env=posting.env(GITHUB_TOKEN=None))
    assert out.returncode == 3 and "needs a GitHub token" in out.stderr


def test_dry_run_post_says_what_it_would_do_and_writes_nothing(posting, fake):
    out = weekly(posting, "--offline", "--post", "--dry-run")
    assert out.returncode == 0, out.stderr
    assert "would create" in out.stderr
    assert fake.requests("POST") == [] and not (posting.root / "reports").exists()


def test_the_tracking_issue_gets_one_link_a_week(posting, fake):
    fake.put_issue(FORK, 20, title="Track upstream spec-decode and sparse-MLA performance stack", body="the request")
    for _ in range(2):
        out = weekly(posting, "--offline", "--post", "--comment-tracking")
        assert out.returncode == 0, out.stderr
    comments = fake.comments(FORK, 20)
    [weekly_issue] = _weekly_issues(fake)
    assert len(comments) == 1 and f"#{weekly_issue['number']}" in comments[0]["body"]


def test_the_previous_weeks_issue_gives_since_in_a_fresh_checkout(posting, fake):
    history_mod.records_path(Workspace(posting.root)).unlink()
    fake.put_issue(FORK, title="porttrack weekly status 2026-W48", labels=LABELS, created_at="2026-11-23T09:00:00Z",
                   body="<!-- porttrack:weekly:2026-W48 -->\nlast week\n")
    out = weekly(posting, "--offline", "--post", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["since"]["source"] == "issue" and data["since"]["at"] == "2026-11-23T09:00:00Z"
    assert data["post"]["action"] == "created"


# --------------------------------------------------------------------------- the workflow


# tests/report/test_weekly_ci.py: the workflow's permissions, and two scheduled runs that carry state.


# --------------------------------------------------------------------------- live, end to end


def test_a_live_week_against_the_emulator(world, tmp_path):
    """Real git upstream, real HTTP: what `status` recorded, then a force-push, a merge and a
    close, then the weekly report polls live and posts; run twice, one issue."""
    world.open_pr(46849, {"vllm/spec.py": "fused = True\n"}, title="[MRV2][Spec] Fuse AR speculator decodes @octocat")
    world.open_pr(48407, {"vllm/indexer.py": "skip = True\n"}, title="[Attention] Skip sparse indexer scoring")
    world.open_pr(48804, {"vllm/warmup.py": "warm = True\n"}, title="[Spec Decode] Warm kernels at startup")
    tracks = {"fused-ar-graph": track([46849]), "sparse-indexer-skip": track([48407]), "spec-kernel-warmup": track([48804])}
    tw = make_workspace(tmp_path / "ws", tracks, api_url=world.fake.base_url, token=world.token)
    assert tw.run_in_process("status", "--no-fetch").returncode == 0

    world.force_push(46849, {"vllm/spec.py": "fused = 'yes'\n"})
    world.squash_merge(48407)
    world.close(48804)
    out = tw.run_in_process("report", "weekly", "--post")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "polled" in text and "Offline" not in text
    assert "**force-pushed**" in _section(text, "### fused-ar-graph:")
    assert "**merged**" in _section(text, "### sparse-indexer-skip:")
    assert "**closed without merging**" in _section(text, "### spec-kernel-warmup:")
    assert "@&#8203;octocat" in text and "@octocat" not in text
    again = tw.run_in_process("report", "weekly", "--post")
    assert again.returncode == 0, again.stderr
    issues = [i for i in world.fake.issues(FORK) if (i["body"] or "").startswith("<!-- porttrack:weekly:")]
    assert len(issues) == 1 and issues[0]["body"] == again.stdout
