"""Device-buffered logging: the rows read back per interval equal per-iteration logging, and the
writer thread writes every scalar to a real TensorBoard event file."""

from __future__ import annotations

import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from soaklab.rl.logging import DeviceLog, EpisodeStats, RunLogger


def test_drained_rows_equal_per_iteration_statistics():
    gen = torch.Generator().manual_seed(0)
    log, buffered, direct = DeviceLog(4, 6, ("critic", "actor"), torch.device("cpu")), EpisodeStats(6), EpisodeStats(6)
    rows = []
    for it in range(4):
        rewards = torch.rand(6, generator=gen)
        dones = torch.rand(6, generator=gen) < 0.4
        diag = torch.tensor([float(it), float("nan")])
        log.record(it, rewards, dones, diag, updated=it > 0, values={"Perf/iteration_ms": 100.0})
        direct.observe(rewards, dones)
        rows.append((direct.mean_return, direct.step_reward))
    assert log.full
    drained = log.drain(buffered)
    assert [it for it, _, _ in drained] == [0, 1, 2, 3] and not log.pending
    for (_, _, values), (mean_return, step_reward) in zip(drained, rows, strict=True):
        assert values["Train/mean_reward"] == mean_return and values["Train/step_reward"] == step_reward
    assert "Loss/critic" not in drained[0][2]  # no update in iteration 0
    assert drained[3][2]["Loss/critic"] == 3.0 and "Loss/actor" not in drained[3][2]  # NaN: never written


def test_the_writer_thread_writes_every_scalar(tmp_path):
    logger = RunLogger(tmp_path, 100)
    for step in range(50):
        logger.scalars({"Perf/a": float(step), "Perf/b": None}, step, walltime=1000.0 + step)
    logger.close()
    acc = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0})
    acc.Reload()
    events = acc.Scalars("Perf/a")
    assert [e.step for e in events] == list(range(50)) and [e.value for e in events] == [float(s) for s in range(50)]
    assert events[7].wall_time == 1007.0  # the iteration's own time, not the write's
    assert "Perf/b" not in acc.Tags()["scalars"]
