"""The sweep through Snakemake's Slurm executor against a real single-node Slurm (munge, slurmdbd with
MariaDB, slurmctld, slurmd from the distribution's packages; scripts/slurm/single-node.sh).

`.ci/run` installs the packages; the fixture starts the daemons in a temporary directory and stops
them after. Where it cannot run (not root, packages missing, a host Slurm already configured) it
skips and says why.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.conftest import REPO
from tests.workflow.conftest import snakemake

pytestmark = pytest.mark.snakemake
SCRIPT = REPO / "scripts/slurm/single-node.sh"
DAEMONS = ("munged", "slurmctld", "slurmd", "slurmdbd", "mariadbd", "sbatch", "sacct")
SWEEP = {"sweeps": {"pair": {"base": "cpu", "matrix": {"algo": ["sac", "flashsac"]}}}}
# The soak's group job (resolve_config, mps_start and train_soak of one run, on one node), as the
# executor names it in the job's comment.
GROUP_COMMENT = "rule_soak_node_mps_start_resolve_config_train_soak"


def _live(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
            alive.append(pid)
        except ProcessLookupError:
            pass
    return alive


@pytest.fixture
def slurm(tmp_path_factory):
    """A running single-node Slurm; yields its directory. Stops every daemon it started."""
    if os.geteuid() != 0:
        pytest.skip("a single-node Slurm needs root (munged, slurmd)")
    missing = [d for d in DAEMONS if shutil.which(d) is None]
    if missing:
        pytest.skip(f"Slurm packages not installed ({', '.join(missing)} missing): "
                    "run scripts/slurm/single-node.sh install")
    if Path("/etc/slurm/slurm.conf").exists():
        pytest.skip("/etc/slurm/slurm.conf exists: this host has a Slurm of its own")
    home = tmp_path_factory.mktemp("slurm")
    up = subprocess.run(["bash", str(SCRIPT), "up", str(home)], capture_output=True, text=True, timeout=300)
    pids = [int(p.read_text()) for p in (home / "run").glob("*.pid")]
    try:
        assert up.returncode == 0, up.stderr + "".join(p.read_text()[-2000:] for p in (home / "log").glob("*.log"))
        yield home
    finally:
        subprocess.run(["bash", str(SCRIPT), "down", str(home)], capture_output=True, text=True, timeout=120)
        assert _live(pids) == [], "a Slurm daemon outlived `down`"
        assert not Path("/etc/slurm/slurm.conf").exists()


def sacct(job_ids: list[str]) -> dict[str, dict[str, str]]:
    """The scheduler's own accounting (slurmdbd) of these jobs."""
    out = subprocess.run(["sacct", "-X", "--parsable2", "--noheader", "--format=JobIdRaw,JobName,State,Comment",
                          "-j", ",".join(job_ids)], capture_output=True, text=True, check=True, timeout=60).stdout
    rows = [line.split("|") for line in out.splitlines() if line]
    return {r[0]: {"name": r[1], "state": r[2], "comment": r[3]} for r in rows}


def test_a_sweep_runs_every_job_through_sbatch(project, slurm, tmp_path):
    _, work, _ = project
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump(SWEEP, sort_keys=False))
    # --slurm-no-account: the test cluster has no accounts to choose from (a real one names its
    # slurm_account in default-resources); the first status check after 2 s, not the default 40.
    proc = snakemake(project, "sweep", "--profile", str(REPO / "profiles/slurm"), "--slurm-no-account",
                     "--slurm-init-seconds-before-status-checks", "2", overlays=(sweep,), cores=None, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]

    run_id = re.search(r"SLURM run ID: (\S+)", out).group(1)
    submitted = re.findall(r"submitted with SLURM jobid (\d+)", out)
    assert len(submitted) == 6, out[-5000:]  # per run: the soak's group job, extract_metrics, validate_artifacts
    accounted = sacct(submitted)
    assert set(accounted) == set(submitted), "every submitted job is in the scheduler's accounting"
    for job_id, record in accounted.items():
        assert record["name"] == run_id and record["state"] == "COMPLETED", (job_id, record)
    # The executor writes the rule (and a plain job's wildcards) into each job's comment.
    comments = sorted(r["comment"] for r in accounted.values())
    assert comments == sorted([f"rule_{rule}_wildcards_{run}" for rule in ("extract_metrics", "validate_artifacts")
                               for run in ("pair-sac", "pair-flashsac")] + [GROUP_COMMENT] * 2), comments
    # The assets pull and the table stay on this host (localrules).
    assert "localrule prefetch_assets" in out and "localrule sweep_summary" in out

    table = pd.read_csv(work / "results/sweeps/pair/summary.csv")
    assert list(table["status"]) == ["passed", "passed"] and list(table["algo"]) == ["sac", "flashsac"]
