"""Issue 31, item 8: porttrack.jobs.vllm asks the Python that the `--vllm` command runs about vLLM's
interface, not the Python porttrack itself runs in, and refuses when the two disagree."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from porttrack.common.errors import ConfigError
from porttrack.jobs import vllm as job
from testing import vllm_standin


def test_the_python_of_the_vllm_command_is_its_shebang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    direct = tmp_path / "vllm"
    direct.write_text("#!/opt/other-venv/bin/python3.12\nprint('x')\n")
    direct.chmod(0o755)
    via_env = tmp_path / "vllm-env"
    via_env.write_text("#!/usr/bin/env python3\nprint('x')\n")
    via_env.chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path), os.environ.get("PATH", "")]))
    assert job.vllm_python("vllm --flag") == "/opt/other-venv/bin/python3.12"
    import shutil

    assert job.vllm_python("vllm-env") == shutil.which("python3")
    assert job.vllm_python("no-such-command-here") == sys.executable


def test_the_interface_is_asked_of_the_vllm_that_runs_and_a_mismatch_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = vllm_standin.install(tmp_path / "bin")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    offered = job.vllm_interface(job.vllm_python("vllm"))
    assert offered.version == "0.33.0+standin" and offered.engine_argument
    other = tmp_path / "bin" / "vllm-old"
    other.write_text(f"#!{sys.executable}\nprint('0.10.1')\n")
    other.chmod(0o755)
    version = job.vllm_version(str(other))
    assert version == "0.10.1"
    assert job.same_vllm("vllm", job.vllm_version("vllm"), offered) is offered
    with pytest.raises(ConfigError, match="which vLLM runs is unclear"):
        job.same_vllm(str(other), version, job.vllm_interface(job.vllm_python(str(other))))
