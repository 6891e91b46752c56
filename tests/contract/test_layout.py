"""One layout: the bytes resolution records are the bytes the runtime allocates."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
from pathlib import Path

import pytest

from soaklab.config.host import simulated_host
from soaklab.config.resolve import RunRequest, resolve
from soaklab.contract.budget import SHM_PAGE_BYTES, shm_required_bytes
from soaklab.contract.layout import INFERENCE_ARRAYS, TaskSpaces, chunks_per_vector
from soaklab.rl.channels import make_channels
from soaklab.tasks.spaces import TASK_SPACES


@pytest.mark.parametrize(("num_envs", "capacity", "slot_rows", "depth"),
                         [(16, 1, None, 2), (16, 2, 4, 2), (10, 3, 3, 4), (64, 16, 7, 3), (5, 4, 1, 1)])
def test_recorded_budget_equals_the_shared_memory_allocated(num_envs, capacity, slot_rows, depth, monkeypatch):
    monkeypatch.delenv("SOAKLAB_HOST_CAPABILITIES", raising=False)
    overrides = [f"algo.num_envs={num_envs}", f"training.inference_slot_capacity={capacity}",
                 f"training.replay_ingress_depth={depth}", "algo.replay_buffer_size=1000"]
    if slot_rows is not None:
        overrides.append(f"training.replay_ingress_slot_rows={slot_rows}")
    resolved = resolve(RunRequest("sac", "cartpole_swingup", "mujoco", tuple(overrides)),
                       simulated_host(json.dumps({"cuda_device_count": 0})))
    parts = resolved.budget.parts
    arrays, handles = make_channels(mp.get_context("spawn"), resolved.layout)
    try:
        allocated = {key: spec.nbytes for key, spec in handles.specs.items()}
        assert parts["inference_ring"] == sum(allocated[a] for a in INFERENCE_ARRAYS)
        assert parts["replay_ingress"] == allocated["ingress"]
        # what /dev/shm really gave each segment, page-rounded, plus one page per semaphore
        on_disk = [os.stat(Path("/dev/shm") / spec.name).st_size for spec in handles.specs.values()]
        pages = sum(-(-size // SHM_PAGE_BYTES) for size in on_disk) + len(handles.obs_ready) + \
            len(handles.act_ready) + 2
        assert shm_required_bytes(resolved.layout) == pages * SHM_PAGE_BYTES
        pool = next(p for p in resolved.budget.pools if p.name == "shared_memory")
        assert pool.required_bytes == pages * SHM_PAGE_BYTES
    finally:
        assert arrays.close() == []  # the owner unlinks every segment it made
    assert not any((Path("/dev/shm") / spec.name).exists() for spec in handles.specs.values())


def test_the_layout_carries_the_replay_row_and_chunking():
    spaces = TASK_SPACES["g1_motion_tracking"]
    assert spaces.replay_row_width == 2 * 160 + 2 * 286 + 29 + 3
    assert TaskSpaces(1, 2, 3).row_widths() == {"obs": 1, "next_obs": 1, "critic": 2, "next_critic": 2, "action": 3,
                                                "reward": 1, "terminated": 1, "truncated": 1}
    assert chunks_per_vector(10, 4) == 3 and chunks_per_vector(8, 4) == 2 and chunks_per_vector(1, 4) == 1
