"""algo.compile: what each scope wraps, the CPU learner staying eager, and `auto` falling back
only when asked to (a real torch.compile whose backend fails)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from soaklab.rl.agents.compiled import Compilation
from tests.rl.test_agents import small_agent

CUDA = torch.device("cuda")  # a device value only: nothing below allocates on it


def failing_backend(graph: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):
    """A torch.compile backend that cannot build the graph (what a broken compiler looks like)."""
    raise RuntimeError("cannot compile this")


def update_like(calls: list[str]):
    x = torch.ones(4)

    def fn() -> None:
        x.mul_(2.0).add_(1.0)  # tensor work: dynamo hands a graph to the backend
        calls.append("ran")
    return fn


def test_a_cpu_learner_stays_eager_and_says_why():
    agent = small_agent("flashsac", compile="update")
    agent.update(0)
    compiled = agent.capture_diagnostics()["compile"]
    assert compiled == {"requested": "update", "ran": "eager",
                        "reason": "learner on cpu: compile applies to CUDA learners only"}
    assert torch.isfinite(agent.diagnostics[0])


def test_eager_is_the_default_and_wraps_nothing():
    agent = small_agent("sac")
    assert agent.capture_diagnostics()["compile"] == {"requested": "eager", "ran": "eager", "reason": None}
    fn = update_like([])
    assert Compilation("eager", CUDA).step("x", fn) is fn


def test_auto_falls_back_to_eager_when_compilation_fails_and_records_it():
    torch._dynamo.reset()
    calls: list[str] = []
    compilation = Compilation("auto", CUDA, backend=failing_backend)
    step = compilation.step("update_critic", update_like(calls))
    step()
    step()
    assert calls == ["ran", "ran"]  # each call ran once, eagerly, after the failed compile
    diag = compilation.diagnostics()
    assert diag["requested"] == "auto" and diag["ran"] == "eager"
    assert diag["reason"].startswith("update_critic: ") and "cannot compile this" in diag["reason"]


def test_a_named_scope_fails_the_run_instead_of_falling_back():
    torch._dynamo.reset()
    calls: list[str] = []
    step = Compilation("update", CUDA, backend=failing_backend).step("update_critic", update_like(calls))
    with pytest.raises(Exception, match="cannot compile this"):
        step()
    assert calls == []


def test_nets_compiles_modules_in_place_keeping_their_state_dict_keys():
    module = nn.Linear(3, 2)
    keys = list(module.state_dict())
    Compilation("nets", CUDA).networks([module])
    assert module._compiled_call_impl is not None  # nn.Module.compile's in-place wrapper
    assert list(module.state_dict()) == keys


def test_an_unknown_scope_is_refused():
    with pytest.raises(ValueError, match="algo.compile='fast'"):
        Compilation("fast", CUDA)
