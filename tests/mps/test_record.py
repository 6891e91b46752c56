"""The mps_start record, and its agreement with the resolved config."""

from __future__ import annotations

import json

from tests.conftest import CPU_HOST, one_line


def test_not_requested_record(cli, tmp_path):
    out = tmp_path / "mps.json"
    result = cli("mps", "ensure", "--cuda-process-sharing", "null", "--out", out)
    assert result.code == 0, result.err
    record = json.loads(out.read_text())
    assert record["requested"] is False and record["cuda_process_sharing"] is None and record["daemon"] is None


def test_mps_request_without_the_mps_binaries_fails_closed(cli, tmp_path, monkeypatch):
    """The rule starts (or reuses) a daemon; a host without the driver's MPS binaries refuses it."""
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on it
    out = tmp_path / "mps.json"
    result = cli("mps", "ensure", "--cuda-process-sharing", "mps", "--out", out)
    assert result.code == 2
    assert one_line(result.err) == ("soaklab: error: nvidia-cuda-mps-control: not on PATH; install the NVIDIA CUDA "
                                    "MPS binaries of the driver")
    assert not out.exists()


def test_invalid_sharing_value_fails_closed(cli, tmp_path):
    out = tmp_path / "mps.json"
    result = cli("mps", "ensure", "--cuda-process-sharing", "true", "--out", out)
    assert result.code == 2 and "null or the string 'mps'" in one_line(result.err)
    assert not out.exists()


def test_the_record_follows_the_resolved_run_config(cli, tmp_path):
    """The mps_start rule reads the resolved run: a cpu run is "not requested"; an edited record is refused."""
    run_config = tmp_path / "rc.json"
    ok = cli("config", "resolve", "--algo", "sac", "--task", "g1_motion_tracking", "--sim", "mujoco",
             "algo.replay_buffer_size=2048", "--out", run_config, host=CPU_HOST)
    assert ok.code == 0, ok.err
    out = tmp_path / "mps.json"
    result = cli("mps", "ensure", "--run-config", run_config, "--out", out)
    assert result.code == 0, result.err
    assert json.loads(out.read_text())["requested"] is False
    edited = json.loads(run_config.read_text())
    edited["config"]["training"]["cuda_process_sharing"] = "mps"
    run_config.write_text(json.dumps(edited))
    out.unlink()
    bad = cli("mps", "ensure", "--run-config", run_config, "--out", out)
    assert bad.code == 2 and "no longer matches its config_hash" in one_line(bad.err)
    assert not out.exists()
