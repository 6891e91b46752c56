"""The trainer's side of MPS: the selection points this process at the daemon and gives the learner
and the collector their own thread shares (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE), read by the driver
when each process starts CUDA."""

from __future__ import annotations

import multiprocessing as mp
import os

import pytest

from soaklab.mps.client import LOG_ENV, PIPE_ENV, THREADS_ENV, MpsSelection


def selection(learner: int | None, collector: int | None) -> MpsSelection:
    return MpsSelection("soaklab record", "/tmp/soaklab-test-pipe", "/tmp/soaklab-test-log", "test", (), None,
                        learner_threads=learner, collector_threads=collector)


def child_environment(queue: mp.Queue) -> None:
    queue.put(os.environ.get(THREADS_ENV))


def spawned_share(sel: MpsSelection) -> str | None:
    """What a child spawned inside the collector environment sees (a real spawn, as the runner's)."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=child_environment, args=(queue,))
    with sel.collector_environment():
        proc.start()
    value = queue.get(timeout=60)
    proc.join(timeout=60)
    return value


@pytest.mark.parametrize(("learner", "collector"), [(50, None), (50, 90), (None, 40), (None, None)])
def test_each_process_starts_with_its_own_thread_share(monkeypatch, learner, collector):
    for name in (PIPE_ENV, LOG_ENV, THREADS_ENV):
        monkeypatch.delenv(name, raising=False)
    sel = selection(learner, collector)
    sel.apply()
    assert os.environ[PIPE_ENV] == "/tmp/soaklab-test-pipe"
    assert os.environ.get(THREADS_ENV) == (None if learner is None else str(learner))
    assert spawned_share(sel) == (None if collector is None else str(collector))
    # The learner keeps its own share after the spawn (and its later DP ranks inherit it).
    assert os.environ.get(THREADS_ENV) == (None if learner is None else str(learner))
