"""The host description: CUDA_VISIBLE_DEVICES mapped like the CUDA runtime maps it, and a probe that
creates no CUDA context (the soak monitor's, shown on a real GPU)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from soaklab.gpu.nvidia import GpuMemory, host_gpus, visible_indices
from tests.conftest import one_line

H200 = [GpuMemory(f"GPU-{c}{c}{c}-0000", "NVIDIA H200", 100, 200) for c in "abcd"]


@pytest.mark.parametrize(("spec", "expected"), [
    (None, [0, 1, 2, 3]),
    ("", []),
    ("2", [2]),
    ("3,1", [3, 1]),
    ("1,9,2", [1]),  # the list ends at the first entry that names no GPU
    ("GPU-ccc", [2]),  # a UUID prefix
    ("GPU-ccc-0000,0", [2, 0]),
    ("1,1", [1]),  # a repeat ends it too
    ("-1", []),
])
def test_visible_devices_map_like_the_cuda_runtime(spec, expected, monkeypatch):
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    assert visible_indices(spec, H200) == expected


def test_unsure_mappings_are_refused(monkeypatch):
    """MIG instances, and GPUs of different models without PCI_BUS_ID order: NVML cannot say."""
    mixed = [H200[0], GpuMemory("GPU-eee", "NVIDIA A100", 1, 2)]
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    assert visible_indices("MIG-abc", H200) is None
    assert visible_indices(None, mixed) is None
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    assert visible_indices(None, mixed) == [0, 1]


@pytest.mark.parametrize(("description", "named"), [
    ('{"gpus": 1}', "unknown field 'gpus'"),
    ('{"shm_free_bytes": Infinity}', "shm_free_bytes=inf (float): must be a whole number >= 0"),
    ('{"cuda_device_count": 1, "cuda_free_bytes": [1e400]}', "cuda_free_bytes[0]=inf (float)"),
    ('{"mem_available_bytes": NaN}', "mem_available_bytes=nan (float)"),
    ('{"cuda_device_count": true}', "cuda_device_count=true (bool)"),
    ('{"cuda_device_count": -3}', "cuda_device_count=-3: must be a whole number >= 0"),
    ('{"cpu_ids": [0, 1.5]}', "cpu_ids[1]=1.5 (float)"),
    ('{"rocm": 1}', "rocm=1: must be true or false"),
    ('{"cuda_device_count": 2, "cuda_free_bytes": [1]}', "cuda_free_bytes lists 1 devices, cuda_device_count=2"),
    ('{"cuda_device_count": 1, "current_cuda_device": 1}', "current_cuda_device=1: must be below"),
])
def test_a_bad_simulated_host_is_refused_in_one_line(cli, tmp_path, description, named):
    """SOAKLAB_HOST_CAPABILITIES is input from outside: each field of its kind (whole numbers >= 0,
    flags), or exit 2 naming the field, before anything is resolved or written."""
    out = tmp_path / "run_config.json"
    result = cli("config", "resolve", "--algo", "sac", "--task", "cartpole_swingup", "--sim", "mujoco",
                 "--out", out, host=description)
    assert result.code == 2, result.err
    line = one_line(result.err)
    assert "SOAKLAB_HOST_CAPABILITIES: invalid host description" in line and named in line
    assert not out.exists()


PROBE = """
import json, sys
from soaklab.config.host import probe_host
from soaklab.config.resolve import RunRequest, load, resolve
from soaklab.config.run_config import write_run_config
from pathlib import Path
host = probe_host(cuda_context=False)
record = Path(sys.argv[1])
write_run_config(resolve(RunRequest("sac", "cartpole_swingup", "mujoco", ("training.device=cuda",)), host), record)
loaded = load(record, probe_host(cuda_context=False))
import os
nvidia_fds = []
for fd in os.listdir("/proc/self/fd"):
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        continue
    if target.startswith("/dev/nvidia"):
        nvidia_fds.append(target)
torch = sys.modules.get("torch")
print(json.dumps({"count": host.cuda_device_count, "free": list(host.cuda_free_bytes), "source": host.source,
                  "learner": loaded.devices.learner, "nvidia_fds": sorted(nvidia_fds),
                  "torch_cuda_initialized": bool(torch and torch.cuda.is_initialized())}))
"""


@pytest.mark.gpu
def test_the_probe_and_a_load_create_no_cuda_context(tmp_path):
    """Resolution and load on a real GPU host, as the monitor does them. A process that created a CUDA
    context (or only initialised the driver: cuInit) keeps /dev/nvidia* open for its lifetime; NVML
    opens them only between its init and shutdown. So afterwards: no device file open, and torch's
    CUDA never initialised."""
    if not host_gpus():
        pytest.skip("needs an NVIDIA GPU (NVML or nvidia-smi)")
    done = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "rc.json")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["count"] >= 1 and min(seen["free"]) > 0 and seen["source"] == "probed (nvml)"
    assert seen["learner"] == "cuda:0"
    assert seen["nvidia_fds"] == [] and seen["torch_cuda_initialized"] is False
