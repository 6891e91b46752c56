"""The benchmarks' timing loops: every call timed once, in milliseconds; the GPU loops on a GPU."""

from __future__ import annotations

import pytest
import torch

from soaklab.bench.timing import time_ms, warp_replay_ms


def test_each_call_is_timed_once_in_milliseconds_on_the_cpu():
    calls = []
    times = time_ms(lambda: calls.append(sum(range(20_000))), 7, torch.device("cpu"))
    assert len(calls) == 7 and len(times) == 7
    assert all(t > 0 for t in times)
    assert max(times) < 60_000, "milliseconds, not microseconds: summing 20k ints takes well under a minute"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU (CUDA)")
def test_cuda_events_time_the_gpu_work_and_warp_replays_a_captured_graph():
    device = torch.device("cuda")
    x = torch.randn(2048, 2048, device=device)
    assert len(time_ms(lambda: x @ x, 5, device)) == 5
    wp = pytest.importorskip("warp", reason="warp is not installed (the warp extra)")
    wp.init()
    a = wp.zeros(1 << 20, dtype=wp.float32, device="cuda:0")
    with wp.ScopedDevice("cuda:0"), wp.ScopedCapture() as capture:
        a.fill_(1.0)
    with wp.ScopedDevice("cuda:0"):
        times = warp_replay_ms(capture.graph, 4, warmup=1)
    assert len(times) == 4 and all(t >= 0 for t in times)
    assert float(a.numpy().mean()) == 1.0
