"""Data parallelism on the CPU: two gloo ranks, the agents' real updates. After N updates every
rank holds bitwise the same parameters, buffers and optimizer state, though each started from its
own seed and sampled only its own replay."""

from __future__ import annotations

import multiprocessing as mp

import pytest
import torch

from soaklab.rl.dp import NCCL_DEFAULTS, nccl_environment
from tests.rl.dp_worker import run_rank

WORLD = 2


def run_ranks(tmp_path, algo: str, use_dp: bool, updates: int = 6, backend: str = "gloo"
              ) -> list[dict[str, torch.Tensor]]:
    return [r["state"] for r in rank_results(tmp_path, algo, use_dp, updates, backend)]


def rank_results(tmp_path, algo: str, use_dp: bool, updates: int, backend: str) -> list[dict]:
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=run_rank, args=(r, WORLD, str(tmp_path), algo, updates, use_dp,
                                                str(tmp_path), backend)) for r in range(WORLD)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)  # a bound for a hung rank, not a speed claim
    assert [p.exitcode for p in procs] == [0] * WORLD
    return [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(WORLD)]


def differing(states: list[dict[str, torch.Tensor]]) -> list[str]:
    first, second = states
    assert first.keys() == second.keys() and first
    return sorted(k for k in first if not torch.equal(first[k], second[k]))


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_ranks_stay_bitwise_identical(tmp_path, algo):
    assert differing(run_ranks(tmp_path, algo, use_dp=True)) == []


def test_without_the_sync_the_ranks_differ(tmp_path):
    """The check above can fail: the same two ranks without data parallelism drift apart."""
    assert differing(run_ranks(tmp_path, "sac", use_dp=False)) != []


def test_nccl_defaults_yield_to_the_environment(monkeypatch):
    for key in NCCL_DEFAULTS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("NCCL_P2P_DISABLE", "0")
    effective = nccl_environment()
    assert effective == {**NCCL_DEFAULTS, "NCCL_P2P_DISABLE": "0"}


@pytest.mark.gpu
@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_nccl_ranks_with_captured_updates_stay_identical(tmp_path, algo):
    """Two GPUs, NCCL over the default TCP loopback: the updates are CUDA graphs whose gradient
    all-reduce is captured (after the eager collective warm-up), and the ranks stay bitwise equal."""
    if not torch.cuda.is_available() or torch.cuda.device_count() < WORLD:
        pytest.skip("needs two CUDA GPUs")
    results = rank_results(tmp_path, algo, use_dp=True, updates=8, backend="nccl")
    assert all(r["captured"] and r["warmed_up"] for r in results)
    assert differing([r["state"] for r in results]) == []
