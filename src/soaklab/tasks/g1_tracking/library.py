"""A motion library: `env.motion` as a list of clips, the envs spread over them in blocks.

Block k of the envs tracks clip k, with its own adaptive phase sampler and RNG stream (env.seed + k),
so one clip's failures never skew where another's episodes start; `StepResult.clips` names the
blocks, so the collector also reports each clip's episode ends and tracking error on their own
(`clip/<label>/...`, soaklab.tasks.metrics).

`WorldSetEnv`, what a library run steps: every clip's envs are worlds of ONE model and one set of
physics data (on MJWarp one captured graph launch per control step, whatever the clip count). The
model is the union of the clips' scenes (soaklab.assets.scene.union_scene): each world has the
world-body geoms of its own clip's scene only, the others moved far below its floor
(soaklab.sim, `absent_geoms`). The reference is the clips' frames one after the other in one table,
each world reading its clip's rows.

`MotionLibraryEnv`, the layout before it and the reference it is tested and timed against: one whole
tracking env per clip, stepped one after the other (on the GPU each block's launches in series).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from soaklab.assets.motion import MotionClip
from soaklab.assets.scene import union_scene
from soaklab.contract.sections import RunConfig
from soaklab.errors import InvalidInput
from soaklab.tasks.env import BatchedEnv, EnvSpec, StepResult
from soaklab.tasks.g1_tracking.env import G1MotionTrackingEnv, TrackingConfig, build_tracking_model, reference_table
from soaklab.tasks.g1_tracking.sampling import FrameSampler
from soaklab.tasks.rng import ManagerRng

OLD_CHECKPOINT = ("a motion library checkpoint of one env per clip (written before the library became one world "
                  "set): resume it with the soaklab that wrote it, or start the run anew")


def block_slices(sizes: list[int]) -> tuple[slice, ...]:
    starts = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    return tuple(slice(a, b) for a, b in zip(starts[:-1], starts[1:], strict=True))


class WorldSetEnv(G1MotionTrackingEnv):
    """Every clip's envs in one G1 tracking env: block k of `sizes` tracks clips[k] on scenes[k]'s
    world geoms, drawing its starts and reset noise from its own stream `seeds[k]`."""

    def __init__(self, labels: tuple[str, ...], scenes: list[str], clips: list[MotionClip], cfg: TrackingConfig,
                 sizes: list[int], seeds: list[int], num_threads: int | None = None, sampler: str = "adaptive",
                 episode_length_s: float = 10.0, device: str | torch.device = "cpu", compile_terms: bool = False,
                 sim: str = "mujoco") -> None:
        spec, own = union_scene([Path(s) for s in scenes])
        model, frames, num_contact = build_tracking_model(spec, cfg)
        self._check_timestep(model, cfg)
        self.num_envs = sum(sizes)
        self.device = torch.device(device)
        self.cfg = cfg
        self.rngs = [ManagerRng(seed, self.device) for seed in seeds]
        self.labels, self.clip_list = labels, clips
        self.blocks = block_slices(sizes)
        self.clips = tuple(zip(labels, self.blocks, strict=True))
        # The world-body geoms of the union each clip's scene lacks (a terrain of another clip).
        world = [g for g in range(model.ngeom) if model.geom_bodyid[g] == 0]
        absent = np.zeros((len(clips), model.ngeom), dtype=bool)
        for k, names in enumerate(own):
            absent[k, [g for g in world if model.geom(g).name not in names]] = True
        self.absent_geoms = np.repeat(absent, sizes, axis=0)
        # Clips on one scene share every geom: the plain stepper, as one clip's env builds it.
        self._build_physics(model, num_threads, sim, self.absent_geoms if absent.any() else None)
        self.ref_table, self._ref_layout = reference_table(clips, model, frames, self.device)
        lengths = [c.num_frames for c in clips]
        self.clip_starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).tolist()
        dev, counts = self.device, torch.tensor(sizes, device=self.device)
        self.clip_of = torch.repeat_interleave(torch.arange(len(clips), device=dev), counts)
        # Per world: its clip's first row and one past its last (`frame` and the truncation read
        # `start_frame` and `num_frames` as rows of the table), and its frames per control step.
        first = torch.tensor(self.clip_starts, dtype=torch.long, device=dev)[self.clip_of]
        self.num_frames = first + torch.tensor(lengths, dtype=torch.long, device=dev)[self.clip_of]
        self.frames_per_step = torch.tensor([c.fps * cfg.ctrl_dt for c in clips], dtype=torch.float32,
                                            device=dev)[self.clip_of]
        self._build_task(model, frames, num_contact, episode_length_s)
        self.samplers = [FrameSampler(c.num_frames, rng, sampler, cfg.uniform_ratio, cfg.adaptive_alpha,
                                      lookahead=max(1, int(round(c.fps))), first_frame_ratio=cfg.first_frame_ratio)
                         for c, rng in zip(clips, self.rngs, strict=True)]
        self.start_frame = first.clone()
        self._build_step(model, frames, num_contact, compile_terms)

    # -- each clip's own streams -------------------------------------------------------------------
    def generators(self) -> tuple[torch.Generator, ...]:
        return tuple(rng.generator for rng in self.rngs)

    def _record_failures(self, frame: torch.Tensor, terminated: torch.Tensor) -> None:
        for sampler, block, start in zip(self.samplers, self.blocks, self.clip_starts, strict=True):
            sampler.record(frame[block] - start, terminated[block])

    def _draw_starts(self, ids: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Each clip's envs among `ids` (every env when None) draw from their clip's sampler and
        stream, in block order (ids ascend: a host reset's nonzero), as one env per clip would."""
        if ids is None:
            counts = [b.stop - b.start for b in self.blocks]
        else:
            counts = torch.bincount(self.clip_of[ids], minlength=len(self.blocks)).tolist()
        parts = []
        for k, count in enumerate(counts):
            if count:  # a clip with no env to reset draws nothing, as its own env would not
                frames = self.samplers[k].sample(count) + self.clip_starts[k]
                parts.append((frames, *self._reset_state(frames, self.rngs[k])))
        frames, qpos, qvel = (torch.cat(p) for p in zip(*parts, strict=True))
        return frames, qpos, qvel

    def evaluate(self, actions: torch.Tensor) -> StepResult:
        return dataclasses.replace(super().evaluate(actions), clips=self.clips)

    # -- checkpoint --------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"world_set": list(self.labels), "rngs": [rng.get_state() for rng in self.rngs],
                "failures": [s.failures.clone() for s in self.samplers],
                "start_frame": self.start_frame.clone(), "episode_step": self.episode_step.clone(),
                "last_action": self.last_action.clone(), "backend": self.backend.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "world_set" not in state:
            raise ValueError(OLD_CHECKPOINT)
        if list(state["world_set"]) != list(self.labels):
            raise ValueError(f"a checkpoint of clips {state['world_set']}, not of this library's {list(self.labels)}")
        for rng, saved in zip(self.rngs, state["rngs"], strict=True):
            rng.set_state(saved)
        for sampler, saved in zip(self.samplers, state["failures"], strict=True):
            sampler.failures.copy_(saved)
        self.start_frame.copy_(state["start_frame"])
        self.episode_step.copy_(state["episode_step"])
        self.last_action.copy_(state["last_action"])  # in place: the captured task step holds it
        self.backend.load_state_dict(state["backend"])

    def diagnostics(self) -> dict:
        return {**super().diagnostics(), "motion_library": {label: {"envs": block.stop - block.start}
                                                            for label, block in self.clips}}


class MotionLibraryEnv:
    """One whole tracking env per clip (its own scene, model and physics), stepped in block order."""

    def __init__(self, labels: tuple[str, ...], envs: list[Any]) -> None:
        self.labels, self.envs = labels, envs
        self.num_envs = sum(e.num_envs for e in envs)
        self.device, self.spaces = envs[0].device, envs[0].spaces
        self.blocks = block_slices([e.num_envs for e in envs])
        self.clips = tuple(zip(labels, self.blocks, strict=True))

    def reset(self, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        parts = [env.reset(None if mask is None else mask[block]) for env, block in zip(self.envs, self.blocks,
                                                                                         strict=True)]
        return torch.cat([o for o, _ in parts]), torch.cat([c for _, c in parts])

    def step(self, actions: torch.Tensor) -> StepResult:
        results = [env.step(actions[block]) for env, block in zip(self.envs, self.blocks, strict=True)]
        first = results[0]
        return StepResult(
            obs=torch.cat([r.obs for r in results]), critic_obs=torch.cat([r.critic_obs for r in results]),
            reward=torch.cat([r.reward for r in results]), terminated=torch.cat([r.terminated for r in results]),
            truncated=torch.cat([r.truncated for r in results]), final_obs=torch.cat([r.final_obs for r in results]),
            final_critic_obs=torch.cat([r.final_critic_obs for r in results]),
            reward_terms={k: torch.cat([r.reward_terms[k] for r in results]) for k in first.reward_terms},
            metrics={k: torch.cat([r.metrics[k] for r in results]) for k in first.metrics},
            clips=self.clips,
        )

    def physics_unstable(self) -> int:
        return sum(env.physics_unstable() for env in self.envs)

    def close(self) -> None:
        for env in self.envs:
            env.close()


def build(run: RunConfig, spec: EnvSpec, scene: Path | str | Mapping[str, str] | None,
          compile_terms: bool) -> BatchedEnv:
    """The catalogue's builder (soaklab.catalogue.TASKS): one clip's env, or a motion library as one
    world set (`WorldSetEnv`), each clip's worlds on its clip's scene."""
    return _build(run, spec, scene, compile_terms, world_set=True)


def build_blocks(run: RunConfig, spec: EnvSpec, scene: Path | str | Mapping[str, str] | None,
                 compile_terms: bool) -> BatchedEnv:
    """A motion library as one whole env per clip, stepped one after the other: the layout the world
    set replaced, kept as its reference (its tests, and scripts/gpu/library_world.sh's timings)."""
    return _build(run, spec, scene, compile_terms, world_set=False)


def _build(run: RunConfig, spec: EnvSpec, scene: Path | str | Mapping[str, str] | None, compile_terms: bool,
           world_set: bool) -> BatchedEnv:
    from soaklab.assets.motion import load_motion
    from soaklab.assets.scene import load_scene
    from soaklab.contract.layout import block_sizes
    from soaklab.tasks.metrics import clip_labels

    env = run.env
    if scene is None or env.motion is None:
        raise InvalidInput("g1_motion_tracking needs the scene and env.motion; run `soaklab assets pull`")
    tracking = TrackingConfig.from_config(run.task)
    shared = (env.num_threads, env.sampler, env.episode_length_s, spec.device, compile_terms)

    def scene_of(motion: str) -> str:
        return str(scene[motion] if isinstance(scene, Mapping) else scene)

    def clip(motion: str) -> MotionClip:
        return load_motion(Path(motion), load_scene(Path(scene_of(motion))))

    if isinstance(env.motion, str):
        return G1MotionTrackingEnv(scene_of(env.motion), clip(env.motion), tracking, spec.num_envs, spec.seed,
                                   *shared, sim=spec.sim)
    sizes = block_sizes(spec.num_envs, len(env.motion), env.motion_weights)
    seeds = [spec.group(n, k).seed for k, n in enumerate(sizes)]  # each clip a group of its own: its seed offset
    labels, scenes, clips = clip_labels(env.motion), [scene_of(m) for m in env.motion], [clip(m) for m in env.motion]
    if world_set:
        return WorldSetEnv(labels, scenes, clips, tracking, sizes, seeds, *shared, sim=spec.sim)
    return MotionLibraryEnv(labels, [G1MotionTrackingEnv(s, c, tracking, n, seed, *shared, sim=spec.sim)
                                     for s, c, n, seed in zip(scenes, clips, sizes, seeds, strict=True)])
