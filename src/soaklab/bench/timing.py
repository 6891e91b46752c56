"""The two timing loops every GPU benchmark here uses: a callable timed with CUDA events, and a
captured Warp graph replayed between Warp events. Both time the work on the GPU's own clock after
the caller's warm-up, so host overhead between launches does not count (docs/runtime.md)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch


def time_ms(fn: Callable[[], Any], iters: int, device: torch.device) -> list[float]:
    """Milliseconds of each of `iters` calls: between two CUDA events on a CUDA device (each call
    waited for), by the wall clock elsewhere."""
    out = []
    for _ in range(iters):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e3)
    return out


def warp_replay_ms(graph: Any, iters: int, warmup: int = 5) -> list[float]:
    """Milliseconds of each of `iters` replays of a captured Warp graph on the current Warp device and
    stream, after `warmup` untimed ones. The replays go back to back (events recorded between them,
    one synchronize at the end), as a training loop would launch them."""
    import warp as wp

    for _ in range(warmup):
        wp.capture_launch(graph)
    pairs = []
    for _ in range(iters):
        begin, end = wp.Event(enable_timing=True), wp.Event(enable_timing=True)
        wp.record_event(begin)
        wp.capture_launch(graph)
        wp.record_event(end)
        pairs.append((begin, end))
    wp.synchronize_device()
    return [wp.get_event_elapsed_time(begin, end) for begin, end in pairs]
