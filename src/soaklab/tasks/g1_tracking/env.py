"""G1 motion tracking, batched over N envs (docs/assets-and-tasks.md).

Control at 50 Hz (ctrl_dt 0.02 = 4 physics steps of 0.005). Action: 29
joint-position targets = default pose + action scale x action. The reference
advances with the episode's time; rewards, terminations and observations are
one batched tensor call per term (tasks/g1_tracking/terms.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np
import torch

from soaklab.assets import g1
from soaklab.assets.motion import MotionClip
from soaklab.errors import InvalidInput
from soaklab.host.compile_cache import start_compile_workers, use_keyed_cache
from soaklab.sim import build_stepper
from soaklab.tasks import metrics as metrics_table
from soaklab.tasks.env import StepResult
from soaklab.tasks.g1_tracking import terms
from soaklab.tasks.g1_tracking.quat import quat_apply_inverse, quat_from_yaw, quat_mul
from soaklab.tasks.g1_tracking.sampling import FrameSampler
from soaklab.tasks.rng import ManagerRng
from soaklab.tasks.spaces import TASK_SPACES

SPACES = TASK_SPACES["g1_motion_tracking"]
REWARD_TERMS = metrics_table.reward_terms("g1_motion_tracking")
TRACKING_METRICS = metrics_table.tracking_metrics("g1_motion_tracking")
ACTION_BOUNDS = ("joint_limits", "motor_scale")


@dataclass(frozen=True)
class TrackingConfig:
    """The task.* settings of the owner config, typed."""

    ctrl_dt: float
    decimation: int
    anchor_body: str
    tracked_bodies: tuple[str, ...]
    end_effector_bodies: tuple[str, ...]
    action_bounds: str
    action_scale_factor: float
    weights: dict[str, float]
    stds: dict[str, float]
    soft_ratio: float
    anchor_height: float
    anchor_ori: float
    end_effector_height: float
    uniform_ratio: float
    adaptive_alpha: float
    first_frame_ratio: float
    noise_joint_pos: float
    noise_root_pos: float
    noise_root_yaw: float

    @classmethod
    def from_config(cls, task: dict[str, Any]) -> TrackingConfig:
        rewards = task["rewards"]
        return cls(
            ctrl_dt=float(task["ctrl_dt"]),
            decimation=int(task["decimation"]),
            anchor_body=task["anchor_body"],
            tracked_bodies=tuple(task["tracked_bodies"]),
            end_effector_bodies=tuple(task["end_effector_bodies"]),
            action_bounds=str(task["action_bounds"]),
            action_scale_factor=float(task["action_scale_factor"]),
            weights={k: float(v["weight"]) for k, v in rewards.items()},
            stds={k: float(v["std"]) for k, v in rewards.items() if "std" in v},
            soft_ratio=float(rewards["joint_limit"]["soft_ratio"]),
            anchor_height=float(task["terminations"]["anchor_height"]),
            anchor_ori=float(task["terminations"]["anchor_ori"]),
            end_effector_height=float(task["terminations"]["end_effector_height"]),
            uniform_ratio=float(task["sampler_settings"]["adaptive_uniform_ratio"]),
            adaptive_alpha=float(task["sampler_settings"]["adaptive_alpha"]),
            # A record made before the key: no first-frame share, what those runs did.
            first_frame_ratio=float(task["sampler_settings"].get("first_frame_ratio", 0.0)),
            noise_joint_pos=float(task["reset_noise"]["joint_pos"]),
            noise_root_pos=float(task["reset_noise"]["root_pos"]),
            noise_root_yaw=float(task["reset_noise"]["root_yaw"]),
        )


FRAME_SENSORS = (
    ("pos", mujoco.mjtSensor.mjSENS_FRAMEPOS, 3),
    ("quat", mujoco.mjtSensor.mjSENS_FRAMEQUAT, 4),
    ("lin_vel", mujoco.mjtSensor.mjSENS_FRAMELINVEL, 3),
    ("ang_vel", mujoco.mjtSensor.mjSENS_FRAMEANGVEL, 3),
)
# Contact sensor parameters: report the number of matching contacts ("found"), unreduced, one slot.
CONTACT_FOUND = [1, 0, 1]


def frame_bodies(cfg: TrackingConfig, root: str) -> list[str]:
    """Bodies whose frames the task reads: tracked ones first, then any anchor/end effector/root not tracked."""
    names = list(cfg.tracked_bodies)
    for extra in (cfg.anchor_body, *cfg.end_effector_bodies, root):
        if extra not in names:
            names.append(extra)
    return names


def undesired_contact_bodies(spec: mujoco.MjSpec) -> list[str]:
    """Robot bodies with a collision geom other than the feet: their contacts are penalized."""
    names = []
    for body in spec.bodies:
        geoms = [g for g in body.geoms if g.contype or g.conaffinity]
        if body.name and body.name != "world" and any(not g1.FOOT_GEOM_PATTERN.match(g.name) for g in geoms):
            names.append(body.name)
    return names


def build_tracking_model(scene: str | mujoco.MjSpec, cfg: TrackingConfig) -> tuple[mujoco.MjModel, list[str], int]:
    """The scene (its XML, or a spec: a world set's union, soaklab.assets.scene) plus the sensors the
    task reads: world-frame pose and velocity of each frame body (computed by MuJoCo in mj_step1,
    packed in one copy) and one contact counter per undesired body. Returns the model, the frame
    bodies and the number of contact sensors."""
    spec = scene if isinstance(scene, mujoco.MjSpec) else mujoco.MjSpec.from_file(scene)
    bodies = {b.name for b in spec.bodies}
    root = spec.worldbody.first_body().name
    frames = frame_bodies(cfg, root)
    for name, key in [(n, "task.tracked_bodies") for n in cfg.tracked_bodies] + [
            (cfg.anchor_body, "task.anchor_body")] + [(n, "task.end_effector_bodies") for n in cfg.end_effector_bodies]:
        if name not in bodies:
            raise InvalidInput(f"{key}: body {name!r} is not in the G1 scene")
    for field, sensor_type, _ in FRAME_SENSORS:
        for name in frames:
            spec.add_sensor(name=f"task_{field}_{name}", type=sensor_type, objtype=mujoco.mjtObj.mjOBJ_XBODY,
                            objname=name)
    contact_bodies = undesired_contact_bodies(spec)
    for name in contact_bodies:
        sensor = spec.add_sensor(name=f"task_contact_{name}", type=mujoco.mjtSensor.mjSENS_CONTACT,
                                 objtype=mujoco.mjtObj.mjOBJ_BODY, objname=name)
        sensor.intprm = CONTACT_FOUND
    return spec.compile(), frames, len(contact_bodies)


def sensor_block(model: mujoco.MjModel, names: list[str], width: int) -> int:
    """Start of a contiguous run of sensors in sensordata (the scene has sensors of its own first)."""
    adrs = [model.sensor(n).adr[0] for n in names]
    start = adrs[0]
    if adrs != [start + i * width for i in range(len(names))]:
        raise RuntimeError(f"task sensors {names[0]}.. are not contiguous in sensordata")
    return int(start)


def reference_table(clips: list[MotionClip], model: mujoco.MjModel, frames: list[str], device: torch.device
                    ) -> tuple[torch.Tensor, list[tuple[str, int, tuple[int, ...]]]]:
    """The clips' reference frames, one after the other, as one [sum of T, width] table (a lookup is a
    single gather, then views), and its layout: (field, first column, shape) per field."""
    # Reference bodies in the order of the frame sensors (a clip holds every body in model order).
    clip_index = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, n) - 1 for n in frames]
    tables, layout = [], []
    for clip in clips:
        fields = {
            "joint_pos": clip.joint_pos, "joint_vel": clip.joint_vel,
            "pos": clip.body_pos_w[:, clip_index], "quat": clip.body_quat_w[:, clip_index],
            "lin_vel": clip.body_lin_vel_w[:, clip_index], "ang_vel": clip.body_ang_vel_w[:, clip_index],
        }
        tables.append(np.concatenate([np.asarray(v).reshape(clip.num_frames, -1) for v in fields.values()], axis=1))
        layout, start = [], 0
        for name, value in fields.items():
            shape = tuple(np.asarray(value).shape[1:])
            layout.append((name, start, shape))
            start += int(np.prod(shape))
    table = tables[0] if len(tables) == 1 else np.concatenate(tables, axis=0)
    return torch.as_tensor(table, dtype=torch.float32, device=device), layout


def undesired_contact_names(model: mujoco.MjModel, count: int) -> list[str]:
    names = [model.sensor(i).name for i in range(model.nsensor)]
    return [n.removeprefix("task_contact_") for n in names if n.startswith("task_contact_")][:count]


class G1MotionTrackingEnv:
    spaces = SPACES

    def __init__(self, scene_xml: str, clip: MotionClip, cfg: TrackingConfig, num_envs: int, seed: object,
                 num_threads: int | None = None, sampler: str = "adaptive", episode_length_s: float = 10.0,
                 device: str | torch.device = "cpu", compile_terms: bool = False, sim: str = "mujoco") -> None:
        model, frames, num_contact = build_tracking_model(scene_xml, cfg)
        self._check_timestep(model, cfg)
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.cfg = cfg
        self.rng = ManagerRng(seed, self.device)
        self._build_physics(model, num_threads, sim, None)
        self.clip = clip
        self.ref_table, self._ref_layout = reference_table([clip], model, frames, self.device)
        self.num_frames = clip.num_frames
        self.frames_per_step = clip.fps * cfg.ctrl_dt
        self._build_task(model, frames, num_contact, episode_length_s)
        self.sampler = FrameSampler(self.num_frames, self.rng, sampler, cfg.uniform_ratio, cfg.adaptive_alpha,
                                    lookahead=max(1, int(round(clip.fps))), first_frame_ratio=cfg.first_frame_ratio)
        self.start_frame = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self._build_step(model, frames, num_contact, compile_terms)

    @staticmethod
    def _check_timestep(model: mujoco.MjModel, cfg: TrackingConfig) -> None:
        if abs(cfg.ctrl_dt - cfg.decimation * model.opt.timestep) > 1e-9:
            raise InvalidInput(
                f"task.ctrl_dt={cfg.ctrl_dt}: must equal task.decimation x physics dt ({model.opt.timestep})"
            )

    def _build_physics(self, model: mujoco.MjModel, num_threads: int | None, sim: str,
                       absent_geoms: np.ndarray | None) -> None:
        # The stepper `sim`'s catalogue entry names (a device-resident one keeps its state where the
        # env's tensors live; a host one steps on `num_threads` host threads).
        self.backend: Any = build_stepper(sim, model, self.num_envs, self.cfg.decimation, device=str(self.device),
                                          num_threads=num_threads, absent_geoms=absent_geoms)
        # A device-resident backend resets by mask (no host round trip per step); the host backend by ids.
        self.masked_resets = hasattr(self.backend, "reset_masked")

    def _build_task(self, model: mujoco.MjModel, frames: list[str], num_contact: int, episode_length_s: float) -> None:
        """What the terms read of the model: frame indices, default pose, action scale, joint limits."""
        cfg, dev = self.cfg, self.device

        def t(x: np.ndarray) -> torch.Tensor:
            return torch.as_tensor(np.asarray(x), dtype=torch.float32, device=dev)

        # Tracked bodies are the first frames (frame_bodies puts them first): a slice, not a gather.
        self.tracked = slice(0, len(cfg.tracked_bodies))
        self.anchor = frames.index(cfg.anchor_body)
        self.root = frames.index(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, 1))
        self.end_effectors = torch.tensor([frames.index(n) for n in cfg.end_effector_bodies], device=dev)
        joints = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(1, model.njnt)]
        self.default_joint_pos = t([g1.default_joint_pos(j) for j in joints])
        lo, hi = t(model.jnt_range[1:, 0]), t(model.jnt_range[1:, 1])
        self.action_scale = action_scale(cfg, joints, self.default_joint_pos, lo, hi)
        mid, half = (lo + hi) / 2, (hi - lo) / 2
        self.joint_lo, self.joint_hi = lo, hi
        self.soft_lo, self.soft_hi = mid - cfg.soft_ratio * half, mid + cfg.soft_ratio * half
        self.max_episode_steps = int(round(episode_length_s / cfg.ctrl_dt))

    def _build_step(self, model: mujoco.MjModel, frames: list[str], num_contact: int, compile_terms: bool) -> None:
        """The episode state, the views of the backend's packed state, and the step's graphs."""
        n, dev, k = self.num_envs, self.device, len(frames)
        self.episode_step = torch.zeros(n, dtype=torch.long, device=dev)
        self.last_action = torch.zeros(n, SPACES.action, device=dev)
        # Zero-copy views of the backend's packed host state, sensors split by kind.
        # The per-step terms fuse into one Inductor graph when compiled (the eager path runs the
        # same function, for debugging and for tests that should not pay the compile).
        self.compiled = compile_terms
        if compile_terms:
            use_keyed_cache()  # kernels built for another instruction set are never reused
            start_compile_workers()  # during start-up, not inside the soak's leak window
        self._step_terms = torch.compile(self.step_terms, dynamic=False) if compile_terms else self.step_terms
        b = self.backend
        base = b.slices["sensordata"].start
        self._qpos_slice, self._qvel_slice = b.slices["qpos"], b.slices["qvel"]
        self._frame_slices: dict[str, tuple[slice, int]] = {}
        for field, _, width in FRAME_SENSORS:
            start = base + sensor_block(model, [f"task_{field}_{n}" for n in frames], width)
            self._frame_slices[field] = (slice(start, start + k * width), width)
        contact_names = [f"task_contact_{n}" for n in undesired_contact_names(model, num_contact)]
        start = base + sensor_block(model, contact_names, 1)
        self._contact_slice = slice(start, start + num_contact)
        self._device = DeviceStep(self) if self.masked_resets else None

    def generators(self) -> tuple[torch.Generator, ...]:
        """The env's RNG streams (a captured step registers each)."""
        return (self.rng.generator,)

    def _record_failures(self, frame: torch.Tensor, terminated: torch.Tensor) -> None:
        """Teach the adaptive sampler where episodes failed."""
        self.sampler.record(frame, terminated)

    def _draw_starts(self, ids: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Start frames and their (qpos, qvel) for envs `ids` (every env when None)."""
        frames = self.sampler.sample(self.num_envs if ids is None else len(ids))
        qpos, qvel = self._reset_state(frames)
        return frames, qpos, qvel

    # -- state -------------------------------------------------------------------------------------
    @property
    def frame(self) -> torch.Tensor:
        offset = torch.floor(self.episode_step.to(torch.float32) * self.frames_per_step + 0.5).long()
        return (self.start_frame + offset).clamp(max=self.num_frames - 1)

    def _robot(self, ids: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """Robot state of all envs (or rows `ids`) as tensors on the env device (views on a CPU env)."""
        dev = self.device
        # One contiguous copy of the packed rows, then views: strided math on the packed
        # buffer is slower than the copy.
        state = self.backend.state.to(dev)
        state = state[ids] if ids is not None else state.clone()
        n = state.shape[0]
        robot = {field: state[:, sl].view(n, -1, width) for field, (sl, width) in self._frame_slices.items()}
        robot["joint_pos"], robot["joint_vel"] = state[:, self._qpos_slice][:, 7:], state[:, self._qvel_slice][:, 6:]
        # Bodies touching something (the contact sensors count matching contacts per body).
        robot["contacts"] = (state[:, self._contact_slice] > 0).sum(-1).to(torch.float32)
        return robot

    def _reference(self, frame: torch.Tensor) -> dict[str, torch.Tensor]:
        rows = self.ref_table[frame]
        n = rows.shape[0]
        return {name: rows[:, start:start + int(np.prod(shape))].view(n, *shape)
                for name, start, shape in self._ref_layout}

    # -- terms -------------------------------------------------------------------------------------
    def reward_terms(self, robot: dict, ref: dict, action: torch.Tensor,
                     previous_action: torch.Tensor) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """Each term weighted (and scaled by ctrl_dt) as it enters the reward; and the tracking
        errors (TRACKING_METRICS) measured on the same re-anchored reference."""
        a, s, w = self.anchor, self.cfg.stds, self.cfg.weights
        tb = self.tracked
        ref_pos, ref_quat = terms.reanchor(ref["pos"][:, tb], ref["quat"][:, tb], ref["pos"][:, a], ref["quat"][:, a],
                                           robot["pos"][:, a], robot["quat"][:, a])
        metrics = {
            "body_pos_error_m": (ref_pos - robot["pos"][:, tb]).norm(dim=-1).mean(-1),
            "joint_pos_error_rad": (ref["joint_pos"] - robot["joint_pos"]).abs().mean(-1),
        }
        raw = {
            "anchor_pos": terms.anchor_pos_reward(ref["pos"][:, a], robot["pos"][:, a], s["anchor_pos"]),
            "anchor_ori": terms.anchor_ori_reward(ref["quat"][:, a], robot["quat"][:, a], s["anchor_ori"]),
            "body_pos": terms.body_pos_reward(ref_pos, robot["pos"][:, tb], s["body_pos"]),
            "body_ori": terms.body_ori_reward(ref_quat, robot["quat"][:, tb], s["body_ori"]),
            "body_lin_vel": terms.body_vel_reward(ref["lin_vel"][:, tb], robot["lin_vel"][:, tb], s["body_lin_vel"]),
            "body_ang_vel": terms.body_vel_reward(ref["ang_vel"][:, tb], robot["ang_vel"][:, tb], s["body_ang_vel"]),
            "action_rate": terms.action_rate_penalty(action, previous_action),
            "joint_limit": terms.joint_limit_penalty(robot["joint_pos"], self.soft_lo, self.soft_hi),
            "undesired_contacts": robot["contacts"],
        }
        dt = self.cfg.ctrl_dt
        return {name: w[name] * value * dt for name, value in raw.items()}, metrics

    def failures(self, robot: dict, ref: dict) -> torch.Tensor:
        a, ee = self.anchor, self.end_effectors
        ref_ee, _ = terms.reanchor(ref["pos"][:, ee], ref["quat"][:, ee], ref["pos"][:, a], ref["quat"][:, a],
                                   robot["pos"][:, a], robot["quat"][:, a])
        return (
            terms.anchor_height_failed(ref["pos"][:, a, 2], robot["pos"][:, a, 2], self.cfg.anchor_height)
            | terms.anchor_ori_failed(ref["quat"][:, a], robot["quat"][:, a], self.cfg.anchor_ori)
            | terms.end_effector_height_failed(ref_ee[..., 2], robot["pos"][:, ee, 2], self.cfg.end_effector_height)
        )

    def observe(self, robot: dict, ref: dict, last_action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, tb = self.anchor, self.tracked
        root = self.root
        pelvis_quat = robot["quat"][:, root]
        actor = torch.cat([
            ref["joint_pos"], ref["joint_vel"],
            terms.anchor_error_in_anchor_frame(ref["pos"][:, a], ref["quat"][:, a], robot["pos"][:, a],
                                               robot["quat"][:, a]),
            quat_apply_inverse(pelvis_quat, robot["lin_vel"][:, root]),
            quat_apply_inverse(pelvis_quat, robot["ang_vel"][:, root]),
            robot["joint_pos"] - self.default_joint_pos,
            robot["joint_vel"],
            last_action,
        ], dim=-1)
        privileged = terms.bodies_in_anchor_frame(robot["pos"][:, tb], robot["quat"][:, tb], robot["pos"][:, a],
                                                  robot["quat"][:, a])
        return actor, torch.cat([actor, privileged], dim=-1)

    # -- lifecycle ---------------------------------------------------------------------------------
    def reset(self, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if mask is None:
            mask = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        if self.masked_resets:
            self._reset_masked(mask)
        else:
            ids = mask.nonzero(as_tuple=True)[0]
            if len(ids):
                self._reset_envs(ids)
        return self.observe(self._robot(), self._reference(self.frame), self.last_action)

    def _reset_state(self, frames: torch.Tensor, rng: ManagerRng | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """qpos/qvel starting the reference at `frames`, with the configured noise (one row per frame)
        drawn from `rng` (the env's own by default; a world set's clip draws from its own)."""
        k, c, rng = len(frames), self.cfg, self.rng if rng is None else rng
        ref = self._reference(frames)
        joint_pos = ref["joint_pos"] + rng.uniform((k, SPACES.action), -c.noise_joint_pos, c.noise_joint_pos)
        joint_pos = torch.maximum(torch.minimum(joint_pos, self.joint_hi), self.joint_lo)
        r = self.root
        root_pos = ref["pos"][:, r].clone()
        root_pos[:, :2] += rng.uniform((k, 2), -c.noise_root_pos, c.noise_root_pos)
        yaw = rng.uniform((k,), -c.noise_root_yaw, c.noise_root_yaw)
        root_quat = quat_mul(quat_from_yaw(yaw), ref["quat"][:, r])
        # Free joint: linear velocity in the world frame, angular velocity in the body frame.
        root_ang_local = quat_apply_inverse(root_quat, ref["ang_vel"][:, r])
        qpos = torch.cat([root_pos, root_quat, joint_pos], dim=-1)
        qvel = torch.cat([ref["lin_vel"][:, r], root_ang_local, ref["joint_vel"]], dim=-1)
        return qpos, qvel

    def _reset_envs(self, ids: torch.Tensor) -> None:
        frames, qpos, qvel = self._draw_starts(ids)
        self.backend.reset(ids.cpu().numpy(), qpos.cpu().double().numpy(), qvel.cpu().double().numpy())
        self.start_frame[ids] = frames
        self.episode_step[ids] = 0
        self.last_action[ids] = 0.0

    def _reset_masked(self, mask: torch.Tensor) -> None:
        """Reset where `mask` is set without learning how many: every env draws a start, the masked
        ones take it (the device-resident path: no host synchronisation)."""
        self._stage_masked_reset(mask)
        self.backend.launch_reset()

    def _stage_masked_reset(self, mask: torch.Tensor) -> None:
        """Everything of a masked reset but the physics: draw starts, write the backend's reset
        buffers, reset the episode state. In place: a captured step reads and writes these tensors."""
        frames, qpos, qvel = self._draw_starts(None)
        self.backend.stage_reset(mask, qpos, qvel)
        self.start_frame.copy_(torch.where(mask, frames, self.start_frame))
        self.episode_step.masked_fill_(mask, 0)
        self.last_action.masked_fill_(mask[:, None], 0.0)

    def reference_qpos(self, ids: torch.Tensor) -> torch.Tensor:
        """The clip's pose at the current frame of envs `ids`, as qpos (root position, root quaternion,
        joints): what the reference ghost of `soaklab play` shows."""
        ref, r = self._reference(self.frame[ids]), self.root
        return torch.cat([ref["pos"][:, r], ref["quat"][:, r], ref["joint_pos"]], dim=-1)

    def set_reference_state(self, mask: torch.Tensor | None = None) -> None:
        """Put the selected envs exactly on their current reference frame (kinematic replay, tests)."""
        ids = torch.arange(self.num_envs, device=self.device) if mask is None else mask.nonzero(as_tuple=True)[0]
        ref, r = self._reference(self.frame[ids]), self.root
        root_quat = ref["quat"][:, r]
        qpos = self.reference_qpos(ids)
        qvel = torch.cat([ref["lin_vel"][:, r], quat_apply_inverse(root_quat, ref["ang_vel"][:, r]),
                          ref["joint_vel"]], dim=-1)
        self.backend.reset(ids.cpu().numpy(), qpos.cpu().double().numpy(), qvel.cpu().double().numpy())

    # -- evaluation (soaklab evaluate): episodes from the clip's start, never reset ----------------
    def start_at_first_frame(self) -> torch.Tensor:
        """Start every env at the clip's first frame, with the configured reset noise; the actor
        observation. The frame sampler is not consulted (nor taught)."""
        ids = torch.arange(self.num_envs, device=self.device)
        qpos, qvel = self._reset_state(torch.zeros(self.num_envs, dtype=torch.long, device=self.device))
        self.backend.reset(ids.cpu().numpy(), qpos.cpu().double().numpy(), qvel.cpu().double().numpy())
        self.start_frame.zero_()
        self.episode_step.zero_()
        self.last_action.zero_()
        return self.observe(self._robot(), self._reference(self.frame), self.last_action)[0]

    def step_without_reset(self, actions: torch.Tensor) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor],
                                                                 torch.Tensor, torch.Tensor, torch.Tensor]:
        """One control step of every env with no reset and no time limit: the robot and reference
        state after it, the reference frame, the terminations and the next actor observation. A
        terminated env keeps stepping; the caller stops counting it."""
        actions = actions.detach().to(self.device, torch.float32)
        self.apply_action(actions)
        self.backend.step()
        self.episode_step += 1
        frame = self.frame
        robot, ref = self._robot(), self._reference(frame)
        terminated = self.failures(robot, ref)
        obs = self.observe(robot, ref, actions)[0]
        self.last_action = actions.clone()
        return robot, ref, frame, terminated, obs

    def apply_action(self, actions: torch.Tensor) -> None:
        targets = self.default_joint_pos + self.action_scale * actions
        self.backend.ctrl_tensor.copy_(targets)

    def step(self, actions: torch.Tensor) -> StepResult:
        # Physics: the backend steps every env `decimation` times and repacks its state.
        self.apply_action(actions)
        self.backend.step()
        return self.evaluate(actions)

    def step_terms(self, frame: torch.Tensor, actions: torch.Tensor, previous_action: torch.Tensor
                   ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], torch.Tensor, torch.Tensor,
                              torch.Tensor]:
        """Rewards, tracking errors, failures and observations of every env: a pure function of the
        packed state, the reference frame and the actions, so it can run compiled (one fused graph)
        or eager."""
        robot, ref = self._robot(), self._reference(frame)
        reward_terms, metrics = self.reward_terms(robot, ref, actions, previous_action)
        final_obs, final_critic = self.observe(robot, ref, actions)
        return reward_terms, metrics, self.failures(robot, ref), final_obs, final_critic

    def evaluate(self, actions: torch.Tensor) -> StepResult:
        """Everything after physics: advance the reference, terms, observations, resets."""
        actions = actions.detach().to(self.device, torch.float32)
        if self.masked_resets:
            return self._device.evaluate(actions)
        self.episode_step += 1
        frame = self.frame
        reward_terms, metrics, terminated, final_obs, final_critic = self._step_terms(frame, actions,
                                                                                      self.last_action)
        reward = torch.stack(list(reward_terms.values())).sum(0)
        truncated = ((self.episode_step >= self.max_episode_steps) | (frame >= self.num_frames - 1)) & ~terminated
        self.last_action = actions.clone()
        done = terminated | truncated
        self._record_failures(frame, terminated)
        obs, critic = final_obs, final_critic
        ids = done.nonzero(as_tuple=True)[0]
        if len(ids):
            # Only the reset rows change: recompute their observations, keep the final ones elsewhere.
            self._reset_envs(ids)
            obs, critic = final_obs.clone(), final_critic.clone()
            obs[ids], critic[ids] = self.observe(self._robot(ids), self._reference(self.frame[ids]),
                                                 self.last_action[ids])
        return StepResult(obs, critic, reward, terminated, truncated, final_obs, final_critic, reward_terms, metrics)

    def state_dict(self) -> dict[str, Any]:
        """What the next step reads (a resumable checkpoint, soaklab.rl.resume): the RNG, the
        adaptive sampler's failure counts, each env's clip position and last action, the physics."""
        return {"rng": self.rng.get_state(), "failures": self.sampler.failures.clone(),
                "start_frame": self.start_frame.clone(), "episode_step": self.episode_step.clone(),
                "last_action": self.last_action.clone(), "backend": self.backend.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.set_state(state["rng"])
        self.sampler.failures.copy_(state["failures"])
        self.start_frame.copy_(state["start_frame"])
        self.episode_step.copy_(state["episode_step"])
        self.last_action.copy_(state["last_action"])  # in place: the captured task step holds it
        self.backend.load_state_dict(state["backend"])

    def physics_unstable(self) -> int:
        return self.backend.take_unstable()

    def diagnostics(self) -> dict:
        record = self.backend.diagnostics()
        if self._device is not None and record.get("available"):
            record["diagnostics"]["task_cuda_graph"] = self._device.diagnostics()
        return record

    def close(self) -> None:
        if self._device is not None:
            self._device.close()
        self.backend.close()


class DeviceStep:
    """The G1 env's step on a device-resident backend, as two captured steps around the physics
    reset graph: (1) terms, rewards, terminations, failure counts and the staging of the masked
    reset; (2) the observations after the reset. Each reads and writes only static tensors (the
    env's episode state, the backend's views and reset buffers, the buffers below), so on CUDA
    each is one graph replay instead of a few hundred kernel launches from Python."""

    def __init__(self, env: G1MotionTrackingEnv) -> None:
        from soaklab.gpu.capture import CapturedStep

        self.env = env
        n, dev, spaces = env.num_envs, env.device, SPACES
        self.actions = torch.zeros(n, spaces.action, device=dev)
        self.terms = torch.zeros(len(REWARD_TERMS), n, device=dev)
        self.metrics = torch.zeros(len(TRACKING_METRICS), n, device=dev)
        self.reward = torch.zeros(n, device=dev)
        self.terminated = torch.zeros(n, dtype=torch.bool, device=dev)
        self.truncated = torch.zeros(n, dtype=torch.bool, device=dev)
        self.final_obs = torch.zeros(n, spaces.actor_obs, device=dev)
        self.final_critic = torch.zeros(n, spaces.critic_obs, device=dev)
        self.obs = torch.zeros(n, spaces.actor_obs, device=dev)
        self.critic = torch.zeros(n, spaces.critic_obs, device=dev)
        backend = env.backend
        # The task's steps capture where the backend's do: not with its graphs off, nor on warp's CPU
        # device (no CUDA there), where both run eagerly.
        if not backend.graph_requested:
            requested: tuple[bool, str | None] = (False, "the backend's graphs are off")
        elif torch.device(dev).type != "cuda":
            requested = (False, backend.graph_disable_reason or f"env on {dev}: CUDA graphs need a CUDA device")
        else:
            requested = (True, None)
        # The observations after the reset: with the task's terms compiled, compiled too (one fused
        # graph instead of the ~70 eager kernels of the gathers, quaternion terms and concatenations;
        # at 1024 envs the step is bound by its kernel count, benchmarks/visits/2026-12-05-h100-profile).
        self._observations = (torch.compile(self._observations_after_reset, dynamic=False) if env.compiled
                              else self._observations_after_reset)
        generators = env.generators()
        self.steps = (CapturedStep("task_terms_and_reset", self._terms_and_reset, dev, generators, requested=requested),
                      CapturedStep("task_observe", self._observe, dev, generators, requested=requested))

    @torch.no_grad()
    def _terms_and_reset(self) -> None:
        env = self.env
        env.episode_step += 1
        frame = env.frame
        terms, metrics, terminated, final_obs, final_critic = env._step_terms(frame, self.actions, env.last_action)
        stacked = torch.stack([terms[k] for k in REWARD_TERMS])
        self.terms.copy_(stacked)
        self.metrics.copy_(torch.stack([metrics[k] for k in TRACKING_METRICS]))
        self.reward.copy_(stacked.sum(0))
        truncated = ((env.episode_step >= env.max_episode_steps) | (frame >= env.num_frames - 1)) & ~terminated
        self.terminated.copy_(terminated)
        self.truncated.copy_(truncated)
        self.final_obs.copy_(final_obs)
        self.final_critic.copy_(final_critic)
        env.last_action.copy_(self.actions)
        env._record_failures(frame, terminated)
        env._stage_masked_reset(terminated | truncated)

    def _observations_after_reset(self, done: torch.Tensor, final_obs: torch.Tensor, final_critic: torch.Tensor
                                  ) -> tuple[torch.Tensor, torch.Tensor]:
        """A pure function of the reset state: the reset envs' new observations, the others' final ones."""
        env = self.env
        new_obs, new_critic = env.observe(env._robot(), env._reference(env.frame), env.last_action)
        return torch.where(done, new_obs, final_obs), torch.where(done, new_critic, final_critic)

    @torch.no_grad()
    def _observe(self) -> None:
        done = (self.terminated | self.truncated)[:, None]
        obs, critic = self._observations(done, self.final_obs, self.final_critic)
        self.obs.copy_(obs)
        self.critic.copy_(critic)

    def evaluate(self, actions: torch.Tensor) -> StepResult:
        self.actions.copy_(actions)
        self.steps[0]()
        self.env.backend.launch_reset()
        self.steps[1]()
        # Callers keep the observations for the next transition: they get their own copy. The other
        # fields are this step's buffers, valid until the next step.
        terms = dict(zip(REWARD_TERMS, self.terms.unbind(0), strict=True))
        metrics = dict(zip(TRACKING_METRICS, self.metrics.unbind(0), strict=True))
        return StepResult(self.obs.clone(), self.critic.clone(), self.reward, self.terminated, self.truncated,
                          self.final_obs, self.final_critic, terms, metrics)

    def diagnostics(self) -> dict[str, Any]:
        from soaklab.gpu.capture import graph_diagnostics

        return graph_diagnostics(list(self.steps))

    def close(self) -> None:
        for step in self.steps:
            step.close()


def action_scale(cfg: TrackingConfig, joints: list[str], default: torch.Tensor, lo: torch.Tensor,
                 hi: torch.Tensor) -> torch.Tensor:
    """Radians of joint target per unit of action, per joint.

    `joint_limits` (the default, as FlashSAC's and holosoma's off-policy tracking agents do): an
    action of +-1 reaches the joint limit farthest from the default pose, so every pose of the
    joint's range is reachable by a tanh-bounded policy. `motor_scale` (BeyondMimic's PPO setting):
    action_scale_factor x effort limit / kp, a few tenths of a radian, so a policy whose actions
    saturate at +-1 cannot reach poses far from the default (a deep squat, an arm overhead)."""
    if cfg.action_bounds == "joint_limits":
        return torch.maximum(default - lo, hi - default)
    if cfg.action_bounds == "motor_scale":
        scales = [cfg.action_scale_factor * g1.motor_class(j).effort_limit / g1.motor_class(j).kp for j in joints]
        return torch.tensor(scales, dtype=torch.float32, device=default.device)
    raise InvalidInput(f"task.action_bounds={cfg.action_bounds}: expected one of {', '.join(ACTION_BOUNDS)}")


def episode_return_bound(cfg: TrackingConfig) -> float:
    """Largest per-step reward: every positive term at its maximum of 1."""
    return sum(w for k, w in cfg.weights.items() if w > 0) * cfg.ctrl_dt
