"""A task, an algorithm and a simulator backend added through the catalogue alone: an installed
plug-in (a distribution with a `soaklab.catalogue` entry point, found on PYTHONPATH like any installed
one) declares a point-mass task as a folder of its own (its env, its defaults YAML, its resolution
checks), a SAC variant, and a second CPU stepper (every world on the calling thread), with no file of
soaklab's changed. The same plug-in goes where a built-in goes: `config resolve` (its task's checks
refuse in one line), `train` through its real spawned collector, `train --resume` of a killed run,
`export`, and the real DAG (`snakemake soak` of a plug-in run on the plug-in's backend, a record naming
it planned); `evaluate` says in one line that it judges tracking tasks only, `play` that the task
declares no control step. A broken or clashing plug-in stops every command, and the DAG, in one line.
docs/architecture.md, "How to add ...", is this plug-in's recipe for an in-tree entry."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from tests.workflow.conftest import planned, snakemake

PLUGIN = {
    "soaklab_dummy/__init__.py": '''
        """The plug-in's catalogue entries: plain facts and references, imported only when used."""
        from pathlib import Path

        from soaklab.catalogue import HOST_BRIDGE, Algorithm, Backend, Task

        HERE = Path(__file__).parent
        ENTRIES = (
            Algorithm("twin_sac", "soaklab.contract.sections:AlgoConfig", "soaklab_dummy.agent:TwinSAC",
                      defaults=str(HERE / "twin_sac.yaml")),
            Task("point_reach", "soaklab_dummy.point_reach.env:build", actor_obs=2, critic_obs=2, action=1,
                 reward_terms=("distance", "control"), backends=("mujoco", "serial_mujoco"), needs_assets=False,
                 defaults=str(HERE / "point_reach" / "defaults.yaml"),
                 resolve="soaklab_dummy.point_reach.resolve:check"),
            Backend("serial_mujoco", "soaklab_dummy.serial:SerialMujoco", HOST_BRIDGE, ("torch", "mujoco")),
        )
    ''',
    "soaklab_dummy/serial.py": '''
        import numpy as np

        from soaklab.sim.mujoco_cpu import MujocoBackend


        class SerialMujoco(MujocoBackend):
            """A second CPU stepper: every world on the calling thread, one after the other."""

            backend_type = "serial_mujoco"

            @classmethod
            def build(cls, model, num_envs, decimation, *, device, num_threads):
                return cls(model, num_envs, decimation, 1)

            def step(self):
                self._step_chunk(np.arange(self.num_envs))
    ''',
    "soaklab_dummy/point_reach/__init__.py": "",
    "soaklab_dummy/point_reach/resolve.py": '''
        from soaklab.errors import SettingError


        def check(config, assets):
            if not 0 < config["task"]["start"] <= 1:
                raise SettingError("task.start", config["task"]["start"], "must be in (0, 1] m")
    ''',
    "soaklab_dummy/agent.py": '''
        from soaklab.rl.agents.sac import SACAgent


        class TwinSAC(SACAgent):
            """SAC under another name: what a new algorithm's module would hold."""
    ''',
    "soaklab_dummy/point_reach/env.py": '''
        import mujoco
        import torch

        from soaklab.sim import build_stepper
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
                self.backend = build_stepper(spec.sim, point_mass(), spec.num_envs, 2, device=spec.device,
                                             num_threads=run.env.num_threads)
                self.qpos, self.qvel = self.backend.view("qpos"), self.backend.view("qvel")
                self.limit = int(run.env.episode_length_s / 0.02)
                self.steps = torch.zeros(spec.num_envs, dtype=torch.long)
                self.step_calls = 0  # in its diagnostics: what a run's diagnostics say at its end

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
                self.step_calls += 1
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
                record = self.backend.diagnostics()
                record["diagnostics"]["step_calls"] = self.step_calls
                return record

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
    "soaklab_dummy/point_reach/defaults.yaml": '''
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


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> dict[str, str]:
    """The plug-in, installed once for the module: the environment that finds it."""
    return install(tmp_path_factory.mktemp("plugin") / "site", PLUGIN)


def soaklab(env: dict[str, str], cwd: Path, *args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in env.items() if k != "SOAKLAB_FAULT"} | ({"SOAKLAB_FAULT": fault} if fault else {})
    return subprocess.run([sys.executable, "-m", "soaklab", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def test_a_plugin_resolves_trains_resumes_and_exports_like_a_built_in(plugin, tmp_path):
    run_dir, record = tmp_path / "run", tmp_path / "run_config.json"
    resolved = soaklab(plugin, tmp_path, "config", "resolve", "--algo", "twin_sac", "--task", "point_reach",
                       "--sim", "mujoco", "algo.save_interval=3", f"training.log_dir={run_dir}", "--out", str(record))
    assert resolved.returncode == 0, resolved.stdout + resolved.stderr
    config = json.loads(record.read_text())
    assert config["owner_files"] == [], "no owner file of soaklab's: the entries' defaults alone"
    assert config["config"]["task"] == {"start": 0.5, "control_weight": -0.01}
    assert config["config"]["algo"]["num_envs"] == 4 and config["config"]["training"]["sim_backend"] == "mujoco"
    # The task's own checks, named by its entry, run at resolution: one line, nothing written.
    bad = tmp_path / "bad.json"
    refused = soaklab(plugin, tmp_path, "config", "resolve", "--algo", "twin_sac", "--task", "point_reach",
                      "--sim", "mujoco", "task.start=2", "--out", str(bad))
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.returncode == 2 and len(lines) == 1 and not bad.exists(), refused.stderr
    assert "task.start" in lines[0] and "must be in (0, 1] m" in lines[0], lines[0]

    # Trained from the record and SIGKILLed after its checkpoint at iteration 3, then resumed there.
    killed = soaklab(plugin, tmp_path, "train", "--run-config", str(record), "--skip-post-training",
                     fault="kill_learner@4")
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    assert not (run_dir / "run_summary.json").exists()
    # The plug-in's code is the run's code: with a helper module of its package edited (one no entry of
    # the run names: the task's resolution checks), a resume of a copy is refused, nothing changed.
    helper = "soaklab_dummy/point_reach/resolve.py"
    edited = install(tmp_path / "edited-site", {**PLUGIN, helper: textwrap.dedent(PLUGIN[helper]) + "\n# an edit\n"})
    copy = Path(shutil.copytree(run_dir, tmp_path / "copy"))
    refused = soaklab(edited, tmp_path, "train", "--resume", str(copy), "--skip-post-training")
    assert refused.returncode == 2 and "was made by other code (the training sources were" in refused.stderr, (
        refused.stdout + refused.stderr)
    resumed = soaklab(plugin, tmp_path, "train", "--resume", str(run_dir), "--skip-post-training")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "at iteration 3" in resumed.stdout
    summary = json.loads((run_dir / "run_summary.json").read_text())
    assert (summary["algo"], summary["task"], summary["sim"], summary["status"]) == (
        "twin_sac", "point_reach", "mujoco", "completed")
    assert summary["completed_iterations"] == 6 and summary["total_env_steps"] == 24, "the entries' own defaults"
    assert [(s["start_iteration"], s["end_iteration"]) for s in summary["segments"]] == [(0, 3), (3, 6)]
    # The collector process (spawned: a fresh interpreter) stepped the plug-in's task and the learner
    # updated the plug-in's agent: its reward terms and losses are in the run's metrics.
    from soaklab.metrics.events import current_tags, event_file, read_scalars

    tags = set(current_tags(read_scalars(event_file(run_dir)))["tag"])
    assert {"Train/reward/distance", "Train/reward/control", "Loss/critic"} <= tags, sorted(tags)

    # Without the plug-in installed, the run dir names what to install (resolving again would not
    # make this run exportable or resumable).
    bare = dict(os.environ)  # the environment the plug-in was installed into, without it
    orphan = soaklab(bare, tmp_path, "export", str(run_dir), "--out", str(tmp_path / "orphan.onnx"))
    lines = [line for line in orphan.stderr.splitlines() if line.strip()]
    assert orphan.returncode == 2 and len(lines) == 1, orphan.stderr
    assert "its algo 'twin_sac' is not in the installed catalogue: install the plug-in that declares it" in lines[0]

    # (With the plug-in, its run exports like a built-in's: the DAG test below exports one through the
    # evaluate target, parity checked.)
    # Evaluation judges a policy from a reference clip's first frame: a task that follows no clip is
    # refused in one line, before anything is built.
    out = tmp_path / "evaluation.json"
    judged = soaklab(plugin, tmp_path, "evaluate", str(run_dir), "--sim", "mujoco", "--out", str(out))
    lines = [line for line in judged.stderr.splitlines() if line.strip()]
    assert judged.returncode == 2 and len(lines) == 1 and not out.exists(), judged.stderr
    assert "task point_reach: evaluation tracks a motion clip" in lines[0]
    # Playback times its frames by the task's control step, which this task does not declare.
    video = tmp_path / "play.mp4"
    played = soaklab(plugin, tmp_path, "play", str(run_dir), "--out", str(video))
    lines = [line for line in played.stderr.splitlines() if line.strip()]
    assert played.returncode == 2 and len(lines) == 1 and not video.exists(), played.stderr
    assert "task point_reach: play times its frames by task.ctrl_dt" in lines[0]


# A plug-in naming a built-in's name: refused, never a replacement.
CLASH = '''
    from soaklab.catalogue import Algorithm

    ENTRIES = (Algorithm("sac", "soaklab.contract.sections:AlgoConfig", "soaklab.rl.agents.sac:SACAgent"),)
'''
CLASH_LINE = "ValueError: algorithm 'sac' is already in the catalogue; choose another name; fix or uninstall it"


def entries(*declared: str) -> str:
    """A plug-in's __init__ declaring these entries (Python expressions)."""
    return f"from soaklab.catalogue import Algorithm, Task\n\nENTRIES = ({', '.join(declared)},)\n"


def task(actor_obs: str = "2", backends: str = "('mujoco',)") -> str:
    return (f"Task('point_reach', 'soaklab_dummy.env:build', actor_obs={actor_obs}, critic_obs=2, action=1, "
            f"reward_terms=('distance',), backends={backends}, needs_assets=False)")


def algorithm(name: str) -> str:
    return f"Algorithm({name!r}, 'soaklab.contract.sections:AlgoConfig', 'soaklab.rl.agents.sac:SACAgent')"


@pytest.mark.parametrize(("init", "line"), [
    (CLASH, CLASH_LINE),
    ("ENTRIES = ('sac',)\n", "TypeError: 'sac' is not an Algorithm, Task or Backend"),
    ("raise ImportError('no module named torchx')\n", "ImportError: no module named torchx"),
    ("import sys\nsys.exit(0)\n", "SystemExit: 0; fix or uninstall it"),
    (entries(task(actor_obs="'2'")), "ValueError: task 'point_reach': actor_obs must be an int > 0, not '2'"),
    (entries(algorithm("../../evil sac")), "ValueError: algorithm '../../evil sac': name must be a name like"),
    (entries(task(backends="('nosuchsim',)")),
     "ValueError: task 'point_reach': backends names 'nosuchsim', not a backend of the catalogue (one of "),
    (entries(algorithm("twin_sac"), algorithm("twin_sac")),
     "ValueError: algorithm 'twin_sac' is declared twice in this plug-in; keep one"),
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


RESOLVE = "soaklab_dummy/point_reach/resolve.py"
DEFAULTS = "soaklab_dummy/point_reach/defaults.yaml"


def referring(old: str, new: str) -> dict[str, str]:
    """The plug-in's __init__ with one reference changed."""
    return {"soaklab_dummy/__init__.py": PLUGIN["soaklab_dummy/__init__.py"].replace(old, new)}


# An installed plug-in whose run cannot start: refused at resolution, before anything is written.
@pytest.mark.parametrize(("files", "line"), [
    ({RESOLVE: "import sys\n\n\ndef check(config, assets):\n    sys.exit(0)\n"},
     "task point_reach: its resolve check soaklab_dummy.point_reach.resolve:check exited (SystemExit: 0); "
     "fix or uninstall the plug-in that declares it"),
    ({RESOLVE: "def check(config, assets):\n    raise ValueError('start too big')\n"},
     "task point_reach: its resolve check soaklab_dummy.point_reach.resolve:check failed "
     "(ValueError: start too big); fix or uninstall the plug-in that declares it"),
    (referring("soaklab_dummy.serial:SerialMujoco", "soaklab_dummy.nope:SerialMujoco"),
     "backend serial_mujoco: its stepper soaklab_dummy.nope:SerialMujoco does not load "
     "(ModuleNotFoundError: No module named 'soaklab_dummy.nope'); fix or uninstall the plug-in that declares it"),
    ({DEFAULTS: "task:\n  start: 0.5\n  control_weight: -0.01\ntraining:\n  bogus: 1\n"},
     "point_reach/defaults.yaml: unknown key training.bogus (an entry's defaults define task.* keys"),
    ({DEFAULTS: "task: 5\n"}, "point_reach/defaults.yaml: task: must be a mapping of the task's keys, not 5"),
])
def test_a_plugin_run_that_cannot_start_is_refused_at_resolution(tmp_path, files, line):
    env = install(tmp_path / "site", {**PLUGIN, **files})
    out = tmp_path / "rc.json"
    result = soaklab(env, tmp_path, "config", "resolve", "--algo", "twin_sac", "--task", "point_reach", "--sim",
                     "serial_mujoco", "--out", str(out))
    lines = [entry for entry in result.stderr.splitlines() if entry.strip()]
    assert result.returncode == 2 and len(lines) == 1 and not out.exists(), result.stdout + result.stderr
    assert line in lines[0], lines[0]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["site"], "nothing written"


def test_a_tasks_check_gets_a_copy_its_edits_never_reach_the_record(tmp_path):
    edits = ("def check(config, assets):\n    config['algo']['num_envs'] = 2\n    config['task']['start'] = 9.0\n"
             "    config['training']['seed'] = 12345\n")
    env = install(tmp_path / "site", {**PLUGIN, RESOLVE: edits})
    out = tmp_path / "rc.json"
    result = soaklab(env, tmp_path, "config", "resolve", "--algo", "twin_sac", "--task", "point_reach", "--sim",
                     "mujoco", "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    config = json.loads(out.read_text())["config"]
    assert config["algo"]["num_envs"] == 4 and config["task"]["start"] == 0.5 and "seed" not in config["training"]


def test_a_reference_that_does_not_load_as_its_caller_builds_it_is_named():
    """What resolution refuses a run's entry for (soaklab.catalogue.reference_error)."""
    from soaklab.catalogue import reference_error

    assert reference_error("soaklab.rl.agents.nope:SACAgent", "agent") == (
        "does not load (ModuleNotFoundError: No module named 'soaklab.rl.agents.nope')")
    assert reference_error("soaklab.catalogue:PLUGIN_GROUP", "builder") == "is not callable (a str)"
    assert reference_error("soaklab.sim:build_stepper", "stepper") == "is not a class with a callable build"
    assert reference_error("soaklab.sim.mujoco_cpu:MujocoBackend", "stepper") is None


def test_every_built_in_entry_holds_to_the_checks_a_plugins_entries_pass():
    from soaklab.catalogue import ALGORITHMS, BACKENDS, TASKS, _entry_error

    assert [_entry_error(entry) for table in (ALGORITHMS, TASKS, BACKENDS) for entry in table.values()] == [None] * 6
    # A backend's stepper is a "module:Class" reference, held to the form a task's builder is.
    dotted = replace(BACKENDS["mujoco"], stepper="soaklab.sim.mujoco_cpu.MujocoBackend")
    assert _entry_error(dotted) == ("backend 'mujoco': stepper must be a \"module:name\" reference, "
                                    "not 'soaklab.sim.mujoco_cpu.MujocoBackend'")


def test_without_the_plugin_its_names_are_refused_in_one_line(tmp_path, cli):
    from tests.conftest import one_line

    result = cli("config", "resolve", "--algo", "twin_sac", "--task", "cartpole_swingup", "--sim", "mujoco",
                 "--out", str(tmp_path / "rc.json"))
    assert result.code == 2 and "twin_sac" in one_line(result.err)
    assert not (tmp_path / "rc.json").exists()


# The plug-in's run in the workflow config, soaked for a second on one physics thread.
SOAK = {"min_duration_seconds": 1, "sample_interval_seconds": 0.5, "startup_timeout_seconds": 120,
        "stale_progress_seconds": 60, "post_shutdown_grace_seconds": 1}
PLUGIN_RUN = {"algo": "twin_sac", "task": "point_reach", "sim": "serial_mujoco", "overrides": {"env.num_threads": 1},
              "soak": SOAK}
# A record of it: its seeds run through the same rules, compared with its artifacts of record.
PLUGIN_RECORD = {
    "description": "a plug-in's run as a record", "machine": "cpu", "seeds": [1],
    "run": {**PLUGIN_RUN, "overrides": {"algo.num_envs": 4, "algo.max_iterations": 6, "env.num_threads": 1}},
    "compare": {"exact": False, "figures": [{"name": "mean_reward", "rule": "bootstrap", "tolerance": 0.05,
                                            "relative": True, "at_env_steps": 24}]},
}


@pytest.mark.snakemake
def test_a_plugin_run_soaks_and_exports_through_the_dag_and_its_record_plans(plugin, project, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", plugin["PYTHONPATH"])  # Snakemake and every rule's soaklab find it
    root, work, _ = project
    overlay = tmp_path / "plugin.yaml"
    overlay.write_text(yaml.safe_dump({"runs": {"plug": PLUGIN_RUN}, "soak_runs": ["plug"]}))
    (root / "records" / "plug").mkdir(parents=True)
    (root / "records" / "plug" / "record.yaml").write_text(yaml.safe_dump(PLUGIN_RECORD))

    jobs = planned(project, target="reproduce", overlays=(overlay,))
    assert jobs["train_soak"] == 1 and jobs["compare_record"] == 1, jobs
    proc = snakemake(project, "soak", "evaluate", overlays=(overlay,))
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = work / "results" / "plug"
    soak = json.loads((results / "soak.json").read_text())
    assert soak["status"] == "passed"
    summary = soak["run_summary"]
    assert (summary["algo"], summary["task"], summary["sim"], summary["status"]) == (
        "twin_sac", "point_reach", "serial_mujoco", "completed")
    # Stepped by the plug-in's own stepper, which the catalogue built from its entry.
    diagnostics = summary["runtime_manifest"]["backend_diagnostics"]
    assert diagnostics["available"] and diagnostics["backend_type"] == "serial_mujoco", diagnostics
    # Written again when the collector ends: they say what the env did, not what it was at its build.
    assert diagnostics["diagnostics"]["step_calls"] == summary["total_env_steps"] // 4 > 0, diagnostics
    validation = json.loads((results / "validation.json").read_text())
    assert validation["status"] == "passed", [c for c in validation["checks"] if not c["passed"]]
    # `evaluate` exports every soaked run; a task that follows no clip has no clip evaluation.
    assert (results / "policy.onnx").stat().st_size > 0 and (results / "policy.parity.json").is_file()
    assert not list(results.glob("evaluation-*"))


@pytest.mark.snakemake
def test_a_clashing_plugin_stops_the_dag_in_one_line(project, tmp_path, monkeypatch):
    env = install(tmp_path / "site", {**PLUGIN, "soaklab_dummy/__init__.py": CLASH})
    monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])
    proc = snakemake(project, "soak", "-n")
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0].startswith("soaklab: error: plug-in soaklab_dummy:ENTRIES"), proc.stderr
    assert CLASH_LINE in errors[0]
    assert not (project[1] / "results").exists()


def test_a_tasks_checks_are_named_by_a_reference_or_none():
    """`Task.resolve` is held to the form of every reference: resolution loads and calls it."""
    from dataclasses import replace

    from soaklab.catalogue import TASKS, _entry_error

    assert _entry_error(TASKS["g1_motion_tracking"]) is None and TASKS["cartpole_swingup"].resolve is None
    bad = replace(TASKS["cartpole_swingup"], resolve="checks.py")
    assert _entry_error(bad) == ("task 'cartpole_swingup': resolve must be None or a \"module:name\" reference, "
                                 "not 'checks.py'")
    # A relative defaults path would be read from wherever the command runs.
    relative = replace(TASKS["cartpole_swingup"], defaults="cartpole/defaults.yaml")
    assert _entry_error(relative) == ("task 'cartpole_swingup': defaults must be None or an absolute path of a YAML, "
                                      "not 'cartpole/defaults.yaml'")
