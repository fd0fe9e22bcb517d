"""Separability is more than textual (issue 21, class 8): a hunk that uses a name only another hunk
brings travels with it, and after taking, the patched Python files are checked against the base
(pyflakes: no new undefined names, every module compiles); other languages are said unchecked.

The fixtures have the shape of vLLM #48407 imported over a fork base older than the PR: upstream
moved the import blocks and a signature between the fork's base and the PR's, so the hunks there
are "not separable"; the far-away hunks that use what those bring applied cleanly and were taken.
"""

from __future__ import annotations

import ast
import json
import subprocess
from collections import Counter

from pyflakes import checker, messages

from testing.gitfixtures import git
from testing.text import numbered
from testing.workspace import make_workspace, track

IDX = "vllm/model_executor/layers/sparse_attn_indexer.py"
UTILS = "vllm/v1/worker/utils.py"
ENVS = "CMakeLists.txt"  # not Python: said unchecked


def _indexer(imports: str, signature: str, first: str, last: str) -> str:
    body = "".join(f"    step_{i} = scores + {i}\n" for i in range(12))
    return (f'"""Sparse attention indexer."""\n{imports}\n' + numbered("LIMIT", 8)
            + f"\n\n{signature}\n{first}    scores = hidden_states @ k_cache\n{body}{last}    return scores.topk(topk)\n")


def _utils(imports: str, tail: str) -> str:
    return f"{imports}\n" + numbered("SIZE", 10) + "\n\ndef gather(x):\n    return x\n" + tail


BASE = {
    IDX: _indexer("import torch\n\nfrom vllm.config import VllmConfig\n",
                  "def sparse_attn_indexer(hidden_states, k_cache, topk):", "", ""),
    UTILS: _utils("import os\n", ""),
    ENVS: numbered("VLLM_FLAG", 12),
}
# upstream, between the fork's base and the PR's: the import blocks and the signature change
LATER = {
    IDX: _indexer("import torch\n\nfrom vllm.config import VllmConfig\nfrom vllm.logger import init_logger\n",
                  "def sparse_attn_indexer(hidden_states, k_cache, topk: int):", "", ""),
    UTILS: _utils("import os\nimport sys\n", ""),
}
USE = ("    layer = forward_context.attn_metadata[dense_mha_metadata_layer_name]\n"
       "    if layer.cudagraph_mode == CUDAGraphMode.FULL:\n        scores = scores * 2\n")
PR = {
    IDX: _indexer("import torch\n\nfrom vllm.config import CUDAGraphMode, VllmConfig\nfrom vllm.forward_context import get_forward_context\n"
                  "from vllm.logger import init_logger\n",
                  "def sparse_attn_indexer(hidden_states, k_cache, topk: int, dense_mha_metadata_layer_name: str):",
                  "    forward_context = get_forward_context()\n", USE),
    UTILS: _utils("from collections.abc import Mapping\nimport os\nimport sys\n",
                  "\n\ndef bind_kv_cache(kv_caches: Mapping[str, int]) -> None:\n    return None\n"),
    ENVS: numbered("VLLM_FLAG", 12).replace("VLLM_FLAG_6 = 6", "VLLM_FLAG_6 = 60"),
}


def _undefined(source: str, path: str) -> Counter:
    """The oracle: pyflakes itself, straight on the file (not through porttrack)."""
    compile(source, path, "exec")
    found = checker.Checker(ast.parse(source), filename=path).messages
    return Counter(m.message_args[0] for m in found if isinstance(m, (messages.UndefinedName, messages.UndefinedLocal)))


def _scene(world, tmp_path, pr=PR, later=LATER):
    world.upstream.commit(BASE, "project files")
    git(world.fork, "pull", "-q", "--ff-only", "upstream", "main")  # the fork's base: older than the PR's
    world.upstream.commit(later, "upstream moves on")
    world.open_pr(48407, pr, "[Attention] dense short-prefill sparse-indexer skip")
    ws = make_workspace(tmp_path / "ws", {"t": track([48407])}, api_url=world.fake.base_url, fork=world.fork, token=world.token)
    assert ws.run_in_process("status", "--no-search").returncode == 0
    return ws


def _queue_applied(world, ws, tmp_path) -> dict[str, str]:
    """The fork with the queue applied by `git am` (a real client), file by file."""
    work = tmp_path / "applied"
    git(tmp_path, "clone", "-q", str(world.fork), str(work))
    series = [ln for ln in (ws.root / "patches" / "series").read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    for name in series:
        subprocess.run(["git", "am", "-q", str(ws.root / "patches" / name)], cwd=work, check=True,
                       env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
                            "GIT_COMMITTER_EMAIL": "t@e", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    return {p: (work / p).read_text() for p in (IDX, UTILS, ENVS)}


def test_hunks_using_names_only_left_out_hunks_bring_travel_with_them(tmp_path, world):
    ws = _scene(world, tmp_path)
    out = ws.run_in_process("import", "48407", "--json")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    by_path: dict[str, list[dict]] = {}
    for h in plan["hunks"]:
        by_path.setdefault(h["path"], []).append(h)
    assert [h["taken"] for h in by_path[ENVS]] == [True]
    # sparse_attn_indexer.py: the using hunks are left out with what they need, not taken alone
    imports, signature, use = by_path[IDX]
    assert not any(h["taken"] for h in by_path[IDX]), by_path[IDX]
    assert imports["group"] == signature["group"] == use["group"]
    assert use["reason_kind"] in ("depends on left-out hunk", "not separable"), use
    # utils.py: the annotation and its import travel together (here git's 3-way takes both)
    assert len({h["taken"] for h in by_path[UTILS]}) == 1 and len({h["group"] for h in by_path[UTILS]}) == 1
    notes = "\n".join(plan["notes"])
    for name in ("forward_context", "CUDAGraphMode", "dense_mha_metadata_layer_name", "Mapping"):
        assert f"`{name}`" in notes, notes
    check = plan["source_check"]
    assert check["ok"] is True and check["findings"] == [{"kind": "not-checked", "path": ENVS, "detail": "not Python: no analyser for it"}]
    assert check["checked"] == [UTILS]
    # independent: the queue applied by git am, each file against the fork's base, by pyflakes
    applied = _queue_applied(world, ws, tmp_path)
    for path in (IDX, UTILS, ENVS):
        assert not (_undefined(applied[path], path) - _undefined(BASE[path], path)), path


def test_a_hunk_that_fails_the_check_after_taking_leaves_the_queue_with_its_reason(tmp_path, world):
    """The name is bound on a line the PR keeps (upstream added the import before the PR), so no
    hunk of the PR brings it and the hunk goes in cleanly; taken, the module would raise NameError
    on the fork (vLLM #46849's `Mapping` in vllm/v1/worker/utils.py over an older fork). A failed
    source check never reaches the queue: that hunk is left out with its reason, the rest is taken
    and passes the check, and the weekly report has no failing patch to show."""
    later = {UTILS: _utils("from collections.abc import Mapping\nimport os\nimport sys\n", "")}
    pr = {UTILS: _utils("from collections.abc import Mapping\nimport os\nimport sys\n",
                        "\n\ndef bind_kv_cache(kv_caches: Mapping[str, int]) -> None:\n    return None\n"),
          ENVS: PR[ENVS]}
    ws = _scene(world, tmp_path, pr=pr, later=later)
    out = ws.run_in_process("import", "48407", "--json")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    check = plan["source_check"]
    assert check["ok"] is True, check
    (utils,) = [h for h in plan["hunks"] if h["path"] == UTILS]
    assert not utils["taken"] and utils["reason_kind"] == "fails the source check", utils
    assert "new undefined name 'Mapping'" in utils["reason"]
    assert [h["taken"] for h in plan["hunks"] if h["path"] == ENVS] == [True]
    assert any("source check of the separable hunks failed" in n for n in plan["notes"]), plan["notes"]
    manifest = json.loads((ws.root / "patches" / "manifest.json").read_text())
    (entry,) = [p for p in manifest["patches"] if p["pr"] == 48407]
    assert entry["source_check"]["ok"] is True
    assert [h["reason_kind"] for h in entry["hunks_left_out"]] == ["fails the source check"]
    # independent: the queue applied by git am, each Python file against the fork's base, by pyflakes
    applied = _queue_applied(world, ws, tmp_path)
    assert not (_undefined(applied[UTILS], UTILS) - _undefined(BASE[UTILS], UTILS))
    shown = ws.run_in_process("report", "weekly", "--dry-run")
    assert shown.returncode == 0, shown.stderr
    assert "does not pass its source check" not in shown.stdout


def test_a_hunk_chosen_with_hunk_that_fails_the_check_is_a_refusal_and_writes_nothing(tmp_path, world):
    """--hunk takes exactly the hunks asked for: when one of them fails the source check, the
    import refuses (exit 1), naming it, and the queue is left as it was."""
    later = {UTILS: _utils("from collections.abc import Mapping\nimport os\nimport sys\n", "")}
    pr = {UTILS: _utils("from collections.abc import Mapping\nimport os\nimport sys\n",
                        "\n\ndef bind_kv_cache(kv_caches: Mapping[str, int]) -> None:\n    return None\n"),
          ENVS: PR[ENVS]}
    ws = _scene(world, tmp_path, pr=pr, later=later)
    plan = json.loads(ws.run_in_process("import", "48407", "--dry-run", "--json").stdout)
    (utils,) = [h for h in plan["hunks"] if h["path"] == UTILS]
    out = ws.run_in_process("import", "48407", "--hunk", utils["id"])
    assert out.returncode == 1, (out.returncode, out.stderr)
    assert utils["id"] in out.stderr and "Mapping" in out.stderr and "Nothing was written" in out.stderr, out.stderr
    assert not (ws.root / "patches" / "manifest.json").exists() or "48407" not in (ws.root / "patches" / "manifest.json").read_text()


def test_the_import_says_the_check_in_words(tmp_path, world):
    ws = _scene(world, tmp_path)
    out = ws.run_in_process("import", "48407", "--dry-run")
    assert out.returncode == 0, out.stderr
    assert "source check passed (pyflakes" in out.stdout and f"not checked: {ENVS}" in out.stdout, out.stdout


def test_selecting_a_using_hunk_alone_is_refused_naming_what_it_needs(tmp_path, world):
    ws = _scene(world, tmp_path)
    plan = json.loads(ws.run_in_process("import", "48407", "--dry-run", "--json").stdout)
    imports, signature, use = [h for h in plan["hunks"] if h["path"] == IDX]
    before = sorted(p.name for p in (ws.root / "patches").iterdir()) if (ws.root / "patches").is_dir() else []
    out = ws.run_in_process("import", "48407", "--hunk", use["id"])
    assert out.returncode != 0
    assert imports["id"] in out.stderr and signature["id"] in out.stderr, out.stderr
    assert (sorted(p.name for p in (ws.root / "patches").iterdir()) if (ws.root / "patches").is_dir() else []) == before


def test_the_check_counts_only_what_the_patch_made_worse():
    from porttrack.diff.pycheck import check_sources

    check = check_sources(
        {"a.py": b"import os\nprint(missing)\n", "b.py": b"def f(:\n", "gone.py": b"x = 1\n"},
        {"a.py": b"import os\nprint(missing)\nx = Mapping\n", "b.py": b"def g(:\n", "new.py": b"y = z\n",
         "gone.py": None, "kernel.cu": b"__global__ void k() {}\n"})
    assert [(f.kind, f.path, f.detail) for f in check.findings] == [
        ("undefined-name", "a.py", "Mapping"),  # `missing` was undefined before: not news
        ("not-checked", "kernel.cu", "not Python: no analyser for it"),
        ("undefined-name", "new.py", "z"),
    ]  # b.py did not compile before either: not made worse; gone.py deleted
    assert not check.ok and check.checked == ("a.py", "b.py", "new.py")
    broken = check_sources({"a.py": b"x = 1\n"}, {"a.py": b"def f(:\n"})
    assert [f.kind for f in broken.findings] == ["does-not-compile"] and "no longer compiles" in broken.text
    assert check_sources({"a.py": b"x = 1\n"}, {"a.py": b"x = 2\n"}).ok
