"""A finished run read back for use: its resolved config and one checkpoint's policy
(`soaklab export`, `soaklab play`).

Everything comes from the run dir (run_config.json, checkpoints/); a missing or foreign file is bad
input: one line naming it, exit 2, nothing written.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import torch

from soaklab.config.run_config import recorded_run
from soaklab.contract.sections import RunConfig
from soaklab.errors import InvalidInput
from soaklab.files.checkpoints import load_weights
from soaklab.files.jsonfiles import read_json
from soaklab.files.rundir import RUN_CONFIG

FINAL_CHECKPOINT = "model_final.pt"
RUN_SUMMARY = "run_summary.json"


@dataclass(frozen=True)
class RunStatus:
    """How the run ended, from its run_summary.json: `completed`, `failed`, or `unknown` where there
    is none to read (still running, or killed before it could write one)."""

    status: str
    failure_reason: str | None

    @property
    def finished(self) -> bool:
        """A completed run's policy; any other is judged as what it is, never as a finished one's."""
        return self.status == "completed"


def run_status(run_dir: Path) -> RunStatus:
    path = run_dir / RUN_SUMMARY
    if not path.is_file():
        return RunStatus("unknown", f"no {RUN_SUMMARY}: the run is still going, or was killed before writing it")
    try:  # a key twice, too deep, too large: refused (exit 2), never judged by the copy a parser keeps
        summary = read_json(path)
    except OSError as exc:
        return RunStatus("unknown", f"{RUN_SUMMARY} unreadable ({exc})")
    if not isinstance(summary, dict) or not isinstance(summary.get("status"), str):
        return RunStatus("unknown", f"{RUN_SUMMARY} holds no status")
    reason = summary.get("failure_reason")
    return RunStatus(summary["status"], reason if isinstance(reason, str) else None)


@dataclass(frozen=True)
class TrainedRun:
    run_dir: Path
    record: dict[str, Any]  # run_config.json
    checkpoint: Path
    iteration: int
    agent: Any  # an OffPolicyAgent on the CPU, in eval mode, with the checkpoint's weights
    training_s: float | None = None  # the run's training time from launch to this checkpoint (None: not recorded)

    @property
    def task(self) -> str:
        return self.record["task"]

    @property
    def config(self) -> dict[str, Any]:
        return self.record["config"]

    @cached_property
    def run(self) -> RunConfig:
        """The run's configuration as typed values (checked when the run is loaded)."""
        return run_of(self.run_dir, self.record)

    @cached_property
    def status(self) -> RunStatus:
        """How the run ended (its run_summary.json, read when asked)."""
        return run_status(self.run_dir)

    @property
    def playback_clip(self) -> str | None:
        """The clip playback and export parity roll out: the run's clip, or a motion library's first."""
        motion = self.run.env.motion
        return motion[0] if isinstance(motion, tuple) else motion

    def scene(self) -> Path | None:
        """The scene of the playback clip (a terrain clip's own)."""
        from soaklab.assets.record import scene_of

        scene = scene_of(self.record["run"].get("assets"), self.playback_clip)
        return Path(scene) if scene else None


def load_trained(run_dir: Path, checkpoint: Path | None = None) -> TrainedRun:
    """The run in `run_dir` with the weights of `checkpoint` (default: its final checkpoint)."""
    from soaklab.config.resolve import read_run_config
    from soaklab.rl.agents import make_agent
    from soaklab.tasks.spaces import task_spaces

    if not run_dir.is_dir():
        raise InvalidInput(f"{run_dir}: not a run dir (no such directory)")
    if not (run_dir / RUN_CONFIG).is_file():
        raise InvalidInput(f"{run_dir}: not a run dir (no {RUN_CONFIG}); give the dir `soaklab train` wrote")
    record = read_run_config(run_dir / RUN_CONFIG)
    path = checkpoint if checkpoint is not None else run_dir / "checkpoints" / FINAL_CHECKPOINT
    if path.is_dir():
        raise InvalidInput(f"{path}: is a directory; expected a checkpoint file (checkpoints/{FINAL_CHECKPOINT})")
    if not path.is_file():
        raise InvalidInput(f"{path}: no such checkpoint; a run writes checkpoints/{FINAL_CHECKPOINT} when it ends")
    payload = load_weights(path)
    state = payload.get("agent") if isinstance(payload, dict) else None
    if not isinstance(state, dict):
        raise InvalidInput(f"{path}: not a soaklab checkpoint (no agent state)")
    # Weights of the same shapes from another run would load and be exported or played as this
    # run's: a checkpoint names its run's config hash (those written before it did are taken on trust).
    theirs = payload.get("config_hash") if isinstance(payload, dict) else None
    if theirs is not None and theirs != record["config_hash"]:
        raise InvalidInput(f"{path}: a checkpoint of another run (config {str(theirs)[:19]}), not of {run_dir} "
                           f"(config {record['config_hash'][:19]}); give one from {run_dir / 'checkpoints'}")
    diverged = next(iter(non_finite_tensors(state)), None)
    if diverged is not None:  # a policy of NaN would export, play and deploy as if it were one
        raise InvalidInput(f"{path}: {diverged} holds non-finite values; the run diverged "
                           "(its run_summary.json says where)")
    spaces = task_spaces(record["task"])
    run = run_of(run_dir, record)
    agent = make_agent(record["algo"], spaces.actor_obs, spaces.critic_obs, spaces.action, 1, run.algo,
                       torch.device("cpu"))
    try:
        agent.load_state_dict(state)
    except (RuntimeError, AttributeError, KeyError) as exc:
        first = str(exc).strip().splitlines()[-1].strip() if str(exc).strip() else type(exc).__name__
        raise InvalidInput(f"{path}: does not fit the {record['algo']}/{record['task']} run in {run_dir} "
                           f"({first}); a checkpoint from another run or task?") from None
    for module in agent.modules():
        module.eval()
    return TrainedRun(run_dir, record, path, int(payload.get("iteration", 0)), agent, training_time(path, payload))


def training_time(path: Path, payload: dict[str, Any]) -> float | None:
    """The checkpoint's `elapsed_s` (seconds from the run's launch, earlier segments of a resumed run
    included); None for a checkpoint written before checkpoints carried it."""
    elapsed = payload.get("elapsed_s")
    if elapsed is None:
        return None
    if type(elapsed) not in (int, float) or not math.isfinite(elapsed) or elapsed < 0:
        raise InvalidInput(f"{path}: elapsed_s is {str(elapsed)[:40]!r}, not a number of seconds; not a checkpoint "
                           "soaklab wrote")
    return float(elapsed)


def non_finite_tensors(tree: Any, prefix: str = "agent") -> list[str]:
    """The names of the floating tensors in a checkpoint's state that hold a NaN or an infinity."""
    if isinstance(tree, dict):
        return [name for key in sorted(tree, key=str) for name in non_finite_tensors(tree[key], f"{prefix}.{key}")]
    if isinstance(tree, torch.Tensor) and tree.is_floating_point() and not bool(torch.isfinite(tree).all()):
        return [prefix]
    return []


def run_of(run_dir: Path, record: dict[str, Any]) -> RunConfig:
    """A run's record as typed values; a record this build cannot read whole is bad input."""
    return recorded_run(run_dir / RUN_CONFIG, record)


def describe(trained: TrainedRun) -> str:
    return json.dumps({"run_dir": str(trained.run_dir), "checkpoint": str(trained.checkpoint),
                       "iteration": trained.iteration, "algo": trained.record["algo"], "task": trained.task})
