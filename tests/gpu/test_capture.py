"""CapturedStep's eager path and its diagnostics (the captured path runs on the GPU machine: see
benchmarks/archive/gpu/README.md)."""

from __future__ import annotations

import pytest
import torch

from soaklab.gpu.capture import GRAPH_ENV, CapturedStep, graph_diagnostics, graph_requested
from tests.conftest import one_line


def test_graphs_need_cuda_and_can_be_turned_off(monkeypatch):
    assert graph_requested(torch.device("cpu")) == (False, "learner on cpu: CUDA graphs need a CUDA device")
    monkeypatch.delenv(GRAPH_ENV, raising=False)
    assert graph_requested(torch.device("cuda")) == (True, None)  # decided without touching a GPU
    monkeypatch.setenv(GRAPH_ENV, "0")
    assert graph_requested(torch.device("cuda")) == (False, f"{GRAPH_ENV}=0")


def test_the_eager_path_runs_the_step_once_per_call():
    counter = torch.zeros(())
    step = CapturedStep("count", lambda: counter.add_(1), torch.device("cpu"))
    for _ in range(5):
        step()
    assert int(counter) == 5 and step.calls == 5
    assert step.diagnostics() == {"requested": False, "enabled": False,
                                  "disable_reason": "learner on cpu: CUDA graphs need a CUDA device"}


def test_a_set_is_enabled_only_when_every_step_is():
    cpu = CapturedStep("a", lambda: None, torch.device("cpu"))
    off = CapturedStep("b", lambda: None, torch.device("cpu"), requested=(False, "the backend's graphs are off"))
    record = graph_diagnostics([cpu, off])
    assert record["enabled"] is False and record["requested"] is False
    assert record["disable_reason"] == "learner on cpu: CUDA graphs need a CUDA device; the backend's graphs are off"
    assert set(record["steps"]) == {"a", "b"} and record["steps"]["a"]["calls"] == 0


def test_a_bad_graph_setting_is_refused_before_training(cli, monkeypatch, tmp_path):
    monkeypatch.setenv(GRAPH_ENV, "false")
    result = cli("train", "--algo", "sac", "--task", "cartpole_swingup", "--sim", "mujoco",
                 f"training.log_dir={tmp_path / 'run'}")
    assert result.code == 2
    assert f"{GRAPH_ENV}='false'" in one_line(result.err) and "expected 0" in one_line(result.err)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("flags", "words"), [
    (("--algos", "ppo"), "--algos ppo"),
    (("--batch-sizes", "2048,x"), "--batch-sizes 2048,x"),
    (("--batch-sizes", "0"), "--batch-sizes 0"),
    (("--iters", "0"), "--iters=0"),
    (("--device", "blah"), "--device blah: not a torch device"),
])
def test_bench_learner_refuses_bad_flags_in_one_line(cli, tmp_path, flags, words):
    out = tmp_path / "b.json"
    result = cli("bench", "learner", "--device", "cpu", *flags, "--output", out)
    assert result.code == 2 and words in one_line(result.err)
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal of a host without CUDA")
def test_bench_learner_on_a_host_without_cuda_names_the_device_to_pass(cli, tmp_path):
    out = tmp_path / "b.json"
    result = cli("bench", "learner", "--output", out)  # its default device is cuda
    assert result.code == 2 and "--device cuda: CUDA is not available here; pass --device cpu" in one_line(result.err)
    assert not out.exists()


def test_bench_learner_times_both_agents_on_the_cpu(cli, tmp_path):
    import json

    out = tmp_path / "b.json"
    result = cli("bench", "learner", "--device", "cpu", "--batch-sizes", "16", "--iters", "3", "--warmup", "1",
                 "--num-envs", "8", "--replay-rows", "200", "--output", out)
    assert result.code == 0, result.err
    rows = json.loads(out.read_text())["results"]
    assert [(r["algo"], r["mode"]) for r in rows] == [("flashsac", "eager"), ("sac", "eager")]
    assert all(r["update_ms_median"] > 0 and r["finite_diagnostics"] for r in rows)
