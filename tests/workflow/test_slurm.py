"""The sweep through Snakemake's Slurm executor against a real single-node Slurm (munge, slurmdbd with
MariaDB, slurmctld, slurmd from the distribution's packages; scripts/slurm/single-node.sh).

`.ci/run` installs the packages; the fixture starts the daemons in a temporary directory and stops
them after. Where it cannot run (not root, packages missing, a host Slurm already configured) it
skips and says why.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from soaklab.errors import REQUEUE_EXIT
from tests.conftest import REPO
from tests.rl.conftest import assert_same_run
from tests.workflow.conftest import snakemake_command

pytestmark = pytest.mark.snakemake
SCRIPT = REPO / "scripts/slurm/single-node.sh"
DAEMONS = ("munged", "slurmctld", "slurmd", "slurmdbd", "mariadbd", "sbatch", "sacct")
# The soak's group job (resolve_config, mps_start and train_soak of one run, on one node), as the
# executor names it in the job's comment.
GROUP_COMMENT = "rule_soak_node_mps_start_resolve_config_train_soak"
# --slurm-no-account: the test cluster has no accounts to choose from (a real one names its
# slurm_account in default-resources); the first status check after 2 s, not the default 40.
SLURM_FLAGS = ("--profile", str(REPO / "profiles/slurm"), "--slurm-no-account",
               "--slurm-init-seconds-before-status-checks", "2")
# One SAC cart-pole run long enough to be requeued mid-run (about 130 iterations a second on an idle
# 2-core machine, progress.json rewritten every 2 s: the requeue lands some 300-450 iterations past
# REQUEUE_PAST, which leaves 8 s of margin idle and more under load, where iterations slow down).
# Cart-pole: Slurm's requeue and the resume are the point; G1's resume is tests/rl/test_resume.py's.
# Its periodic checkpoints come late: the one the requeue resumes from is the one the trainer writes
# at the signal.
LONG_ITERATIONS = 1500
RUN = "preempted-sac-cartpole_swingup-long"
LONG = {"sweeps": {"preempted": {"base": "cpu", "matrix": {"algo": ["sac"], "task": ["cartpole_swingup"]},
                                 "override_sets": {"long": {"algo.max_iterations": LONG_ITERATIONS,
                                                            "algo.save_interval": 1200}}}}}
REQUEUE_PAST = 25


def _live(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
            alive.append(pid)
        except ProcessLookupError:
            pass
    return alive


@pytest.fixture(scope="module")
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
    with pytest.MonkeyPatch.context() as patch:
        # The cluster's config for this module's processes (the script, Snakemake and its executor,
        # squeue, sacct, scontrol): the one `up` links, not the empty one tests/conftest.py gives the
        # suite's other Snakemake starts.
        if os.environ.get("SLURM_CONF") == os.devnull:
            patch.delenv("SLURM_CONF")
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


def sacct_states(job_id: str) -> list[str]:
    """Every start of one job, oldest first (--duplicates: a requeued job's earlier runs too)."""
    out = subprocess.run(["sacct", "-X", "--duplicates", "--parsable2", "--noheader", "--format=State", "-j", job_id],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    return out.split()


def test_a_sweep_goes_through_sbatch_and_its_requeued_soak_job_ends_as_the_unbroken_run(project, slurm, tmp_path):
    """A sweep through the Slurm executor: every job but the localrules is submitted with sbatch and
    ends COMPLETED in the scheduler's own accounting. Its soak job is requeued mid-run (`scontrol
    requeue`): Slurm sends SIGTERM to every process of the job; the trainer finishes its iteration,
    checkpoints it and exits REQUEUE_EXIT; the soak keeps the run. The job's second start (sbatch
    --requeue, from the profile) resumes it, the sweep completes, and the run's Train/ and Loss/
    series and final weights equal, bit for bit, those of the same run config trained without a
    break. (One sweep for both: on the 2-core CI machine each Slurm sweep costs about 100 s.)"""
    _, work, _ = project
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump(LONG, sort_keys=False))
    cmd, env = snakemake_command(project, "sweep", *SLURM_FLAGS, overlays=(sweep,), cores=None)
    log = tmp_path / "snakemake.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
    run_dir = work / "results" / RUN / "train"
    unbroken = tmp_path / "unbroken"
    ref = None
    try:
        deadline = time.monotonic() + 600
        while _iteration(run_dir) < REQUEUE_PAST:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-5000:]
            time.sleep(0.2)
        running = subprocess.run(["squeue", "--noheader", "--states=RUNNING", "--format=%i"], capture_output=True,
                                 text=True, check=True, timeout=60).stdout.split()
        assert len(running) == 1, running  # the soak's group job; the metrics and validation wait for it
        # The same run config trained without a break, beside the sweep while Slurm requeues and
        # restarts the job (the soak keeps the run dir aside meanwhile, so from a copy of its config).
        shutil.copyfile(run_dir / "run_config.json", tmp_path / "run_config.json")
        subprocess.run(["scontrol", "requeue", running[0]], check=True, timeout=60)
        with open(tmp_path / "unbroken.log", "w") as ref_log:
            ref = subprocess.Popen([sys.executable, "-m", "soaklab", "train", "--run-config",
                                    str(tmp_path / "run_config.json"), f"training.log_dir={unbroken}",
                                    "--skip-post-training"], env=env, cwd=work, stdout=ref_log,
                                   stderr=subprocess.STDOUT)
        # Slurm holds a requeued job for two minutes (its BeginTime); the test does not wait them out.
        while _state(running[0]) != "PENDING":
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-5000:]
            time.sleep(0.5)
        subprocess.run(["scontrol", "update", f"JobId={running[0]}", "StartTime=now"], check=True, timeout=60)
        assert proc.wait(timeout=900) == 0, log.read_text()[-5000:]
        assert ref.wait(timeout=600) == 0, (tmp_path / "unbroken.log").read_text()[-5000:]
    finally:
        for started in (proc, ref):
            if started is not None and started.poll() is None:
                started.kill()
                started.wait()
    out = log.read_text()
    assert sacct_states(running[0]) == ["REQUEUED", "COMPLETED"], out[-5000:]

    run_id = re.search(r"SLURM run ID: (\S+)", out).group(1)
    submitted = re.findall(r"submitted with SLURM jobid (\d+)", out)
    assert len(submitted) == 3, out[-5000:]  # the soak's group job, extract_metrics, validate_artifacts
    accounted = sacct(submitted)
    assert set(accounted) == set(submitted), "every submitted job is in the scheduler's accounting"
    for job_id, record in accounted.items():
        assert record["name"] == run_id and record["state"] == "COMPLETED", (job_id, record)
    # The executor writes the rule (and a plain job's wildcards) into each job's comment.
    comments = sorted(r["comment"] for r in accounted.values())
    assert comments == sorted([f"rule_{rule}_wildcards_{RUN}"
                               for rule in ("extract_metrics", "validate_artifacts")] + [GROUP_COMMENT]), comments
    # The assets pull and the table stay on this host (localrules).
    assert "localrule prefetch_assets" in out and "localrule sweep_summary" in out

    first = json.loads((run_dir / "soak_segments/soak-0.json").read_text())
    assert first["shutdown"]["trainer_returncode"] == REQUEUE_EXIT, first["failure_reason"]
    summary = json.loads((run_dir / "run_summary.json").read_text())
    (first_segment, second_segment) = summary["segments"]
    assert first_segment["start_iteration"] == 0 and first_segment["end_iteration"] >= REQUEUE_PAST
    assert second_segment["start_iteration"] == first_segment["end_iteration"]
    assert second_segment["end_iteration"] == LONG_ITERATIONS and summary["status"] == "completed"
    table = pd.read_csv(work / "results/sweeps/preempted/summary.csv")
    assert list(table["status"]) == ["passed"]
    # Each start resolves the run on its host again (memory figures move); the run config is one.
    assert (json.loads((tmp_path / "run_config.json").read_text())["config_hash"]
            == json.loads((run_dir / "run_config.json").read_text())["config_hash"])
    assert_same_run(run_dir, unbroken)


def _state(job_id: str) -> str:
    return subprocess.run(["squeue", "--noheader", "--format=%T", "-j", job_id], capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()


def _iteration(run_dir: Path) -> int:
    try:
        return int(json.loads((run_dir / "progress.json").read_text())["iteration"])
    except (OSError, ValueError, KeyError):
        return 0
