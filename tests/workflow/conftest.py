"""Snakemake itself on a copy of the workflow: the project fixture and the command that runs it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

# The default CPU run, sized for a test: the DAG and its artifacts are under test here, not learning.
TINY = {"runs": {"cpu": {
    "overrides": {"algo.num_envs": 8, "algo.max_iterations": 30, "algo.batch_size": 64, "algo.learning_starts": 5,
                  "algo.actor_hidden": 32, "algo.critic_hidden": 32, "algo.num_blocks": 1,
                  "algo.replay_buffer_size": 2000, "algo.save_interval": 10, "env.num_threads": 1},
    # A second of grace after the trainer ends, not config.yaml's five: every DAG soak here sleeps it
    # (tests/soak/conftest.py's QUICK_BUDGET gives its soaks one too).
    "soak": {"min_duration_seconds": 1, "sample_interval_seconds": 0.5, "stale_progress_seconds": 60,
             "post_shutdown_grace_seconds": 1},
}}}
CHAIN = ("prefetch_assets", "resolve_config", "mps_start", "train_soak", "extract_metrics", "validate_artifacts")
WORKFLOW_FILES = ["Snakefile", "workflow", "config", "profiles", "src/soaklab"]


@pytest.fixture
def project(tmp_path, pinned_wheel, clip_wheel):
    """A copy of the workflow (so editing its sources is safe) and an empty work directory."""
    root = tmp_path / "project"
    for item in WORKFLOW_FILES:
        src, dst = REPO / item, root / item
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
    overlay = tmp_path / "local.yaml"
    overlay.write_text(yaml.safe_dump({"assets": {"source": str(pinned_wheel), "clip_wheel": str(clip_wheel)}, **TINY}))
    work = tmp_path / "work"
    work.mkdir()
    return root, work, overlay


def snakemake_command(project, *args: str, overlays: tuple[Path, ...] = (), fault: str | None = None,
                      cores: int | None = 1) -> tuple[list[str], dict[str, str]]:
    """Snakemake's command line and environment; overlays follow the local one (a second
    --configfile flag would replace the first). cores=None leaves --cores out (a cluster executor
    has none)."""
    root, work, overlay = project
    cmd = [sys.executable, "-m", "snakemake", *args, "-s", str(root / "Snakefile"), "--directory", str(work),
           *(["--cores", str(cores)] if cores is not None else []), "--configfile", str(overlay), *map(str, overlays)]
    env = dict(os.environ, SOAKLAB_TORCH_COMPILE="0")
    env.pop("SOAKLAB_FAULT", None)
    if fault:
        env["SOAKLAB_FAULT"] = fault
    return cmd, env


def snakemake(project, *args: str, overlays: tuple[Path, ...] = (), fault: str | None = None, cores: int | None = 1,
              timeout: float = 600) -> subprocess.CompletedProcess:
    """Run Snakemake to its end (snakemake_command)."""
    cmd, env = snakemake_command(project, *args, overlays=overlays, fault=fault, cores=cores)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def planned(project, *args: str, target: str = "soak", overlays: tuple[Path, ...] = ()) -> dict[str, int]:
    """The jobs a dry run of the target plans, by rule."""
    proc = snakemake(project, target, "-n", "--quiet", "rules", *args, overlays=overlays)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return job_counts(proc.stdout)


def ran(stderr: str) -> dict[str, int]:
    """The jobs a real run planned, by rule: the job stats Snakemake prints (on stderr) before it
    starts any. What a dry run before it would have planned, without a Snakemake start of its own."""
    stats = stderr.partition("Job stats:\n")[2]
    assert stats, "Snakemake printed no job stats (nothing to be done?):\n" + stderr[-3000:]
    return job_counts(stats.partition("\n\n")[0])


def job_counts(text: str) -> dict[str, int]:
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^([a-z_]+)\s+(\d+)$", text, re.M)
            if m.group(1) != "total"}


