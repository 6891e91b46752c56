"""Sweeps through the real DAG: a sweep's runs, one failing entry under --keep-going, the table."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.conftest import REPO
from tests.workflow.conftest import CHAIN, planned, ran, snakemake

pytestmark = pytest.mark.snakemake
# Two points of one learner: the base run as it is, and one whose batch size the contract rejects.
SWEEP = {"sweeps": {"mini": {"base": "cpu", "matrix": {"algo": ["sac"]},
                             "override_sets": {"ok": {}, "bad": {"algo.batch_size": 0}}}}}
BRANCH = {"resolve_config": 1, "mps_start": 1, "train_soak": 1, "extract_metrics": 1, "validate_artifacts": 1}


def overlay(tmp_path: Path, name: str, content: dict) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(content, sort_keys=False))  # axis and set order is sweep order
    return path


def test_a_sweep_leaves_the_soak_target_unchanged(project, tmp_path):
    """(What the sweep target plans: the job stats of the sweep run below.)"""
    sweep = overlay(tmp_path, "sweep", SWEEP)
    assert planned(project, overlays=(sweep,)) == {**dict.fromkeys(CHAIN, 1), "soak": 1}


def test_a_bad_entry_fails_only_its_branch_and_the_table_says_why(project, tmp_path):
    _, work, _ = project
    sweep = overlay(tmp_path, "sweep", SWEEP)
    proc = snakemake(project, "sweep", "--keep-going", overlays=(sweep,))
    assert proc.returncode != 0, "a failed branch fails the invocation"
    # Both points' branches, the one assets pull and the table were planned (the bad one fails in it).
    assert ran(proc.stderr) == {"prefetch_assets": 1, **{rule: 2 for rule in BRANCH}, "sweep_summary": 1, "sweep": 1}
    out = proc.stdout + proc.stderr
    ok, bad = work / "results/mini-sac-ok", work / "results/mini-sac-bad"
    assert json.loads((ok / "validation.json").read_text())["status"] == "passed"
    assert not (bad / "run_config.json").exists() and not (bad / "soak.json").exists()
    assert "algo.batch_size=0" in (work / "logs/mini-sac-bad/resolve_config.log").read_text()

    table = pd.read_csv(work / "results/sweeps/mini/summary.csv").set_index("run")
    assert list(table.index) == ["mini-sac-ok", "mini-sac-bad"]
    passed = table.loc["mini-sac-ok", ["status", "classification", "checks"]].tolist()
    assert passed == ["passed", "clean_exit", "28/28"]
    assert table.loc["mini-sac-ok", "env_steps_per_s"] > 0
    assert table.loc["mini-sac-bad", ["status", "classification"]].tolist() == ["failed", "config_rejected"]
    assert "algo.batch_size=0" in table.loc["mini-sac-bad", "reason"]
    assert (work / "results/sweeps/mini/summary.png").stat().st_size > 0
    assert "run mini-sac-bad: FAILED (config_rejected)" in out and "run mini-sac-ok: PASSED" in out

    # Mend the entry: only its branch and the table are planned; the passed run stays. (Not run: a
    # passing branch and its table are what the run above made; another soak would cost CI 40 s.)
    mended = overlay(tmp_path, "mended", {"sweeps": {"mini": {"override_sets": {"bad": {"algo.batch_size": 32}}}}})
    assert planned(project, target="sweep", overlays=(sweep, mended)) == {**BRANCH, "sweep_summary": 1, "sweep": 1}


@pytest.mark.parametrize(("content", "words"), [
    ({"sweeps": {"s": {"base": "cpu", "matrix": {"algo": ["ppo"]}}}},
     "soaklab: error: sweeps.s.matrix.algo: 'ppo' is not in the catalogue (one of sac, flashsac;"),
    ({"runs": {"cpu": {"sim": "bullet"}}}, "soaklab: error: runs.cpu.sim: 'bullet' is not in the catalogue"),
    ({"sweeps": {"s": {"base": "nope", "matrix": {"algo": ["sac"]}}}}, "sweeps.s.base: 'nope' is not defined"),
    ({"sweeps": {"s": {"base": "cpu", "matrix": {}}}}, "should be non-empty"),
    ({"sweeps": {"s": {"base": "cpu", "matrix": {"training.log_dir": ["x"]}}}},
     "runs.s-log_dirx.overrides.training.log_dir: not allowed"),
    ({"runs": {"sweeps": yaml.safe_load((REPO / "config/config.yaml").read_text())["runs"]["cpu"]}},
     "runs.sweeps: the name is taken"),
])
def test_a_bad_sweep_is_refused_at_load(project, tmp_path, content, words):
    proc = snakemake(project, "sweep", "-n", overlays=(overlay(tmp_path, "bad", content),))
    assert proc.returncode != 0
    assert words in proc.stderr + proc.stdout
