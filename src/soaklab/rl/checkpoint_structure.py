"""What a resumable checkpoint must hold to be resumed by this run (docs/runtime.md, "Resuming a run").

weights_only proves a file is plain data, not that it is a checkpoint of this run: a file of the
right keys with a tensor of another shape, an RNG state of the wrong size or a counter that is a
string would otherwise be found only once the collector is spawned and the event file carried, as a
traceback. So the checkpoint choice (soaklab.rl.resume.newest_readable) checks each file against
what this run's config says it holds: every key, every type, the counters, the replay ring's and the
metric row's shapes from the layout, each env group's published observations, and every RNG state,
by setting it on a throwaway generator of the same kind. The agent's modules are checked for their
kinds and types; their shapes are checked by load_state_dict when they are restored.
Each check raises ValueError naming the entry; nothing here allocates more than a generator.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

AGENT_KINDS = {"state_dict": dict, "generator": torch.Tensor, "tensor": torch.Tensor, "object": dict}


@dataclass(frozen=True)
class Expected:
    """What this run's checkpoints hold, from its resolved config (soaklab.rl.train.resume_run_dir)."""

    config_hash: str
    learner_device: str
    num_envs: int
    replay_capacity: int
    row_width: int
    metrics: int  # the collector's metric row (the shared array's length)
    terms: int  # the reward-term sums the collector accumulates
    obs_dim: int
    critic_dim: int
    groups: tuple[int, ...]  # the envs of each group, in order


def _typed(value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, (int, float))):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ValueError(f"{where} is {type(value).__name__}, not {names}")
    return value


def _count(value: Any, where: str, upto: int | None = None) -> int:
    _typed(value, int, where)
    if value < 0 or (upto is not None and value > upto):
        raise ValueError(f"{where} is {value}, outside 0..{upto if upto is not None else ''}")
    return value


def _tensor(value: Any, where: str, dtype: torch.dtype | None = None, shape: tuple[int, ...] | None = None) -> None:
    _typed(value, torch.Tensor, where)
    if dtype is not None and value.dtype != dtype:
        raise ValueError(f"{where} is a {value.dtype} tensor, not {dtype}")
    if shape is not None and tuple(value.shape) != shape:
        raise ValueError(f"{where} has shape {tuple(value.shape)}, this run's is {shape}")


def _fields(state: Any, where: str, keys: tuple[str, ...]) -> dict[str, Any]:
    _typed(state, dict, where)
    missing = [k for k in keys if k not in state]
    if missing:
        raise ValueError(f"{where} lacks {', '.join(missing)}")
    return state


def _generator(value: Any, where: str, device: str = "cpu") -> None:
    """A generator state: set on a throwaway generator where it is a CPU one (the exact check)."""
    _tensor(value, where, torch.uint8)
    if torch.device(device).type == "cpu":
        try:
            torch.Generator().set_state(value)
        except (RuntimeError, TypeError, ValueError) as exc:
            raise ValueError(f"{where}: not a generator state ({str(exc).splitlines()[0]})") from None
    elif value.dim() != 1:
        raise ValueError(f"{where} has shape {tuple(value.shape)}, not a generator state")


def _host_rng(state: Any) -> None:
    state = _fields(state, "host_rng", ("torch", "numpy", "python"))
    _generator(state["torch"], "host_rng.torch")
    saved = _fields(state["numpy"], "host_rng.numpy", ("kind", "keys", "pos", "has_gauss", "gauss"))
    _tensor(saved["keys"], "host_rng.numpy.keys", torch.int64)
    try:
        np.random.RandomState().set_state((_typed(saved["kind"], str, "host_rng.numpy.kind"),
                                           saved["keys"].numpy().astype(np.uint32),
                                           _typed(saved["pos"], int, "host_rng.numpy.pos"),
                                           _typed(saved["has_gauss"], int, "host_rng.numpy.has_gauss"),
                                           _typed(saved["gauss"], float, "host_rng.numpy.gauss")))
        random.Random().setstate(_typed(state["python"], tuple, "host_rng.python"))
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"host_rng: not an RNG state ({exc})") from None
    for i, cuda in enumerate(_typed(state.get("cuda", []), (list, tuple), "host_rng.cuda")):
        _tensor(cuda, f"host_rng.cuda[{i}]", torch.uint8)


def _agent(state: Any, device: str, where: str = "agent") -> None:
    _typed(state, dict, where)
    for name, entry in state.items():
        at = f"{where}.{name}"
        if not isinstance(entry, tuple | list) or len(entry) != 2 or entry[0] not in AGENT_KINDS:
            raise ValueError(f"{at} is not one of ({', '.join(AGENT_KINDS)}, value)")
        kind, value = entry
        _typed(value, AGENT_KINDS[kind], at)
        if kind == "generator":
            _generator(value, at, device)
        elif kind == "object":
            _agent(value, device, at)


def check_learner(state: Any, k: int, expected: Expected) -> None:
    """A learner file of iteration k this run can restore, or ValueError naming the first entry that is not."""
    state = _fields(state, "the learner file", ("iteration", "env_steps", "config_hash", "update_count", "agent",
                                               "replay", "stats", "metrics", "host_rng", "collector"))
    if _typed(state["iteration"], int, "iteration") != k:
        raise ValueError(f"iteration is {state['iteration']}, its name says {k}")
    _count(state["env_steps"], "env_steps")
    _count(state["update_count"], "update_count")
    _typed(state["config_hash"], str, "config_hash")
    if state["collector"] != f"collector_{k}.pt":
        raise ValueError(f"collector is {state['collector']!r}, not collector_{k}.pt")
    elapsed = _typed(state.get("elapsed_s", 0.0), (int, float), "elapsed_s")
    if not math.isfinite(elapsed) or elapsed < 0:
        raise ValueError(f"elapsed_s is {elapsed}, not a finite number of seconds")
    _agent(state["agent"], expected.learner_device)
    replay = _fields(state["replay"], "replay", ("rows", "ptr", "size", "generator"))
    size = _count(replay["size"], "replay.size", expected.replay_capacity)
    _count(replay["ptr"], "replay.ptr", expected.replay_capacity)
    _tensor(replay["rows"], "replay.rows", torch.float32, (size, expected.row_width))
    _generator(replay["generator"], "replay.generator", expected.learner_device)
    stats = _fields(state["stats"], "stats", ("returns", "lengths", "finished_returns", "finished_lengths",
                                              "step_reward"))
    _tensor(stats["returns"], "stats.returns", shape=(expected.num_envs,))
    _tensor(stats["lengths"], "stats.lengths", shape=(expected.num_envs,))
    for key in ("finished_returns", "finished_lengths"):
        for value in _typed(stats[key], list, f"stats.{key}"):
            _typed(value, (int, float), f"stats.{key}[]")
    _typed(stats["step_reward"], (int, float), "stats.step_reward")
    _tensor(state["metrics"], "metrics", torch.float64, (expected.metrics,))
    _host_rng(state["host_rng"])


def check_collector(state: Any, k: int, expected: Expected) -> None:
    """A collector file of step k this run's collector can restore, or ValueError naming the first entry
    that is not (each env's own state is the task's and its backend's; they check its shapes)."""
    state = _fields(state, "the collector file", ("step", "envs", "published", "term_sums", "term_count", "torch_rng"))
    if _typed(state["step"], int, "step") != k:
        raise ValueError(f"step is {state['step']}, its name says {k}")
    groups = len(expected.groups)
    for key in ("envs", "published"):
        if len(_typed(state[key], list, key)) != groups:
            raise ValueError(f"{key} holds {len(state[key])} env groups, this run has {groups}")
    for g, (env, published, n) in enumerate(zip(state["envs"], state["published"], expected.groups, strict=True)):
        _typed(env, dict, f"envs[{g}]")
        if "blocks" in env:  # the motion library's layout before it became one world set (tasks/g1_tracking/library.py)
            raise ValueError(f"envs[{g}] is a motion library of one env per clip, saved before the library became one "
                             "world set; resume it with the soaklab that wrote it")
        if not isinstance(published, tuple | list) or len(published) != 3:
            raise ValueError(f"published[{g}] is not (obs, critic_obs, dones)")
        for value, name, shape in zip(published, ("obs", "critic_obs", "dones"),
                                      ((n, expected.obs_dim), (n, expected.critic_dim), (n,)), strict=True):
            _tensor(value, f"published[{g}].{name}", shape=shape)
    _tensor(state["term_sums"], "term_sums", torch.float64, (expected.terms,))
    _count(state["term_count"], "term_count")
    _generator(state["torch_rng"], "torch_rng")
