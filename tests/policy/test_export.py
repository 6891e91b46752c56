"""`soaklab export` and `soaklab play` on a real (short) training run: ONNX parity with onnxruntime,
an MP4 whose frames the decoder counts, and the refusals (docs/export.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import one_line

FAST = ("algo.num_envs=4", "algo.max_iterations=12", "algo.learning_starts=4", "algo.batch_size=16",
        "algo.actor_hidden=32", "algo.critic_hidden=32", "algo.num_blocks=1", "algo.save_interval=6",
        "env.num_threads=1")
QUIET = ("training.export_onnx=false", "training.no_play=true")  # these tests call export and play themselves


def train(run_dir: Path, algo: str = "sac", task: str = "cartpole_swingup", *extra: str,
          post: tuple[str, ...] = QUIET) -> Path:
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "DISPLAY")}
    env["SOAKLAB_TORCH_COMPILE"] = "0"
    done = subprocess.run([sys.executable, "-m", "soaklab", "train", "--algo", algo, "--task", task, "--sim",
                           "mujoco", *FAST, *post, *extra, f"training.log_dir={run_dir}"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return run_dir


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory) -> Path:
    """With the defaults' end of training (export and play into the run dir); the tests below write
    their own files into their tmp_path, never into the run dir."""
    return train(tmp_path_factory.mktemp("cartpole") / "run", post=())


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_export_matches_torch_within_the_bound(cli, tmp_path, algo, cartpole_run):
    run_dir = cartpole_run if algo == "sac" else train(tmp_path / "run", "flashsac")
    out = tmp_path / "policy.onnx"
    result = cli("export", run_dir, "--out", out)
    assert result.code == 0, result.err
    parity = json.loads((tmp_path / "policy.parity.json").read_text())
    assert parity["parity"]["observations"] == 1000 and parity["parity"]["passed"]
    assert parity["parity"]["max_abs_diff"] <= 1e-5
    assert [i["name"] for i in parity["inputs"]] == ["obs"] and [o["name"] for o in parity["outputs"]] == ["action"]
    # The file stands alone: onnxruntime runs it on a batch size the export never saw.
    import onnxruntime

    session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    obs_dim = parity["inputs"][0]["shape"][1]
    action = session.run(["action"], {"obs": torch.randn(37, obs_dim).numpy()})[0]
    assert action.shape == (37, parity["outputs"][0]["shape"][1]) and abs(action).max() <= 1.0


def test_an_export_outside_its_parity_bound_fails_on_stderr_in_one_line(cli, tmp_path, cartpole_run, monkeypatch):
    """A bound no real export meets (negative): the summary stays on stdout, the failure is one line
    on stderr with exit 1."""
    import soaklab.policy.export

    monkeypatch.setattr(soaklab.policy.export, "PARITY_BOUND", -1.0)
    result = cli("export", cartpole_run, "--out", tmp_path / "policy.onnx")
    assert result.code == 1 and "OUTSIDE" in result.out
    line = one_line(result.err)
    assert f"{tmp_path / 'policy.onnx'}: onnxruntime and torch differ by" in line and "do not deploy it" in line


def test_play_writes_the_frames_it_says(tmp_path, cartpole_run):
    """In a process of its own, as a user runs it: MuJoCo picks its GL backend once, at import."""
    import imageio.v2 as imageio

    out = tmp_path / "play.mp4"
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "DISPLAY")}  # the headless default
    done = subprocess.run([sys.executable, "-m", "soaklab", "play", str(cartpole_run), "--out", str(out),
                           "--seconds", "0.6"], env=env, capture_output=True, text=True, timeout=300)
    if done.returncode == 2 and "no offscreen GL context" in done.stderr:
        pytest.skip(one_line(done.stderr))  # a machine without EGL: the line says so
    assert done.returncode == 0, done.stderr[-2000:]
    assert "MUJOCO_GL=egl" in done.stdout
    record = json.loads((tmp_path / "play.json").read_text())
    with imageio.get_reader(out) as reader:  # the packaged ffmpeg decodes what was written
        decoded = reader.count_frames()
        first = reader.get_data(0)
        fps = reader.get_meta_data()["fps"]
    assert decoded == record["frames"] == 30 and fps == 50
    assert first.shape == (480, 640, 3) and first.std() > 0  # an image, not a blank
    assert (tmp_path / "play.png").stat().st_size > 0


def test_a_run_without_a_checkpoint_is_refused(cli, tmp_path, cartpole_run):
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "run_config.json").write_bytes((cartpole_run / "run_config.json").read_bytes())
    result = cli("export", bare, "--out", tmp_path / "p.onnx")
    assert result.code == 2
    assert one_line(result.err).startswith(f"soaklab: error: {bare / 'checkpoints' / 'model_final.pt'}: no such")
    assert not (tmp_path / "p.onnx").exists()


@pytest.mark.parametrize(("args", "says"), [
    (["export", "{missing}", "--out", "{tmp}/p.onnx"], "not a run dir"),
    (["export", "{run}", "--out", "{tmp}/p.txt"], "must end in .onnx"),
    (["export", "{run}", "--out", "{tmp}/no/such/p.onnx"], "does not exist"),
    (["play", "{run}", "--out", "{tmp}/p.avi"], "must end in .mp4"),
    (["play", "{run}", "--out", "{tmp}/p.mp4", "--seconds", "0"], "--seconds 0.0: must be > 0"),
    (["export", "{run}", "--checkpoint", "{tmp}/junk.pt", "--out", "{tmp}/p.onnx"], "not a soaklab checkpoint"),
])
def test_bad_paths_fail_closed_in_one_line(cli, tmp_path, cartpole_run, args, says):
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    values = {"missing": tmp_path / "missing", "tmp": tmp_path, "run": cartpole_run}
    result = cli(*[a.format(**values) for a in args])
    assert result.code == 2, result.err
    assert says in one_line(result.err)
    assert not list(tmp_path.glob("p.*"))


def test_a_checkpoint_from_another_task_is_refused(cli, tmp_path, cartpole_run):
    """A G1 checkpoint (its observations are the tracking task's) against the cart-pole run."""
    from soaklab.contract.sections import RunConfig
    from soaklab.rl.agents import make_agent
    from soaklab.tasks.spaces import task_spaces

    record = json.loads((cartpole_run / "run_config.json").read_text())
    g1 = task_spaces("g1_motion_tracking")
    agent = make_agent("sac", g1.actor_obs, g1.critic_obs, g1.action, 1,
                       RunConfig.of(record["config"], record["algo"], record["task"]).algo, torch.device("cpu"))
    foreign = tmp_path / "g1.pt"
    torch.save({"iteration": 1, "env_steps": 1, "agent": agent.state_dict()}, foreign)
    result = cli("export", cartpole_run, "--checkpoint", foreign, "--out", tmp_path / "p.onnx")
    assert result.code == 2
    assert "does not fit the sac/cartpole_swingup run" in one_line(result.err)


def test_a_checkpoint_of_another_run_of_the_same_shapes_is_refused(cli, tmp_path, cartpole_run):
    """Another seed of the same run: its weights would load; the checkpoint's config hash says whose
    they are. And a directory given as the checkpoint is named as one."""
    other = train(tmp_path / "other", "sac", "cartpole_swingup", "algo.seed=7", "env.seed=7")
    theirs = other / "checkpoints" / "model_final.pt"
    assert torch.load(theirs, weights_only=True)["config_hash"] == json.loads(
        (other / "run_config.json").read_text())["config_hash"]
    result = cli("play", cartpole_run, "--checkpoint", theirs, "--out", tmp_path / "p.mp4")
    assert result.code == 2
    assert f"{theirs}: a checkpoint of another run" in one_line(result.err)
    result = cli("export", cartpole_run, "--checkpoint", other / "checkpoints", "--out", tmp_path / "p.onnx")
    assert result.code == 2 and "is a directory; expected a checkpoint file" in one_line(result.err)
    assert not list(tmp_path.glob("p.*"))
    mine = cli("export", cartpole_run, "--checkpoint", cartpole_run / "checkpoints" / "model_6.pt",
               "--out", tmp_path / "mine.onnx")
    assert mine.code == 0, mine.err


def test_a_completed_run_exports_and_plays_at_its_end(cartpole_run):
    """The defaults: a completed standalone run leaves policy.onnx and play.mp4 in its run dir."""
    run_dir = cartpole_run
    record = json.loads((run_dir / "post_training.json").read_text())
    if record["play"]["status"] == "failed" and "no offscreen GL context" in record["play"]["line"]:
        pytest.skip(record["play"]["line"])
    assert {k: v["status"] for k, v in record.items()} == {"export": "written", "play": "written"}
    assert json.loads((run_dir / "policy.parity.json").read_text())["parity"]["passed"]
    assert (run_dir / "policy.onnx").is_file() and (run_dir / "play.mp4").is_file()
    assert json.loads((run_dir / "play.json").read_text())["frames"] == 250


def test_a_failing_step_is_recorded_in_one_line(tmp_path, capsys):
    """A step that fails (here: a run dir that is not one) is recorded with its exit code and the
    CLI's one line, and printed; post_training never raises."""
    from dataclasses import replace

    from soaklab.config.compose import compose
    from soaklab.policy.post_training import RECORD, post_training

    (tmp_path / "run").mkdir()
    training = compose("sac", "cartpole_swingup", "mujoco").run.training
    steps = post_training(tmp_path / "run", replace(training, export_onnx=True, no_play=True))
    assert steps["export"]["status"] == "failed" and steps["export"]["exit_code"] == 2
    assert "not a run dir" in steps["export"]["line"]
    assert json.loads((tmp_path / "run" / RECORD).read_text()) == steps
    assert "train: export failed: soaklab: error:" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["bogus", "osmesa"])
def test_a_gl_backend_mujoco_cannot_load_is_one_line(value):
    """MUJOCO_GL is read when MuJoCo is imported, before any command: a value it cannot load (unknown,
    or a library this machine lacks) is exit 2 with one line naming it. (A machine with libOSMesa
    loads osmesa; then the command simply runs.)"""
    env = dict(os.environ, MUJOCO_GL=value)
    done = subprocess.run([sys.executable, "-m", "soaklab", "--version"], env=env, capture_output=True, text=True,
                          timeout=120)
    if done.returncode == 0:
        assert value == "osmesa"
        return
    assert done.returncode == 2
    assert one_line(done.stderr).startswith(f"soaklab: error: MUJOCO_GL={value}: MuJoCo cannot load")


def test_non_finite_or_crafted_weights_are_refused_by_export_play_and_evaluate(cli, tmp_path, cartpole_run):
    """The run's own checkpoint with one NaN weight: a policy of NaN is never written where a
    deployment would pick it up, and the refused checkpoint is left as it was. A crafted checkpoint,
    whose unpickling would create a file, is refused as not plain data: nothing in it runs."""
    import hashlib

    from tests.rl.conftest import craft

    payload = torch.load(cartpole_run / "checkpoints" / "model_final.pt", weights_only=True)
    actor = payload["agent"]["actor"]
    name = next(k for k, v in actor.items() if v.is_floating_point())
    actor[name].view(-1)[0] = float("nan")
    nan = tmp_path / "nan.pt"
    torch.save(payload, nan)
    marker = tmp_path / "marker"
    crafted = craft(tmp_path / "crafted.pt", marker, iteration=12, agent={})
    for checkpoint, says in ((nan, f"agent.actor.{name} holds non-finite values"),
                             (crafted, f"{crafted}: not plain data (it names io.open")):
        before = hashlib.sha256(checkpoint.read_bytes()).hexdigest()
        for command, out in (("export", tmp_path / "p.onnx"), ("play", tmp_path / "p.mp4"),
                             ("evaluate", tmp_path / "e.json")):
            result = cli(command, cartpole_run, "--checkpoint", checkpoint, "--out", out)
            assert result.code == 2 and says in one_line(result.err)
            assert not out.exists()
        assert hashlib.sha256(checkpoint.read_bytes()).hexdigest() == before
    assert not marker.exists()


def test_play_without_pyopengl_names_the_other_backends_and_evaluate(tmp_path, cartpole_run):
    """A headless GPU machine of 2026-12-06 lacked PyOpenGL: import of it fails there as it does
    here with its module entry blocked, in a process of its own."""
    out = tmp_path / "play.mp4"
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "DISPLAY")}
    code = ("import sys; sys.modules['OpenGL'] = None; sys.argv[0] = 'soaklab'; "
            "from soaklab.cli import main; sys.exit(main())")
    done = subprocess.run([sys.executable, "-c", code, "play", str(cartpole_run), "--out", str(out),
                           "--seconds", "0.2"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    line = one_line(done.stderr)
    assert line.startswith("soaklab: error: MUJOCO_GL=egl: no offscreen GL context"), line
    assert line.endswith("try --gl glfw or --gl osmesa, or `snakemake evaluate` for the policy's figures "
                         "without a video"), line
    assert not out.exists() and not (tmp_path / "play.json").exists()
