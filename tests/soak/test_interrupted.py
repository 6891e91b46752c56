"""Keeping an interrupted run aside and adopting it back (soaklab.soak.interrupted): decided from
the run dir's names and its run config alone, never by loading a checkpoint (the trainer then loads
them, as data)."""

from __future__ import annotations

import json
from pathlib import Path

from soaklab.files.checkpoints import checkpoint_iterations, collector_path, learner_path
from soaklab.files.rundir import RUN_CONFIG
from soaklab.soak.interrupted import adopt_interrupted, interrupted_dir, keep_interrupted
from tests.rl.conftest import craft

FAILED = {"status": "failed", "failure_classification": "external_cancellation", "run_summary": {"status": "failed"}}


def make_run(run_dir: Path, config_hash: str, iterations: tuple[int, ...]) -> None:
    run_dir.mkdir(parents=True)
    (run_dir / RUN_CONFIG).write_text(json.dumps({"config_hash": config_hash}))
    for k in iterations:
        collector_path(run_dir, k).parent.mkdir(exist_ok=True)
        collector_path(run_dir, k).write_bytes(b"collector")
        learner_path(run_dir, k).write_bytes(b"learner")


def test_a_kept_run_comes_back_at_its_newest_checkpoint(tmp_path):
    run = tmp_path / "train"
    make_run(run, "sha256:a", (10, 20))
    kept = keep_interrupted(run, FAILED)
    assert kept == interrupted_dir(run) and not run.exists()
    assert json.loads((kept / "soak_segments/soak-0.json").read_text()) == FAILED
    assert adopt_interrupted(run, "sha256:a") == (20, None)
    assert (run / "resume/learner_20.pt").is_file() and not kept.exists()


def test_another_configuration_starts_afresh_and_leaves_the_interrupted_run_alone(tmp_path):
    run = tmp_path / "train"
    make_run(run, "sha256:a", (10,))
    keep_interrupted(run, FAILED)
    resumed_at, note = adopt_interrupted(run, "sha256:b")
    assert resumed_at is None and "sha256:a" in note and "sha256:b" in note
    assert (interrupted_dir(run) / "resume/learner_10.pt").is_file() and not run.exists()


def test_a_run_without_checkpoint_completed_or_diverged_is_not_kept(tmp_path):
    bare = tmp_path / "bare"
    make_run(bare, "sha256:a", ())
    assert keep_interrupted(bare, FAILED) is None and bare.is_dir()
    done = tmp_path / "done"
    make_run(done, "sha256:a", (10,))
    assert keep_interrupted(done, {**FAILED, "run_summary": {"status": "completed"}}) is None and done.is_dir()
    nan = tmp_path / "nan"
    make_run(nan, "sha256:a", (10,))
    assert keep_interrupted(nan, {**FAILED, "failure_classification": "non_finite"}) is None and nan.is_dir()


def test_an_interrupted_dir_without_a_checkpoint_is_not_adopted(tmp_path):
    run = tmp_path / "train"
    make_run(interrupted_dir(run), "sha256:a", ())
    resumed_at, note = adopt_interrupted(run, "sha256:a")
    assert resumed_at is None and "no checkpoint" in note and not run.exists()


def test_a_crafted_checkpoint_in_a_kept_run_is_data_when_the_next_soak_adopts_it(start_soak, tmp_path):
    """The soak's own recovery path (the real monitor over the real trainer): a soak killed at
    iteration 25 keeps its run; its newest learner file is replaced by one whose unpickling would
    create a file; the same soak again adopts the run, and its trainer, loading checkpoints as data,
    names that file and resumes from the one before it. The payload never runs."""
    first = start_soak(fault="kill_learner@25")
    assert first.wait() == 1, first.out()
    kept = interrupted_dir(first.log_dir)
    assert checkpoint_iterations(kept) == [10, 20]
    marker = tmp_path / "marker"
    craft(learner_path(kept, 20), marker, iteration=20)
    again = start_soak()
    assert again.wait() == 0, again.out()
    console = (again.evidence / "soak-console.log").read_text()
    assert "learner_20.pt cannot be read (not plain data (it names " in console
    assert "resuming" in console and "at iteration 10" in console
    assert again.soak["run_summary"]["completed_iterations"] == 30
    assert not marker.exists()
