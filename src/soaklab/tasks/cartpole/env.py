"""Cart-pole swing-up: the small control task the learning tests use.

Built in code with MjSpec, on the same batched API and CPU backend as G1. The
pole starts hanging down; reward favours it upright with the cart near the
centre and small forces. A random policy scores about 0.1 per step, a
swung-up and balanced pole close to 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mujoco
import torch

from soaklab.contract.sections import RunConfig
from soaklab.sim import build_stepper
from soaklab.tasks.env import EnvSpec, StepResult
from soaklab.tasks.metrics import reward_terms
from soaklab.tasks.rng import ManagerRng
from soaklab.tasks.spaces import TASK_SPACES

SPACES = TASK_SPACES["cartpole_swingup"]
REWARD_TERMS = reward_terms("cartpole_swingup")
PHYSICS_DT = 0.01


def build_model() -> mujoco.MjModel:
    return build_spec().compile()


def build_spec() -> mujoco.MjSpec:
    """The cart-pole as MjSpec (its XML goes into the policy contract: tasks/cartpole/contract.py)."""
    spec = mujoco.MjSpec()
    spec.modelname = "cartpole"
    spec.option.timestep = PHYSICS_DT
    cart = spec.worldbody.add_body(name="cart", pos=[0, 0, 1])
    cart.add_joint(name="slider", type=mujoco.mjtJoint.mjJNT_SLIDE, axis=[1, 0, 0], damping=0.1)
    cart.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.1, 0.05, 0.05], mass=1.0, contype=0, conaffinity=0)
    pole = cart.add_body(name="pole")
    pole.add_joint(name="hinge", type=mujoco.mjtJoint.mjJNT_HINGE, axis=[0, 1, 0], damping=0.01)
    pole.add_geom(type=mujoco.mjtGeom.mjGEOM_CAPSULE, fromto=[0, 0, 0, 0, 0, 0.6], size=[0.03, 0, 0], mass=0.1,
                  contype=0, conaffinity=0)
    act = spec.add_actuator(name="push", target="slider")
    act.trntype = mujoco.mjtTrn.mjTRN_JOINT
    act.gear = [10, 0, 0, 0, 0, 0]
    act.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
    act.ctrlrange = [-1, 1]
    return spec


@dataclass(frozen=True)
class SwingupConfig:
    ctrl_dt: float
    decimation: int
    x_limit: float
    weights: dict[str, float]
    noise_angle: float
    noise_position: float
    noise_velocity: float

    @classmethod
    def from_config(cls, task: dict[str, Any]) -> SwingupConfig:
        return cls(
            ctrl_dt=float(task["ctrl_dt"]),
            decimation=int(task["decimation"]),
            x_limit=float(task["x_limit"]),
            weights={k: float(v["weight"]) for k, v in task["rewards"].items()},
            noise_angle=float(task["reset_noise"]["angle"]),
            noise_position=float(task["reset_noise"]["position"]),
            noise_velocity=float(task["reset_noise"]["velocity"]),
        )


class CartpoleSwingupEnv:
    spaces = SPACES

    def __init__(self, cfg: SwingupConfig, num_envs: int, seed: object, num_threads: int | None = None,
                 episode_length_s: float = 5.0, device: str | torch.device = "cpu", sim: str = "mujoco") -> None:
        self.cfg = cfg
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.rng = ManagerRng(seed, self.device)
        self.backend = build_stepper(sim, build_model(), num_envs, cfg.decimation, device=str(self.device),
                                     num_threads=num_threads)
        self._qpos, self._qvel = self.backend.view("qpos"), self.backend.view("qvel")
        self.max_episode_steps = int(round(episode_length_s / cfg.ctrl_dt))
        self.episode_step = torch.zeros(num_envs, dtype=torch.long, device=self.device)

    def observe(self) -> tuple[torch.Tensor, torch.Tensor]:
        qpos, qvel = self._qpos.to(self.device), self._qvel.to(self.device)
        x, theta = qpos[:, 0], qpos[:, 1]
        obs = torch.stack([torch.cos(theta), torch.sin(theta), x, qvel[:, 0], qvel[:, 1]], dim=-1)
        return obs, obs

    def reward_terms(self, action: torch.Tensor) -> dict[str, torch.Tensor]:
        x, theta = self._qpos[:, 0].to(self.device), self._qpos[:, 1].to(self.device)
        w = self.cfg.weights
        # theta = 0 is upright (the pole points up along +z from the cart).
        return {
            "upright": w["upright"] * (1 + torch.cos(theta)) / 2,
            "centered": w["centered"] * torch.exp(-x * x),
            "control": w["control"] * (action ** 2).sum(-1),
        }

    def reset(self, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if mask is None:
            mask = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        ids = mask.nonzero(as_tuple=True)[0]
        k, c = len(ids), self.cfg
        if k:
            qpos = torch.stack([self.rng.uniform((k,), -c.noise_position, c.noise_position),
                                torch.pi + self.rng.uniform((k,), -c.noise_angle, c.noise_angle)], dim=-1)
            qvel = self.rng.uniform((k, 2), -c.noise_velocity, c.noise_velocity)
            self.backend.reset(ids.cpu().numpy(), qpos.cpu().double().numpy(), qvel.cpu().double().numpy())
            self.episode_step[ids] = 0
        return self.observe()

    def step(self, actions: torch.Tensor) -> StepResult:
        actions = actions.to(self.device, torch.float32).clamp(-1, 1)
        self.backend.ctrl_tensor.copy_(actions)
        self.backend.step()
        self.episode_step += 1
        terms = self.reward_terms(actions)
        reward = torch.stack(list(terms.values())).sum(0)
        terminated = self._qpos[:, 0].to(self.device).abs() > self.cfg.x_limit
        truncated = (self.episode_step >= self.max_episode_steps) & ~terminated
        final_obs, final_critic = self.observe()
        done = terminated | truncated
        obs, critic = self.reset(done) if bool(done.any()) else (final_obs, final_critic)
        return StepResult(obs, critic, reward, terminated, truncated, final_obs, final_critic, terms)

    def state_dict(self) -> dict[str, Any]:
        """What the next step reads (a resumable checkpoint, soaklab.rl.resume)."""
        return {"rng": self.rng.get_state(), "episode_step": self.episode_step.clone(),
                "backend": self.backend.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.set_state(state["rng"])
        self.episode_step.copy_(state["episode_step"])
        self.backend.load_state_dict(state["backend"])

    def diagnostics(self) -> dict:
        return self.backend.diagnostics()

    def physics_unstable(self) -> int:
        return self.backend.take_unstable()

    def close(self) -> None:
        self.backend.close()


def build(run: RunConfig, spec: EnvSpec, scene: object, compile_terms: bool) -> CartpoleSwingupEnv:
    """The catalogue's builder (soaklab.catalogue.TASKS): no scene, no assets (the model is built here)."""
    return CartpoleSwingupEnv(SwingupConfig.from_config(run.task), spec.num_envs, spec.seed, run.env.num_threads,
                              run.env.episode_length_s, spec.device, spec.sim)
