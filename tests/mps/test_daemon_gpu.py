"""The real CUDA MPS daemon on the GPU machine: start, a trainer through it, stop. Skipped elsewhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from soaklab.mps.ownership import proc_start_time

pytestmark = pytest.mark.gpu
if shutil.which("nvidia-cuda-mps-control") is None or shutil.which("nvidia-smi") is None:
    pytest.skip("needs an NVIDIA GPU with the CUDA MPS binaries", allow_module_level=True)


def soaklab(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "soaklab", *args], env=env, capture_output=True, text=True,
                          timeout=900, check=False)


@pytest.mark.covers("flashsac/g1_motion_tracking/mjwarp/cuda/1")
def test_start_train_through_mps_stop(tmp_path, record_cache, g1_assets):
    env = dict(os.environ, SOAKLAB_MPS_RECORD_DIR=str(record_cache), PYTHONUNBUFFERED="1")
    env.pop("CUDA_MPS_PIPE_DIRECTORY", None)
    name = f"test-{os.getpid()}"
    # Four starts at once, as N runs each ensuring their GPU's daemon: one starts it, three reuse it.
    starts = [subprocess.Popen([sys.executable, "-m", "soaklab", "mps", "start", "--name", name], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    try:
        outputs = [(proc.communicate(timeout=120), proc.returncode) for proc in starts]
        assert [code for _, code in outputs] == [0] * 4, outputs
        lines = [out for (out, _), _ in outputs]
        assert sum(f"mps: started {name}" in out for out in lines) == 1, lines
        assert sum(f"mps: {name} is already running" in out for out in lines) == 3, lines
        record = json.loads((record_cache / name / "daemon.json").read_text())
        assert record["gpu_uuids"][0].startswith("GPU-")
        assert oct(Path(record["pipe_dir"]).stat().st_mode & 0o777) == "0o700"
        assert proc_start_time(record["control_pid"]) == record["control_start_time"]
        doctor = soaklab("mps", "doctor", env=env)
        assert doctor.returncode == 0, doctor.stdout

        run_dir = tmp_path / "run"
        trained = soaklab("train", "--algo", "flashsac", "--task", "g1_motion_tracking", "--sim", "mjwarp",
                          "--assets-manifest", str(g1_assets.manifest_path), "algo.num_envs=64",
                          "algo.max_iterations=20", "algo.learning_starts=4", "algo.batch_size=256",
                          "training.cuda_process_sharing=mps", f"training.log_dir={run_dir}", env=env)
        assert trained.returncode == 0, trained.stdout + trained.stderr
        sharing = json.loads((run_dir / "run_summary.json").read_text())["runtime_manifest"]["cuda_process_sharing"]
        assert sharing["validated"] is True and sharing["effective"] == "mps"
        assert sharing["source"] == "soaklab record" and sharing["daemon"] == name
        assert sharing["server_pids"] and sharing["control_pipe"] == f"{record['pipe_dir']}/control"
    finally:
        stopped = soaklab("mps", "stop", "--name", name, env=env)
    assert stopped.returncode == 0, stopped.stderr
    assert proc_start_time(record["control_pid"]) is None
    assert not (record_cache / name).exists()
    assert any(Path(record["log_dir"]).iterdir())  # logs are kept
