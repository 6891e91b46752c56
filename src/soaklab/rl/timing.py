"""Phase durations that mean the same on the CPU and the GPU.

On a CPU device a span is host wall time. On CUDA the host only enqueues work,
so a span is the GPU time between two timing events on the current stream,
read once the end event has completed (never stalling the loop unless asked).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch


class PhaseTimer:
    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.pending: list[tuple[str, Any, Any]] = []
        self.totals_ms: dict[str, float] = defaultdict(float)

    @contextmanager
    def span(self, name: str) -> Iterator[None]:
        if not self.cuda:
            t0 = time.perf_counter()
            yield
            self.totals_ms[name] += (time.perf_counter() - t0) * 1e3
            return
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        yield
        end.record()
        self.pending.append((name, start, end))

    def take(self, block: bool = False) -> dict[str, float]:
        """Milliseconds per phase of the spans finished since the last call (all of them if `block`)."""
        keep = []
        for name, start, end in self.pending:
            if block:
                end.synchronize()
            if block or end.query():
                self.totals_ms[name] += start.elapsed_time(end)
            else:
                keep.append((name, start, end))
        self.pending = keep
        out = dict(self.totals_ms)
        self.totals_ms.clear()
        return out
