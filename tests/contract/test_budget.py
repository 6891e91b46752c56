"""The memory budget: its breakdown, and refusals that name the knob to change."""

from __future__ import annotations

import json
import re

from soaklab.contract.budget import WORKSPACE_SLACK_MIN_BYTES
from tests.conftest import one_line

RUN = ("--algo", "sac", "--task", "g1_motion_tracking", "--sim", "mujoco", "algo.num_envs=16")
W = 924


def test_budget_breakdown_matches_the_formula(cli, tmp_path):
    out = tmp_path / "rc.json"
    result = cli("config", "resolve", *RUN, "algo.replay_buffer_size=1000", "algo.batch_size=64",
                 "algo.updates_per_step=2", "training.inference_slot_capacity=2", "--out", out,
                 host=json.dumps({"cuda_device_count": 0}))
    assert result.code == 0, result.err
    budget = json.loads(out.read_text())["run"]["memory_budget"]
    parts = budget["parts_bytes"]
    assert budget["replay_row_width"] == W
    assert parts["replay_storage"] == 1000 * W * 4
    assert parts["replay_ingress"] == 2 * 16 * W * 4
    assert parts["learner_batch"] == 2 * 64 * 2 * W * 4
    # 2 slots of 8 envs each: every env has one row of obs, done and action in the ring
    assert parts["inference_ring"] == 2 * 8 * (160 + 1 + 29) * 4
    assert parts["workspace_slack"] == WORKSPACE_SLACK_MIN_BYTES  # 10% is below the 32 MiB floor here
    assert budget["tensor_memory_budget_bytes"] == sum(parts.values())
    pools = {p["name"]: p for p in budget["pools"]}
    assert set(pools) == {"shared_memory", "host"}
    assert pools["shared_memory"]["parts"] == ["replay_ingress", "inference_ring"]


def test_replay_too_large_for_host_memory_is_refused(cli, tmp_path):
    out = tmp_path / "rc.json"
    host = json.dumps({"cuda_device_count": 0, "mem_available_bytes": 8 << 30})
    result = cli("config", "resolve", *RUN, "algo.replay_buffer_size=10000000", "--out", out, host=host)
    assert result.code == 2
    line = one_line(result.err)
    assert line.startswith("soaklab: error: algo.replay_buffer_size: memory budget refused")
    assert "MemAvailable" in line
    assert not out.exists()


def test_shared_memory_too_small_names_the_ingress_knobs(cli, tmp_path):
    out = tmp_path / "rc.json"
    host = json.dumps({"cuda_device_count": 0, "shm_free_bytes": 64 << 10})
    result = cli("config", "resolve", *RUN, "algo.replay_buffer_size=1000", "--out", out, host=host)
    assert result.code == 2
    line = one_line(result.err)
    assert "training.replay_ingress_depth" in line and "/dev/shm" in line
    assert not out.exists()


def test_cuda_budget_uses_free_device_memory(cli, tmp_path):
    out = tmp_path / "rc.json"
    host = json.dumps({"cuda_device_count": 1, "cuda_free_bytes": [1 << 30]})
    result = cli("config", "resolve", "--algo", "flashsac", "--task", "g1_motion_tracking", "--sim", "mjwarp",
                 "algo.num_envs=1024", "--out", out, host=host)
    assert result.code == 2
    line = one_line(result.err)
    assert "cuda (cuda:0)" in line and "0.8 x free device memory" in line and "algo.replay_buffer_size" in line


def test_shared_memory_counts_whole_pages_and_semaphores(cli, tmp_path):
    """A /dev/shm with room for the bytes but not for the pages they take is refused, in units
    that say how much (never "0.00 GiB")."""
    from soaklab.contract.budget import SHM_PAGE_BYTES, human_bytes

    out = tmp_path / "rc.json"
    result = cli("config", "resolve", *RUN, "algo.replay_buffer_size=1000", "--out", out,
                 host=json.dumps({"cuda_device_count": 0, "shm_free_bytes": 64 << 20}))
    assert result.code == 0, result.err
    pool = next(p for p in json.loads(out.read_text())["run"]["memory_budget"]["pools"]
                if p["name"] == "shared_memory")
    parts = json.loads(out.read_text())["run"]["memory_budget"]["parts_bytes"]
    # one slot of 16 envs: ring_obs (16 x 160), ring_dones (16) and ring_actions (16 x 29) floats, each
    # its own segment, then the ingress, row counts, control and metrics segments, and 2 x 1 + 2 semaphores
    segments = [16 * 160 * 4, 16 * 4, 16 * 29 * 4, parts["replay_ingress"], 2 * 8, 32 * 8, 13 * 8]
    pages = sum(-(-b // SHM_PAGE_BYTES) for b in segments)
    assert pool["required_bytes"] == (pages + 2 * 1 + 2) * SHM_PAGE_BYTES > parts["replay_ingress"] + \
        parts["inference_ring"]
    # Free space that holds the raw bytes (x 1.25 for the fill limit) but not the pages: refused.
    tight = int((parts["replay_ingress"] + parts["inference_ring"]) / 0.8) + 1
    result = cli("config", "resolve", *RUN, "algo.replay_buffer_size=1000", "--out",
                 tmp_path / "tight.json", host=json.dumps({"cuda_device_count": 0, "shm_free_bytes": tight}))
    assert result.code == 2
    line = one_line(result.err)
    assert "/dev/shm" in line and "KiB" in line
    assert not re.search(r"(?<![\d.])0\.00 ", line)
    assert human_bytes(300) == "300 B" and human_bytes(3 << 20) == "3.00 MiB"
