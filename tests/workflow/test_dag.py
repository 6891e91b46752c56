"""Snakemake itself runs the DAG, in a temporary --directory on a copy of the workflow."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from soaklab.schemas import schema_errors
from tests.conftest import REPO

pytestmark = pytest.mark.snakemake
WORKFLOW_FILES = ["Snakefile", "workflow", "config", "profiles", "src/soaklab"]


@pytest.fixture
def project(tmp_path, pinned_wheel):
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
    overlay.write_text(yaml.safe_dump({"assets": {"source": str(pinned_wheel)}}))
    work = tmp_path / "work"
    work.mkdir()
    return root, work, overlay


def snakemake(project, *args: str, overlays: tuple[Path, ...] = ()) -> subprocess.CompletedProcess:
    """Run Snakemake; overlays follow the local one (a second --configfile flag would replace the first)."""
    root, work, overlay = project
    cmd = [sys.executable, "-m", "snakemake", *args, "-s", str(root / "Snakefile"), "--directory", str(work),
           "--cores", "1", "--configfile", str(overlay), *map(str, overlays)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def planned(project) -> dict[str, int]:
    proc = snakemake(project, "soak", "-n", "--quiet", "rules")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^([a-z_]+)\s+(\d+)$", proc.stdout, re.M)
            if m.group(1) != "total"}


def test_dry_run_lists_the_chain(project):
    assert planned(project) == {"prefetch_assets": 1, "mps_start": 1, "resolve_config": 1, "soak": 1}


def test_gpu_overlay_plans_the_gpu_run_only(project):
    proc = snakemake(project, "soak", "-n", overlays=(REPO / "config/gpu.yaml",))
    assert proc.returncode == 0, proc.stderr
    outputs = set(re.findall(r"output: (\S+)", proc.stdout))
    assert "results/gpu/run_config.json" in outputs and "results/gpu/mps.json" in outputs
    assert not any("results/cpu" in o for o in outputs)


def test_run_then_edit_config_code_reruns_resolve_config_only(project):
    root, work, _ = project
    proc = snakemake(project, "soak")
    assert proc.returncode == 0, proc.stderr
    run_config = json.loads((work / "results/cpu/run_config.json").read_text())
    assert schema_errors("run_config", run_config) == []
    assert run_config["config"]["training"]["log_dir"] == "results/cpu/train"
    assert run_config["run"]["assets"]["motion"].endswith("synthetic_dance.npz")
    for rule in ("prefetch_assets", "mps_start", "resolve_config"):
        log = work / ("logs/assets" if rule == "prefetch_assets" else "logs/cpu") / f"{rule}.log"
        assert log.is_file(), rule
        bench = next((work / "benchmarks/rules").rglob(f"{rule}.tsv"))
        assert bench.is_file()
    assert "devices: learner cpu -> cpu" in (work / "logs/cpu/resolve_config.log").read_text()

    assert planned(project) == {}
    with open(root / "src/soaklab/config/keys.py", "a") as fh:
        fh.write("\n# an edit\n")
    assert planned(project) == {"resolve_config": 1, "soak": 1}


def test_invalid_override_fails_the_dag_with_a_clear_log(project, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"runs": {"cpu": {"overrides": {"training.inference_slot_capacity": 1.0}}}}))
    proc = snakemake(project, "soak", overlays=(bad,))
    assert proc.returncode != 0
    root, work, _ = project
    log = (work / "logs/cpu/resolve_config.log").read_text()
    assert "training.inference_slot_capacity=1.0 (float)" in log
    assert not (work / "results/cpu/run_config.json").exists()
    assert (work / "results/assets/manifest.json").is_file(), "upstream results are kept"


@pytest.mark.parametrize(("overlay", "words"), [
    ({"soak_runs": ["nope"]}, "soak_runs: 'nope' is not defined"),
    ({"runs": {"cpu": {"overrides": {"training.log_dir": "x"}}}}, "runs.cpu.overrides.training.log_dir"),
    ({"runs": {"cpu": {"algo": "ppo"}}}, "ppo"),
])
def test_invalid_workflow_config_is_refused_at_load(project, tmp_path, overlay, words):
    path = tmp_path / "overlay.yaml"
    path.write_text(yaml.safe_dump(overlay))
    proc = snakemake(project, "soak", "-n", overlays=(path,))
    assert proc.returncode != 0
    assert words in proc.stderr + proc.stdout
