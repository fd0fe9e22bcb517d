"""Shell completion: the scripts click generates for bash, zsh and fish, and completions of PR
numbers, patch names, targets and proofs from the workspace, asked for as the shells ask
(`_PORTTRACK_COMPLETE=bash_complete` with COMP_WORDS / COMP_CWORD, in a separate process). A
broken workspace completes nothing, silently: never a traceback in the user's prompt.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from porttrack.cli import completion
from porttrack.workspace.files import Workspace
from testing.workspace import make_workspace, track


@pytest.fixture
def tw(tmp_path: Path):
    return make_workspace(tmp_path / "ws", {
        "fused-ar-graph": track([46849], "Fused AR speculator graph"),
        "sparse-indexer-skip": track([48407, 48410], "Sparse indexer skip"),
    })


def complete(tw, words: str, cword: int, *, shell: str = "bash", cwd: Path | None = None, **env: str | None):
    """What `porttrack` answers a shell's completion request for the command line `words`."""
    extra = {"COMP_WORDS": words, "COMP_CWORD": str(cword), "_PORTTRACK_COMPLETE": f"{shell}_complete", **env}
    return subprocess.run([sys.executable, "-m", "porttrack"], cwd=cwd or tw.root, env=tw.env(**extra),
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("shell, marker", [
    ("bash", "complete -o nosort -F _porttrack_completion porttrack"),
    ("zsh", "#compdef porttrack"),
    ("fish", "complete --no-files --command porttrack"),
])
def test_each_shell_gets_a_completion_script(tw, shell, marker):
    out = subprocess.run([sys.executable, "-m", "porttrack"], cwd=tw.root, env=tw.env(_PORTTRACK_COMPLETE=f"{shell}_source"),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert marker in out.stdout and "_PORTTRACK_COMPLETE" in out.stdout, out.stdout


def test_bash_completes_a_pr_number_from_tracks_yaml(tw):
    out = complete(tw, "porttrack verify-converged 484", 2)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert out.stdout.splitlines() == ["plain,48407", "plain,48410"]


def test_zsh_shows_which_track_a_pr_belongs_to(tw):
    out = complete(tw, "porttrack import 468", 2, shell="zsh")
    assert out.stdout.splitlines() == ["plain", "46849", "fused-ar-graph: Fused AR speculator graph"]


def test_the_workspace_flag_is_honoured_from_elsewhere(tw, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = complete(tw, f"porttrack -C {tw.root} refresh ''", 4, cwd=elsewhere, PORTTRACK_WORKSPACE=None)
    assert out.stdout.splitlines() == ["plain,46849", "plain,48407", "plain,48410"]


def test_patch_names_target_and_proof_ids_complete(tw):
    import json

    (tw.root / "patches").mkdir()
    (tw.root / "patches" / "manifest.json").write_text(json.dumps({"schema": "x"}))  # not a queue: completes nothing
    assert complete(tw, "porttrack drop 00", 2).stdout.strip() == ""
    out = complete(tw, "porttrack gate run --target s", 4)
    assert out.stdout.splitlines() == ["plain,sm_121a"]
    assert completion.candidates("target", "", str(tw.root)) == [("sm_121a", "NVIDIA GB10 (DGX Spark)"), ("gfx1151", "AMD Strix Halo")]
    assert completion.candidates("track", "f", str(tw.root)) == [("fused-ar-graph", "Fused AR speculator graph")]


def test_patch_names_come_from_the_queue(world, tmp_path):
    """A real import puts a patch in the queue; `drop <Tab>` offers its name."""
    world.open_pr(46849, {"vllm/spec.py": "fused = True\n"}, title="[MRV2][Spec] Fuse AR speculator decodes")
    tw = make_workspace(tmp_path / "ws", {"fused-ar-graph": track([46849])}, api_url=world.fake.base_url,
                        fork=world.fork, token=world.token)
    imported = tw.run_in_process("import", "46849")
    assert imported.returncode == 0, imported.stderr
    [name] = [n for n, _ in completion.patch_names(Workspace(tw.root))]
    out = complete(tw, "porttrack drop ''", 2)
    assert out.stdout.splitlines() == [f"plain,{name}"] and "46849" in name


@pytest.mark.parametrize("breakage", ["not: [valid", "tracks: 7\n", None])
def test_a_broken_workspace_completes_nothing_and_says_nothing(tw, breakage):
    if breakage is None:
        tw.tracks_file.unlink()
    else:
        tw.tracks_file.write_text(breakage)
    for line in ("porttrack verify-converged ''", "porttrack drop ''", "porttrack gate run --proof ''"):
        out = complete(tw, line, len(line.split()) - 1)
        assert (out.returncode, out.stdout.strip(), out.stderr) == (0, "", ""), line  # click ends an empty answer with a newline
