"""One rank of the data-parallel agent tests (imported by spawned processes, so it is a module)."""

from __future__ import annotations

from pathlib import Path

import torch

from soaklab.config.compose import compose
from soaklab.contract.layout import Layout, TaskSpaces
from soaklab.rl.agents import make_agent
from soaklab.rl.dp import DataParallel
from soaklab.rl.replay import ReplayRing

OBS, CRITIC, ACTION, ENVS = 6, 9, 3, 4


def model_state(agent) -> dict[str, torch.Tensor]:  # noqa: ANN001 - an OffPolicyAgent
    """Every parameter, buffer and optimizer state tensor of the agent, by name."""
    out: dict[str, torch.Tensor] = {}
    for i, module in enumerate(agent.modules()):
        for name, tensor in [*module.named_parameters(), *module.named_buffers()]:
            out[f"module{i}.{name}"] = tensor.detach().clone()
    for opt_name in ("actor_opt", "critic_opt", "alpha_opt"):
        for j, state in enumerate(getattr(agent, opt_name).state.values()):
            for key, value in state.items():
                if isinstance(value, torch.Tensor):
                    out[f"{opt_name}.{j}.{key}"] = value.detach().clone()
    return out


def run_rank(rank: int, world: int, store: str, algo: str, updates: int, use_dp: bool, out: str,
             backend: str = "gloo") -> None:
    """gloo: CPU ranks. nccl: rank r on cuda:r with captured updates (the all-reduce in the graph)."""
    torch.set_num_threads(1)
    device = torch.device(f"cuda:{rank}") if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dp = DataParallel.join(Path(store), rank, world, backend) if use_dp else None
    overrides = ["algo.actor_hidden=16", "algo.critic_hidden=16", "algo.num_blocks=1", "algo.batch_size=8",
                 f"algo.seed={rank}"]  # a different initial model per rank: the broadcast must unify them
    cfg = compose(algo, "cartpole_swingup", "mujoco", overrides).run.algo
    agent = make_agent(algo, OBS, CRITIC, ACTION, ENVS, cfg, device)
    if dp is not None:
        agent.join(dp)
    layout = Layout(spaces=TaskSpaces(OBS, CRITIC, ACTION), num_envs=ENVS, capacity=1, depth=1, slot_rows=ENVS,
                    num_metrics=1)
    replay = ReplayRing(256, layout.row_width, layout.row_slices(), device, seed=100 + rank)
    data = torch.rand(128, layout.row_width, generator=torch.Generator().manual_seed(rank))  # each rank its own
    replay.add(data.to(device))
    agent.bind(replay, 8)
    for step in range(updates):
        agent.update(step)
    state = {k: v.cpu() for k, v in model_state(agent).items()}
    torch.save({"state": state, "captured": agent.capture_diagnostics()["enabled"],
                "warmed_up": dp is not None and dp.warmed_up}, Path(out) / f"rank{rank}.pt")
    agent.close()  # the graphs holding NCCL nodes go before the group
    if dp is not None:
        dp.close()
