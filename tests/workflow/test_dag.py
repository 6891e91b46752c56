"""Snakemake itself runs the DAG, in a temporary --directory on a copy of the workflow."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
import yaml

from soaklab.metrics.wandb_offline import read_offline_run
from soaklab.schemas import schema_errors
from soaklab.soak.interrupted import kept_runs
from soaklab.soak.sampler import ProcessKey
from tests.conftest import REPO
from tests.rl.test_wandb import assert_same_series
from tests.workflow.conftest import CHAIN, planned, ran, snakemake

pytestmark = pytest.mark.snakemake


AFTER_RESOLUTION = {"resolve_config": 1, "mps_start": 1, "train_soak": 1, "extract_metrics": 1,
                    "validate_artifacts": 1, "soak": 1}


@pytest.mark.parametrize("overlay, runs", [("gpu.yaml", {"gpu": 1}), ("gpu-short.yaml", {"gpu-short": 1}),
                                           ("gpu-x2.yaml", {"gpu-x2": 2, "gpu-x1": 1}),
                                           ("gpu-x4.yaml", {"gpu-x4": 4, "gpu-x1": 1}),
                                           ("gpu-x8.yaml", {"gpu-x8": 8, "gpu-x1": 1}),
                                           ("gpu-deterministic.yaml", {"gpu-det": 1})])
def test_gpu_overlays_plan_their_runs_only_each_with_its_gpus(project, overlay, runs):
    proc = snakemake(project, "soak", "-n", overlays=(REPO / "config" / overlay,))
    assert proc.returncode == 0, proc.stderr
    outputs = set(re.findall(r"output: (\S+)", proc.stdout))
    for run in runs:
        assert f"results/{run}/run_config.json" in outputs and f"results/{run}/mps.json" in outputs
    assert not any("results/cpu" in o for o in outputs)
    # the soak job asks a scheduler for one GPU per data-parallel rank (training.dp_ranks)
    soak_gpus = dict(re.findall(r"output: results/([\w.-]+)/soak\.json.*?resources: [^\n]*\bgpu=(\d+)", proc.stdout,
                                re.S))
    assert {run: int(n) for run, n in soak_gpus.items()} == runs


@pytest.mark.covers("flashsac/g1_motion_tracking/mujoco/cpu/1")
def test_whole_dag_then_rerun_one_step_then_edit_code_then_report(project, monkeypatch):
    """The G1 run through the whole DAG with W&B on beside TensorBoard (training.loggers; offline; the
    wandb extra, which `make setup` installs as it does the warp one `evaluate` needs): one DAG run
    for both, at 40 s of CI each. The DAG runs without W&B in every other DAG test (cart-pole's failed
    soak, sweeps, records, plug-ins) and in CI's reproduction of record ci-dag."""
    root, work, _ = project
    for name in ("WANDB_MODE", "WANDB_DIR", "WANDB_NAME", "WANDB_RUN_GROUP", "WANDB_TAGS"):
        monkeypatch.delenv(name, raising=False)
    wandb = work.parent / "wandb.yaml"
    wandb.write_text(yaml.safe_dump({"runs": {"cpu": {"overrides": {"training.loggers": ["tensorboard", "wandb"],
                                                                    "training.wandb_project": "soaklab-dag"}}}}))
    proc = snakemake(project, "soak", overlays=(wandb,))
    assert proc.returncode == 0, proc.stderr
    # the chain, each rule once, and the DAG's verdict into the training's W&B run
    assert ran(proc.stderr) == {**dict.fromkeys(CHAIN, 1), "wandb_summary": 1, "soak": 1}
    results = work / "results/cpu"
    run_config = json.loads((results / "run_config.json").read_text())
    assert schema_errors("run_config", run_config) == []
    assert run_config["config"]["training"]["log_dir"] == "results/cpu/train"
    assert run_config["run"]["assets"]["motion"].endswith("largebox.npz")
    soak = json.loads((results / "soak.json").read_text())
    assert schema_errors("soak", soak) == [] and soak["status"] == "passed"
    assert soak["run_summary"]["task"] == "g1_motion_tracking" and soak["run_summary"]["completed_iterations"] == 30
    metrics = json.loads((results / "metrics.json").read_text())
    assert metrics["missing"] == [] and metrics["metrics"]["Perf/total_fps"]["mean"] > 0
    # G1 runs say whether they track: errors on the real clip, and how episodes end.
    tracking = metrics["tracking"]
    assert tracking["body_pos_error_m"] > 0 and tracking["joint_pos_error_rad"] > 0
    assert 0 <= tracking["timeout_fraction"] <= 1
    validation = json.loads((results / "validation.json").read_text())
    assert validation["status"] == "passed", [c for c in validation["checks"] if not c["passed"]]
    for rule in CHAIN:
        log = work / ("logs/assets" if rule == "prefetch_assets" else "logs/cpu") / f"{rule}.log"
        assert log.is_file(), rule
        assert next((work / "benchmarks/rules").rglob(f"{rule}.tsv")).is_file()
    assert "devices: learner cpu -> cpu" in (work / "logs/cpu/resolve_config.log").read_text()
    assert (work / "logs/cpu/soak_evidence/soak.json").is_file()
    # A soak proves the runtime: no export or playback after it (the play target makes both).
    assert not (results / "train/post_training.json").exists() and not (results / "train/policy.onnx").exists()
    # Resolution runs once per DAG run: the monitor and the trainer load its record.
    logs = {"resolve": work / "logs/cpu/resolve_config.log", "monitor": work / "logs/cpu/train_soak.log",
            "trainer": results / "train/soak-console.log"}
    texts = {k: p.read_text() for k, p in logs.items()}
    assert sum(t.count("resolved on this host") for t in texts.values()) == 1
    assert "config: resolved on this host" in texts["resolve"]
    assert "soak: config loaded from results/cpu/run_config.json" in texts["monitor"]
    assert "train: config loaded from results/cpu/train/run_config.json" in texts["trainer"]

    # The optional evaluate target: the soaked policy as ONNX (parity checked) and, a tracking run,
    # evaluated from the clip's first frame (docs/learning.md), on its own MuJoCo and, sim-to-sim, on
    # MuJoCo Warp (warp's CPU device on a machine without a GPU); no video, so no GL needed.
    play_overlay = work.parent / "play.yaml"
    play_overlay.write_text("play:\n  seconds: 0.5\n  evaluation_episodes: 4\n")
    proc = snakemake(project, "evaluate", overlays=(wandb, play_overlay))
    assert proc.returncode == 0, proc.stderr[-3000:]
    parity = json.loads((results / "policy.parity.json").read_text())
    assert parity["parity"]["passed"] and parity["task"] == "g1_motion_tracking"
    evaluations = {}
    for sim in ("mujoco", "mjwarp"):
        evaluation = evaluations[sim] = json.loads((results / f"evaluation-{sim}.json").read_text())
        assert evaluation["clips"]["largebox"]["episodes"] == 4 and evaluation["policy"] == "onnx"
        assert evaluation["sim"] == sim and evaluation["sim_to_sim"] is (sim == "mjwarp")
        assert evaluation["trained_on"] == "mujoco"
        assert "largebox" in (results / f"evaluation-{sim}.html").read_text()
    # Sim-to-sim judges the same episodes from the same first frame on float32 physics (warp's CPU
    # device here when there is no GPU), so the same figures within float32's reach.
    warp, cpu = evaluations["mjwarp"], evaluations["mujoco"]
    assert warp["device"] == ("cuda" if torch.cuda.is_available() else "cpu") and cpu["device"] == "cpu"
    a, b = warp["clips"]["largebox"], cpu["clips"]["largebox"]
    # A step of the clip is 1/325 of it; float32 against float64 may move an early end by one.
    assert abs(a["tracked_fraction"] - b["tracked_fraction"]) <= 0.02, (a, b)
    for name in ("mpkpe_m", "root_relative_mpkpe_m", "joint_error_rad"):
        assert 0.0 < a[name] < 5.0 and abs(a[name] - b[name]) <= 0.01, (name, a[name], b[name])
    assert not (results / "play.mp4").exists()
    # The play target is evaluate plus the video: only the video is left to make, and its W&B record
    # (the policy, the video and the evaluations into the training's W&B run).
    proc = snakemake(project, "play", overlays=(wandb, play_overlay))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ran(proc.stderr) == {"play_policy": 1, "wandb_play": 1, "play": 1}
    played = json.loads((results / "play.json").read_text())
    assert played["frames"] == 25 and played["ghost"] and (results / "play.png").stat().st_size > 0

    assert planned(project, overlays=(wandb,)) == {}
    # -R extract_metrics: extraction and validation only (and the W&B summary of the validation); the
    # soak is not rerun. (Planned here; the edit below reruns them for real, and CI runs the README's
    # `snakemake soak -R extract_metrics`.)
    after_metrics = {"extract_metrics": 1, "validate_artifacts": 1, "wandb_summary": 1, "soak": 1}
    assert planned(project, "-R", "extract_metrics", overlays=(wandb,)) == after_metrics

    # Editing a module replans exactly the rules whose command imports it (and what follows them).
    touch_module(root, "metrics/plot.py")
    soak_mtime = (results / "soak.json").stat().st_mtime
    proc = snakemake(project, "soak", overlays=(wandb,))
    assert proc.returncode == 0, proc.stderr
    assert ran(proc.stderr) == after_metrics
    assert (results / "soak.json").stat().st_mtime == soak_mtime
    touch_module(root, "mps/record.py")
    after_resolution = {**AFTER_RESOLUTION, "wandb_summary": 1}
    assert planned(project, overlays=(wandb,)) == {k: v for k, v in after_resolution.items() if k != "resolve_config"}
    touch_module(root, "config/keys.py")
    assert planned(project, overlays=(wandb,)) == after_resolution

    # One report of both targets: the soak's files and the play target's.
    report = work / "report.html"
    proc = snakemake(project, "soak", "play", "--report", str(report), overlays=(wandb, play_overlay))
    assert proc.returncode == 0, proc.stderr
    text = report.read_text()
    for shown in ("metrics.png", "metrics.html", "validation.html", "play.png", "evaluation-mjwarp.html",
                  "wandb.html"):
        assert shown in text, f"the report lacks {shown}"

    # W&B (a standalone run's: tests/rl/test_wandb.py): the training's offline run has every Train/ and
    # Loss/ series of the event file, G1's reward terms included; the soak target added the DAG's
    # verdict to that run, and the report's page names its folders and the `wandb sync` line.
    record = json.loads((results / "wandb.json").read_text())
    assert record["state"] == "ok" and record["mode"] == "offline" and record["project"] == "soaklab-dag"
    trained, summarised = (Path(f) if Path(f).is_absolute() else work / f for f in record["folders"])
    assert trained.parent == summarised.parent == results / "train" / "wandb"
    run, summary = read_offline_run(trained), read_offline_run(summarised)
    assert run.run_id == summary.run_id == record["run_id"]
    assert run.project == "soaklab-dag" and run.history["Perf/iteration_ms"]
    assert assert_same_series(trained.parent.parent, run.history) > 50
    assert run.config["config_hash"] == json.loads((results / "train/run_config.json").read_text())["config_hash"]
    loggers = json.loads((results / "train/run_summary.json").read_text())["loggers"]
    assert loggers["wandb"]["state"] == "ok" and Path(loggers["wandb"]["run_folder"]).name == trained.name
    # The run is named after the workflow run; the DAG's verdict is its summary.
    assert "wandb: cpu" in (work / "logs/cpu/wandb_summary.log").read_text()
    assert summary.summary["soaklab/status"] == "passed"
    assert summary.summary["soaklab/checks_passed"] == summary.summary["soaklab/checks_total"] > 0
    assert summary.summary["train/status"] == "completed"
    page = (results / "wandb.html").read_text()
    assert str(trained.name) in page and "wandb sync" in page
    assert re.search(r"wandb\.json", (work / "logs/cpu/wandb_summary.log").read_text())
    # The play target's W&B record: the ONNX policy and the video as artifacts, the evaluations' figures.
    played = json.loads((results / "wandb-play.json").read_text())
    assert played["state"] == "ok" and played["run_id"] == record["run_id"], played
    assert sorted(Path(a).name for a in played["artifacts"]) == ["play.mp4", "policy.onnx"]
    assert {"mujoco", "mjwarp"} <= {key.split("/")[1] for key in played["summary"] if key.startswith("evaluation/")}


def touch_module(root: Path, module: str) -> None:
    with open(root / "src/soaklab" / module, "a") as fh:
        fh.write("\n# an edit\n")


def test_invalid_override_fails_the_dag_with_a_clear_log(project, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"runs": {"cpu": {"overrides": {"training.inference_slot_capacity": 1.0}}}}))
    proc = snakemake(project, "soak", overlays=(bad,))
    assert proc.returncode != 0
    root, work, _ = project
    log = (work / "logs/cpu/resolve_config.log").read_text()
    assert "training.inference_slot_capacity=1.0 (float)" in log
    assert not (work / "results/cpu/run_config.json").exists()
    assert (work / "results/assets/manifest.json").is_file(), "upstream results are kept"


@pytest.mark.parametrize(("overlay", "words"), [
    ({"soak_runs": ["nope"]}, "soak_runs: 'nope' is not defined"),
    ({"runs": {"cpu": {"overrides": {"training.log_dir": "x"}}}}, "runs.cpu.overrides.training.log_dir"),
    ({"runs": {"cpu": {"algo": "ppo"}}}, "ppo"),
    ({"runs": {"cpu": {"soak": {"min_duration_seconds": float("inf")}}}},
     "runs.cpu.soak.min_duration_seconds is not a finite number"),
    ({"runs": {"cpu": {"overrides": {"algo.gamma": float("nan")}}}}, "runs.cpu.overrides.algo.gamma is not a finite"),
    ({"runs": {"cpu": {"soak": {"sample_interval_seconds": 36000}}}}, "36000 is greater than the maximum of 3600"),
    # safe_dump writes a repeated object once and aliases it: a small file that expands enormously.
    ({"runs": {"cpu": {"overrides": {"x": [[[[[1] * 10] * 10] * 10] * 10] * 10}}}}, "a YAML alias chain"),
])
def test_invalid_workflow_config_is_refused_at_load(project, tmp_path, overlay, words):
    path = tmp_path / "overlay.yaml"
    path.write_text(yaml.safe_dump(overlay))
    proc = snakemake(project, "soak", "-n", overlays=(path,))
    assert proc.returncode != 0
    assert words in proc.stderr + proc.stdout


def test_a_failed_soak_fails_the_dag_keeps_its_evidence_and_the_next_dag_run_resumes_it(project, tmp_path):
    """The trainer SIGKILLed at iteration 23 (checkpoints every 10): the failed soak fails the DAG and
    keeps its run as results/cpu/train.interrupted-<config hash>; the same `snakemake soak` again
    resumes it at iteration 20 and the run validates, its soak JSON and run summary naming both
    segments. That passing soak run again (-R train_soak) and failing takes its pass with it, and its
    evidence is kept. (One test: each DAG run here costs 20-40 s of CI. The run is cart-pole's: the
    DAG's handling of a failed soak is the point, the whole-DAG test soaks G1 and tests/rl/test_resume.py
    resumes G1 bit for bit.)"""
    _, work, _ = project
    cartpole = tmp_path / "cartpole.yaml"
    cartpole.write_text(yaml.safe_dump({"runs": {"cpu": {"task": "cartpole_swingup"}}}))
    proc = snakemake(project, "soak", overlays=(cartpole,), fault="kill_learner@23")
    assert proc.returncode != 0
    [interrupted] = kept_runs(work / "results/cpu/train")  # results/cpu/train.interrupted-<its config>
    assert (interrupted / "resume/learner_20.pt").is_file() and not (work / "results/cpu/train").exists()
    assert not (work / "results/cpu/soak.json").exists()
    assert "kept the interrupted run" in (work / "logs/cpu/train_soak.log").read_text()

    proc = snakemake(project, "soak", overlays=(cartpole,))
    assert proc.returncode == 0, proc.stderr
    assert "resuming the interrupted run" in (work / "logs/cpu/train_soak.log").read_text()
    assert json.loads((work / "results/cpu/validation.json").read_text())["status"] == "passed"
    soak = json.loads((work / "results/cpu/soak.json").read_text())
    assert [s["status"] for s in soak["segments"]] == ["failed", "passed"]
    assert soak["segments"][0]["leak"] is False and soak["command"]["trainer"][3:5] == ["train", "--resume"]
    # The killed segment's progress (iteration 23) is not this segment's: the soak's first sample,
    # taken as the trainer is spawned, sees none, so start-up and the leak window are its own.
    assert soak["samples"][0]["progress"]["iteration"] is None
    summary = json.loads((work / "results/cpu/train/run_summary.json").read_text())
    assert [(s["start_iteration"], s["end_iteration"]) for s in summary["segments"]] == [(0, 20), (20, 30)]
    assert not interrupted.exists()

    # No stale pass: the passing soak run again and failing takes its pass with it. The derived
    # results go before the soak starts; the summary Snakemake prints on error says FAILED.
    proc = snakemake(project, "soak", "-R", "train_soak", overlays=(cartpole,), fault="raise_learner@3")
    assert proc.returncode != 0
    for name in ("soak.json", "metrics.json", "metrics.csv", "metrics.png", "metrics.html", "validation.json",
                 "validation.html"):
        assert not (work / "results/cpu" / name).exists(), name
    assert "run cpu: FAILED (learner_failure)" in proc.stdout + proc.stderr
    # The failed soak's evidence is kept beside the results; its run had no checkpoint to keep.
    assert not (work / "results/cpu/train").exists()
    evidence = work / "logs/cpu/soak_evidence"
    soak = json.loads((evidence / "soak.json").read_text())
    # The trainer's classification is the soak's and its shutdown's (tests/soak/test_monitor.py's
    # trainer-failure test, for this fault), and nothing the soak saw outlived it.
    assert soak["failure_classification"] == soak["shutdown"]["classification"] == "learner_failure"
    for sample in soak["samples"]:
        for p in sample["processes"]:
            assert not ProcessKey(p["pid"], p["create_time"]).alive(), f"{p['name']} ({p['pid']}) outlived the soak"
    assert "injected learner fault" in (evidence / "soak-console.log").read_text()
    assert json.loads((evidence / "run_summary.json").read_text())["status"] == "failed"
    assert "learner_failure" in (work / "logs/cpu/train_soak.log").read_text()
