"""Data-parallel ranks of the real trainer on the CPU: two gloo ranks, each with its own collector,
envs and replay (soaklab.rl.ranks). What one run of them must leave: one event file, one checkpoint
set, one summary with every rank's evidence; and a rank that fails ends the whole run, classified,
with every rank's processes and shared memory gone."""

from __future__ import annotations

import pytest

from soaklab.metrics.events import event_file, read_scalars
from tests.rl.conftest import own_segments, process_gone

RANKS = ("training.dp_ranks=2",)


def rank_processes(run) -> list[int]:  # noqa: ANN001 - a TrainRun
    """Every learner and collector pid of every rank, from the run's own summary."""
    ranks = run.manifest["data_parallel"]["ranks"]
    return [r["pid"] for r in ranks] + [r["collector_pid"] for r in ranks if r["collector_pid"]]


def test_two_ranks_write_one_run(start_train):
    run = start_train(*RANKS, "algo.max_iterations=30")
    assert run.wait() == 0, run.output()
    # Rank 0 alone writes: one event file, one checkpoint set, no rank subdirectories.
    assert len(list(run.run_dir.glob("events.out.tfevents.*"))) == 1
    assert [p.name for p in run.run_dir.iterdir() if p.is_dir()] == ["checkpoints"]
    assert sorted(p.name for p in (run.run_dir / "checkpoints").iterdir()) == [
        "model_10.pt", "model_20.pt", "model_30.pt", "model_final.pt"]
    dp = run.manifest["data_parallel"]
    assert (dp["world_size"], dp["backend"]) == (2, "gloo")
    assert [(r["rank"], r["classification"], r["iteration"]) for r in dp["ranks"]] == [
        (0, "normal_completion", 30), (1, "normal_completion", 30)]
    assert not set(dp["ranks"][0]["cpu_ids"]) & set(dp["ranks"][1]["cpu_ids"])  # one CPU slice each
    assert run.summary["total_env_steps"] == 2 * 30 * 8
    # Each logged iteration combines the ranks: replay rows are summed (each rank holds (it + 1) x 8).
    frame = read_scalars(event_file(run.run_dir))
    sizes = frame[frame["tag"] == "Replay/size"].sort_values("step")
    assert len(sizes) == 30
    assert sizes["value"].tolist() == [2.0 * (step + 1) * 8 for step in sizes["step"]]
    assert all(process_gone(pid) for pid in rank_processes(run))
    assert own_segments(r["pid"] for r in dp["ranks"]) == []


@pytest.mark.parametrize(("fault", "classification", "owner"), [
    ("kill_collector@10:1", "collector_failure", "rank 1 collector"),
    ("kill_collector@10:0", "collector_failure", "collector"),
    ("raise_learner@10:1", "learner_failure", "rank 1 learner"),
])
def test_a_failing_rank_ends_the_run(start_train, fault, classification, owner):
    run = start_train(*RANKS, "algo.max_iterations=100000", fault=fault)
    assert run.wait(timeout=180) == 1, run.output()  # a bound for a hung rank, not a speed claim
    shutdown = run.manifest["shutdown"]
    assert (shutdown["classification"], shutdown["owner"]) == (classification, owner)
    ranks = run.manifest["data_parallel"]["ranks"]
    assert [r["reported"] for r in ranks] == [True, True]  # rank 1 ended itself and said how
    assert all(process_gone(pid) for pid in rank_processes(run))
    assert own_segments(r["pid"] for r in ranks) == []
    assert not list(run.run_dir.glob(".dp-*"))  # the rendezvous file goes with the run
