"""Data-parallel ranks of the real trainer on the CPU: two gloo ranks, each with its own collector,
envs and replay (soaklab.rl.ranks). A rank that fails ends the whole run, classified, with every rank's
processes and shared memory gone. (What a run of them leaves: tests/soak/test_monitor.py's two-rank
soak.)"""

from __future__ import annotations

import pytest

from tests.rl.conftest import own_segments, process_gone

RANKS = ("training.dp_ranks=2",)


def rank_processes(run) -> list[int]:  # noqa: ANN001 - a TrainRun
    """Every learner and collector pid of every rank, from the run's own summary."""
    ranks = run.manifest["data_parallel"]["ranks"]
    return [r["pid"] for r in ranks] + [r["collector_pid"] for r in ranks if r["collector_pid"]]


# What one run of two ranks leaves (one event file, one checkpoint set, every rank's evidence, the
# replay rows summed): tests/soak/test_monitor.py's two-rank soak holds it on its own run, the same
# trainer under the monitor; a run of its own here was that run again.


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
