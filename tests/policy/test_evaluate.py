"""`soaklab evaluate` on a real (short) G1 tracking run on MuJoCo: episodes from the clip's first
frame with the exported ONNX policy, the figures' ranges and meaning, and the refusals. Sim-to-sim on
MuJoCo Warp (warp's CPU device where there is no GPU) is judged where the DAG's evaluate target runs
both sims on one soaked run (tests/workflow/test_dag.py)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import one_line
from tests.policy.test_export import FAST, QUIET, feed, rewrite_contract, train


def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def train_g1(run_dir: Path, g1_assets, expect: int, **env: str) -> Path:
    """A short FlashSAC G1 run on MuJoCo into `run_dir`, exiting `expect`."""
    done = subprocess.run([sys.executable, "-m", "soaklab", "train", "--algo", "flashsac",
                           "--task", "g1_motion_tracking", "--sim", "mujoco", "--assets-manifest",
                           str(g1_assets.manifest_path), *FAST, *QUIET, f"training.log_dir={run_dir}"],
                          env=dict(os.environ, SOAKLAB_TORCH_COMPILE="0", **env),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == expect, done.stdout[-2000:] + done.stderr[-2000:]
    return run_dir


@pytest.fixture(scope="module")
def g1_run(tmp_path_factory, g1_assets) -> Path:
    return train_g1(tmp_path_factory.mktemp("g1") / "run", g1_assets, 0)


@pytest.fixture(scope="module")
def g1_policy(tmp_path_factory, g1_run) -> Path:
    """The G1 run's policy exported with its contract (outside the run dir), its parity checked on 8
    observations rather than 1,000 (the CLI's export is the cart-pole tests'; CI time)."""
    from soaklab.policy.export import export
    from soaklab.policy.trained import load_trained

    out = tmp_path_factory.mktemp("g1-policy") / "policy.onnx"
    assert export(load_trained(g1_run), out, observations=8)["parity"]["passed"]
    return out


@pytest.fixture(scope="module")
def g1_failed_run(tmp_path_factory, g1_assets) -> Path:
    """The same run, failed at iteration 6: its final checkpoint is written all the same."""
    run_dir = train_g1(tmp_path_factory.mktemp("g1-failed") / "run", g1_assets, 1, SOAKLAB_FAULT="raise_learner@6")
    assert (run_dir / "checkpoints" / "model_final.pt").is_file()
    return run_dir


def test_a_failed_run_is_evaluated_but_never_as_a_finished_policy(cli, tmp_path, g1_failed_run):
    out, page = tmp_path / "evaluation.json", tmp_path / "evaluation.html"
    result = cli("evaluate", g1_failed_run, "--episodes", "2", "--out", out, "--html", page)
    assert result.code == 0, result.err
    record = json.loads(out.read_text())
    assert record["run_status"] == "failed" and record["finished_policy"] is False
    assert record["run_failure_reason"].startswith("learner_failure: RuntimeError: injected learner fault")
    assert record["clips"]["largebox"]["episodes"] == 2  # judged all the same
    assert result.out.startswith("evaluate: NOT A FINISHED POLICY (run status failed: learner_failure: ")
    assert "NOT A FINISHED POLICY (run status failed" in page.read_text()


@pytest.mark.parametrize(("text", "named"), [
    ('{"status": "failed", "completed_iterations": 6, "status": "completed"}', "key 'status' appears twice"),
    ("[" * 100_000 + "]" * 100_000, "nested deeper than 64 levels")])
def test_a_summary_soaklab_never_wrote_is_refused(cli, tmp_path, g1_failed_run, text, named):
    """A run_summary.json whose parsed status is the parser's choice (a key twice: plain json keeps the
    later "completed"), or one nested past any run summary's depth, is refused in one line (exit 2)
    before any episode, never judged as a finished policy."""
    run_dir = tmp_path / "run"
    shutil.copytree(g1_failed_run, run_dir)
    (run_dir / "run_summary.json").write_text(text)
    out = tmp_path / "evaluation.json"
    result = cli("evaluate", run_dir, "--episodes", "2", "--out", out)
    assert result.code == 2, result.err
    line = one_line(result.err)
    assert f"{run_dir / 'run_summary.json'}: " in line and named in line
    assert not out.exists()


def test_evaluate_runs_every_episode_from_the_first_frame(cli, tmp_path, g1_run, g1_policy, g1_assets):
    before = digest(g1_run)
    out = tmp_path / "evaluation.json"
    page = tmp_path / "evaluation.html"
    result = cli("evaluate", g1_run, "--episodes", "6", "--out", out, "--html", page)
    assert result.code == 0, result.err
    record = json.loads(out.read_text())
    assert record["sim"] == record["trained_on"] == "mujoco" and record["sim_to_sim"] is False
    assert record["policy"] == "onnx" and record["run"]["config_hash"]
    # how long the policy trained, from launch, read from its own checkpoint (not from file times)
    final = torch.load(g1_run / "checkpoints" / "model_final.pt", weights_only=True)
    assert final["elapsed_s"] > 0 and record["run"]["training_minutes"] == round(final["elapsed_s"] / 60.0, 3)
    assert record["run_status"] == "completed" and record["finished_policy"] is True
    assert record["run_failure_reason"] is None and "NOT A FINISHED" not in result.out + page.read_text()
    # The ONNX file acts; torch, beside it on the same observations, agrees within export's bound.
    assert record["torch_cross_check"]["max_abs_action_diff"] <= 1e-5
    (clip, figures), = record["clips"].items()
    assert clip == "largebox" and figures["episodes"] == 6 and figures["steps"] >= 1
    assert 0.0 <= figures["success_rate"] <= 1.0 and 0.0 < figures["tracked_fraction"] <= 1.0
    for name in ("mpkpe_m", "root_relative_mpkpe_m", "joint_error_rad"):
        assert 0.0 < figures[name] < 5.0, (name, figures[name])
    assert "evaluate: largebox on mujoco: 6 episodes from the first frame" in result.out
    assert "largebox" in page.read_text() and "first frame on mujoco" in page.read_text()
    assert digest(g1_run) == before  # evaluation never writes into the run's evidence
    # The same policy from its ONNX file alone, on plain MuJoCo through its contract: the same initial
    # states and steps, so the same episodes; the error means agree to float32 summation order.
    contract = json.loads(g1_policy.with_name("policy.contract.json").read_text())
    blocks = contract["observation"]["blocks"]
    assert contract["observation"]["dim"] == 160 and sum(b["stop"] - b["start"] for b in blocks) == 160
    assert contract["robot_model"]["sha256"] == g1_assets.manifest["scene"]["sha256"]
    assert [c["label"] for c in contract["clips"]] == ["largebox"] and contract["action"]["dim"] == 29
    # Its files are named inside the asset tree, so the contract works where the tree lies elsewhere
    # (here: a copy of it, as `soaklab assets pull` on another machine makes).
    root = Path(g1_assets.manifest["root"]).parent
    clip = contract["clips"][0]["path"]
    assert not Path(clip).is_absolute() and (root / clip).resolve() == g1_assets.motion.resolve()
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(root, elsewhere, copy_function=os.link)
    deployed = tmp_path / "deploy.json"
    result = cli("deploy-check", g1_policy, "--episodes", "6", "--out", deployed, "--assets", elsewhere)
    assert result.code == 0, result.err
    check = json.loads(deployed.read_text())
    assert check["probe"]["max_abs_diff"] == 0.0 and check["seed"] == contract["run"]["seed"]
    theirs = check["clips"]["largebox"]
    for name in ("episodes", "success_rate", "steps"):
        assert theirs[name] == figures[name], name
    assert theirs["tracked_fraction"] == pytest.approx(figures["tracked_fraction"], rel=1e-12)  # float64 means
    for name in ("mpkpe_m", "root_relative_mpkpe_m", "joint_error_rad"):
        assert theirs[name] == pytest.approx(figures[name], rel=1e-6), name
    # A mesh the scene loads, cut short (the scene's hash covers the scene file only): one line.
    mesh = next((elsewhere / "g1").rglob("*.STL"))
    data = mesh.read_bytes()
    mesh.unlink()  # a hard link: the session's tree keeps its own
    mesh.write_bytes(data[:100])
    result = cli("deploy-check", g1_policy, "--episodes", "1", "--assets", elsewhere)
    assert result.code == 2 and "the robot model the contract names does not load in MuJoCo (" in \
        one_line(result.err), result.err


def test_the_evaluation_path_starts_at_frame_zero_and_never_resets(make_g1):
    """The env's evaluation path on its own: every env starts at the clip's first frame (within the
    reset noise), and a step without reset advances the reference by the clip's rate, also past a
    termination."""
    env = make_g1(4)
    obs = env.start_at_first_frame()
    assert obs.shape == (4, env.spaces.actor_obs) and env.frame.tolist() == [0, 0, 0, 0]
    for step in range(1, 4):
        _, _, frame, terminated, _ = env.step_without_reset(torch.zeros(4, env.spaces.action))
        assert frame.tolist() == [int(step * env.frames_per_step + 0.5)] * 4 and terminated.dtype == torch.bool
    assert env.episode_step.tolist() == [3, 3, 3, 3] and env.start_frame.tolist() == [0, 0, 0, 0]


def test_evaluate_refuses_bad_requests_in_one_line(cli, tmp_path, g1_run):
    cartpole = train(tmp_path / "cartpole", "sac", "cartpole_swingup")
    cases = [
        (("evaluate", cartpole, "--out", tmp_path / "e.json"), "only g1_motion_tracking runs can be evaluated"),
        (("evaluate", g1_run, "--episodes", "0", "--out", tmp_path / "e.json"), "--episodes 0: must be in [1, 16384]"),
        (("evaluate", g1_run, "--episodes", "100000", "--out", tmp_path / "e.json"), "--episodes 100000: must be in"),
        (("evaluate", g1_run, "--out", g1_run / "evaluation.json"), "is inside the input RUN_DIR"),
        (("evaluate", g1_run, "--out", tmp_path / "e.json", "--html", g1_run / ".." / g1_run.name / "e.html"),
         "is inside the input RUN_DIR"),
        (("evaluate", tmp_path / "nothing", "--out", tmp_path / "e.json"), "not a run dir"),
    ]
    if importlib.util.find_spec("mujoco_warp") is None:
        cases.append((("evaluate", g1_run, "--sim", "mjwarp", "--out", tmp_path / "e.json"),
                      "--sim mjwarp: mujoco_warp is not installed"))
    for args, words in cases:
        result = cli(*args)
        assert result.code == 2 and words in one_line(result.err), (args, result.err)
        assert not (tmp_path / "e.json").exists() and not (g1_run / "evaluation.json").exists()



def test_the_error_definitions_on_a_known_offset(make_g1):
    """The robot exactly on the reference: zero errors. Shifted as a whole by 0.1 m: MPKPE 0.1 m,
    root-relative MPKPE 0 (a translation moves the root too), joints untouched."""
    from soaklab.policy.evaluate import body_errors

    env = make_g1(3)
    env.start_at_first_frame()
    ref = env._reference(env.frame)
    robot = {"pos": ref["pos"].clone(), "joint_pos": ref["joint_pos"].clone()}
    for value in body_errors(env, robot, ref):
        assert torch.allclose(value, torch.zeros(3))
    robot["pos"] = robot["pos"] + torch.tensor([0.1, 0.0, 0.0])
    mpkpe, relative, joint = body_errors(env, robot, ref)
    assert torch.allclose(mpkpe, torch.full((3,), 0.1)) and torch.allclose(relative, torch.zeros(3), atol=1e-6)
    assert torch.allclose(joint, torch.zeros(3))


def test_a_contract_with_two_joints_swapped_is_refused_naming_them(cli, tmp_path, g1_policy, g1_assets):
    """A self-consistent but wrong contract: two channels of the action order swapped (their joints,
    actuators, poses, scales and gains with them; the flat keys rewritten, the graph's hash still the
    file's). Schema, hashes and the model's actuators all agree with it; the policy's own first
    observations do not, and the line names the two joints."""
    policy = tmp_path / "policy.onnx"
    policy.write_bytes(g1_policy.read_bytes())

    def swap(contract: dict) -> None:
        channels = contract["action"]["channels"]
        channels[1], channels[2] = channels[2], channels[1]

    rewrite_contract(policy, swap)
    result = cli("deploy-check", policy, "--episodes", "1", "--out", tmp_path / "d.json", "--assets",
                 Path(g1_assets.manifest["root"]).parent)
    assert result.code == 2, result.err
    line = one_line(result.err)
    assert (f"{policy}: the contract does not rebuild the observations the policy was exported with: they differ at "
            "left_hip_yaw_joint, left_hip_roll_joint in ref_joint_pos, ref_joint_vel, joint_pos_rel, joint_vel") in line
    assert not (tmp_path / "d.json").exists()


@pytest.mark.parametrize(("edit", "says"), [
    (lambda c, tmp: c["clips"][0].update(path="g1/motions/gone.npz"), "gone.npz: the clip largebox the contract "
     "names is absent under --assets"),
    (lambda c, tmp: c["clips"][0].update(path=str(tmp / "gone.npz")), "the clip largebox is named by the absolute "
     "path"),
    (lambda c, tmp: c["clips"][0]["scene"].update(sha256="0" * 64), "the robot model differs from the one the policy "
     "was trained with (sha256 "),
])
def test_assets_absent_or_not_the_trained_ones_are_refused(cli, tmp_path, g1_policy, g1_assets, edit, says):
    policy = tmp_path / "policy.onnx"
    policy.write_bytes(g1_policy.read_bytes())
    rewrite_contract(policy, lambda c: edit(c, tmp_path))
    result = cli("deploy-check", policy, "--clip", "largebox", "--assets", Path(g1_assets.manifest["root"]).parent)
    assert result.code == 2 and says in one_line(result.err), result.err
    result = cli("deploy-check", g1_policy, "--clip", "walk")
    assert result.code == 2 and "--clip walk: the contract names largebox; give one of them" in one_line(result.err)


def test_the_example_feeds_the_g1_policy_from_the_file(g1_policy, g1_assets):
    assert "the first 3 observations match the contract's probe" in feed(g1_policy, 20, "--assets",
                                                                          str(Path(g1_assets.manifest["root"]).parent))
