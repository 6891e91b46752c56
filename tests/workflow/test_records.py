"""Records in the real DAG: a bad spec or an unknown record is one exit-2 line before any job runs;
record runs plan through the usual rules into the comparison."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest
import yaml

from tests.conftest import REPO
from tests.workflow.conftest import ran, snakemake

pytestmark = pytest.mark.snakemake


def _with_record(project, name="ci-dag"):
    root, _, _ = project
    shutil.copytree(REPO / "records" / name, root / "records" / name)
    return root / "records" / name


def test_a_malformed_record_is_one_line_and_exit_2_before_anything_runs(project):
    folder = _with_record(project)
    spec = yaml.safe_load((folder / "record.yaml").read_text())
    spec["compare"]["figures"][0]["band"] = [2.0, 3.0]
    (folder / "record.yaml").write_text(yaml.safe_dump(spec))
    proc = snakemake(project, "reproduce")
    assert proc.returncode == 2
    assert "records/ci-dag/record.yaml: compare.figures[0].band" in proc.stderr
    assert not (project[1] / "results").exists()


@pytest.mark.parametrize(("numerics", "words"), [
    ({"cpu_capability": "avx1024", "threads": 2, "task_terms": "inductor"},
     "records/ci-dag/record.yaml: numerics.cpu_capability: 'avx1024' is not an x86-64 capability"),
    ({"cpu_capability": "avx2", "threads": 0, "task_terms": "inductor"},
     "records/ci-dag/record.yaml: numerics.threads: 0: expected an integer in [1, 256]"),
])
def test_a_record_whose_profile_is_unknown_is_one_line_and_exit_2_before_anything_runs(project, numerics, words):
    folder = _with_record(project)
    spec = yaml.safe_load((folder / "record.yaml").read_text())
    spec["numerics"] = numerics
    (folder / "record.yaml").write_text(yaml.safe_dump(spec))
    proc = snakemake(project, "reproduce")
    assert proc.returncode == 2 and words in proc.stderr
    # one error line, beside Snakemake's own preamble
    assert len([line for line in proc.stderr.splitlines() if "error" in line]) == 1, proc.stderr
    assert not (project[1] / "results").exists()


def test_an_unknown_record_is_refused(project):
    _with_record(project)
    proc = snakemake(project, "reproduce", "--config", "reproduce=nope")
    assert proc.returncode == 2 and "reproduce=nope: no record 'nope'" in proc.stderr


def _digest(folder) -> dict[str, str]:
    import hashlib

    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_second_reproduce_is_refused_and_a_failed_one_is_incomplete_and_leaves_the_record(project):
    """A reproduce plans the record's run through the usual rules into the comparison and the verdict.
    Two reproduces of one record at once: Snakemake's lock on the working directory (or the first
    one's in-flight job) refuses the second. A reproduction whose run fails: the comparison is marked
    incomplete, naming the run; the record's files are byte for byte what they were."""
    import subprocess
    import time

    folder = _with_record(project)
    # Eager task terms: the run is killed at its fifth step, and inductor's compile of the terms
    # before it (CI's own reproduce of ci-dag compiles them) would be most of this test's time.
    spec = yaml.safe_load((folder / "record.yaml").read_text())
    spec["numerics"]["task_terms"] = "eager"
    (folder / "record.yaml").write_text(yaml.safe_dump(spec))
    before = _digest(folder)
    root, work, overlay = project
    first = subprocess.Popen(
        [sys.executable, "-m", "snakemake", "reproduce", "-s", str(root / "Snakefile"), "--directory", str(work),
         "--cores", "1", "--configfile", str(overlay)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, SOAKLAB_TORCH_COMPILE="0", SOAKLAB_FAULT="kill_collector@5"))
    try:
        locks = work / ".snakemake" / "locks"
        deadline = time.monotonic() + 300  # a bound for a stuck start, not a speed claim
        while not (locks.is_dir() and any(locks.iterdir())):
            assert first.poll() is None, first.stderr.read()
            assert time.monotonic() < deadline, "the first reproduce never took its lock"
            time.sleep(0.2)
        second = snakemake(project, "reproduce")
        # Refused by the lock, or, while the first has a job in flight, by that job's incomplete
        # marker, which Snakemake checks first: either way before any job of its own starts.
        assert second.returncode != 0, second.stderr
        assert "cannot be locked" in second.stderr or "IncompleteFilesException" in second.stderr, second.stderr
        assert "Select jobs to execute" not in second.stderr
    finally:
        _, first_err = first.communicate(timeout=600)
    assert first.returncode != 0
    jobs = ran(first_err)
    assert jobs["train_soak"] == 1 and jobs["compare_record"] == 1 and jobs["reproduce_verdict"] == 1
    comparison = json.loads((work / "results/reproduce/ci-dag/comparison.json").read_text())
    assert comparison["verdict"] == "incomplete" and "rec-ci-dag-seed1" in comparison["reason"]
    assert _digest(folder) == before


def test_record_update_passes_its_arguments_to_snakemake_and_a_failed_run_leaves_the_record(project, tmp_path):
    """`record update NAME --cores N -- ARGS`: the options after NAME stay the command's, ARGS reach
    Snakemake (here a config overlay that does not exist, which Snakemake refuses before any job),
    and the failed workflow leaves the record's files byte for byte."""
    import subprocess

    root, work, _ = project
    folder = _with_record(project)
    before = _digest(folder)
    missing = tmp_path / "no-such-overlay.yaml"
    proc = subprocess.run(
        [sys.executable, "-m", "soaklab", "record", "update", "ci-dag", "--records", str(root / "records"),
         "--cores", "1", "--directory", str(work), "--", "--configfile", str(missing)],
        capture_output=True, text=True, timeout=300, env=dict(os.environ, SOAKLAB_TORCH_COMPILE="0"))
    assert proc.returncode == 1, proc.stderr
    output = proc.stdout + proc.stderr
    # Snakemake itself read the flag and named the overlay (argparse's REMAINDER once sent it every
    # option after NAME, which it refused as unrecognized arguments).
    assert f"No such file or directory: '{missing}'" in output and "unrecognized arguments" not in output
    assert "record ci-dag: the workflow failed" in proc.stderr and "the record is unchanged" in proc.stderr
    assert _digest(folder) == before
    assert not (work / "results").exists()


# A cart-pole record small enough to reproduce three times in one test: the same code path as ci-dag's
# (a bitwise cpu record under a numerics profile, made by `record update`, reproduced by the DAG).
TINY_RECORD = {
    "description": "A cart-pole record for the bisect test.", "machine": "cpu", "seeds": [1],
    "numerics": {"cpu_capability": "default", "threads": 1, "task_terms": "eager"},
    "run": {"algo": "sac", "task": "cartpole_swingup", "sim": "mujoco",
            "overrides": {"algo.num_envs": 4, "algo.max_iterations": 12, "algo.batch_size": 32,
                          "algo.learning_starts": 4, "algo.replay_buffer_size": 1000, "algo.save_interval": 12},
            "soak": {"min_duration_seconds": 1, "sample_interval_seconds": 0.5, "startup_timeout_seconds": 120,
                     "stale_progress_seconds": 60, "post_shutdown_grace_seconds": 1}},
    "compare": {"exact": True, "figures": [{"name": "env_steps_per_s", "rule": "ratio", "band": [0.01, 100.0]}]},
}


def test_record_bisect_finds_the_commit_that_changed_the_discount_and_resumes_from_its_state(project, tmp_path):
    """A git history of the project: the record made at the first commit (`record update`), algo.gamma
    changed in the config its run uses at the second. `record bisect` reproduces the good and the bad
    commit, each in a worktree of its own, and names the bad one with its first differing series and
    step. Run again, it resumes from its state file and reproduces nothing. The user's tree (with an
    uncommitted edit) is left as it was. (Two commits, not three: a candidate between them would be
    reproduced and judged as the bad end is, at 40 s of CI; the search's choice of candidates is
    tests/records/test_bisection.py's, its loop over them on a real worktree tests/records/test_bisect.py's.)"""
    import subprocess

    root, _, overlay = project
    (root / ".gitignore").write_text("\n".join(["/.soaklab/", "/results/", "/logs/", "/benchmarks/", ".snakemake/",
                                                "__pycache__/"]) + "\n")
    (root / "records" / "tiny").mkdir(parents=True)
    (root / "records" / "tiny" / "record.yaml").write_text(yaml.safe_dump(TINY_RECORD))
    env = dict(os.environ, SOAKLAB_TORCH_COMPILE="0")

    def git(*args):
        return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=root, check=True,
                              capture_output=True, text=True).stdout.strip()

    made = subprocess.run([sys.executable, "-m", "soaklab", "record", "update", "tiny", "--records", "records",
                           "--", "--configfile", str(overlay)], cwd=root, env=env, capture_output=True, text=True,
                          timeout=600)
    assert made.returncode == 0, made.stdout + made.stderr
    (root / "NOTES").write_text("a note\n")
    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "the tiny record")
    owner = root / "src/soaklab/config/defaults/sac/task/cartpole_swingup/base.yaml"
    owner.write_text(owner.read_text().replace("algo:\n", "algo:\n  gamma: 0.98\n", 1))
    git("commit", "-q", "-am", "cart-pole: discount 0.98")
    good, bad = git("rev-list", "--reverse", "HEAD").split()
    (root / "NOTES").write_text("an uncommitted edit\n")
    out = tmp_path / "bisect.json"
    command = [sys.executable, "-m", "soaklab", "record", "bisect", "tiny", "--good", "HEAD~1", "--bad", "HEAD",
               "--python", sys.executable, "--out", str(out), "--", "--configfile", str(overlay)]
    proc = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    assert result["first_bad"] == bad and result["skipped"] == []
    assert {s["commit"]: s["verdict"] for s in result["steps"]} == {good: "good", bad: "bad"}
    assert result["first_difference"]["series"].startswith(("Loss/", "Train/"))
    assert f"first commit that does not reproduce it: {bad[:7]} 'cart-pole: discount 0.98'" in proc.stdout
    assert f"first difference: {result['first_difference']['series']} at step" in proc.stdout
    assert git("worktree", "list").count("\n") == 0 and git("status", "--short") == "M NOTES"
    assert (root / "NOTES").read_text() == "an uncommitted edit\n"

    again = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "resuming from" in again.stdout and "reproducing" not in again.stdout
    assert json.loads(out.read_text())["first_bad"] == bad
