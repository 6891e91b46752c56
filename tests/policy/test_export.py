"""`soaklab export` and `soaklab play` on a real (short) training run: ONNX parity with onnxruntime,
an MP4 whose frames the decoder counts, and the refusals (docs/export.md)."""

from __future__ import annotations

import json
import os
import shutil
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


def metadata(onnx_path: Path) -> dict[str, str]:
    import onnx

    return {p.key: p.value for p in onnx.load(str(onnx_path)).metadata_props}


def rewrite_contract(onnx_path: Path, edit, flat: bool = True) -> None:
    """Edit the contract inside an exported file in place (`edit(contract)`), the flat keys rewritten
    from it when `flat`; the graph, and so its hash, untouched."""
    import onnx

    from soaklab.deploy.contract import CONTRACT_KEY, flat_metadata

    model = onnx.load(str(onnx_path))
    props = {p.key: p for p in model.metadata_props}
    contract = json.loads(props[CONTRACT_KEY].value)
    edit(contract)
    props[CONTRACT_KEY].value = json.dumps(contract)
    if flat:
        for key, value in flat_metadata(contract).items():
            props[key].value = value
    onnx.save(model, str(onnx_path))


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
    # The contract rides in the file and beside it, the same JSON.
    contract = json.loads((tmp_path / "policy.contract.json").read_text())
    assert parity["contract"] == str(tmp_path / "policy.contract.json")
    assert metadata(out)["soaklab.contract"] == json.dumps(contract, sort_keys=True)
    assert contract["observation"]["dim"] == 5 and [c["joint"] for c in contract["action"]["channels"]] == ["slider"]
    assert contract["run"]["config_hash"] == json.loads((run_dir / "run_config.json").read_text())["config_hash"]
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
    actor[name].view(-1)[0] = 0.0
    payload["elapsed_s"] = float("inf")  # the training time an evaluation reports: a number of seconds
    clock = tmp_path / "clock.pt"
    torch.save(payload, clock)
    marker = tmp_path / "marker"
    crafted = craft(tmp_path / "crafted.pt", marker, iteration=12, agent={})
    for checkpoint, says in ((nan, f"agent.actor.{name} holds non-finite values"),
                             (clock, f"{clock}: elapsed_s is 'inf', not a number of seconds"),
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


@pytest.fixture(scope="module")
def cartpole_policy(cartpole_run) -> Path:
    """The cart-pole run's policy.onnx, exported at the end of its training (with its contract)."""
    return cartpole_run / "policy.onnx"


def test_deploy_check_of_cartpole_agrees_with_the_task_itself(cli, tmp_path, cartpole_run, cartpole_policy):
    """From the file alone, the episodes soaklab's own task runs with the same policy and seed:
    `soaklab evaluate` takes tracking tasks only, so the cart-pole's reference is its env stepped by
    the same ONNX session, each episode until its first end (terminated or the time limit)."""
    import numpy as np
    import onnxruntime

    from soaklab.policy.rollout import playback_config, playback_spec
    from soaklab.policy.trained import load_trained
    from soaklab.tasks.registry import make_env

    out = tmp_path / "deploy.json"
    result = cli("deploy-check", cartpole_policy, "--episodes", "4", "--out", out)
    assert result.code == 0, result.err
    figures = json.loads(out.read_text())["clips"]["cartpole_swingup"]
    assert "reproduces the policy's first 3 observations (max |diff| 0.0e+00)" in result.out
    trained = load_trained(cartpole_run)
    session = onnxruntime.InferenceSession(str(cartpole_policy), providers=["CPUExecutionProvider"])
    env = make_env(playback_config(trained), playback_spec(trained, 4), None, compile_terms=False)
    obs, _ = env.reset()
    alive, survived, lengths, steps = np.ones(4, bool), np.zeros(4, bool), np.zeros(4), 0
    while alive.any():
        step = env.step(torch.from_numpy(session.run(None, {"obs": obs.numpy()})[0]))
        obs, steps = step.obs, steps + 1
        lengths += alive
        survived |= alive & step.truncated.numpy()
        alive &= ~(step.terminated | step.truncated).numpy()
    env.close()
    assert figures == {"episodes": 4, "success_rate": float(survived.mean()), "steps": steps,
                       "mean_episode_steps": float(lengths.mean())}


def test_deploy_check_never_writes_over_the_runs_evidence(cli, tmp_path, cartpole_run, cartpole_policy):
    """The ONNX's folder is its run dir: its summary, progress, contract and parity are refused as
    --out (nothing changes); an earlier deploy-check record there may be written again."""
    for name in ("run_summary.json", "progress.json", "policy.contract.json", "policy.parity.json"):
        before = (cartpole_run / name).read_bytes()
        result = cli("deploy-check", cartpole_policy, "--episodes", "1", "--out", cartpole_run / name)
        assert result.code == 2 and f"--out {cartpole_run / name}: is " in one_line(result.err), result.err
        assert (cartpole_run / name).read_bytes() == before
    again = cartpole_run / "deploy_check.json"
    again.write_text(json.dumps({"kind": "deploy_check"}))
    try:
        result = cli("deploy-check", cartpole_policy, "--episodes", "1", "--out", again)
        assert result.code == 0 and json.loads(again.read_text())["probe"]["steps"] == 3, result.err
    finally:
        again.unlink()


def feed(policy: Path, steps: int, *extra: str) -> str:
    """examples/feed_policy.py on `policy`, as another program runs it: its own process."""
    from tests.conftest import REPO

    done = subprocess.run([sys.executable, str(REPO / "examples" / "feed_policy.py"), str(policy), "--steps",
                           str(steps), *extra], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    return done.stdout


def test_the_example_feeds_the_cartpole_policy_from_the_file(cartpole_policy):
    assert "the first 3 observations match the contract's probe" in feed(cartpole_policy, 100)


@pytest.mark.parametrize(("edit", "flat", "says"), [
    (lambda c: c.update(schema_version=2), True, "schema_version 2 is unknown; this soaklab reads 1"),
    (lambda c: c["observation"]["blocks"][1].update(start=2), True, "slices do not tile the 5 observations: "
     "block pole_sin starts at 2, not 1: a gap"),
    (lambda c: c["observation"]["blocks"][1].update(start=0), True, "block pole_sin starts at 0, not 1: an overlap"),
    (lambda c: c["episode"].update(end="clip_last_frame"), True, "episode end clip_last_frame follows a clip, and "
     "the contract names none"),
    (lambda c: c["model_file"].update(graph_sha256="0" * 64), True, "belongs to another model (its graph_sha256 "
     "000000000000, this file's graph"),
    (lambda c: c["action"]["channels"][0].update(scale=2.0), False, "metadata action_scale is '1.0', the contract "
     "says '2.0'"),
    (lambda c: c["probe"].update(tolerance=1e30), True, "1e+30 is greater than the maximum of 0.001"),
    (lambda c: c["action"]["channels"][0].update(scale=float("nan")), True, "action.channels.0.scale is nan; a "
     "contract's numbers are finite"),
    (lambda c: c["reset"].update(qpos=[float("inf")] * len(c["reset"]["qpos"])), True, "reset.qpos.0 is inf"),
    (lambda c: c["observation"].update(dim=10 ** 400), True, "...(401 digits)"),
    (lambda c: c["action"].update(actuation="x" * 5000), True, "xxx..."),
    (lambda c: c.update(padding="x" * (1 << 20)), True, "characters, more than a contract's 1048576 "
     "(MAX_CONTRACT_BYTES); not a contract soaklab wrote"),
])
def test_deploy_check_refuses_a_contract_it_cannot_trust_in_one_line(cli, tmp_path, cartpole_policy, edit, flat,
                                                                     says):
    """Each rewritten inside the file: a future schema, slices with a gap or an overlap, parts that do
    not fit together, a contract copied from another model, flat keys not written from the contract.
    Nothing is written."""
    import shutil

    policy = tmp_path / "policy.onnx"
    shutil.copyfile(cartpole_policy, policy)
    rewrite_contract(policy, edit, flat)
    result = cli("deploy-check", policy, "--episodes", "1", "--out", tmp_path / "d.json")
    assert result.code == 2 and says in one_line(result.err), result.err
    assert len(one_line(result.err)) < 400 + len(str(policy))  # a crafted value is quoted short
    assert not (tmp_path / "d.json").exists()


def test_deploy_check_reads_model_files_only_inside_the_asset_tree_and_names_a_bad_one(cli, tmp_path,
                                                                                       cartpole_policy):
    """The contract's files are relative to --assets and stay inside it; a model MuJoCo does not load
    (a bad attribute, an include) is one line naming it; an inline model reads no file."""
    import hashlib

    def sha(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()

    assets = tmp_path / "assets"
    (assets / "robot").mkdir(parents=True)
    include = '<mujoco><include file="/etc/passwd"/></mujoco>'
    (assets / "robot" / "scene.xml").write_text(include)
    (tmp_path / "outside.xml").write_text("<mujoco/>")
    (assets / "robot" / "link.xml").symlink_to(tmp_path / "outside.xml")
    bad_size = '<mujoco><worldbody><geom size="x"/></worldbody></mujoco>'
    scene = os.path.realpath(assets / "robot" / "scene.xml")
    cases = [
        ({"path": "robot/scene.xml", "sha256": sha(include)},
         f"{scene}: the robot model the contract names does not load in MuJoCo ("),
        ({"path": "../../../../etc/passwd", "sha256": "0" * 64}, "lies outside the asset tree --assets"),
        ({"path": "robot/link.xml", "sha256": sha("<mujoco/>")}, "robot/link.xml lies outside the asset tree"),
        ({"path": "/etc/passwd", "sha256": "0" * 64}, "the robot model is named by the absolute path /etc/passwd (a "
         "contract exported before paths relative to the asset tree); export the policy again"),
        ({"path": "robot/none.xml", "sha256": "0" * 64}, "the robot model the contract names is absent under --assets"),
        ({"xml": include, "sha256": sha(include)}, "contract robot_model: its xml reads a file"),
        ({"xml": bad_size, "sha256": sha(bad_size)}, "contract robot_model (its xml): the robot model the contract "
         "names does not load in MuJoCo ("),
    ]
    policy = tmp_path / "policy.onnx"
    for entry, says in cases:
        shutil.copyfile(cartpole_policy, policy)
        rewrite_contract(policy, lambda c, entry=entry: c.update(robot_model=entry))
        result = cli("deploy-check", policy, "--episodes", "1", "--assets", assets)
        assert result.code == 2 and says in one_line(result.err), (entry, result.err)


def test_deploy_check_refuses_a_policy_exported_before_contracts_or_another_graph(cli, tmp_path, cartpole_policy):
    """A file with no contract (as exported before contracts), and one whose weights changed under
    its contract (the graph's hash no longer the contract's)."""
    import onnx
    from onnx import numpy_helper

    bare, changed = tmp_path / "bare.onnx", tmp_path / "changed.onnx"
    model = onnx.load(str(cartpole_policy))
    del model.metadata_props[:]
    onnx.save(model, str(bare))
    model = onnx.load(str(cartpole_policy))
    weight = max(model.graph.initializer, key=lambda t: len(t.raw_data) or len(t.float_data))
    values = numpy_helper.to_array(weight).copy()
    values.flat[0] += 1.0
    weight.CopyFrom(numpy_helper.from_array(values, weight.name))
    onnx.save(model, str(changed))
    result = cli("deploy-check", bare)
    assert result.code == 2
    assert one_line(result.err).endswith(f"{bare}: no policy contract in its metadata (exported before contracts, "
                                         "or not by soaklab); export it again with `soaklab export RUN_DIR --out ...`")
    result = cli("deploy-check", changed)
    assert result.code == 2
    assert f"{changed}: metadata soaklab.contract: belongs to another model" in one_line(result.err)


def test_export_never_writes_a_contract_whose_slices_do_not_tile(tmp_path, cartpole_policy):
    """The writer export calls checks the schema and the tiling first: nothing is written."""
    import shutil

    from soaklab.deploy.contract import write_contract
    from soaklab.errors import RuntimeFailure

    policy, readable = tmp_path / "policy.onnx", tmp_path / "policy.contract.json"
    shutil.copyfile(cartpole_policy, policy)
    before = policy.read_bytes()
    contract = json.loads(cartpole_policy.with_name("policy.contract.json").read_text())
    contract["observation"]["blocks"][4]["stop"] = 6
    with pytest.raises(RuntimeFailure, match=r"policy contract: the blocks cover \[0, 6\), the observation has 5"):
        write_contract(policy, contract, readable)
    assert policy.read_bytes() == before and not readable.exists()


def test_deploy_check_refuses_an_empty_file_and_a_stale_readable_contract(cli, tmp_path, cartpole_policy):
    """An empty file is said to be one (protobuf reads it as an empty model); the readable contract
    beside the ONNX, once it says something else than the metadata (edited, or left by an earlier
    export), is refused naming the first key that differs."""
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    result = cli("deploy-check", empty)
    assert result.code == 2 and one_line(result.err).endswith(f"{empty}: an empty file, not an ONNX model; "
                                                              "export the policy again")
    policy, readable = tmp_path / "policy.onnx", tmp_path / "policy.contract.json"
    shutil.copy(cartpole_policy, policy)
    shutil.copy(cartpole_policy.with_name("policy.contract.json"), readable)
    contract = json.loads(readable.read_text())
    blocks = contract["observation"]["blocks"]
    blocks[0]["name"], blocks[1]["name"] = blocks[1]["name"], blocks[0]["name"]
    readable.write_text(json.dumps(contract))
    result = cli("deploy-check", policy, "--episodes", "1")
    assert result.code == 2
    assert one_line(result.err).endswith(f"{readable}: differs from the contract in policy.onnx's metadata (first at "
                                         "observation.blocks[0].name); the metadata is what the policy was exported "
                                         "with: export it again, or remove the stale file")
    readable.unlink()  # the metadata alone is the contract
    result = cli("deploy-check", policy, "--episodes", "1")
    assert result.code == 0 and "1 episode (seed" in result.out, result.err
