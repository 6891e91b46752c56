"""`algo.compile`: torch.compile of a CUDA learner's update before it is captured.

The captured update is one graph launch, but it still runs every kernel eager
PyTorch issues: FlashSAC's update at batch 2048 is hundreds of small kernels,
most of them elementwise passes over [2, B, 4 x hidden] activations, so it is
bound by memory traffic and launch gaps rather than by its matrix products.
Inductor fuses those passes; the CUDA graph then captures the fused kernels
(compile in the default mode: the capture is soaklab's own, not inductor's).

Scopes (`algo.compile`):
- ``eager``: no compilation (the default; CPU learners always run eager);
- ``nets``: each network's forward (and, through AOTAutograd, its backward)
  compiled, the loss code between them eager;
- ``update``: the whole update function compiled; dynamo breaks its graph where
  it cannot trace (explicit generators, the optimizers' steps), which stay eager;
- ``auto``: ``update``, falling back to eager when compilation fails at start-up
  (the first calls, before capture); the manifest records what ran and why.
A failure under ``nets`` or ``update`` fails the run: it was asked for by name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from soaklab.config.keys import COMPILE_MODES
from soaklab.host.compile_cache import start_compile_workers, use_keyed_cache


class Compilation:
    """What one agent compiles, decided once when it is built."""

    def __init__(self, requested: str, device: torch.device, backend: Any = "inductor") -> None:
        """`backend`: torch.compile's backend (inductor; tests pass one that fails)."""
        if requested not in COMPILE_MODES:
            raise ValueError(f"algo.compile={requested!r}: expected one of {', '.join(COMPILE_MODES)}")
        self.requested, self.backend = requested, backend
        self.reason: str | None = None
        if requested != "eager" and device.type != "cuda":
            self.scope, self.reason = "eager", f"learner on {device.type}: compile applies to CUDA learners only"
        else:
            self.scope = "update" if requested == "auto" else requested
        self.fallback: str | None = None

    def networks(self, modules: Sequence[nn.Module]) -> None:
        """Compile each network's forward in place (state_dict keys stay those of the module)."""
        if self.scope == "nets":
            for module in modules:
                module.compile(dynamic=False, backend=self.backend)

    def step(self, name: str, fn: Callable[[], Any]) -> Callable[[], Any]:
        """`fn` compiled under the update scope, else `fn` itself."""
        if self.scope != "update":
            return fn
        use_keyed_cache()
        start_compile_workers()  # during start-up, not inside the soak's leak window
        compiled = torch.compile(fn, dynamic=False, backend=self.backend)
        if self.requested != "auto":
            return compiled

        def guarded() -> Any:
            if self.fallback is None:
                try:
                    return compiled()
                except Exception as exc:  # noqa: BLE001 - auto: any compile failure falls back, recorded
                    # A failure surfaces while a fragment is traced, before it runs; fragments before
                    # a graph break may already have run once (start-up calls, before capture).
                    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
                    self.fallback = f"{name}: {type(exc).__name__}: {text[:300]}"
            return fn()

        return guarded

    def diagnostics(self) -> dict[str, Any]:
        """For the run's manifest: what was asked, what ran, and why they differ."""
        ran = "eager" if self.fallback is not None else self.scope
        return {"requested": self.requested, "ran": ran, "reason": self.fallback or self.reason}
