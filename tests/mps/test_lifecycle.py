"""MPS lifecycle on a machine without a GPU: records, ownership, quarantine and refusals.

The daemon itself runs only on the GPU machine (tests/mps/test_daemon_gpu.py);
here a real process and a real bound Unix socket stand where it would, which
is all the ownership logic reads.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from soaklab.errors import InvalidInput
from soaklab.mps.client import select_daemon
from soaklab.mps.gpus import parse_gpu_csv, select_gpus, visible
from soaklab.mps.ownership import LIVE, LOCK_FILE, STALE, load_records, make_private_dir
from tests.conftest import CUDA_HOST, one_line

SMI = """0, GPU-aaaaaaaa-1111-2222-3333-444444444444, NVIDIA H200, Default
1, GPU-bbbbbbbb-1111-2222-3333-444444444444, NVIDIA H200, Default
"""


def no_mps_binaries(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))


# -- selectors --------------------------------------------------------------------------------------
def test_selectors_resolve_to_canonical_uuids():
    gpus = parse_gpu_csv(SMI)
    assert select_gpus("1", gpus)[0].uuid.startswith("GPU-bbbb")
    assert select_gpus("GPU-aaaa", gpus)[0].index == 0
    assert select_gpus("bbbbbbbb-1111-2222-3333-444444444444", gpus)[0].index == 1
    assert select_gpus(None, gpus[:1])[0].index == 0  # one visible GPU needs no argument
    assert [g.index for g in select_gpus("all", gpus, allow_all=True)] == [0, 1]
    assert [g.index for g in visible(gpus, "1")] == [1]
    assert [g.index for g in visible(gpus, "GPU-bbbb,0")] == [1, 0]


@pytest.mark.parametrize("selector, message", [
    (None, "--gpus: 2 GPUs are visible (0=GPU-aaaaaaaa-1111-2222-3333-444444444444, "
           "1=GPU-bbbbbbbb-1111-2222-3333-444444444444); pass --gpus <index-or-uuid>"),
    ("MIG-0e3c1c2a-aaaa-bbbb-cccc-000000000000", "MIG UUIDs are rejected"),
    ("0,1", "topology single_task_multi_gpu or task_per_gpu, which fail closed"),
    ("all", "start serves one GPU (topology single_gpu)"),
    ("7", "--gpus=7: matches no visible GPU"),
])
def test_selector_refusals(selector, message):
    with pytest.raises(InvalidInput) as err:
        select_gpus(selector, parse_gpu_csv(SMI))
    assert message in str(err.value)


def test_no_visible_gpu_fails_closed():
    with pytest.raises(InvalidInput, match="no NVIDIA GPU is visible"):
        select_gpus(None, [])


# -- records and ownership --------------------------------------------------------------------------
def test_live_record_is_listed_and_exported(cli, listener):
    listener.record()
    [loaded] = load_records()
    assert loaded.state()[0] == LIVE
    status = cli("mps", "status")
    assert status.code == 0 and "gpu-test: live" in status.out
    assert "topology single_task_multi_gpu: parsed, fails closed" in status.out
    env = cli("mps", "env")
    assert env.code == 0
    assert env.out.splitlines() == [f"export CUDA_MPS_PIPE_DIRECTORY={listener.pipe_dir}",
                                    f"export CUDA_MPS_LOG_DIRECTORY={listener.log_dir}"]


def test_dead_daemon_is_stale_status_only_reports_stop_quarantines(cli, listener, record_cache):
    listener.record()
    listener.kill()
    status = cli("mps", "status")
    assert status.code == 0 and "gpu-test: stale (control pid" in status.out
    assert (record_cache / "gpu-test" / "daemon.json").is_file()  # status is read-only
    stopped = cli("mps", "stop")
    assert stopped.code == 0 and "nothing to stop" in stopped.out
    assert not (record_cache / "gpu-test").exists()
    [moved] = (record_cache / "quarantine").iterdir()
    assert json.loads((moved / "daemon.json").read_text())["name"] == "gpu-test"
    assert "is gone" in (moved / "quarantined.txt").read_text()
    assert (listener.log_dir / "control.log").read_text() == "daemon log\n"  # logs are kept


def test_recycled_pid_is_not_ownership(listener):
    record = listener.record(control_start_time=listener.record().control_start_time - 1)
    assert record.state() == (STALE, f"pid {listener.proc.pid} now belongs to another process (start time differs)")


def test_foreign_record_is_never_stopped(cli, listener, record_cache):
    listener.record(uid=os.getuid() + 1)
    result = cli("mps", "stop", "--name", "gpu-test")
    assert result.code == 2
    assert "recorded by uid" in one_line(result.err) and "stops only daemons this user started" in result.err
    assert (record_cache / "gpu-test" / "daemon.json").is_file()
    assert listener.proc.poll() is None


def test_unknown_name_is_refused(cli):
    result = cli("mps", "stop", "--name", "someone-elses")
    assert result.code == 2 and "acts only on daemons it started" in one_line(result.err)


def test_stop_of_a_live_owned_daemon_without_the_control_binary_keeps_everything(cli, listener, record_cache,
                                                                               monkeypatch, tmp_path):
    listener.record()
    no_mps_binaries(monkeypatch, tmp_path)
    result = cli("mps", "stop")
    assert result.code == 2 and "nvidia-cuda-mps-control: not on PATH" in one_line(result.err)
    assert (record_cache / "gpu-test" / "daemon.json").is_file()
    assert listener.proc.poll() is None


# Read, pause, write back: the read-modify-write `start` and `stop` do on the records, in four processes at once.
BUMP = """import sys, time
from pathlib import Path
from soaklab.mps.ownership import records_lock
counter = Path(sys.argv[1])
for _ in range(10):
    with records_lock():
        seen = int(counter.read_text())
        time.sleep(0.01)
        counter.write_text(str(seen + 1))
"""


def test_the_records_lock_serialises_processes(record_cache, tmp_path):
    counter = tmp_path / "counter"
    counter.write_text("0")
    procs = [subprocess.Popen([sys.executable, "-c", BUMP, str(counter)]) for _ in range(4)]
    assert [proc.wait(timeout=300) for proc in procs] == [0] * 4
    assert counter.read_text() == "40"  # no process's update was lost to another's
    assert (record_cache / LOCK_FILE).is_file() and load_records() == []  # the lock is not a record


def test_unreadable_record_is_stale(cli, record_cache):
    (record_cache / "gpu-broken").mkdir(parents=True)
    (record_cache / "gpu-broken" / "daemon.json").write_text("{not json")
    status = cli("mps", "status")
    assert "gpu-broken: stale (unreadable record" in status.out


def test_private_dirs_are_0700_and_refuse_symlinks(tmp_path):
    target = tmp_path / "pipe"
    make_private_dir(target, "pipe-dir")
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(InvalidInput, match="--pipe-dir=.*link: is not a plain directory"):
        make_private_dir(link, "pipe-dir")
    with pytest.raises(InvalidInput, match="must be an absolute path"):
        make_private_dir(type(tmp_path)("relative"), "log-dir")


@pytest.mark.parametrize("args, message", [
    (("--name", "../../etc"), "--name='../../etc': use 1-64 letters, digits"),
    (("--name", "a" * 65), "--name='aaaa"),
    (("--pipe-dir", "/tmp/" + "p" * 110), "longer than 107 bytes (the Unix socket limit)"),
])
def test_bad_start_flags_fail_closed_before_anything(cli, args, message, record_cache):
    result = cli("mps", "start", *args)
    assert result.code == 2 and message in one_line(result.err)
    assert not record_cache.exists()


def test_stop_refuses_a_path_as_name(cli):
    result = cli("mps", "stop", "--name", "../quarantine")
    assert result.code == 2 and "--name='../quarantine'" in one_line(result.err)


def test_start_without_the_binaries_fails_closed(cli, monkeypatch, tmp_path, record_cache):
    no_mps_binaries(monkeypatch, tmp_path)
    result = cli("mps", "start")
    assert result.code == 2 and "nvidia-cuda-mps-control: not on PATH" in one_line(result.err)
    assert not record_cache.exists()


# -- the trainer's selection ------------------------------------------------------------------------
def test_explicit_pipe_directory_wins(listener, monkeypatch):
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(listener.pipe_dir))
    selection = select_daemon("cuda")
    assert selection.source == "CUDA_MPS_PIPE_DIRECTORY" and selection.pipe_dir == str(listener.pipe_dir)


def test_explicit_pipe_without_a_daemon_fails_closed(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path))
    with pytest.raises(InvalidInput, match="no MPS control socket there; start a daemon with `soaklab mps start`"):
        select_daemon("cuda")


def test_trainer_with_mps_fails_closed_before_building_anything(cli, g1_assets, tmp_path, monkeypatch):
    """No GPU here: resolution refuses the CUDA learner before any MPS selection or run dir."""
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path / "no-daemon"))
    run_dir = tmp_path / "run"
    result = cli("train", "--algo", "flashsac", "--task", "g1_motion_tracking", "--sim", "mjwarp",
                 "--assets-manifest", g1_assets.manifest_path, "training.cuda_process_sharing=mps",
                 f"training.log_dir={run_dir}")
    assert result.code == 2
    assert one_line(result.err).startswith("soaklab: error: training.device='cuda'")
    assert not run_dir.exists()


def test_soak_with_mps_and_no_daemon_fails_closed_before_spawning(cli, g1_assets, tmp_path, monkeypatch):
    """On a (simulated) CUDA host the monitor checks the daemon exists before it spawns anything."""
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path / "no-daemon"))
    log_dir, run_config = tmp_path / "run", tmp_path / "rc.json"
    resolved = cli("config", "resolve", "--algo", "flashsac", "--task", "g1_motion_tracking", "--sim", "mjwarp",
                   "--assets-manifest", g1_assets.manifest_path, "training.cuda_process_sharing=mps",
                   "--out", run_config, host=CUDA_HOST)
    assert resolved.code == 0, resolved.err
    result = cli("soak", "--run-config", run_config, "--min-duration-seconds", "1", "--sample-interval-seconds", "1",
                 "--startup-timeout-seconds", "60", "--stale-progress-seconds", "60",
                 "--post-shutdown-grace-seconds", "0", "--log-dir", log_dir, "--output", tmp_path / "soak.json",
                 host=CUDA_HOST)
    assert result.code == 2
    assert "CUDA_MPS_PIPE_DIRECTORY=" in one_line(result.err) and "soaklab mps start" in result.err
    assert not log_dir.exists() and not (tmp_path / "soak.json").exists()
