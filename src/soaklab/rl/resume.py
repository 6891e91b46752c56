"""Resumable checkpoints: everything the next iteration reads, so a killed run continues where its
last checkpoint left it, bit for bit on the CPU (docs/runtime.md, "Resuming a run").

At every `algo.save_interval`, beside the policy's `checkpoints/model_<k>.pt`, the run dir's
`resume/` gets two files for iteration k (the first iteration not yet run):
- `collector_<k>.pt`, written by the collector after its vector step k - 1 and before it publishes
  that vector (so it exists before the learner can take the vector in): each env group's state
  (physics, RNG, sampler, clip positions), the observations it published for step k and the
  metric sums it is accumulating;
- `learner_<k>.pt`, written by the learner at the end of iteration k - 1, after its event rows are
  on disk: the agent (networks, optimizers, normalizers, generator and every tensor it keeps), the
  replay ring, the episode statistics, the counters, the host RNGs and the collector's metric row.
The learner's file is written last and names its collector file: a learner file is the checkpoint.
The last two are kept. Both are plain data (tensors, numbers, strings and containers: the host
RNGs and the physics are converted), loaded with weights_only (soaklab.files.checkpoints.load_weights):
a run dir is data, and a crafted file never runs code. A newest checkpoint that cannot be read, or
is not plain data, falls back to the one before it, and says so.

This works because the schedule is fixed (soaklab.rl.schedule: update round `it` reads vector steps
up to `it - 1`): at the end of iteration k - 1 the collector can only be waiting for step k's
actions, so the two files are one consistent cut of the run.
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from soaklab.errors import InvalidInput
from soaklab.files.checkpoints import checkpoint_iterations, collector_path, learner_path, load_weights, resume_dir
from soaklab.files.jsonfiles import read_json, write_json_atomic
from soaklab.files.rundir import SEGMENTS
from soaklab.host.run_code import code_change, made_at
from soaklab.rl.checkpoint_structure import Expected, check_collector, check_learner
from soaklab.schemas import part_errors

KEEP = 2


def save_atomic(payload: Any, path: Path) -> int:
    """torch.save into memory, then one write and a rename (a kill leaves the old file or the new,
    never half of one; a full disk is an OSError naming ENOSPC). Returns the bytes written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_bytes(buffer.getbuffer())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return buffer.getbuffer().nbytes


def prune(run_dir: Path, keep: int = KEEP) -> None:
    """Keep the newest `keep` learner checkpoints and their collector files; drop the rest."""
    iterations = checkpoint_iterations(run_dir)
    for k in iterations[:-keep] if len(iterations) > keep else []:
        learner_path(run_dir, k).unlink(missing_ok=True)
        collector_path(run_dir, k).unlink(missing_ok=True)
    kept = set(iterations[-keep:])
    for stray in resume_dir(run_dir).glob("collector_*.pt"):  # a collector file whose learner file never came
        k = int(stray.stem.split("_")[1])
        if k not in kept and k < max(kept, default=0):
            stray.unlink(missing_ok=True)


# -- host RNGs ---------------------------------------------------------------------------------------
def host_rng_state() -> dict[str, Any]:
    """The host RNGs as plain data (a checkpoint is loaded weights_only: tensors, numbers, strings
    and containers, never a NumPy array): NumPy's Mersenne Twister as a tensor of its key and its
    scalars, Python's as the tuple of ints random.getstate() gives."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state(legacy=True)
    state: dict[str, Any] = {"torch": torch.get_rng_state(),
                             "numpy": {"kind": str(kind), "keys": torch.from_numpy(keys.astype(np.int64)),
                                       "pos": int(pos), "has_gauss": int(has_gauss), "gauss": float(gauss)},
                             "python": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_host_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    saved = state["numpy"]
    np.random.set_state((saved["kind"], saved["keys"].numpy().astype(np.uint32), saved["pos"], saved["has_gauss"],
                         saved["gauss"]))
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# -- an object's tensors, modules, optimizers and generators -------------------------------------------
def tensor_state(obj: Any, skip: frozenset[str] = frozenset(), depth: int = 1) -> dict[str, Any]:
    """Every piece of training state an object holds in its attributes: tensors, modules,
    optimizers, generators, and (to `depth`) plain soaklab objects holding those (FlashSAC's return
    scale). Walking the attributes, rather than listing them per agent, means a tensor an agent adds
    later is saved without anyone remembering to: a resume that forgets one is not exact."""
    out: dict[str, Any] = {}
    for name, value in vars(obj).items():
        if name.startswith("_") or name in skip:
            continue
        if isinstance(value, torch.nn.Module | torch.optim.Optimizer):
            out[name] = ("state_dict", value.state_dict())
        elif isinstance(value, torch.Generator):
            out[name] = ("generator", value.get_state())
        elif isinstance(value, torch.Tensor):
            out[name] = ("tensor", value.detach().clone())
        elif depth > 0 and type(value).__module__.startswith("soaklab.") and hasattr(value, "__dict__"):
            out[name] = ("object", tensor_state(value, depth=depth - 1))
    return out


def load_tensor_state(obj: Any, state: dict[str, Any]) -> None:
    """The inverse of tensor_state(). Tensors are copied in place: a captured CUDA graph or a view
    keeps pointing at the same memory."""
    for name, (kind, value) in state.items():
        target = getattr(obj, name)
        if kind == "state_dict":
            target.load_state_dict(value)
        elif kind == "generator":
            target.set_state(value)
        elif kind == "tensor":
            if target.shape != value.shape:
                raise ValueError(f"{name}: saved shape {tuple(value.shape)}, this run's {tuple(target.shape)}")
            target.copy_(value)
        else:
            load_tensor_state(target, value)


# -- choosing a checkpoint -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Checkpoint:
    iteration: int
    learner: dict[str, Any]
    collector: Path
    notes: tuple[str, ...]  # what was skipped on the way (a damaged newer checkpoint)


def newest_readable(run_dir: Path, expected: Expected) -> tuple[Checkpoint | None, tuple[str, ...]]:
    """The newest readable checkpoint, and what was skipped on the way: a damaged, incomplete or not
    plain-data newer one, or one whose structure is not what this run holds (checkpoint_structure),
    is named in its `notes` (all of them, when none is readable). Both files of a checkpoint are
    loaded as data and checked here (load_weights), before anything is spawned or written: a crafted
    collector file is refused here, not in the collector, which loads its file again the same way."""
    notes: list[str] = []
    for k in reversed(checkpoint_iterations(run_dir)):
        path, collector = learner_path(run_dir, k), collector_path(run_dir, k)
        failing = path
        try:
            learner = load_weights(path)
            check_learner(learner, k, expected)
            failing = collector
            if not collector.is_file():
                raise ValueError("missing")
            check_collector(load_weights(collector), k, expected)
        except Exception as exc:  # any unreadable file: fall back, and say so
            why = " ".join(str(exc).removeprefix(f"{failing}: ").split())  # load_weights names the file: said once
            notes.append(f"{failing.name} cannot be read ({why[:240]}); falling back to the one before it")
            continue
        return Checkpoint(k, learner, collector, tuple(notes)), tuple(notes)
    return None, tuple(notes)


def check_resumable(run_dir: Path, expected: Expected, code: dict[str, Any]) -> Checkpoint:
    """What `soaklab train --resume RUN_DIR` continues from, or one line on why it cannot. `code`: what
    this process runs (soaklab.host.run_code): a checkpoint made by other code is refused, since the
    resumed run would not be its unbroken self."""
    config_hash = expected.config_hash
    summary = run_dir / "run_summary.json"
    if summary.is_file():
        try:
            status = read_json(summary).get("status")
        except ValueError:
            status = None
        if status == "completed":
            raise InvalidInput(f"--resume {run_dir}: the run completed; there is nothing to resume")
    found, skipped = newest_readable(run_dir, expected)
    if found is None:
        unread = "; ".join(note.removesuffix("; falling back to the one before it") for note in skipped)
        raise InvalidInput(f"--resume {run_dir}: no readable checkpoint in {resume_dir(run_dir)} "
                           "(one is written every algo.save_interval iterations)" + (f": {unread}" if unread else ""))
    if found.learner.get("config_hash") != config_hash:
        raise InvalidInput(f"--resume {run_dir}: its checkpoint at iteration {found.iteration} was made with config "
                           f"{found.learner.get('config_hash')}, and run_config.json now resolves to {config_hash}; "
                           "resume with the configuration the run started with")
    if change := code_change(found.learner.get("code"), code):
        raise InvalidInput(f"--resume {run_dir}: its checkpoint at iteration {found.iteration} was made by other code "
                           f"({change}), and a resume on other code is not the unbroken run; resume with the code "
                           f"that made it ({made_at(found.learner.get('code'))}), or start the run afresh")
    return found


# -- segments --------------------------------------------------------------------------------------------
def read_segments(run_dir: Path, required: bool = False) -> list[dict[str, Any]]:
    """The run's segments so far, checked: segments.json is the run's history (its kills, its declared
    event gaps), so a file that is refused by read_json or breaks run_summary.json's segment schema
    (a NaN, a string for an iteration) is refused in one line (InvalidInput), never replaced. Missing
    it is only for a new run: every run writes it when it starts (`required` for a resume)."""
    path = run_dir / SEGMENTS
    if not path.exists() and not required:
        return []
    fix = "restore it from a copy of the run dir; it holds the run's segments and declared event gaps"
    if path.exists() and not path.is_file():  # a FIFO would block the read: the resume would hang
        raise InvalidInput(f"{path}: not a regular file; {fix}")
    try:
        payload = read_json(path)
    except FileNotFoundError:
        raise InvalidInput(f"{path}: missing, and every run writes it when it starts; {fix}") from None
    except (OSError, ValueError) as exc:
        why = " ".join(str(exc).removeprefix(f"{path}: ").split())  # read_json names the file: said once
        raise InvalidInput(f"{path}: unreadable ({why}); {fix}") from None
    errors = part_errors("run_summary", "segments", payload)
    if errors:
        raise InvalidInput(f"{path}: not a segment history soaklab wrote ({errors[0]}); {fix}")
    return list(payload["segments"])


def begin_segment(run_dir: Path, start_iteration: int, resumed_from: int | None,
                  carried: dict[str, Any] | None = None, code: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Close the previous segment (a killed one never wrote its end: it ended where this resume
    picks up, its later work discarded) and open this one. `carried`: what a resume keeps of the
    event file, with the gaps damaged records leave (soaklab.metrics.events.CarryPlan.record);
    `code`: what the segment runs (soaklab.host.run_code)."""
    segments = read_segments(run_dir)
    if segments and segments[-1].get("end_iteration") is None:
        segments[-1].update(end_iteration=start_iteration, cause="killed (no shutdown recorded)",
                            resumed_at=start_iteration)
    elif segments:
        segments[-1]["resumed_at"] = start_iteration
    segments.append({"start_iteration": start_iteration, "resumed_from_checkpoint": resumed_from,
                     "end_iteration": None, "cause": None, **({"carried_events": carried} if carried else {}),
                     **({"code": code} if code is not None else {})})
    write_json_atomic(run_dir / SEGMENTS, {"segments": segments})
    return segments


def event_gaps(segments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every gap the run's resumes declared, once each (a resume killed before its rewrite plans the
    same gap again), in the order they were found."""
    gaps: list[dict[str, Any]] = []
    for segment in segments:
        for gap in (segment.get("carried_events") or {}).get("gaps", []):
            if gap not in gaps:
                gaps.append(gap)
    return gaps


def end_segment(run_dir: Path, end_iteration: int, cause: str) -> list[dict[str, Any]]:
    segments = read_segments(run_dir)
    if segments:
        segments[-1].update(end_iteration=end_iteration, cause=cause)
        write_json_atomic(run_dir / SEGMENTS, {"segments": segments})
    return segments
