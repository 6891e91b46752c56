"""The all-reduce time of one data-parallel learner update, per GPU count, on the GPU machine.

Each rank builds the FlashSAC agent of the G1 tracking task on its GPU (the G1 widths and the owner's
defaults, as `soaklab bench learner` does), joins the NCCL group the runtime joins
(`soaklab.rl.dp.DataParallel`, its NCCL defaults unless the environment sets them) and replays the
collectives of one update through the runtime's own calls, in the update's order:

  critic:        grads(critics), buffers(critics), buffers(actor)
  critic_actor:  grads(critics), buffers(critics), grads(actor), buffers(actor), grads(temperature)

timed between CUDA events on the rank's stream after --warmup rounds (eager launches: the captured
update runs the same collectives without the launch gaps, so this is an upper bound). The ceiling in
the same run: a 256 MiB all-reduce, its bus bandwidth (2(n-1)/n x bytes / time, NCCL's convention).

    python scripts/gpu/gpu_allreduce.py --out benchmarks/archive/gpu/allreduce-x2.json [--world N]

Rank 0 writes the JSON: medians per variant, bytes per variant, the ceiling, the NCCL environment.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

CEILING_BYTES = 256 << 20


def _rank(rank: int, world: int, store_dir: str, args: argparse.Namespace, queue) -> None:  # noqa: ANN001
    os.environ["CUDA_VISIBLE_DEVICES"] = os.environ.get("SOAKLAB_BENCH_GPUS", ",".join(map(str, range(world)))
                                                        ).split(",")[rank]
    from soaklab.bench.timing import time_ms
    from soaklab.config.compose import compose
    from soaklab.rl.agents import make_agent
    from soaklab.rl.dp import DataParallel, nccl_environment
    from soaklab.tasks.spaces import TASK_SPACES

    device = torch.device("cuda:0")
    torch.cuda.set_device(device)
    dp = DataParallel.join(Path(store_dir), rank, world, "nccl")
    spaces = TASK_SPACES["g1_motion_tracking"]
    run = compose("flashsac", "g1_motion_tracking", "mujoco", []).run
    agent = make_agent("flashsac", spaces.actor_obs, spaces.critic_obs, spaces.action, args.num_envs, run.algo,
                       device)
    dp.collective_warmup(device)
    for module in (agent.critics, agent.actor, agent.temperature):
        for p in module.parameters():
            p.grad = torch.zeros_like(p)
    variants = {
        "critic": [("grads", agent.critics), ("buffers", agent.critics), ("buffers", agent.actor)],
        "critic_actor": [("grads", agent.critics), ("buffers", agent.critics), ("grads", agent.actor),
                         ("buffers", agent.actor), ("grads", agent.temperature)],
    }

    def run(steps):
        for kind, module in steps:
            (dp.average_grads if kind == "grads" else dp.average_buffers)(module)

    def nbytes(kind, module) -> int:
        tensors = ([p for p in module.parameters()] if kind == "grads"
                   else [b for b in module.buffers() if b.is_floating_point()])
        return sum(t.numel() * t.element_size() for t in tensors)

    record: dict[str, Any] = {"variants": {}}
    for name, steps in variants.items():
        time_ms(lambda steps=steps: run(steps), args.warmup, device)
        times = time_ms(lambda steps=steps: run(steps), args.iters, device)
        record["variants"][name] = {"median_ms": statistics.median(times),
                                    "p90_ms": sorted(times)[int(0.9 * len(times))],
                                    "collectives": len(steps), "bytes": sum(nbytes(k, m) for k, m in steps)}
    big = torch.ones(CEILING_BYTES // 4, device=device)
    time_ms(lambda: dist.all_reduce(big), 3, device)
    ceiling = statistics.median(time_ms(lambda: dist.all_reduce(big), 10, device))
    record["ceiling"] = {"bytes": CEILING_BYTES, "median_ms": ceiling,
                         "bus_gb_per_s": 2 * (world - 1) / world * CEILING_BYTES / (ceiling / 1e3) / 1e9}
    record["nccl_environment"] = nccl_environment()
    record["gpu"] = torch.cuda.get_device_name(device)
    if rank == 0:
        queue.put(record)
    dp.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--world", type=int, default=torch.cuda.device_count() if torch.cuda.is_available() else 0)
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--iters", type=int, default=500)
    args = parser.parse_args(argv)
    if args.world < 2:
        print(f"gpu_allreduce: --world {args.world}: needs at least two CUDA GPUs", file=sys.stderr)
        return 2
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory() as store_dir:
        procs = [ctx.Process(target=_rank, args=(r, args.world, store_dir, args, queue)) for r in range(args.world)]
        for p in procs:
            p.start()
        record = queue.get(timeout=600)
        for p in procs:
            p.join(120)
    from soaklab.host.info import git_state, host_record

    record.update(command="python " + " ".join(sys.argv), world=args.world, num_envs=args.num_envs,
                  warmup=args.warmup, iters=args.iters, host=host_record(), git=git_state())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    v = record["variants"]
    print(f"gpu_allreduce: {args.world} GPUs ({record['nccl_environment']}): critic {v['critic']['median_ms']:.3f} ms, "
          f"critic_actor {v['critic_actor']['median_ms']:.3f} ms per update; ceiling "
          f"{record['ceiling']['bus_gb_per_s']:.1f} GB/s bus bandwidth -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
