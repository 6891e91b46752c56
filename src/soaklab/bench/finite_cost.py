"""What the collector's finiteness check costs beside the env step it checks (issue 46: under 1 %).

Timed in the backend probe (`soaklab bench backend`), on the same env and the same step outputs the
collector checks: the step, the fused check the collector runs (soaklab.rl.finite.non_finite_flags)
and, for scale, the plain one (`~isfinite(v).all()` per tensor). On a GPU each is timed between
CUDA events and waited for, so a check's host launch cost is counted, not hidden behind the next
kernel; nothing is read back, as in the collector, where the flags are read with the metrics."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import torch

from soaklab.bench.timing import time_ms
from soaklab.rl.collector import checked_step
from soaklab.rl.finite import non_finite_flags
from soaklab.tasks.env import BatchedEnv, StepResult


def finite_check_cost(env: BatchedEnv, actions: Callable[[], torch.Tensor], iters: int) -> dict[str, Any]:
    device = torch.device(env.device)
    step_ms: list[float] = []
    fused_ms: list[float] = []
    plain_ms: list[float] = []
    found: list[StepResult] = []
    values: list[torch.Tensor] = []
    for _ in range(iters):
        a = actions()
        step_ms += time_ms(lambda a=a: found.append(env.step(a)), 1, device)
        tensors, terms = checked_step(a, found.pop())
        values = [*terms.values(), *tensors.values()]
        fused_ms += time_ms(lambda v=values: non_finite_flags(v), 1, device)
        plain_ms += time_ms(lambda v=values: torch.stack([~torch.isfinite(x).all() for x in v]), 1, device)
    step, fused, plain = (statistics.median(x) for x in (step_ms, fused_ms, plain_ms))
    return {"iters": iters, "tensors_checked": len(values), "step_ms": step, "fused_check_ms": fused,
            "per_tensor_check_ms": plain, "fused_share_of_step": fused / step, "per_tensor_share_of_step": plain / step}
