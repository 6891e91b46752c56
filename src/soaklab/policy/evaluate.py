"""`soaklab evaluate`: what a motion-tracking policy learned, judged the way tracking work judges it
(docs/learning.md, "Evaluation").

Training figures come from episodes that start at random phases of the clip, with exploration.
Evaluation starts every episode at the clip's first frame (the reset noise of the run's config
still applies, so the episodes differ), acts with the deterministic policy of the exported ONNX
file (the deployment artifact; the torch policy acts beside it as a cross-check), and runs each
episode until it terminates or reaches the clip's last frame: there is no time limit, so the whole
clip must be tracked. Per clip:

- success_rate: the share of episodes that reach the clip's last frame without a termination;
- tracked_fraction: the mean share of the clip an episode covered before it ended;
- mpkpe_m: mean per-body position error of the tracked bodies, world frame;
- root_relative_mpkpe_m: the same with each body taken relative to the root (pelvis) position;
- joint_error_rad: mean absolute joint position error.

Errors are averaged over every step of every episode while it runs. A policy trained on one backend
and evaluated on the other is a sim-to-sim evaluation (`sim_to_sim: true`). MuJoCo Warp steps on the
GPU, or on warp's CPU device where there is none (`device` in the record): so a CPU machine, CI
included, can judge a MuJoCo-trained policy on MuJoCo Warp too.
"""

from __future__ import annotations

import importlib.util
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from soaklab.catalogue import BACKENDS, DEVICE_RESIDENT, TASKS, tracking_tasks
from soaklab.errors import InvalidInput
from soaklab.policy.trained import TrainedRun

if TYPE_CHECKING:
    from soaklab.tasks.env import TrackingEnv

# One env per episode, by where the sim steps: warp's CPU device runs its worlds one after another.
DEFAULT_EPISODES = {"cpu": 64, "cuda": 1024}
MAX_EPISODES = 16384  # one env each: the bound keeps a typo from asking for gigabytes of worlds


@dataclass(frozen=True)
class ClipEvaluation:
    episodes: int
    success_rate: float
    tracked_fraction: float
    mpkpe_m: float
    root_relative_mpkpe_m: float
    joint_error_rad: float
    steps: int  # control steps until the last episode ended


def check_request(trained: TrainedRun, sim: str, episodes: int) -> None:
    """Bad input, before any env is built: a task without the tracking capability (its catalogue
    entry's `tracking`: its env is a TrackingEnv), a backend this host cannot run, no episodes."""
    if trained.task not in TASKS or not TASKS[trained.task].tracking:
        raise InvalidInput(f"{trained.run_dir}: task {trained.task}: evaluation tracks a motion clip; "
                           f"only {', '.join(tracking_tasks())} runs can be evaluated")
    if not 1 <= episodes <= MAX_EPISODES:
        raise InvalidInput(f"--episodes {episodes}: must be in [1, {MAX_EPISODES}] (one env each; default "
                           f"{DEFAULT_EPISODES[sim_device(sim)]} for {sim} on this host)")
    needs = BACKENDS[sim].module
    if needs is not None and importlib.util.find_spec(needs) is None:
        raise InvalidInput(f"--sim {sim}: {needs} is not installed (pip install -e '.[warp]'); "
                           "evaluate on this host with --sim mujoco")


def sim_device(sim: str) -> str:
    """Where `sim` steps, by its entry's placement: a host backend (MuJoCo) on the CPU; a
    device-resident one (MuJoCo Warp) on the GPU, or on warp's CPU device where there is none (the
    same float32 physics, compiled for the host: slower, never different)."""
    return "cuda" if BACKENDS[sim].placement == DEVICE_RESIDENT and torch.cuda.is_available() else "cpu"


class OnnxPolicy:
    """The run's policy exported to ONNX (into a scratch folder) and run by onnxruntime."""

    def __init__(self, trained: TrainedRun, scratch: Path) -> None:
        import onnxruntime

        from soaklab.policy.export import export

        path = scratch / "policy.onnx"
        export(trained, path)
        self.session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        self.input = self.session.get_inputs()[0].name

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        out = self.session.run(None, {self.input: obs.detach().cpu().numpy().astype(np.float32)})[0]
        return torch.from_numpy(out)


def body_errors(env: TrackingEnv, robot: dict[str, torch.Tensor], ref: dict[str, torch.Tensor]
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per env: world-frame MPKPE and root-relative MPKPE over the tracked bodies, mean |joint error|."""
    tb, root = env.tracked, env.root
    robot_pos, ref_pos = robot["pos"][:, tb], ref["pos"][:, tb]
    mpkpe = (ref_pos - robot_pos).norm(dim=-1).mean(-1)
    relative = ((ref_pos - ref["pos"][:, root:root + 1]) - (robot_pos - robot["pos"][:, root:root + 1]))
    joint = (ref["joint_pos"] - robot["joint_pos"]).abs().mean(-1)
    return mpkpe, relative.norm(dim=-1).mean(-1), joint


def clips_of(trained: TrainedRun) -> dict[str, str]:
    """The run's clips, label -> NPZ path (one, or each clip of a motion library, in its order)."""
    from soaklab.tasks.metrics import clip_labels

    motion = trained.run.env.motion
    items = motion if isinstance(motion, tuple) else (motion,)
    return dict(zip(clip_labels(items), items, strict=True))


@torch.no_grad()
def run_episodes(trained: TrainedRun, sim: str, episodes: int, clip: str, policy: OnnxPolicy
                 ) -> tuple[ClipEvaluation, float]:
    """Every episode from the first frame of `clip` (a path of the run's clips) until it terminates or
    ends the clip, on the clip's own scene; the clip's figures and the largest |onnx - torch| action
    difference seen."""
    from soaklab.assets.record import scene_of
    from soaklab.policy.rollout import playback_config, playback_spec
    from soaklab.tasks.registry import make_env

    # One env per episode on `sim`, tracking `clip`, as a playback steps it (one physics thread).
    run, spec = playback_config(trained, clip), playback_spec(trained, episodes, sim, sim_device(sim))
    scene = scene_of(trained.record["run"].get("assets"), clip)
    # A tracking task's env (check_request refused every other): the TrackingEnv protocol.
    env = cast("TrackingEnv", make_env(run, spec, Path(scene) if scene else None, compile_terms=False))
    try:
        n, last = env.num_envs, env.num_frames - 1
        obs = env.start_at_first_frame()
        alive = torch.ones(n, dtype=torch.bool, device=env.device)
        success = torch.zeros_like(alive)
        reached = torch.zeros(n, dtype=torch.long, device=env.device)
        sums = torch.zeros(3, n, dtype=torch.float64, device=env.device)
        counts = torch.zeros(n, dtype=torch.float64, device=env.device)
        worst, steps = 0.0, 0
        while bool(alive.any()):
            actions = policy(obs).to(env.device)
            cross = trained.agent.act(obs.cpu(), slice(0, n), explore=False)
            worst = max(worst, float((actions.cpu() - cross).abs().max()))
            robot, ref, frame, terminated, obs = env.step_without_reset(actions)
            steps += 1
            errors = torch.stack(body_errors(env, robot, ref)).double()
            sums += errors * alive
            counts += alive
            reached = torch.where(alive, frame, reached)
            ended_clip = frame >= last
            success |= alive & ended_clip & ~terminated
            alive &= ~terminated & ~ended_clip
        per_step = (sums.sum(-1) / counts.sum()).tolist()
        figures = ClipEvaluation(episodes=n, success_rate=float(success.double().mean()),
                                 tracked_fraction=float((reached.double() / last).mean()),
                                 mpkpe_m=per_step[0], root_relative_mpkpe_m=per_step[1], joint_error_rad=per_step[2],
                                 steps=steps)
        return figures, worst
    finally:
        env.close()


def evaluate(trained: TrainedRun, sim: str, episodes: int | None = None, clip: str | None = None) -> dict[str, Any]:
    """The evaluation record of `trained` on `sim`, per clip (`clip`: only that one of the run's clips;
    see the module docstring)."""
    from soaklab.host.info import git_state, host_record

    episodes = DEFAULT_EPISODES[sim_device(sim)] if episodes is None else episodes
    check_request(trained, sim, episodes)
    status = trained.status  # read first: a refused run_summary.json stops it before any episode
    clips = clips_of(trained)
    if clip is not None and clip not in clips:
        raise InvalidInput(f"--clip {clip}: the run tracks {', '.join(clips)}; give one of them")
    chosen = {clip: clips[clip]} if clip is not None else clips
    results, worst = {}, 0.0
    with tempfile.TemporaryDirectory(prefix="soaklab-evaluate-") as scratch:
        policy = OnnxPolicy(trained, Path(scratch))
        for label, path in chosen.items():
            figures, diff = run_episodes(trained, sim, episodes, path, policy)
            results[label], worst = asdict(figures), max(worst, diff)
    trained_on = trained.run.training.sim_backend
    return {
        "kind": "evaluation",
        # An interrupted or failed run may be judged, but never as if it were a finished policy.
        "run_status": status.status,
        "finished_policy": status.finished,
        "run_failure_reason": status.failure_reason,
        "sim": sim,
        "trained_on": trained_on,
        "sim_to_sim": sim != trained_on,
        "device": sim_device(sim),
        "policy": "onnx",
        "torch_cross_check": {"max_abs_action_diff": worst},
        "start": "the clip's first frame, reset noise as configured, deterministic policy, no time limit",
        "run": {"run_dir": str(trained.run_dir), "checkpoint": str(trained.checkpoint),
                "iteration": trained.iteration, "config_hash": trained.record.get("config_hash"),
                # from the checkpoint itself (not file times): a time-to-success claim checks from this JSON
                "training_minutes": None if trained.training_s is None else round(trained.training_s / 60.0, 3)},
        "commit": git_state(),
        "host": host_record(),
        "clips": results,
    }


def unfinished_note(record: dict[str, Any]) -> str:
    """Nothing for a finished policy; else the words the line and the page put before its figures."""
    if record["finished_policy"]:
        return ""
    why = f": {record['run_failure_reason']}" if record["run_failure_reason"] else ""
    return f"NOT A FINISHED POLICY (run status {record['run_status']}{why}); "


def write_page(record: dict[str, Any], path: Path) -> None:
    """The evaluation as one row per clip, in the report's style."""
    from soaklab.files.report import write_table

    rows = [{"clip": clip, **figures} for clip, figures in record["clips"].items()]
    where = f"{record['sim']}" + (f" (sim-to-sim: trained on {record['trained_on']})" if record["sim_to_sim"] else "")
    write_table(rows, path, f"Evaluation from the clip's first frame on {where}",
                verdict=f"{unfinished_note(record)}{record['policy']} policy of iteration "
                        f"{record['run']['iteration']}; torch agrees within "
                        f"{record['torch_cross_check']['max_abs_action_diff']:.1e}")
