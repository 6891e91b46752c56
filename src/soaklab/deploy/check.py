"""`soaklab deploy-check`: the policy run from its ONNX file alone on plain MuJoCo (docs/export.md,
"soaklab deploy-check").

First the probe: the contract carries the observations the policy met in its own task over the first
control steps from a noise-free start, and actions it took there; the check builds those observations
from its reading of the contract and refuses, naming the blocks and elements, where they differ (a
joint order, default pose, scale or slice the policy was not trained with). Then episodes, judged as
`soaklab evaluate` judges them: a tracking policy from the clip's first frame until it terminates or
reaches the clip's last frame; any other until it terminates or reaches the episode's step limit.

Reset noise is drawn as the task draws it, so the same seed gives the same initial states: uniform
numbers from MT19937 seeded by init_genrand(seed) (numpy's RandomState(seed), torch's CPU generator),
each 32-bit output masked to 24 bits and scaled by 2^-24 in float32, then low + (high - low) * u.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from soaklab.deploy.contract import Contract, read_contract
from soaklab.deploy.observe import (
    F32,
    State,
    conj,
    observation,
    quat_apply,
    quat_from_yaw,
    quat_mul,
    terminated,
    tracking_errors,
)
from soaklab.deploy.world import Episodes, Joints, actuator_ids, body_id, load_clip, load_model
from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import read_json

DEFAULT_EPISODES = 64  # evaluate's default on the CPU
MAX_EPISODES = 16384
SHOWN = 4  # mismatching elements named in the probe's refusal


DEFAULT_MANIFEST = Path("results/assets/manifest.json")  # `soaklab assets pull`'s default --manifest
DEFAULT_ASSETS = Path("resources/assets")  # and its default --dest


def default_assets() -> Path:
    """The asset tree a contract's paths are relative to when --assets is not given: the folder the
    local manifest's robot tree lies in (its `root` is DEST/<robot>), else `resources/assets`."""
    try:
        root = read_json(DEFAULT_MANIFEST)["root"]
        return Path(root).parent if isinstance(root, str) else DEFAULT_ASSETS
    except (OSError, ValueError, TypeError, KeyError):
        return DEFAULT_ASSETS


class Uniform:
    """Uniform float32 numbers as soaklab's env RNG draws them on the CPU (module docstring)."""

    def __init__(self, seed: int) -> None:
        self.bits = np.random.RandomState(seed)

    def __call__(self, shape: tuple[int, ...], low: Any, high: Any) -> np.ndarray:
        raw = self.bits.randint(0, 2 ** 32, size=int(np.prod(shape)), dtype=np.uint64)
        u = (raw & 0xFFFFFF).astype(F32) * F32(2.0 ** -24)
        low, high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
        return (low.astype(F32) + (high - low).astype(F32) * u.reshape(shape)).astype(F32)


@dataclass(frozen=True)
class Figures:
    episodes: int
    success_rate: float
    steps: int  # control steps until the last episode ended
    tracked_fraction: float | None = None
    mpkpe_m: float | None = None
    root_relative_mpkpe_m: float | None = None
    joint_error_rad: float | None = None
    mean_episode_steps: float | None = None


class Setup:
    """One clip's (or the clip-less task's) model, clip and the contract's names resolved in it."""

    def __init__(self, contract: Contract, clip: dict[str, Any] | None, assets: Path) -> None:
        c = contract.data
        self.c = c
        self.model = load_model(clip["scene"] if clip is not None else c["robot_model"], assets)
        if abs(self.model.opt.timestep - c["timing"]["sim_timestep"]) > 1e-12:
            raise InvalidInput(f"contract timing: sim_timestep {c['timing']['sim_timestep']}, the robot model's "
                               f"{self.model.opt.timestep}")
        reset = c["reset"]
        if reset["kind"] == "joint_state" and not (
                len(reset["qpos"]) == len(reset["noise"]["qpos"]) == self.model.nq
                and len(reset["qvel"]) == len(reset["noise"]["qvel"]) == self.model.nv):
            raise InvalidInput(f"contract reset: qpos, qvel and their noise must have the robot model's "
                               f"{self.model.nq} and {self.model.nv} entries")
        self.clip = load_clip(clip, self.model, assets) if clip is not None else None
        channels = c["action"]["channels"]
        self.action_joints = Joints.of(self.model, [ch["joint"] for ch in channels])
        self.actuators = actuator_ids(self.model, channels)
        self.default = np.array([ch["default_pos"] or 0.0 for ch in channels], dtype=F32)
        self.offset = np.array([ch["offset"] for ch in channels], dtype=F32)
        self.scale = np.array([ch["scale"] for ch in channels], dtype=F32)
        names = {s["body"] for b in c["observation"]["blocks"] for s in [b["source"]] if "body" in s}
        names |= {x for t in c["terminations"] for x in [t.get("body"), t.get("anchor"), *t.get("bodies", [])] if x}
        metrics = c["metrics"]
        if metrics["kind"] == "tracking":
            names |= {*metrics["tracked_bodies"], metrics["root_body"]}
        if c["reset"]["kind"] == "clip_first_frame":
            names.add(c["reset"]["root_body"])
        self.body_names = sorted(names)
        self.body_ids = [body_id(self.model, n) for n in self.body_names]
        self.body_index = {n: k for k, n in enumerate(self.body_names)}
        self.clip_body = {n: b - 1 for n, b in zip(self.body_names, self.body_ids, strict=True)}
        self.joints = {tuple(s["joints"]): Joints.of(self.model, s["joints"]) for b in c["observation"]["blocks"]
                       for s in [b["source"]] if isinstance(s.get("joints"), list)}
        self.blocks = [{**b, "source": {**b["source"], "_clip_body": self.clip_body.get(b["source"].get("body", ""))}}
                       for b in c["observation"]["blocks"]]
        self.terminations = [{**t, "_qpos": int(Joints.of(self.model, [t["joint"]]).qpos[0])} if "joint" in t else t
                             for t in c["terminations"]]
        if self.clip is not None:
            self.per_step = F32(self.clip["fps"] * c["timing"]["control_dt"])
            self.last = self.clip["frames"] - 1

    def frame(self, step: int) -> int:
        return min(int(np.floor(F32(step) * self.per_step + F32(0.5))), self.last)

    def start(self, n: int, draw: Uniform, noise: bool) -> tuple[np.ndarray, np.ndarray]:
        """Initial qpos, qvel of `n` episodes (float64, as MuJoCo takes them)."""
        m, reset = self.model, self.c["reset"]
        if reset["kind"] == "joint_state":
            qpos = np.zeros((n, m.nq), dtype=F32)
            for i, (base, half) in enumerate(zip(reset["qpos"], reset["noise"]["qpos"], strict=True)):
                h = half if noise else 0.0
                qpos[:, i] = F32(base) + draw((n,), -h, h)
            halves = np.array(reset["noise"]["qvel"]) * (1.0 if noise else 0.0)
            qvel = np.array(reset["qvel"], dtype=F32) + draw((n, m.nv), -halves, halves)
            return qpos.astype(np.float64), qvel.astype(np.float64)
        clip, nz = self.clip, reset["noise"]
        hinges = [j for j in range(m.njnt) if m.jnt_type[j] != mujoco.mjtJoint.mjJNT_FREE]
        scale = 1.0 if noise else 0.0
        half = nz["joint_pos"] * scale
        joint_pos = clip["joint_pos"][[0] * n] + draw((n, len(hinges)), -half, half)
        lo, hi = m.jnt_range[hinges, 0].astype(F32), m.jnt_range[hinges, 1].astype(F32)
        joint_pos = np.maximum(np.minimum(joint_pos, hi), lo)
        root = self.clip_body[reset["root_body"]]
        root_pos = clip["body_pos_w"][[0] * n, root].copy()
        root_pos[:, :2] += draw((n, 2), -nz["root_pos_xy"] * scale, nz["root_pos_xy"] * scale)
        yaw = draw((n,), -nz["root_yaw"] * scale, nz["root_yaw"] * scale)
        root_quat = quat_mul(quat_from_yaw(yaw), clip["body_quat_w"][[0] * n, root])
        root_ang = quat_apply(conj(root_quat), clip["body_ang_vel_w"][[0] * n, root])
        free = next(j for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE)
        qa, va = m.jnt_qposadr[free], m.jnt_dofadr[free]
        qpos, qvel = np.zeros((n, m.nq)), np.zeros((n, m.nv))
        qpos[:, qa:qa + 3], qpos[:, qa + 3:qa + 7] = root_pos, root_quat
        qvel[:, va:va + 3], qvel[:, va + 3:va + 6] = clip["body_lin_vel_w"][[0] * n, root], root_ang
        qpos[:, m.jnt_qposadr[hinges]] = joint_pos
        qvel[:, m.jnt_dofadr[hinges]] = clip["joint_vel"][[0] * n]
        return qpos, qvel

    def state(self, episodes: Episodes, frame: int, last_action: np.ndarray) -> State:
        n = len(episodes.datas)
        ref = None
        if self.clip is not None:
            ref = {k: self.clip[k][[frame] * n] for k in ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w")}
        return State(episodes.qpos(), episodes.qvel(), episodes.bodies(self.body_ids), self.body_index, ref,
                     last_action)

    def observe(self, state: State) -> np.ndarray:
        return observation(self.blocks, state, self.joints, self.action_joints, self.default)

    def targets(self, actions: np.ndarray) -> np.ndarray:
        clamp = self.c["action"]["clamp"]
        if clamp is not None:
            actions = np.clip(actions, F32(clamp[0]), F32(clamp[1]))
        return (self.offset + self.scale * actions).astype(np.float64)


class Policy:
    def __init__(self, contract: Contract) -> None:
        import onnxruntime

        self.session = onnxruntime.InferenceSession(contract.model_bytes, providers=["CPUExecutionProvider"])
        self.input = contract["model_file"]["input"]["name"]

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return self.session.run(None, {self.input: obs.astype(F32)})[0]


def element_names(block: dict[str, Any], channels: list[dict[str, Any]]) -> list[str]:
    source, width = block["source"], block["stop"] - block["start"]
    joints = source.get("joints")
    if source["kind"] in ("clip", "last_action") or joints == "action":
        names = [c["joint"] for c in channels]
    elif isinstance(joints, list):
        names = joints
    else:
        names = [str(i) for i in range(width)]
    return names if len(names) == width else [str(i) for i in range(width)]


def probe_mismatch(c: dict[str, Any], bad: np.ndarray, obs: np.ndarray, want: np.ndarray) -> str:
    """Which elements of which blocks the contract rebuilds otherwise than the policy met them."""
    found: dict[str, list[str]] = {}
    first = None
    for i in bad:
        b = next(b for b in c["observation"]["blocks"] if b["start"] <= i < b["stop"])
        label = element_names(b, c["action"]["channels"])[i - b["start"]]
        found.setdefault(label, []).append(b["name"])
        first = first or f"{b['name']}[{label}] {obs[i]:.4g}, the policy saw {want[i]:.4g}"
    labels = list(found)
    blocks = list(dict.fromkeys(name for names in found.values() for name in names))
    more = f" and {len(labels) - SHOWN} more" if len(labels) > SHOWN else ""
    return (f"the contract does not rebuild the observations the policy was exported with: they differ at "
            f"{', '.join(labels[:SHOWN])}{more} in {', '.join(blocks)} (first: {first})")


def check_probe(setup: Setup, policy: Policy, path: Path) -> float:
    """Refuse where the contract does not rebuild the observations the policy met in its task;
    the largest difference otherwise."""
    probe, c = setup.c["probe"], setup.c
    expected = np.array(probe["observations"], dtype=F32)
    episodes = Episodes(setup.model, 1, c["timing"]["decimation"], setup.actuators)
    episodes.reset(*setup.start(1, Uniform(0), noise=False))
    last = np.zeros((1, c["action"]["dim"]), dtype=F32)
    worst = 0.0
    for step, want in enumerate(expected):
        obs = setup.observe(setup.state(episodes, setup.frame(step) if setup.clip else 0, last))[0]
        diff = np.abs(obs.astype(np.float64) - want)
        bad = np.nonzero(diff > probe["tolerance"] * (1.0 + np.abs(want)))[0]
        if len(bad):
            raise InvalidInput(f"{path}: {probe_mismatch(c, bad, obs, want)} (probe step {step}); a field of the "
                               "contract (joint order, default pose, scale, slices) does not describe this policy")
        worst = max(worst, float(diff.max()))
        action = policy(obs[None])
        episodes.step(setup.targets(action))
        last = action
    return worst


def run_episodes(setup: Setup, policy: Policy, n: int, seed: int) -> Figures:
    """`n` episodes stepped together until every one has ended (module docstring)."""
    c = setup.c
    episodes = Episodes(setup.model, n, c["timing"]["decimation"], setup.actuators)
    episodes.reset(*setup.start(n, Uniform(seed), noise=True))
    tracking = setup.clip is not None
    obs = setup.observe(setup.state(episodes, 0, np.zeros((n, c["action"]["dim"]), dtype=F32)))
    alive, success = np.ones(n, dtype=bool), np.zeros(n, dtype=bool)
    reached, lengths = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    sums, counts = np.zeros((3, n)), np.zeros(n)
    steps, limit = 0, c["episode"]["max_steps"]
    if tracking:
        metrics = c["metrics"]
        tracked = [setup.body_index[b] for b in metrics["tracked_bodies"]]
        tracked_clip = [setup.clip_body[b] for b in metrics["tracked_bodies"]]
        root, root_clip = setup.body_index[metrics["root_body"]], setup.clip_body[metrics["root_body"]]
    while alive.any():
        actions = policy(obs)
        episodes.step(setup.targets(actions))
        steps += 1
        frame = setup.frame(steps) if tracking else 0
        state = setup.state(episodes, frame, actions)
        ended_now = terminated(setup.terminations, state, setup.clip_body)
        obs = setup.observe(state)
        lengths += alive
        if tracking:
            errors = tracking_errors(state, tracked, tracked_clip, root, root_clip, setup.action_joints)
            sums += errors * alive
            counts += alive
            reached = np.where(alive, frame, reached)
            ended = np.full(n, frame >= setup.last)
        else:
            ended = np.full(n, steps >= limit)
        success |= alive & ended & ~ended_now
        alive &= ~ended_now & ~ended
    if not tracking:
        return Figures(n, float(success.mean()), steps, mean_episode_steps=float(lengths.mean()))
    per_step = (sums.sum(-1) / counts.sum()).tolist()
    return Figures(n, float(success.astype(np.float64).mean()), steps,
                   tracked_fraction=float((reached.astype(np.float64) / setup.last).mean()),
                   mpkpe_m=per_step[0], root_relative_mpkpe_m=per_step[1], joint_error_rad=per_step[2])


def deploy_check(path: Path, clip: str | None = None, episodes: int = DEFAULT_EPISODES,
                 seed: int | None = None, assets: Path | None = None) -> dict[str, Any]:
    """The deploy-check record of the ONNX file at `path` (module docstring), its files read from the
    asset tree `assets` (default: default_assets())."""
    assets = default_assets() if assets is None else assets
    if not 1 <= episodes <= MAX_EPISODES:
        raise InvalidInput(f"--episodes {episodes}: must be in [1, {MAX_EPISODES}] (one MjData each)")
    if seed is not None and not 0 <= seed < 2 ** 32:
        raise InvalidInput(f"--seed {seed}: must be in [0, 2**32)")
    contract = read_contract(path)
    c = contract.data
    clips = {entry["label"]: entry for entry in c["clips"]}
    if clip is not None and clip not in clips:
        raise InvalidInput(f"--clip {clip}: the contract names "
                           f"{', '.join(clips) if clips else 'no clip (the task tracks none)'}; give one of them")
    probe_clip = clips.get(c["probe"]["clip"]) if c["probe"]["clip"] is not None else None
    policy = Policy(contract)
    probe = check_probe(Setup(contract, probe_clip, assets), policy, path)
    seed = c["run"]["seed"] if seed is None else seed
    chosen = [clips[clip]] if clip is not None else (list(clips.values()) or [None])
    results = {}
    for entry in chosen:
        figures = run_episodes(Setup(contract, entry, assets), policy, episodes, seed)
        results[entry["label"] if entry else c["task"]] = {k: v for k, v in asdict(figures).items() if v is not None}
    return {"kind": "deploy_check", "onnx": str(path), "task": c["task"], "seed": seed,
            "contract": {"schema_version": c["schema_version"], "config_hash": c["run"]["config_hash"],
                         "iteration": c["run"]["iteration"], "graph_sha256": c["model_file"]["graph_sha256"]},
            "probe": {"steps": len(c["probe"]["observations"]), "max_abs_diff": probe},
            "start": ("the clip's first frame" if c["clips"] else "the task's reset") +
                     ", reset noise as the contract says, deterministic policy",
            "clips": results}
