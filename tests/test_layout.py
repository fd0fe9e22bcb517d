"""This repository is its first user's tracking workspace (DESIGN, "Workspace layout"): its top
level has what `porttrack init` writes for the queue and the templates, byte for byte, and
porttrack reads them there as in any workspace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from porttrack.bootstrap.init import Options, workspace_files
from porttrack.workspace.files import Workspace

ROOT = Path(__file__).resolve().parents[1]


def test_the_top_level_has_the_queue_and_templates_init_writes():
    written = dict(workspace_files(Options(upstream="vllm-project/vllm", fork="randomvariable/vllm")))
    for path in ("patches/series", "patches/manifest.json", "patches/evidence/.gitkeep", "templates/README.md"):
        assert (ROOT / path).is_file(), f"{path} is missing from the repository's top level"
        assert (ROOT / path).read_bytes() == written[path], f"{path} differs from what `porttrack init` writes"
    ws = Workspace(ROOT)
    assert ws.patches_dir == ROOT / "patches" and ws.templates_dir == ROOT / "templates"


def test_porttrack_reads_this_repositorys_queue_and_recorded_state():
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GH_TOKEN", "PORTTRACK_WORKSPACE", "PORTTRACK_FORK")}
    env.update(PORTTRACK_NO_GH_CLI="1", GITHUB_API_URL="http://127.0.0.1:9")  # nothing may be asked
    queue = subprocess.run([sys.executable, "-m", "porttrack", "--workspace", str(ROOT), "queue", "--json"],
                           capture_output=True, text=True, env=env, timeout=60)
    assert queue.returncode == 0, queue.stderr
    assert json.loads(queue.stdout)["patches"] == []
    status = subprocess.run([sys.executable, "-m", "porttrack", "--workspace", str(ROOT), "status", "--offline"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert status.returncode == 0, status.stderr
    assert "OFFLINE" in status.stdout
