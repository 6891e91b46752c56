"""The learner's collector and the channels to it (docs/runtime.md, "Channels: rings and shapes"):
the shared blocks and the transport (a host ring, or a CUDA ring the learner allocates), the
collector process spawned on them, each env group's observations answered, a vector step's
transitions taken into the replay ring, and at shutdown the collector stopped, its end recorded and
the blocks released."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

import numpy as np
import torch

from soaklab.contract.layout import Layout
from soaklab.rl.channels import C, ChannelHandles, make_channels, wait
from soaklab.rl.collector import CollectorSpec
from soaklab.rl.collector_process import NO_COLLECTOR, CollectorProcess, read_backend_diagnostics, stop_collector
from soaklab.rl.replay import ReplayRing
from soaklab.rl.shm import SharedArrays, reclaim_at_start
from soaklab.rl.shutdown import Shutdown
from soaklab.rl.timing import PhaseTimer
from soaklab.rl.transport import CudaRing, HostRing, make_cuda_ring, make_transport

# What answers a group's observations: act(obs, a, b) -> the actions of envs a..b-1.
Act = Callable[[torch.Tensor, int, int], torch.Tensor]


class Exchange:
    """`alive`: polled by every wait on the collector (the learner's safe point too)."""

    def __init__(self, layout: Layout, device: torch.device, alive: Callable[[], bool], diagnostics: Path) -> None:
        self.layout, self.device, self.alive = layout, device, alive
        self.diagnostics = diagnostics  # where the collector reports its backend (diagnostics_path)
        self.slices = layout.row_slices()
        self.collector: CollectorProcess | None = None
        self.arrays: SharedArrays | None = None
        self.handles: ChannelHandles | None = None
        self.transport: HostRing | CudaRing | None = None
        self.vector: torch.Tensor | None = None  # the vector step taken in last

    def open(self, ctx: BaseContext, carrier: str) -> None:
        """In this order, so a step that fails leaves what came before it for shutdown to release."""
        # A cuda carrier: the learner allocates the ring and ingress slots on the GPU and shares them.
        cuda_ring = make_cuda_ring(self.layout, carrier) if carrier.startswith("cuda") else None
        if line := reclaim_at_start():  # a tree killed whole left its segments: not for good
            print(f"train: {line}", flush=True)
        self.arrays, self.handles = make_channels(ctx, self.layout, cuda_ring)
        self.transport = make_transport(cuda_ring if cuda_ring is not None else self.arrays)
        self.vector = torch.zeros(self.layout.num_envs, self.layout.row_width, device=self.device)

    def spawn(self, ctx: BaseContext, mps: object, watch: Callable[[], None], **spec: Any) -> None:
        """Start the collector on these channels (`spec`: the rest of its CollectorSpec), under `mps`
        (the run's MPS selection, if any), and wait for its first observations; `watch` checks the
        other ranks meanwhile."""
        self.collector = CollectorProcess(ctx, CollectorSpec(handles=self.handles, torch_threads=1,
                                                             parent_pid=os.getpid(),
                                                             diagnostics_path=str(self.diagnostics), **spec))
        self.collector.start(mps)
        self.collector.wait_ready(self.control, self.alive, watch)

    def collector_alive(self) -> bool:
        return self.collector is not None and self.collector.alive()

    def collector_gone(self) -> bool:
        """Spawned, and exited since."""
        return self.collector is not None and not self.collector.alive()

    @property
    def control(self) -> np.ndarray:
        assert self.arrays is not None
        return self.arrays["control"]

    @property
    def metrics(self) -> np.ndarray:
        """The collector's metric row (the sums it publishes every logging interval)."""
        assert self.arrays is not None
        return self.arrays["metrics"]

    def answer(self, act: Act, timer: PhaseTimer) -> None:
        """Inference: answer each group's observations with `act`."""
        assert self.handles is not None and self.transport is not None
        ctl, h, transport = self.control, self.handles, self.transport
        for g, (a, b) in enumerate(self.layout.group_bounds):
            wait(h.obs_ready[g], ctl, self.alive, stop_aware=False)
            obs = transport.obs(g, b - a, self.device)  # on CUDA: the stream waits for the collector
            with timer.span("inference"):
                actions = act(obs, a, b)
                transport.answer(g, actions)
            ctl[C.TICKS_ANSWERED] += 1
            h.act_ready[g].release()

    def ingest(self, target: int, replay: ReplayRing, timer: PhaseTimer) -> tuple[torch.Tensor, torch.Tensor]:
        """Copy a vector step's chunks into the replay ring, releasing each slot, until `target` chunks
        are released (counted from this process's start); the vector's rewards and dones. Inside
        transport.ingesting(): on CUDA what reads them stays on the ingress stream."""
        assert self.arrays is not None and self.handles is not None and self.transport is not None
        ctl, h, transport, vector = self.control, self.handles, self.transport, self.vector
        assert vector is not None
        ingress_rows = self.arrays["ingress_rows"]
        filled = 0
        while ctl[C.INGRESS_RELEASED] < target:
            wait(h.ingress_filled, ctl, self.alive, stop_aware=False)
            slot = int(ctl[C.INGRESS_RELEASED] % self.layout.depth)
            n = int(ingress_rows[slot])
            rows = transport.chunk(slot, n, self.device)  # on CUDA: the side stream waits for it
            with timer.span("ingress"):
                replay.add(rows)
                vector[filled:filled + n] = rows
                transport.release_chunk(slot)
            filled += n
            ctl[C.INGRESS_RELEASED] += 1
            h.ingress_free.release()
        rewards = vector[:, self.slices["reward"]][:, 0]
        dones = (vector[:, self.slices["terminated"]][:, 0] + vector[:, self.slices["truncated"]][:, 0]) > 0
        return rewards, dones

    def ingesting(self) -> AbstractContextManager[None]:
        """Around taking a vector in and what reads it: on CUDA, the ingress stream."""
        assert self.transport is not None
        return self.transport.ingesting()

    def join(self) -> None:
        """Wait for the ingress stream (the last vector's rows and what read them)."""
        if self.transport is not None:  # closed at shutdown: the device was synchronised then
            self.transport.join()

    # -- shutdown ----------------------------------------------------------------------------------
    def close(self, shutdown: Shutdown, sim: str, keep_diagnostics: bool
              ) -> tuple[np.ndarray | None, dict[str, Any] | None]:
        """Stop the collector, record how it ended, release the channels: the control block's last
        counters, and the backend diagnostics the collector reported (a rank > 0's file is removed
        once read). Each step's error is recorded in `shutdown`."""
        shutdown.step("stop collector", self._stop)
        shutdown.collector = self.collector.record() if self.collector is not None else dict(NO_COLLECTOR)
        counters = self.arrays["control"].copy() if self.arrays is not None and self.arrays.arrays else None
        backend = shutdown.step("backend diagnostics",
                                lambda: read_backend_diagnostics(self.diagnostics, sim, keep_file=keep_diagnostics))
        if self.transport is not None:
            shutdown.step("close transport", self._close_transport)
        if self.arrays is not None:
            shutdown.cleanup_errors.extend(shutdown.step("close shared memory", self.arrays.close) or [])
        return counters, backend

    def _stop(self) -> None:
        control = self.arrays["control"] if self.arrays is not None and self.arrays.arrays else None
        stop_collector(control, self.handles, self.collector)

    def _close_transport(self) -> None:
        """The collector is gone: drop the learner's references to the CUDA ring too, so CUDA IPC
        can account every shared block as released before this process exits."""
        assert self.transport is not None
        self.transport.close()
        self.transport = None
        if self.handles is not None and self.handles.cuda_ring is not None:
            object.__setattr__(self.handles, "cuda_ring", None)
            gc.collect()
            torch.cuda.ipc_collect()
