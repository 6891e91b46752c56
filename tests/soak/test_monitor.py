"""The real monitor against the real trainer, each failure injected with SOAKLAB_FAULT (docs/soak.md)."""

from __future__ import annotations

import json
import signal
import time

import pytest

from soaklab.errors import REQUEUE_EXIT
from soaklab.files.checkpoints import checkpoint_iterations
from soaklab.schemas import schema_errors
from soaklab.soak.interrupted import interrupted_dir, kept_runs
from soaklab.soak.sampler import ProcessKey


def finished(run, code: int = 1) -> dict:
    assert run.wait() == code, run.out()
    soak = run.soak
    assert schema_errors("soak", soak) == []
    assert (run.evidence / "soak.json").is_file() and (run.evidence / "soak-console.log").is_file()
    return soak


def no_process_left(soak: dict) -> None:
    """Nothing the monitor ever saw is still running."""
    for sample in soak["samples"]:
        for p in sample["processes"]:
            assert not ProcessKey(p["pid"], p["create_time"]).alive(), f"{p['name']} ({p['pid']}) outlived the soak"


def test_a_clean_run_passes_with_every_record(start_soak):
    run = start_soak(iterations=40)
    soak = finished(run, 0)
    assert soak["status"] == "passed" and soak["failure_classification"] is None
    assert soak["shutdown"]["trainer_returncode"] == 0 and soak["shutdown"]["classification"] == "normal_completion"
    assert soak["post_shutdown"]["residual_processes"] == []
    assert soak["run_summary"]["completed_iterations"] == 40
    sample = soak["samples"][len(soak["samples"]) // 2]
    assert sample["process_count"] >= 2, "trainer and collector are both sampled"
    assert sample["fds"]["shared_memory"] >= 1 and sample["rss_bytes"] > 0
    assert soak["context"]["config_hash"] == soak["run_summary"]["config_hash"]
    assert soak["resource_summary"]["peaks"]["inference_events"] == 40
    assert (run.log_dir / "soak-console.log").read_text().count("train: ") >= 1
    no_process_left(soak)


# (A learner that raises, raise_learner@3, is learner_failure the same way: tests/workflow/test_dag.py's
# failed-soak test injects it under the real DAG and holds these assertions; a soak of its own here was
# the same path again.)
@pytest.mark.parametrize(("fault", "classification"), [
    ("kill_collector@3", "collector_failure"),
])
def test_trainer_failures_carry_the_trainer_classification(start_soak, fault, classification):
    soak = finished(start_soak(fault=fault))
    assert soak["failure_classification"] == classification
    assert soak["shutdown"]["classification"] == classification
    assert soak["run_summary"]["status"] == "failed"
    no_process_left(soak)


def test_a_trainer_that_refuses_its_run_is_the_soaks_failure_reason(start_soak):
    """A trainer that exits 2 before it writes anything (here it refuses a malformed fault request,
    which only it reads) is `trainer_refused`, with its own one line as the reason and on stderr."""
    run = start_soak(fault="no_such_fault@3")
    soak = finished(run)
    assert soak["status"] == "failed" and soak["failure_classification"] == "trainer_refused"
    assert soak["failure_reason"].startswith("the trainer refused the run (exit 2): SOAKLAB_FAULT=no_such_fault@3: ")
    assert soak["run_summary"] is None and soak["shutdown"]["trainer_returncode"] == 2
    assert "soak: failed (trainer_refused): the trainer refused the run (exit 2): SOAKLAB_FAULT=" in run.out()
    no_process_left(soak)


def test_hung_trainer_ends_as_stale_tick_within_the_limit(start_soak):
    soak = finished(start_soak(fault="hang_learner@5", iterations=1000, stale_progress_seconds=4))
    assert soak["failure_classification"] == "timeout/stale_tick"
    term = soak["shutdown"]["terminated_by_monitor"]
    assert term["signals_sent"][0] == "SIGTERM"
    def fingerprint(s):
        return s["progress"]["files"], s["progress"]["bytes"], s["progress"]["newest_mtime"]

    final = fingerprint(soak["samples"][-1])
    last_change = min(s["elapsed_s"] for s in soak["samples"] if fingerprint(s) == final)
    # Never before the limit after the last change (how much later depends on the host's load).
    assert term["detected_at_s"] - last_change >= 4
    no_process_left(soak)


def test_trainer_that_never_writes_ends_as_startup_timeout(start_soak):
    soak = finished(start_soak(fault="hang_startup@0", startup_timeout_seconds=4))
    assert soak["failure_classification"] == "timeout/startup"
    assert soak["first_progress_s"] is None and soak["run_summary"] is None
    assert soak["shutdown"]["terminated_by_monitor"]["detected_at_s"] >= 4  # not before the limit
    no_process_left(soak)


def test_collector_that_never_becomes_ready_ends_as_startup_timeout(start_soak):
    """The learner waiting for its collector writes no progress: start-up, not training, times out."""
    run = start_soak(fault="hang_collector_ready@0", startup_timeout_seconds=8)
    soak = finished(run)
    assert soak["failure_classification"] == "timeout/startup"
    assert soak["first_progress_s"] is None  # no sample saw progress.json while the collector hung
    assert all(sample["progress"]["iteration"] is None for sample in soak["samples"])
    assert soak["shutdown"]["terminated_by_monitor"]["signals_sent"][0] == "SIGTERM"
    no_process_left(soak)


def test_child_left_alive_is_a_resource_leak_naming_its_pid(start_soak):
    soak = finished(start_soak(fault="leak_child@3", iterations=150, sample_interval_seconds=0.1))
    assert soak["failure_classification"] == "resource_leak"
    residual = soak["post_shutdown"]["residual_processes"]
    assert len(residual) == 1 and str(residual[0]["pid"]) in soak["failure_reason"]
    assert residual[0]["killed_by_monitor"] is True
    assert not ProcessKey(residual[0]["pid"], residual[0]["create_time"]).alive()


def wait_for_training(run) -> None:
    deadline = time.monotonic() + 60
    while not (run.log_dir / "progress.json").is_file():
        assert time.monotonic() < deadline and run.proc.poll() is None, run.out()
        time.sleep(0.2)
    time.sleep(1.0)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_or_sighup_to_the_monitor_is_external_cancellation(start_soak, sig):
    """The trainer, passed the signal, finishes its iteration and checkpoints it; the monitor keeps
    the run for the next soak and, like the trainer, exits REQUEUE_EXIT: a scheduler may requeue it."""
    run = start_soak(iterations=100000)
    wait_for_training(run)
    run.proc.send_signal(sig)
    soak = finished(run, code=REQUEUE_EXIT)
    assert soak["failure_classification"] == "external_cancellation"
    assert soak["shutdown"]["terminated_by_monitor"]["signal"] == signal.Signals(sig).name
    assert soak["shutdown"]["trainer_returncode"] == REQUEUE_EXIT
    assert soak["post_shutdown"]["residual_processes"] == []
    kept = interrupted_dir(run.log_dir, soak["context"]["config_hash"])
    assert kept_runs(run.log_dir) == [kept], "the interrupted run is kept, under its config's name"
    assert not run.log_dir.exists() and checkpoint_iterations(kept), "the interrupted run is kept, checkpointed"
    no_process_left(soak)


def test_the_trainer_does_not_outlive_a_killed_monitor(start_soak):
    """SIGKILL leaves the monitor no chance to clean up: the trainer, tied to it, gets SIGTERM,
    shuts down as cancelled with its run summary, and leaves none of its segments behind."""
    import psutil

    from soaklab.rl.shm import leaked_segments, segment_prefix

    run = start_soak(iterations=100000)
    wait_for_training(run)
    trainer = next(p for p in psutil.Process(run.proc.pid).children() if "train" in p.cmdline())
    collectors = trainer.children(recursive=True)
    run.proc.kill()
    run.proc.wait(timeout=30)
    gone, alive = psutil.wait_procs([trainer, *collectors], timeout=60)
    assert alive == [], f"outlived the monitor: {alive}"
    summary = json.loads((run.log_dir / "run_summary.json").read_text())
    shutdown = summary["runtime_manifest"]["shutdown"]
    assert shutdown["classification"] == "external_cancellation"
    assert shutdown["exception"]["message"] == "SIGTERM"
    assert [n for n in leaked_segments() if n.startswith(segment_prefix(trainer.pid))] == []


def test_a_killed_trainer_group_leaves_nothing_in_dev_shm(start_soak):
    """SIGKILL to the trainer's whole group kills multiprocessing's resource tracker too, so its
    segments and named semaphores stay linked: the monitor removes and reports each of them."""
    import os
    from pathlib import Path

    import psutil

    from soaklab.rl.shm import segment_prefix

    run = start_soak(iterations=100000)
    wait_for_training(run)
    trainer = next(p for p in psutil.Process(run.proc.pid).children() if "train" in p.cmdline())
    os.killpg(trainer.pid, signal.SIGKILL)
    soak = finished(run)
    removed = soak["post_shutdown"]["shm_removed"]
    names = [entry["name"] for entry in removed]
    assert any(n.startswith(segment_prefix(trainer.pid)) for n in names), names
    assert any(n.startswith("sem.mp-") for n in names), names
    assert all(entry["removed"] and entry["error"] is None for entry in removed)
    assert not any((Path("/dev/shm") / n).exists() for n in names)
    assert soak["failure_classification"] in ("missing_run_summary", "invalid_run_summary")
    no_process_left(soak)


def test_a_soak_json_on_a_disk_that_fills_up_fails_in_one_line(start_soak, tmpfs):
    """The space check passes at the start; the disk fills during the soak: the JSON cannot be
    written, which is one line and exit 1, the evidence copy elsewhere still holds the verdict, and
    no temporary file is left on the full disk."""
    disk = tmpfs("20m")
    run = start_soak(iterations=300, output=disk / "soak.json")
    wait_for_training(run)
    with open(disk / "filler", "wb") as filler:  # fill the disk to the last block
        try:
            while True:
                filler.write(b"\0" * (1 << 16))
                filler.flush()
        except OSError:
            pass
    assert run.wait() == 1, run.out()
    errors = [line for line in run.out().splitlines() if line.startswith("soak: error:")]
    assert len(errors) == 1 and "--output" in errors[0] and "No space left on device" in errors[0], run.out()
    assert sorted(p.name for p in disk.iterdir()) == ["filler"]  # no soak.json, no temporary file
    evidence = json.loads((run.evidence / "soak.json").read_text())
    assert evidence["status"] == "passed"  # the verdict itself was fine


@pytest.mark.parametrize(("flags", "words"), [
    (("--extra-override", "algo.num_envs=4"), "algo.num_envs is owned by `soaklab soak`"),
    (("--extra-override", "training.log_dir=/tmp/x"), "training.log_dir is owned"),
    (("--extra-override", "training.sim_backend=mjwarp"), "declared by the --sim owner"),
    (("--extra-override", "training.inference_slot_capacity=0"), "training.inference_slot_capacity=0"),
    (("--sample-interval-seconds", "0"), "--sample-interval-seconds=0.0"),
])
def test_bad_input_is_refused_before_anything_is_spawned(start_soak, flags, words):
    run = start_soak(*flags)
    assert run.wait() == 2
    out = [line for line in run.out().splitlines() if line.strip()]
    assert len(out) == 1 and words in out[0], out
    assert not run.log_dir.exists() and not run.output.exists()


@pytest.mark.covers("sac/cartpole_swingup/mujoco/cpu/2")
def test_two_ranks_are_watched_and_validated(start_soak, tmp_path):
    """A data-parallel soak: the monitor samples every rank's learner and collector, and
    `soaklab validate` checks the rank evidence (docs/runtime.md, "Data parallelism")."""
    from soaklab.outcomes.validation import validate_soak

    run = start_soak("--extra-override", "training.dp_ranks=2", iterations=150)
    soak = finished(run, 0)
    ranks = soak["run_summary"]["runtime_manifest"]["data_parallel"]["ranks"]
    seen = {p["pid"] for sample in soak["samples"] for p in sample["processes"]}
    assert {r["pid"] for r in ranks} | {r["collector_pid"] for r in ranks} <= seen
    no_process_left(soak)
    report = validate_soak(run.output, run.log_dir, None, None, tmp_path / "validation.json")
    rank_checks = [c for c in report["checks"] if c["name"].startswith("data parallel")]
    assert len(rank_checks) == 5 and all(c["passed"] for c in rank_checks)
    assert report["status"] == "passed", [c for c in report["checks"] if not c["passed"]]

    # What two ranks leave (the trainer's, soaklab.rl.ranks; tests/rl/test_ranks.py trained the same
    # two-rank run a second time for it): rank 0 alone writes one event file, one checkpoint set, no
    # rank subdirectories.
    from soaklab.metrics.events import event_file, read_scalars
    from tests.rl.conftest import own_segments, process_gone

    assert len(list(run.log_dir.glob("events.out.tfevents.*"))) == 1
    assert [p.name for p in run.log_dir.iterdir() if p.is_dir()] == ["checkpoints"]
    assert sorted(p.name for p in (run.log_dir / "checkpoints").iterdir()) == sorted(
        [f"model_{i}.pt" for i in range(10, 151, 10)] + ["model_final.pt"])
    dp = soak["run_summary"]["runtime_manifest"]["data_parallel"]
    assert (dp["world_size"], dp["backend"]) == (2, "gloo")
    assert [(r["rank"], r["classification"], r["iteration"]) for r in dp["ranks"]] == [
        (0, "normal_completion", 150), (1, "normal_completion", 150)]
    assert not set(dp["ranks"][0]["cpu_ids"]) & set(dp["ranks"][1]["cpu_ids"])  # one CPU slice each
    assert soak["run_summary"]["total_env_steps"] == 2 * 150 * 8
    # Each logged iteration combines the ranks: replay rows are summed (each rank holds (it + 1) x 8).
    frame = read_scalars(event_file(run.log_dir))
    sizes = frame[frame["tag"] == "Replay/size"].sort_values("step")
    assert len(sizes) == 150
    assert sizes["value"].tolist() == [2.0 * (step + 1) * 8 for step in sizes["step"]]
    assert all(process_gone(pid) for pid in [r["pid"] for r in ranks] + [r["collector_pid"] for r in ranks
                                                                        if r["collector_pid"]])
    assert own_segments(r["pid"] for r in ranks) == []


def test_a_soak_resumes_its_own_configs_run_judged_over_its_segments_alone(start_soak, tmp_path):
    """Config A killed at 25 and kept; a soak of config B (another seed) of the same run dir starts
    afresh beside it, is killed in turn and kept too, A's run untouched. A's soak then resumes A's run
    at 20 and completes it, judged on how long A's run ran in its segments, not B's and not only the
    last one's: the reason names their sum."""
    first = finished(start_soak(iterations=40, fault="kill_learner@25"))  # checkpoints every 10
    assert first["failure_classification"] == "learner_failure" or first["run_summary"] is None, first
    run_dir = tmp_path / "soak" / "run"
    a = interrupted_dir(run_dir, first["context"]["config_hash"])
    other = start_soak("--extra-override", "algo.seed=7", iterations=40, fault="kill_learner@15",
                       output=tmp_path / "b.json")
    b_soak = finished(other)
    out = other.out()
    assert f"soak: {a}: kept for config {first['context']['config_hash']}" in out, out
    b = interrupted_dir(run_dir, b_soak["context"]["config_hash"])
    assert kept_runs(run_dir) == sorted([a, b]) and a != b
    assert checkpoint_iterations(a)[-1] == 20 and checkpoint_iterations(b)[-1] == 10
    # A run shorter than the minimum fails, the trainer itself fine (its completed run summary):
    second = finished(start_soak(iterations=40, min_duration_seconds=100000))
    assert second["command"]["trainer"][3:5] == ["train", "--resume"]
    assert second["run_summary"]["status"] == "completed"
    segments = second["run_summary"]["segments"]
    assert [(s["start_iteration"], s["end_iteration"]) for s in segments] == [(0, 20), (20, 40)]
    assert kept_runs(run_dir) == [b] and checkpoint_iterations(b)[-1] == 10
    assert [s["status"] for s in second["segments"]] == ["failed", "failed"]
    assert second["failure_classification"] == "min_duration_not_met"
    total = sum(s["duration_s"] for s in second["segments"])
    assert total > second["duration_s"] > 0
    assert f"after {total:.1f}s (all its segments)" in second["failure_reason"], second["failure_reason"]
