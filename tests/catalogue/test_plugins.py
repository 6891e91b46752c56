"""A task and an algorithm added through the catalogue alone: an installed plug-in (a distribution
with a `soaklab.catalogue` entry point, found on PYTHONPATH like any installed one) declares a
point-mass task stepped by MuJoCo and a SAC variant, each with its own defaults YAML and no file of
soaklab's changed; `soaklab train` trains them through its real spawned collector, and the refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PLUGIN = {
    "soaklab_dummy/__init__.py": '''
        """The plug-in's catalogue entries: plain facts and references, imported only when used."""
        from pathlib import Path

        from soaklab.catalogue import Algorithm, Task

        HERE = Path(__file__).parent
        ENTRIES = (
            Algorithm("twin_sac", "soaklab.contract.sections:AlgoConfig", "soaklab_dummy.agent:TwinSAC",
                      defaults=str(HERE / "twin_sac.yaml")),
            Task("point_reach", "soaklab_dummy.env:build", actor_obs=2, critic_obs=2, action=1,
                 reward_terms=("distance", "control"), backends=("mujoco",), needs_assets=False,
                 defaults=str(HERE / "point_reach.yaml")),
        )
    ''',
    "soaklab_dummy/agent.py": '''
        from soaklab.rl.agents.sac import SACAgent


        class TwinSAC(SACAgent):
            """SAC under another name: what a new algorithm's module would hold."""
    ''',
    "soaklab_dummy/env.py": '''
        import mujoco
        import torch

        from soaklab.sim.mujoco_cpu import MujocoBackend
        from soaklab.tasks.env import StepResult
        from soaklab.tasks.rng import ManagerRng
        from soaklab.tasks.spaces import TASK_SPACES


        def point_mass() -> mujoco.MjModel:
            spec = mujoco.MjSpec()
            spec.option.timestep = 0.01
            body = spec.worldbody.add_body(name="mass")
            body.add_joint(name="x", type=mujoco.mjtJoint.mjJNT_SLIDE, axis=[1, 0, 0], damping=0.5)
            body.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.05, 0, 0], mass=1.0, contype=0, conaffinity=0)
            act = spec.add_actuator(name="push", target="x")
            act.trntype = mujoco.mjtTrn.mjTRN_JOINT
            act.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
            act.ctrlrange = [-1, 1]
            return spec.compile()


        class PointReach:
            spaces = TASK_SPACES["point_reach"]

            def __init__(self, task, spec, run):
                self.num_envs, self.device = spec.num_envs, torch.device(spec.device)
                self.start, self.weight = float(task["start"]), float(task["control_weight"])
                self.rng = ManagerRng(spec.seed, self.device)
                self.backend = MujocoBackend(point_mass(), spec.num_envs, 2, run.env.num_threads)
                self.qpos, self.qvel = self.backend.view("qpos"), self.backend.view("qvel")
                self.limit = int(run.env.episode_length_s / 0.02)
                self.steps = torch.zeros(spec.num_envs, dtype=torch.long)

            def observe(self):
                obs = torch.cat([self.qpos, self.qvel], dim=-1).float()
                return obs, obs

            def reset(self, mask=None):
                ids = torch.arange(self.num_envs) if mask is None else mask.nonzero(as_tuple=True)[0]
                if len(ids):
                    qpos = self.rng.uniform((len(ids), 1), -self.start, self.start)
                    self.backend.reset(ids.numpy(), qpos.double().numpy(), torch.zeros(len(ids), 1).double().numpy())
                    self.steps[ids] = 0
                return self.observe()

            def step(self, actions):
                actions = actions.float().clamp(-1, 1)
                self.backend.ctrl_tensor.copy_(actions)
                self.backend.step()
                self.steps += 1
                terms = {"distance": -self.qpos[:, 0].abs().float(), "control": self.weight * (actions ** 2).sum(-1)}
                final_obs, final_critic = self.observe()
                terminated = torch.zeros(self.num_envs, dtype=torch.bool)
                truncated = self.steps >= self.limit
                obs, critic = self.reset(truncated) if bool(truncated.any()) else (final_obs, final_critic)
                return StepResult(obs, critic, sum(terms.values()), terminated, truncated, final_obs, final_critic,
                                  terms)

            def state_dict(self):
                return {"rng": self.rng.get_state(), "steps": self.steps.clone(), "backend": self.backend.state_dict()}

            def load_state_dict(self, state):
                self.rng.set_state(state["rng"])
                self.steps.copy_(state["steps"])
                self.backend.load_state_dict(state["backend"])

            def diagnostics(self):
                return self.backend.diagnostics()

            def physics_unstable(self):
                return self.backend.take_unstable()

            def close(self):
                self.backend.close()


        def build(run, spec, scene, compile_terms):
            return PointReach(run.task, spec, run)
    ''',
    "soaklab_dummy/twin_sac.yaml": '''
        algo:
          num_envs: 4
          max_iterations: 6
          batch_size: 16
          replay_buffer_size: 256
          learning_starts: 2
          save_interval: 6
          actor_hidden: 32
          critic_hidden: 32
    ''',
    "soaklab_dummy/point_reach.yaml": '''
        task:
          start: 0.5
          control_weight: -0.01
        env:
          episode_length_s: 0.2
    ''',
    "soaklab_dummy-0.1.dist-info/METADATA": '''
        Metadata-Version: 2.1
        Name: soaklab-dummy
        Version: 0.1
    ''',
    "soaklab_dummy-0.1.dist-info/entry_points.txt": '''
        [soaklab.catalogue]
        dummy = soaklab_dummy:ENTRIES
    ''',
}


def install(root: Path, files: dict[str, str]) -> dict[str, str]:
    """The plug-in written under `root`; the environment that finds it (as `pip install` would)."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}


def soaklab(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "soaklab", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def test_a_plugin_task_and_algorithm_train_through_the_real_runtime(tmp_path):
    env = install(tmp_path / "site", PLUGIN)
    run_dir = tmp_path / "run"
    result = soaklab(env, tmp_path, "train", "--algo", "twin_sac", "--task", "point_reach", "--sim", "mujoco",
                     "--skip-post-training", f"training.log_dir={run_dir}")
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((run_dir / "run_summary.json").read_text())
    assert (summary["algo"], summary["task"], summary["sim"], summary["status"]) == (
        "twin_sac", "point_reach", "mujoco", "completed")
    assert summary["completed_iterations"] == 6 and summary["total_env_steps"] == 24, "the entries' own defaults"
    record = json.loads((run_dir / "run_config.json").read_text())
    assert record["owner_files"] == [], "no owner file of soaklab's: the entries' defaults alone"
    assert record["config"]["task"] == {"start": 0.5, "control_weight": -0.01}
    assert record["config"]["algo"]["num_envs"] == 4 and record["config"]["training"]["sim_backend"] == "mujoco"
    # The collector process (spawned: a fresh interpreter) stepped the plug-in's task and the learner
    # updated the plug-in's agent: its reward terms and losses are in the run's metrics.
    from soaklab.metrics.events import current_tags, event_file, read_scalars

    tags = set(current_tags(read_scalars(event_file(run_dir)))["tag"])
    assert {"Train/reward/distance", "Train/reward/control", "Loss/critic"} <= tags, sorted(tags)


@pytest.mark.parametrize(("init", "line"), [
    ('''
        from soaklab.catalogue import Algorithm

        ENTRIES = (Algorithm("sac", "soaklab.contract.sections:AlgoConfig", "soaklab.rl.agents.sac:SACAgent"),)
    ''', "ValueError: algorithm 'sac' is already in the catalogue; choose another name; fix or uninstall it"),
    ("ENTRIES = ('sac',)\n", "TypeError: 'sac' is not an Algorithm, Task or Backend"),
    ("raise ImportError('no module named torchx')\n", "ImportError: no module named torchx"),
])
def test_a_bad_plugin_stops_every_command_in_one_line(tmp_path, init, line):
    env = install(tmp_path / "site", {**PLUGIN, "soaklab_dummy/__init__.py": init})
    out = tmp_path / "rc.json"
    result = soaklab(env, tmp_path, "config", "resolve", "--algo", "sac", "--task", "cartpole_swingup", "--sim",
                     "mujoco", "--out", str(out))
    assert result.returncode == 2 and not out.exists()
    lines = [entry for entry in result.stderr.splitlines() if entry.strip()]
    assert len(lines) == 1 and lines[0].startswith("soaklab: error: plug-in soaklab_dummy:ENTRIES"), lines
    assert line in lines[0]
    # and its entries are not half added: the built-in table is untouched
    show = "from soaklab.catalogue import ALGORITHMS; print(sorted(ALGORITHMS))"
    check = subprocess.run([sys.executable, "-c", show], env=env, capture_output=True, text=True, timeout=120)
    assert check.stdout.strip() == "['flashsac', 'sac']"


def test_without_the_plugin_its_names_are_refused_in_one_line(tmp_path, cli):
    from tests.conftest import one_line

    result = cli("config", "resolve", "--algo", "twin_sac", "--task", "cartpole_swingup", "--sim", "mujoco",
                 "--out", str(tmp_path / "rc.json"))
    assert result.code == 2 and "twin_sac" in one_line(result.err)
    assert not (tmp_path / "rc.json").exists()
