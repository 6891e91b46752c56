"""`soaklab export`: a run's policy as ONNX, checked against torch with onnxruntime (docs/export.md).

The graph is the deterministic actor with its observation normaliser: `obs` [batch, actor_obs]
float32 in, `action` [batch, action] float32 in [-1, 1] out (the task scales it to the robot). The
parity record beside it holds the largest difference between onnxruntime and torch over
observations the policy met in its own task.
"""

from __future__ import annotations

import logging
import math
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from soaklab.files.jsonfiles import write_json_atomic
from soaklab.files.outpaths import check_out_file
from soaklab.policy.trained import TrainedRun

PARITY_BOUND = 1e-5  # max |onnxruntime - torch| over the recorded observations
PARITY_OBSERVATIONS = 1000
PARITY_ENVS = 8
INPUT, OUTPUT = "obs", "action"


class DeterministicPolicy(nn.Module):
    """What a deployment runs: normalise the observation, take the actor's mean action."""

    def __init__(self, agent: Any) -> None:
        super().__init__()
        self.obs_norm = agent.obs_norm
        self.actor = agent.actor
        self._mean_action = agent._mean_action  # the agent's own head (tanh of the mean)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self._mean_action(self.obs_norm(obs))


def export(trained: TrainedRun, out: Path, observations: int = PARITY_OBSERVATIONS) -> dict[str, Any]:
    """Write `out` (ONNX) and `out`.parity.json; return the parity record."""
    import onnx
    import onnxruntime

    from soaklab.deploy.contract import graph_sha256, sidecar, write_contract
    from soaklab.policy.deploy_contract import build_contract, has_contract, probe, task_part
    from soaklab.policy.rollout import playback_env, roll_out

    check_out_file(out, ".onnx")
    policy = DeterministicPolicy(trained.agent).eval()
    steps = math.ceil(observations / PARITY_ENVS)
    with playback_env(trained, PARITY_ENVS) as env:
        recorded = roll_out(trained, env, steps)[:observations].float()
        task = task_part(trained, env) if has_contract(trained) else None
    batch = torch.export.Dim("batch", min=1)
    tmp = out.with_name(out.name + ".tmp")
    # The exporter logs every op library it skips (torchvision's, absent here) and deprecations of its
    # own internals: noise around the one line this command prints.
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        torch.onnx.export(policy, (recorded[:2],), tmp, input_names=[INPUT], output_names=[OUTPUT],
                          dynamic_shapes={"obs": {0: batch}}, external_data=False, verbose=False)
    session = onnxruntime.InferenceSession(str(tmp), providers=["CPUExecutionProvider"])
    with torch.no_grad():
        expected = policy(recorded).numpy()
    actual = session.run([OUTPUT], {INPUT: recorded.numpy()})[0]
    diff = float(abs(actual - expected).max())
    contract = None
    if task is not None:  # a plug-in's task without a contract exports as before, and deploy-check refuses it
        def act(obs: Any) -> Any:
            return session.run([OUTPUT], {INPUT: obs})[0]

        contract = build_contract(trained, task, graph_sha256(onnx.load(str(tmp))), int(recorded.shape[1]),
                                  int(expected.shape[1]), probe(trained, act))
        write_contract(tmp, contract, sidecar(out))
    tmp.replace(out)
    record = {
        "schema_version": 1,
        "onnx": str(out),
        "run_dir": str(trained.run_dir), "checkpoint": str(trained.checkpoint), "iteration": trained.iteration,
        "algo": trained.record["algo"], "task": trained.task, "config_hash": trained.record["config_hash"],
        "inputs": [{"name": INPUT, "shape": ["batch", int(recorded.shape[1])], "dtype": "float32",
                    "meaning": "the task's actor observation, unnormalised"}],
        "outputs": [{"name": OUTPUT, "shape": ["batch", int(expected.shape[1])], "dtype": "float32",
                     "meaning": "the deterministic action in [-1, 1]"}],
        "parity": {"observations": int(recorded.shape[0]), "source": f"deterministic rollout, {PARITY_ENVS} envs "
                   f"x {steps} steps on the MuJoCo backend", "max_abs_diff": diff, "bound": PARITY_BOUND,
                   "passed": diff <= PARITY_BOUND},
        "versions": {"torch": torch.__version__, "onnxruntime": onnxruntime.__version__},
        "contract": str(sidecar(out)) if contract is not None else None,
    }
    write_json_atomic(out.with_name(out.stem + ".parity.json"), record)
    return record
