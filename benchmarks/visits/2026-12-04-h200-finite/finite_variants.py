"""Ways to flag the collector's ~15 tensors for NaN/inf on a GPU, timed at G1's shapes (issue 46).

Needs torch alone (no staging):
`python3 benchmarks/visits/2026-12-04-h200-finite/finite_variants.py --envs 1024,4096 --out X.json`.
For each way: the host time to enqueue it (what the collector's thread spends, the GPU busy behind a
queued sleep so launches never wait on it) and the GPU time between CUDA events with the work queued
back to back; medians of --iters after a warm-up. Each way's flags are checked against a planted NaN."""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

SHAPES = {"terms": [()] * 9, "tensors": [(29,), (160,), (286,), (160,), (286,), ()]}


def plain(values, lengths):
    return torch.stack([~torch.isfinite(v).all() for v in values])


def foreach(values, lengths):
    return torch.stack(torch._foreach_norm(torch._foreach_mul(values, 0.0), ord=1)) != 0


def cat_segment(values, lengths):
    flat = torch.cat([v.reshape(-1) for v in values])
    return torch.segment_reduce(flat * 0.0, "sum", lengths=lengths) != 0


def cat_any(values, lengths):  # one flag for all: the cheapest bound, names lost
    return ~torch.isfinite(torch.cat([v.reshape(-1) for v in values])).all()


WAYS = {"plain": plain, "foreach": foreach, "cat_segment": cat_segment, "cat_any": cat_any}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--envs", default="1024,4096")
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    dev = torch.device("cuda")
    results = []
    for n in (int(x) for x in args.envs.split(",")):
        values = [torch.randn(n, *s, device=dev)
                  for s in SHAPES["terms"] + SHAPES["tensors"]]
        lengths = torch.tensor([v.numel() for v in values], device=dev)
        for name, way in WAYS.items():
            values[3][n // 2] = float("nan")
            flags = way(values, lengths).cpu()
            assert bool(flags.any()) and (flags.numel() == 1 or flags.tolist().index(True) == 3), (name, flags)
            values[3][n // 2] = 0.0
            assert not bool(way(values, lengths).cpu().any()), name
            host, gpu = [], []
            for _ in range(20):
                way(values, lengths)
            torch.cuda.synchronize()
            for _ in range(args.iters):
                torch.cuda._sleep(2_000_000)  # the GPU busy: the host's enqueue time alone
                t0 = time.perf_counter()
                way(values, lengths)
                host.append((time.perf_counter() - t0) * 1e6)
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda._sleep(2_000_000)  # launches queue behind it: GPU time alone
                start.record()
                for _ in range(10):
                    way(values, lengths)
                end.record()
                end.synchronize()
                gpu.append(start.elapsed_time(end) * 1e3 / 10)
            results.append({"envs": n, "way": name, "host_enqueue_us": statistics.median(host),
                            "gpu_us": statistics.median(gpu)})
            print(json.dumps(results[-1]), flush=True)
    here = "benchmarks/visits/2026-12-04-h200-finite/finite_variants.py"
    record = {"command": f"python3 {here} --envs {args.envs} --iters {args.iters}",
              "device": torch.cuda.get_device_name(), "torch": torch.__version__, "results": results}
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
