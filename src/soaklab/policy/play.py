"""`soaklab play`: a run's policy rolled out on MuJoCo and rendered offscreen to MP4, with the
reference clip as a translucent ghost (tracking tasks), the step, reward and tracking error drawn on
each frame, and a PNG contact sheet of a few frames (docs/export.md).

The GL backend is MuJoCo's MUJOCO_GL: `glfw` where a display exists, else `egl` (headless GPU or
Mesa), else `osmesa`; an explicit MUJOCO_GL (or --gl) wins. It is fixed before MuJoCo starts a
context, so the CLI sets it before anything renders.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import write_json_atomic
from soaklab.files.outpaths import check_out_file
from soaklab.policy.gl import GL_BACKENDS
from soaklab.policy.trained import TrainedRun

WIDTH, HEIGHT = 640, 480  # multiples of 16: the H.264 encoder takes them as they are
SHEET_FRAMES = 6
GHOST_RGBA = (0.3, 0.8, 1.0, 0.35)


class Frames:
    """Renders env 0 of a rollout, each step, with the overlay; keeps a few frames for the sheet."""

    def __init__(self, env: Any, steps: int, writer: Any) -> None:
        import mujoco

        self.mujoco = mujoco
        self.env, self.writer = env, writer
        self.model = env.backend.model
        # A bare model (cart-pole) has no lights of its own: the headlight lights it.
        self.model.vis.headlight.ambient[:] = (0.45, 0.45, 0.45)
        self.model.vis.headlight.diffuse[:] = (0.6, 0.6, 0.6)
        try:
            self.renderer = mujoco.Renderer(self.model, HEIGHT, WIDTH)
        except Exception as exc:  # no GL for the chosen backend: say which, the others, and the no-GL path
            chosen = os.environ.get("MUJOCO_GL")
            others = " or ".join(f"--gl {b}" for b in GL_BACKENDS if b != chosen)
            raise InvalidInput(f"MUJOCO_GL={chosen}: no offscreen GL context ({type(exc).__name__}: {exc}); "
                               f"try {others}, or `snakemake evaluate` for the policy's figures without "
                               f"a video") from None
        self.camera = mujoco.MjvCamera()
        self.camera.type = mujoco.mjtCamera.mjCAMERA_FREE
        self.camera.distance, self.camera.azimuth, self.camera.elevation = 3.5, 90.0, -15.0
        self.ghost = mujoco.MjData(self.model) if hasattr(env, "reference_qpos") else None
        self.option = mujoco.MjvOption()
        self.keep = set(np.linspace(0, steps - 1, SHEET_FRAMES).round().astype(int).tolist())
        self.kept: list[np.ndarray] = []
        self.rewards: list[float] = []
        self.errors: list[float] = []

    def __call__(self, step: int, env: Any, result: Any) -> None:
        data = env.backend.datas[0]
        self.camera.lookat[:] = data.qpos[:3] if self.ghost is not None else (0.0, 0.0, 0.5)
        self.renderer.update_scene(data, self.camera)
        if self.ghost is not None:
            self._add_ghost(env)
        pixels = self.renderer.render()
        reward = float(result.reward[0])
        error = next((float(v[0]) for v in result.metrics.values()), None)
        self.rewards.append(reward)
        if error is not None:
            self.errors.append(error)
        frame = overlay(pixels, step, reward, error, next(iter(result.metrics), None))
        self.writer.append_data(frame)
        if step in self.keep:
            self.kept.append(frame)

    def _add_ghost(self, env: Any) -> None:
        mujoco, ghost, scene = self.mujoco, self.ghost, self.renderer.scene
        ghost.qpos[:] = env.reference_qpos(torch.zeros(1, dtype=torch.long, device=env.device))[0].cpu().numpy()
        mujoco.mj_kinematics(self.model, ghost)
        first = scene.ngeom
        mujoco.mjv_addGeoms(self.model, ghost, self.option, mujoco.MjvPerturb(), mujoco.mjtCatBit.mjCAT_DYNAMIC,
                            scene)
        for i in range(first, scene.ngeom):
            scene.geoms[i].rgba[:] = GHOST_RGBA


def overlay(pixels: np.ndarray, step: int, reward: float, error: float | None, error_name: str | None) -> np.ndarray:
    from PIL import Image, ImageDraw

    image = Image.fromarray(pixels)
    text = f"step {step}   reward {reward:.3f}"
    if error is not None:
        text += f"   {error_name} {error:.3f}"
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, WIDTH, 22), fill=(0, 0, 0))
    draw.text((8, 5), text, fill=(255, 255, 255))
    return np.asarray(image)


def contact_sheet(frames: list[np.ndarray], out: Path) -> None:
    from PIL import Image

    cols = 3
    rows = math.ceil(len(frames) / cols)
    sheet = Image.new("RGB", (cols * WIDTH // 2, rows * HEIGHT // 2), (255, 255, 255))
    for i, frame in enumerate(frames):
        tile = Image.fromarray(frame).resize((WIDTH // 2, HEIGHT // 2))
        sheet.paste(tile, ((i % cols) * WIDTH // 2, (i // cols) * HEIGHT // 2))
    tmp = out.with_name(out.name + ".tmp.png")
    sheet.save(tmp)
    tmp.replace(out)


def play(trained: TrainedRun, out: Path, seconds: float, envs: int) -> dict[str, Any]:
    """Write `out` (MP4), `out` with .png (the contact sheet) and .json (what was played)."""
    import imageio.v2 as imageio

    from soaklab.policy.rollout import playback_env, roll_out

    check_out_file(out, ".mp4")
    if not seconds > 0:
        raise InvalidInput(f"--seconds {seconds}: must be > 0")
    if envs < 1:
        raise InvalidInput(f"--envs {envs}: must be >= 1")
    if "ctrl_dt" not in trained.run.task:  # a plug-in's task may define no control step
        raise InvalidInput(f"{trained.run_dir}: task {trained.task}: play times its frames by task.ctrl_dt, "
                           "which the task's keys do not define; add ctrl_dt (its control step, seconds) to "
                           "the task's defaults YAML")
    ctrl_dt = float(trained.run.task["ctrl_dt"])
    steps = max(1, round(seconds / ctrl_dt))
    fps = round(1.0 / ctrl_dt)
    tmp = out.with_name(out.stem + ".tmp.mp4")
    try:
        with playback_env(trained, envs) as env, \
                imageio.get_writer(tmp, fps=fps, codec="libx264", quality=7, macro_block_size=16) as writer:
            frames = Frames(env, steps, writer)
            roll_out(trained, env, steps, frames)
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    sheet = out.with_suffix(".png")
    contact_sheet(frames.kept, sheet)
    record = {"schema_version": 1, "video": str(out), "contact_sheet": str(sheet), "run_dir": str(trained.run_dir),
              "checkpoint": str(trained.checkpoint), "iteration": trained.iteration, "task": trained.task,
              "frames": steps, "fps": fps, "width": WIDTH, "height": HEIGHT, "envs": envs,
              "gl": os.environ.get("MUJOCO_GL"), "ghost": frames.ghost is not None,
              "mean_reward": float(np.mean(frames.rewards)),
              "mean_tracking_error": float(np.mean(frames.errors)) if frames.errors else None}
    write_json_atomic(out.with_suffix(".json"), record)
    return record
