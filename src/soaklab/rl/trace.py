"""A run's trace: per step, a digest of every tensor that carries the run from one step to the next
(docs/determinism.md, "Finding a difference").

`SOAKLAB_TRACE=1` makes the learner and its collector each append one JSON line per step and stage to
`<run dir>/trace/<side>.jsonl`: {"step", "stage", "digests": {name: sha256 prefix}}. The stages, in the
order a difference propagates: the actions the collector was answered, the physics state after the
step, the rewards, the observations, then the learner's update round (the replay rows it samples, its
losses, the weights after it) and the rows it took into replay. `SOAKLAB_TRACE_DUMP=N` also saves step
N's tensors whole (`<side>-<N>-<stage>.pt`), so a rerun with the step the diff named shows the values.
`soaklab diff-runs` reads two traces (soaklab.metrics.trace).

Tracing reads tensors back to the host (a synchronisation per step) and draws nothing: the numbers
a traced run computes are an untraced run's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from soaklab.host.envvars import trace_settings

TRACE_DIR = "trace"


def digest(tensor: torch.Tensor) -> str:
    """sha256 (first 16 hex digits) of a tensor's dtype, shape and bytes: equal digests, equal bits."""
    t = tensor.detach().contiguous().cpu()
    h = hashlib.sha256(f"{t.dtype}|{tuple(t.shape)}|".encode())
    if t.numel():
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def flatten(tree: Any, prefix: str = "") -> dict[str, torch.Tensor]:
    """Every tensor of a nested dict/list/tuple, by its path ('physics/qpos', 'actor/net.0.weight')."""
    out: dict[str, torch.Tensor] = {}
    if isinstance(tree, torch.Tensor):
        out[prefix] = tree
    elif isinstance(tree, dict):
        for key in sorted(tree, key=str):
            out.update(flatten(tree[key], f"{prefix}/{key}" if prefix else str(key)))
    elif isinstance(tree, list | tuple):
        for i, value in enumerate(tree):
            out.update(flatten(value, f"{prefix}/{i}" if prefix else str(i)))
    return out


class Trace:
    """One process's trace file (`side`: collector or learner)."""

    def __init__(self, run_dir: Path, side: str, dump_step: int | None) -> None:
        self.folder = run_dir / TRACE_DIR
        self.folder.mkdir(exist_ok=True)
        self.side, self.dump_step = side, dump_step
        # Appended: a resumed run continues the file, and the reader keeps each step's last line.
        self.file = open(self.folder / f"{side}.jsonl", "a", encoding="utf-8")  # noqa: SIM115 (the process's lifetime)

    def record(self, step: int, stage: str, tensors: dict[str, torch.Tensor]) -> None:
        line = {"step": step, "stage": stage, "digests": {name: digest(t) for name, t in tensors.items()}}
        self.file.write(json.dumps(line, sort_keys=True) + "\n")
        self.file.flush()
        if step == self.dump_step:
            torch.save({name: t.detach().cpu().clone() for name, t in tensors.items()},
                       self.folder / f"{self.side}-{step}-{stage}.pt")

    def close(self) -> None:
        self.file.close()


def trace_from_env(run_dir: str | Path | None, side: str) -> Trace | None:
    """The trace SOAKLAB_TRACE asks for (None: not asked, or no run dir to write it in); resolution has
    refused a bad value already (soaklab.host.envvars.trace_settings)."""
    on, dump = trace_settings()
    return Trace(Path(run_dir), side, dump) if on and run_dir is not None else None


class LearnerTrace:
    """The learner's stages of the trace (`trace` None: no trace, and these only run the round): the
    update round of iteration `it` (the replay rows its batches start at, its losses, the weights
    after it) and the vector it took into replay."""

    def __init__(self, trace: Trace | None) -> None:
        self.trace = trace

    def round(self, it: int, learning: Any, batch: int, updates: int, timer: Any) -> None:
        """Run update round `it` (`learning`: soaklab.rl.learning.Learning), traced around."""
        if self.trace is None:
            learning.update(updates, timer)
            return
        agent = learning.agent
        self.trace.record(it, "sample", {"replay/rows": learning.replay.peek_rows(batch, updates)})
        learning.update(updates, timer)
        self.trace.record(it, "loss", {f"loss/{name}": agent.diagnostics[i] for i, name in enumerate(agent.diag_names)})
        self.trace.record(it, "weights", flatten(agent.state_dict(), "agent"))

    def ingested(self, it: int, replay: Any, rows: int, join: Callable[[], None]) -> None:
        """The last `rows` rows written into the ring (the vector of step `it`), in ring order; `join`
        waits for the ingress stream that copied them."""
        if self.trace is None:
            return
        join()
        end = replay.ptr if replay.ptr else replay.capacity
        index = torch.arange(end - rows, end, device=replay.storage.device) % replay.capacity
        self.trace.record(it, "replay", {"replay/ingested": replay.storage[index]})

    def close(self) -> None:
        if self.trace is not None:
            self.trace.close()
