"""Keeping an interrupted run aside and adopting it back (soaklab.soak.interrupted): decided from
the run dir's names and its run config alone, never by loading a checkpoint (the trainer then loads
them, as data)."""

from __future__ import annotations

import json
from pathlib import Path

from soaklab.files.checkpoints import checkpoint_iterations, collector_path, learner_path
from soaklab.files.rundir import RUN_CONFIG
from soaklab.soak.interrupted import Adoption, adopt_interrupted, interrupted_dir, keep_interrupted, kept_runs
from tests.rl.conftest import craft

A, B = "sha256:" + "a" * 64, "sha256:" + "b" * 64
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
    make_run(run, A, (10, 20))
    kept, replaced = keep_interrupted(run, FAILED, A)
    assert kept == interrupted_dir(run, A) == tmp_path / "train.interrupted-aaaaaaaaaaaa" and not replaced
    assert not run.exists() and kept_runs(run) == [kept]
    assert json.loads((kept / "soak_segments/soak-0.json").read_text()) == FAILED
    adoption = adopt_interrupted(run, A)
    assert adoption == Adoption(20, (f"moved the interrupted run of this config back from {kept} to {run}",))
    assert (run / "resume/learner_20.pt").is_file() and not kept.exists()


def test_runs_kept_for_two_configs_stay_side_by_side_and_each_comes_back_to_its_own(tmp_path):
    """A interrupted, then B (another config of the same run dir) interrupted in turn: both are kept,
    and A's soak adopts A's run, leaving B's where it is, in a line that names both configs."""
    run = tmp_path / "train"
    make_run(run, A, (10,))
    keep_interrupted(run, FAILED, A)
    resumed_at, notes = (other := adopt_interrupted(run, B)).resumed_at, other.notes
    assert resumed_at is None and len(notes) == 2 and A in notes[0] and B in notes[0] and "starting afresh" in notes[1]
    make_run(run, B, (30,))  # B's soak starts afresh and is interrupted too
    assert keep_interrupted(run, FAILED, B) == (interrupted_dir(run, B), False)
    assert kept_runs(run) == [interrupted_dir(run, A), interrupted_dir(run, B)]
    adoption = adopt_interrupted(run, A)
    assert adoption.resumed_at == 10 and (run / "resume/learner_10.pt").is_file()
    assert any(str(interrupted_dir(run, B)) in n and "left where it is" in n for n in adoption.notes)
    assert (interrupted_dir(run, B) / "resume/learner_30.pt").is_file()


def test_a_newer_interruption_of_the_same_config_replaces_the_older_kept_run(tmp_path):
    run = tmp_path / "train"
    make_run(interrupted_dir(run, A), A, ())  # kept without a checkpoint: the soak starts afresh beside it
    assert adopt_interrupted(run, A).resumed_at is None
    make_run(run, A, (10,))
    assert keep_interrupted(run, FAILED, A) == (interrupted_dir(run, A), True)
    assert kept_runs(run) == [interrupted_dir(run, A)] and checkpoint_iterations(interrupted_dir(run, A)) == [10]


def test_the_legacy_kept_name_is_adopted_by_its_own_config_only(tmp_path):
    run = tmp_path / "train"
    legacy = tmp_path / "train.interrupted"
    make_run(legacy, A, (10,))
    assert kept_runs(run) == [legacy]
    other = adopt_interrupted(run, B)
    assert other.resumed_at is None and legacy.is_dir() and A in other.notes[0]
    moved = f"moved the interrupted run of this config back from {legacy} to {run}"
    assert adopt_interrupted(run, A) == Adoption(10, (moved,))
    assert not legacy.exists() and (run / "resume/learner_10.pt").is_file()


def test_a_run_without_checkpoint_completed_or_diverged_is_not_kept(tmp_path):
    bare = tmp_path / "bare"
    make_run(bare, A, ())
    assert keep_interrupted(bare, FAILED, A) is None and bare.is_dir()
    done = tmp_path / "done"
    make_run(done, A, (10,))
    assert keep_interrupted(done, {**FAILED, "run_summary": {"status": "completed"}}, A) is None and done.is_dir()
    nan = tmp_path / "nan"
    make_run(nan, A, (10,))
    assert keep_interrupted(nan, {**FAILED, "failure_classification": "non_finite"}, A) is None and nan.is_dir()


def test_an_interrupted_dir_without_a_checkpoint_is_not_adopted(tmp_path):
    run = tmp_path / "train"
    make_run(interrupted_dir(run, A), A, ())
    adoption = adopt_interrupted(run, A)
    assert adoption.resumed_at is None and "no checkpoint" in adoption.notes[0] and not run.exists()


def test_a_crafted_checkpoint_in_a_kept_run_is_data_when_the_next_soak_adopts_it(start_soak, tmp_path):
    """The soak's own recovery path (the real monitor over the real trainer): a soak killed at
    iteration 25 keeps its run; its newest learner file is replaced by one whose unpickling would
    create a file; the same soak again adopts the run, and its trainer, loading checkpoints as data,
    names that file and resumes from the one before it. The payload never runs."""
    first = start_soak(fault="kill_learner@25")
    assert first.wait() == 1, first.out()
    (kept,) = kept_runs(first.log_dir)
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
