"""CapturedStep's eager path and its diagnostics (the captured path runs on the GPU machine: see
benchmarks/gpu/README.md)."""

from __future__ import annotations

import torch

from soaklab.capture import GRAPH_ENV, CapturedStep, graph_diagnostics, graph_requested


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
