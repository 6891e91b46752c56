"""CUDA-graph capture of a step of static tensors (learner update, inference, env step), with
an eager path.

A `CapturedStep` wraps a function of static tensors (it reads and writes only
tensors whose addresses never change: model parameters, optimizer state, the
replay storage, input/output buffers). On a CPU device, or where capture is
turned off, every call runs the function eagerly. On CUDA the first `warmup`
calls run eagerly on a side stream (torch's recipe: it initialises optimizer
state and library workspaces off the capture stream), the next call captures
the function into a CUDA graph and replays it, and every later call is one
replay: one launch instead of hundreds, and no host read.

Every call performs the step exactly once: capture records without running, so
the capturing call replays right after. A capture that fails leaves the step
eager for the rest of the run, and `diagnostics()` says why (the way backend
diagnostics do).

SOAKLAB_LEARNER_CUDA_GRAPH=0 keeps a CUDA learner eager (debugging); the env's
steps follow its backend's own graph setting.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import torch

from soaklab.host.envvars import GRAPH_ENV, check_graph_env

WARMUP_CALLS = 3


def graph_requested(device: torch.device) -> tuple[bool, str | None]:
    """Whether a learner on `device` captures, and why not when it does not."""
    check_graph_env()
    if device.type != "cuda":
        return False, f"learner on {device.type}: CUDA graphs need a CUDA device"
    if os.environ.get(GRAPH_ENV, "1") == "0":
        return False, f"{GRAPH_ENV}=0"
    return True, None


class CapturedStep:
    def __init__(self, name: str, fn: Callable[[], Any], device: torch.device,
                 generators: Sequence[torch.Generator] = (), warmup: int = WARMUP_CALLS,
                 requested: tuple[bool, str | None] | None = None) -> None:
        """`requested`: (whether to capture, why not); default: `graph_requested(device)`."""
        self.name, self.fn, self.device = name, fn, device
        self.generators = tuple(generators)
        self.warmup = warmup
        self.requested, self.disable_reason = requested if requested is not None else graph_requested(device)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.calls = 0

    @property
    def enabled(self) -> bool:
        return self.graph is not None

    def __call__(self) -> None:
        self.calls += 1
        if self.graph is not None:
            self.graph.replay()
            return
        if not self.requested or self.disable_reason is not None:
            self.fn()
            return
        if self.calls <= self.warmup:
            self._side_stream(self.fn)
            return
        try:
            self._capture()
        except Exception as exc:  # stays eager; the manifest says why
            self.graph = None
            self.disable_reason = f"{self.name} capture failed: {type(exc).__name__}: {exc}"
            torch.cuda.synchronize(self.device)
            self.fn()
            return
        self.graph.replay()

    def _side_stream(self, fn: Callable[[], Any]) -> None:
        main = torch.cuda.current_stream(self.device)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(main)
        with torch.cuda.stream(side):
            fn()
        main.wait_stream(side)

    def _capture(self) -> None:
        graph = torch.cuda.CUDAGraph()
        register = getattr(graph, "register_generator_state", None)
        if self.generators and register is None:
            raise RuntimeError("this torch cannot register explicit generators with a CUDA graph")
        for generator in self.generators:
            register(generator)
        with torch.cuda.graph(graph):
            self.fn()
        self.graph = graph

    def diagnostics(self) -> dict[str, Any]:
        return {"requested": self.requested, "enabled": self.enabled,
                "disable_reason": None if self.enabled else (self.disable_reason or "not captured yet")}

    def close(self) -> None:
        self.graph = None


def graph_diagnostics(steps: Sequence[CapturedStep]) -> dict[str, Any]:
    """One {requested, enabled, disable_reason} for a set of steps: enabled only if every one is."""
    requested = all(s.requested for s in steps)
    enabled = bool(steps) and all(s.enabled for s in steps)
    reasons = [s.diagnostics()["disable_reason"] for s in steps if not s.enabled]
    return {"requested": requested, "enabled": enabled,
            "disable_reason": None if enabled else ("; ".join(dict.fromkeys(r for r in reasons if r)) or None),
            "steps": {s.name: s.diagnostics() | {"calls": s.calls} for s in steps}}
