"""The two-process runtime with real processes and shared memory: invariants, artifacts, faults."""

from __future__ import annotations

import os
import signal
import time

import pytest
import torch

from soaklab.errors import REQUEUE_EXIT
from soaklab.files.checkpoints import checkpoint_iterations
from soaklab.schemas import schema_errors
from tests.conftest import CUDA_HOST, one_line
from tests.rl.conftest import process_gone


def assert_invariants(manifest: dict, iterations: int, num_envs: int, slot_rows: int) -> None:
    ingress, flight = manifest["replay_ingress"], manifest["inference_flight"]
    chunks = -(-num_envs // slot_rows)
    assert ingress["published_sequence"] == ingress["release_sequence"] == iterations * chunks
    assert ingress["vector_steps"] == iterations
    assert ingress["occupancy"] == 0 and ingress["dropped_batches"] == 0 and ingress["early_returns"] == 0
    assert ingress["high_water_occupancy"] <= ingress["ingress_depth"]
    assert flight["queue_depth"] == 0 and flight["publication_lag"] == 0 and flight["in_flight"] == 0
    shutdown = manifest["shutdown"]
    assert shutdown["classification"] == "normal_completion" and shutdown["cleanup"]["errors"] == []
    assert shutdown["collector"]["exitcode"] == 0 and process_gone(shutdown["collector"]["pid"])


@pytest.mark.covers("sac/cartpole_swingup/mujoco/cpu/1")
def test_normal_run_writes_every_artifact(start_train):
    run = start_train("algo.max_iterations=30")  # SAC (start_train's default): FlashSAC's run is below
    assert run.wait() == 0, run.output()
    output = run.output()  # stdout and stderr: a clean run ends clean
    assert "resource_tracker" not in output and "leaked semaphore" not in output, output
    summary = run.summary
    assert schema_errors("run_summary", summary) == []
    assert summary["status"] == "completed" and summary["failure_reason"] is None
    assert summary["completed_iterations"] == 30 and summary["total_env_steps"] == 240
    assert_invariants(run.manifest, 30, 8, 8)
    assert run.manifest["backend_diagnostics"]["available"] is True
    files = {p.name for p in run.run_dir.iterdir()}
    assert {"run_config.json", "run_summary.json", "progress.json", "checkpoints"} <= files
    assert len([f for f in files if f.startswith("events.out.tfevents")]) == 1
    checkpoints = sorted(p.name for p in (run.run_dir / "checkpoints").iterdir())
    assert checkpoints == ["model_10.pt", "model_20.pt", "model_30.pt", "model_final.pt"]
    payload = torch.load(run.run_dir / "checkpoints/model_final.pt", weights_only=True)
    assert payload["iteration"] == 30 and "actor" in payload["agent"]


def test_slot_rows_not_dividing_num_envs_keeps_every_invariant(start_train):
    run = start_train("algo.max_iterations=20", "training.replay_ingress_slot_rows=3",
                      "training.replay_ingress_depth=1")
    assert run.wait() == 0, run.output()
    assert_invariants(run.manifest, 20, 8, 3)
    assert run.manifest["replay_ingress"]["chunks_per_vector"] == 3
    assert run.manifest["replay_ingress"]["backpressure_waits"] >= 0


def test_capacity_two_reaches_two_in_flight(start_train):
    run = start_train("algo.max_iterations=20", "training.inference_slot_capacity=2")
    assert run.wait() == 0, run.output()
    assert run.manifest["inference_flight"]["max_in_flight"] == 2
    assert run.manifest["inference_flight"]["capacity"] == 2
    assert_invariants(run.manifest, 20, 8, 8)


# (SAC's own short run here was the normal run above again: same run, fewer iterations, same invariants.)
@pytest.mark.covers("flashsac/cartpole_swingup/mujoco/cpu/1")
def test_flashsac_runs(start_train):
    run = start_train("algo.max_iterations=12", algo="flashsac", name="flashsac")
    assert run.wait() == 0, run.output()
    assert_invariants(run.manifest, 12, 8, 8)


def failed(run, classification: str, owner: str) -> dict:
    summary = run.summary
    assert schema_errors("run_summary", summary) == []
    assert summary["status"] == "failed"
    shutdown = summary["runtime_manifest"]["shutdown"]
    assert shutdown["classification"] == classification and shutdown["owner"] == owner
    assert summary["failure_reason"].startswith(classification)
    assert process_gone(shutdown["collector"]["pid"])
    assert shutdown["cleanup"]["errors"] == []
    return shutdown


def test_learner_exception(start_train):
    run = start_train("algo.max_iterations=200", fault="raise_learner@5")
    assert run.wait() == 1
    shutdown = failed(run, "learner_failure", "learner")
    assert shutdown["exception"]["type"] == "RuntimeError" and shutdown["iteration"] == 5
    assert (run.run_dir / "checkpoints/model_final.pt").is_file()


def test_collector_killed(start_train):
    run = start_train("algo.max_iterations=200", fault="kill_collector@5")
    assert run.wait() == 1
    shutdown = failed(run, "collector_failure", "collector")
    assert shutdown["collector"]["signal"] == "SIGKILL"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_cancels_the_run_cleanly(start_train, sig):
    run = start_train("algo.max_iterations=100000")
    run.wait_for_iteration(3)
    # SIGINT goes to the whole group, as Ctrl-C would; the collector ignores it.
    (os.killpg if sig == signal.SIGINT else os.kill)(run.proc.pid, sig)
    code = run.wait(timeout=120)  # a bound for a hung process, not a speed claim
    shutdown = failed(run, "external_cancellation", "learner")
    assert shutdown["exception"]["message"] == signal.Signals(sig).name
    # Which of the two noticed it depends on the load (tests/rl/test_cancel.py tells them apart). At
    # the safe point a resumable run checkpoints first and asks to be run again.
    cancellation = shutdown["cancellation"]
    assert cancellation["signal"] == signal.Signals(sig).name
    if cancellation["noticed"] == "safe point":
        k = cancellation["resumable_checkpoint"]
        assert code == REQUEUE_EXIT and k in checkpoint_iterations(run.run_dir)
    else:
        assert cancellation["noticed"] == "forced" and code == 1


def test_invalid_settings_never_spawn_a_collector(start_train):
    run = start_train("training.inference_slot_capacity=0")
    assert run.wait() == 2
    assert "training.inference_slot_capacity=0" in run.output()
    assert not run.run_dir.exists()


def test_a_simulated_host_plans_but_never_trains(cli, tmp_path):
    """SOAKLAB_HOST_CAPABILITIES resolves GPU runs on a CPU node; training on it is refused up front."""
    run_dir = tmp_path / "run"
    result = cli("train", "--algo", "sac", "--task", "cartpole_swingup", "--sim", "mujoco", "training.device=cuda",
                 f"training.log_dir={run_dir}", host=CUDA_HOST)
    assert result.code == 2
    assert one_line(result.err).startswith("soaklab: error: SOAKLAB_HOST_CAPABILITIES: simulates a host")
    assert not run_dir.exists()


def test_existing_log_dir_fails_closed(start_train):
    first = start_train("algo.max_iterations=2")
    assert first.wait() == 0
    again = start_train("algo.max_iterations=2")
    assert again.wait() == 2
    assert "exists and is not empty" in again.output()


def test_leak_child_fault_leaves_a_detached_process(start_train):
    import psutil

    run = start_train("algo.max_iterations=8", fault="leak_child@2")
    assert run.wait() == 0
    leaked = [p for p in psutil.process_iter(["cmdline", "create_time"])
              if p.info["cmdline"] and "time.sleep(600)" in " ".join(p.info["cmdline"])
              and p.info["create_time"] >= run.started - 5 + time.time() - time.monotonic()]
    assert leaked, "the injected child should outlive the trainer"
    for p in leaked:
        p.kill()


def test_update_round_trains_on_the_vectors_before_its_own(start_train):
    """The overlapped schedule: round `it` samples from vector steps 0..it-1 (lag 1), so it can run
    while the collector steps vector `it`; the manifest records the schedule and the log interval."""
    from tests.rl.test_reproducible import scalar_series

    run = start_train("algo.max_iterations=24", "algo.learning_starts=4", "training.collector_metrics_interval=5")
    assert run.wait() == 0, run.output()
    rows = dict(scalar_series(run.run_dir, ("Replay/update_rows",))["Replay/update_rows"])
    assert sorted(rows) == list(range(24))  # every iteration logged, though read back every 5
    assert all(rows[it] == 0 for it in range(4))  # random actions, no updates yet
    assert all(rows[it] == it * 8 for it in range(4, 24))
    schedule = run.manifest["learner_diagnostics"]["schedule"]
    assert {k: schedule[k] for k in ("update_lag_vectors", "log_interval_iterations")} == {
        "update_lag_vectors": 1, "log_interval_iterations": 5}
    assert schedule["n_step"]["effective"] == schedule["n_step"]["requested"]  # the replay holds the windows
    graph = run.manifest["learner_diagnostics"]["cuda_graph"]
    assert graph["requested"] is False and graph["enabled"] is False and "cpu" in graph["disable_reason"]
    assert_invariants(run.manifest, 24, 8, 8)


def test_a_dangling_symlink_log_dir_is_refused_in_one_line(start_train, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere")
    run = start_train("algo.max_iterations=5", run_dir=link)
    assert run.wait() == 2
    lines = [line for line in run.output().splitlines() if line.strip()]
    assert len(lines) == 1 and "a dangling symbolic link" in lines[0], lines
    assert not (tmp_path / "nowhere").exists()


def test_a_run_dir_claimed_by_another_process_is_refused(start_train, tmp_path):
    """The claim is an exclusive lock: a second trainer on the same dir cannot start, however close
    in time its emptiness check ran."""
    import fcntl

    from soaklab.files.rundir import LOCK as RUN_DIR_LOCK

    run_dir = tmp_path / "claimed"
    run_dir.mkdir()
    with open(run_dir / RUN_DIR_LOCK, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running trainer holds it
        run = start_train("algo.max_iterations=5", run_dir=run_dir)
        assert run.wait() == 2
        lines = [line for line in run.output().splitlines() if line.strip() and "devices:" not in line]
    assert len(lines) == 1 and "in use by another soaklab process" in lines[0], lines
    assert sorted(p.name for p in run_dir.iterdir()) == [RUN_DIR_LOCK]  # nothing written


def test_a_run_config_edited_after_resolution_is_refused(cli, tmp_path):
    import json

    path = tmp_path / "rc.json"
    assert cli("config", "resolve", "--algo", "sac", "--task", "cartpole_swingup", "--sim", "mujoco",
               "--out", path).code == 0
    record = json.loads(path.read_text())
    record["config"]["algo"]["batch_size"] = 7  # ignored by re-resolution, so refused outright
    path.write_text(json.dumps(record))
    result = cli("train", "--run-config", path)
    assert result.code == 2
    assert "no longer matches its config_hash" in one_line(result.err)


@pytest.mark.parametrize("edit, field, words", [
    ({"algo.num_envs": 16}, "disagree at algo.num_envs", "the overrides compose to 16, the config records 8"),
    ({"algo.num_envs": -5}, "overrides: algo.num_envs=-5", "must be an exact int >= 1"),
    ({"algo.batch_size": "lots"}, "overrides: algo.batch_size='lots'", "must be an exact int"),
    ({"algo.no_such_key": 1}, "overrides: algo.no_such_key", "unknown configuration key"),
])
def test_a_run_config_whose_overrides_were_edited_is_refused_before_spawning(cli, tmp_path, edit, field, words):
    """The record is authoritative as a whole: overrides that no longer compose to its config (the
    hash still matching it) are refused in one line naming the field, and no run dir appears."""
    import json

    path, run_dir = tmp_path / "rc.json", tmp_path / "run"
    assert cli("config", "resolve", "--algo", "sac", "--task", "cartpole_swingup", "--sim", "mujoco",
               "algo.num_envs=8", f"training.log_dir={run_dir}", "--out", path).code == 0
    record = json.loads(path.read_text())
    record["overrides"] |= edit
    path.write_text(json.dumps(record))
    before = path.read_bytes()
    result = cli("train", "--run-config", path)
    assert result.code == 2
    line = one_line(result.err)
    assert field in line and words in line and str(path) in line, line
    assert not run_dir.exists() and path.read_bytes() == before
